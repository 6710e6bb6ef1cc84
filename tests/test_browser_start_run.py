"""Starting a run from an eval set in real Chromium: the eval set page's Run button opens New
run with the version chosen, the outputs skeleton downloads from beside the outputs field, the
skeleton with its answers filled in uploads as the run's outputs, and the next New run starts
from that eval set and target."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import Project, Run
from tests.compare_helpers import generated_version
from tests.engine_helpers import import_demo, perfect_outputs

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright import sync_api

expect = sync_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tab(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1366, "height": 860}, accept_downloads=True)
    context.set_default_timeout(30_000)  # a shared, busy machine
    page = context.new_page()
    yield page
    context.close()


def test_run_from_the_eval_set_page_with_the_filled_in_skeleton(tab: Any, live_server: Any, alice: Any,
                                                                acme: Project, tmp_path: Any) -> None:
    generated_version(acme, 2, eval_set_id="aaa_first")  # New run's first choice otherwise
    version = import_demo(acme)
    tab.goto(live_server.url + "/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()

    tab.goto(f"{live_server.url}/evalsets/{version.evalset_id}/")
    tab.get_by_test_id("run-version").click()
    expect(tab).to_have_url(re.compile(rf"/runs/new/\?version={version.pk}$"))
    expect(tab.locator("#id_version")).to_have_value(str(version.pk))
    tab.get_by_label("Upload outputs").check()
    expect(tab.get_by_test_id("outputs-example")).to_be_visible()
    with tab.expect_download() as download:
        tab.get_by_role("link", name="Download the outputs skeleton").click()
    lines = [json.loads(line) for line in Path(download.value.path()).read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 8 and all(line["turns"] for line in lines)

    answers = {o["eval_id"]: o for o in perfect_outputs()}  # the agent's answers, filled into the blanks
    for line in lines:
        for turn, answer in zip(line["turns"], answers[line["eval_id"]]["turns"], strict=True):
            turn["final_response"], turn["tool_calls"] = answer["final_response"], answer["tool_calls"]
    filled = tmp_path / "outputs.jsonl"
    filled.write_text("\n".join(json.dumps(line) for line in lines))
    tab.locator("input[name=outputs_file]").set_input_files(str(filled))
    tab.get_by_role("button", name="Start run").click()
    expect(tab).to_have_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get()
    assert (run.target_kind, run.evalset_version_id, run.cases_total) == ("uploaded", version.pk, 8)

    tab.goto(f"{live_server.url}/runs/new/")  # remembers the eval set and the target
    expect(tab.locator("#id_version")).to_have_value(str(version.pk))
    expect(tab.get_by_label("Upload outputs")).to_be_checked()
