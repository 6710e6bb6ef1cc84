"""An Inspect AI eval log through the browser, in real Chromium: the results-import page takes the
`.eval` zip and links the completed run, whose page shows the log's model, tags and scores; the
upload page takes it as an eval set; the new-run page takes it as outputs. The pages at 1440 px and 390 px, with no sideways scroll on
the phone (photographs in EVALSITE_SHOTS_DIR when set, to look at)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from evaluations.models import EvalSet, Project, Run
from tests.conftest import DATA
from tests.test_browser_evalsets import log_in

LOG = DATA / "inspect" / "evalsite_fixture.eval"


def _shoot(tab: Any, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("EVALSITE_SHOTS_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    for width in (1440, 390):
        tab.set_viewport_size({"width": width, "height": 900})
        assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), (name, width)
        tab.screenshot(path=str(folder / f"{name}-{width}.png"), full_page=True)
    tab.set_viewport_size({"width": 1440, "height": 900})


def test_an_eval_log_imports_as_a_run_and_as_an_eval_set_in_the_browser(
    tab: Any, live_server: Any, alice: Any, acme: Project, tmp_path: Path
) -> None:
    log_in(tab, live_server)
    tab.goto(live_server.url + "/runs/import/")
    tab.locator("input[type=file]").set_input_files(str(LOG))
    tab.get_by_role("button", name="Import").click()
    run = Run.objects.get()
    link = tab.locator(f"a[href='/runs/{run.pk}/']").first
    expect(link).to_be_visible()
    _shoot(tab, "results-import-inspect", tmp_path)
    tab.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(tab.locator("body")).to_contain_text("mockllm/model")
    expect(tab.locator("body")).to_contain_text("inspect-task:evalsite_fixture")
    expect(tab.locator("body")).to_contain_text("mentions_target")
    _shoot(tab, "run-inspect", tmp_path)

    tab.goto(live_server.url + "/evalsets/upload/")
    tab.locator("input[type=file]").first.set_input_files(str(LOG))
    tab.get_by_role("button", name="Upload").click()
    expect(tab.locator(".result-panel")).to_contain_text("evalsite_fixture")
    _shoot(tab, "upload-inspect", tmp_path)
    assert EvalSet.objects.get().latest_version.source_format == "inspect"  # type: ignore[union-attr]

    tab.goto(live_server.url + "/runs/new/")
    expect(tab.locator("input[name=outputs_file]")).to_have_attribute("accept", re.compile(r"\.eval"))
    _shoot(tab, "new-run-inspect", tmp_path)
