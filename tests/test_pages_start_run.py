"""Starting a run from what you have: the eval set page's Run buttons open New run with the
version chosen, New run remembers the user's last eval set and target, and a version's
outputs skeleton (page and API) downloads as JSON lines that upload back as outputs."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, EvalSetVersion, Membership, Project, Run
from evaluations.runs import services as runs
from tests.compare_helpers import generated_version
from tests.engine_helpers import DEMO, import_demo

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    return response.content.decode()


def skeleton(client: Client, version: EvalSetVersion) -> list[dict[str, Any]]:
    response = client.get(reverse("version_outputs_skeleton", args=[version.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson; charset=utf-8"
    assert f'-v{version.number}.outputs.jsonl"' in response["Content-Disposition"]
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


@pytest.fixture
def demo(acme: Project) -> EvalSetVersion:
    return import_demo(acme)


def _start(client: Client, version: EvalSetVersion, **fields: Any) -> Any:
    data = {"version": version.pk, "config_source": "default", "target_kind": "demo", "iterations": 1,
            "warmups": 0, **fields}
    return client.post(reverse("run_new"), data)


def test_the_eval_set_page_has_run_buttons_that_open_new_run_with_the_version(
        alice_client: Client, acme: Project, demo: EvalSetVersion) -> None:
    page = html(alice_client.get(reverse("evalset_detail", args=[demo.evalset_id])))
    new = reverse("run_new") + f"?version={demo.pk}"
    assert f'href="{new}" data-testid="run-version">Run v1</a>' in page
    assert f'href="{new}" aria-label="Run v1">Run</a>' in page  # on the version's row
    assert f'href="{reverse("version_outputs_skeleton", args=[demo.pk])}" download' in page
    form = html(alice_client.get(new))
    assert f'<option value="{demo.pk}" data-default-config=' in form
    assert f'data-skeleton-url="{reverse("version_outputs_skeleton", args=[demo.pk])}" selected>' in form


def test_a_viewer_gets_no_run_button(acme: Project, demo: EvalSetVersion) -> None:
    viewer = get_user_model().objects.create_user("vic", "vic@example.com", "vic-pass-123")
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    page = html(client.get(reverse("evalset_detail", args=[demo.evalset_id])))
    assert "data-testid=\"run-version\"" not in page and 'aria-label="Run v1"' not in page
    assert "outputs skeleton</a>" in page  # reading is for everyone


def test_new_run_remembers_the_last_eval_set_and_target_not_the_alphabetically_first(
        alice_client: Client, acme: Project, demo: EvalSetVersion) -> None:
    first = generated_version(acme, 3, eval_set_id="aaa_first")  # sorts before the demo set
    fresh = html(alice_client.get(reverse("run_new")))
    assert f'value="{first.pk}" data-default-config=' in fresh
    assert f'data-skeleton-url="{reverse("version_outputs_skeleton", args=[first.pk])}" selected>' in fresh

    started = _start(alice_client, demo, target_kind="python", python_callable="evaluations.demo.agent:respond")
    assert started.status_code == 302, html(started)
    again = html(alice_client.get(reverse("run_new")))
    assert f'data-skeleton-url="{reverse("version_outputs_skeleton", args=[demo.pk])}" selected>' in again
    assert re.search(r'<input type="radio" name="target_kind" value="python"[^>]* checked>', again)
    assert not re.search(r'<input type="radio" name="target_kind" value="demo"[^>]* checked>', again)
    assert 'value="evaluations.demo.agent:respond"' in again
    # Asked for another one, the page takes it.
    other = html(alice_client.get(reverse("run_new") + f"?evalset={first.evalset_id}"))
    assert f'data-skeleton-url="{reverse("version_outputs_skeleton", args=[first.pk])}" selected>' in other


def test_new_run_shows_an_outputs_example_and_the_skeleton_link(alice_client: Client, demo: EvalSetVersion) -> None:
    page = html(alice_client.get(reverse("run_new") + f"?version={demo.pk}"))
    example = page.split('data-testid="outputs-example"', 1)[1].split("</div>", 1)[0]
    snippet = example.split('<pre class="value mono">', 1)[1].split("</pre>", 1)[0].replace("&quot;", '"')
    assert json.loads(snippet)["turns"][0]["invocation_id"] == "turn-1"
    assert f'href="{reverse("version_outputs_skeleton", args=[demo.pk])}" data-skeleton-link download' in example


def test_the_skeleton_has_a_line_per_case_with_its_turns_blanks_and_user_messages(
        alice_client: Client, demo: EvalSetVersion) -> None:
    lines = skeleton(alice_client, demo)
    doc = json.loads(DEMO.read_text())
    assert [line["eval_id"] for line in lines] == [c["eval_id"] for c in doc["eval_cases"]]
    first, case = lines[0], doc["eval_cases"][0]
    assert first["iteration"] == 0
    assert [t["invocation_id"] for t in first["turns"]] == [i["invocation_id"] for i in case["conversation"]]
    assert first["turns"][0]["metadata"]["user"] == case["conversation"][0]["user_content"]["content"]
    assert (first["turns"][0]["final_response"], first["turns"][0]["tool_calls"]) == ("", [])


def test_the_skeleton_uploads_back_as_outputs_on_new_run(alice_client: Client, demo: EvalSetVersion) -> None:
    data = b"".join(alice_client.get(reverse("version_outputs_skeleton", args=[demo.pk])).streaming_content)
    response = _start(alice_client, demo, target_kind="uploaded",
                      outputs_file=SimpleUploadedFile("skeleton.jsonl", data, "application/x-ndjson"))
    assert response.status_code == 302, html(response)
    run = runs.run_execute_here(Run.objects.get().pk)
    assert (run.target_kind, run.status, run.cases_total, run.cases_missing) == ("uploaded", "completed", 8, 0)
    assert not CaseResult.objects.filter(run=run, status=CaseResult.Status.MISSING).exists()


def test_the_api_gives_the_same_skeleton_and_it_posts_back_as_outputs(alice_client: Client,
                                                                      demo: EvalSetVersion) -> None:
    url = f"/api/v1/evalsets/{demo.evalset_id}/versions/1/outputs-skeleton/"
    response = alice_client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    body = b"".join(response.streaming_content)
    page = b"".join(alice_client.get(reverse("version_outputs_skeleton", args=[demo.pk])).streaming_content)
    assert body == page
    outputs = [json.loads(line) for line in body.decode().splitlines()]
    started = alice_client.post("/api/v1/runs/", {"evalset": demo.evalset_id, "target_kind": "uploaded",
                                                  "outputs": outputs}, content_type="application/json")
    assert started.status_code == 201, started.json()
    assert started.json()["cases_total"] == 8
    assert alice_client.get(f"/api/v1/evalsets/{demo.evalset_id}/versions/9/outputs-skeleton/").status_code == 404


def test_the_skeleton_streams_in_a_fixed_number_of_queries(alice_client: Client, acme: Project,
                                                           django_assert_max_num_queries: Any) -> None:
    version = generated_version(acme, 1200)
    with django_assert_max_num_queries(12):
        response = alice_client.get(reverse("version_outputs_skeleton", args=[version.pk]))
        lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == 1200 and json.loads(lines[-1])["eval_id"] == "case_1199"
