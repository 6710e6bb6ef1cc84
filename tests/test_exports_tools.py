"""Exports in the tool's own format (ADK, UiPath, DeepEval): every real file, as uploaded and
after an edit, downloads in its tool's format and re-imports to the same content hash; what a
format cannot hold is listed (case and field), never dropped silently."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.evalsets.curation import case_native, evalset_edit, parse_edit
from evaluations.evalsets.exports import ExportLossError, ExportUnavailable, tool_export
from evaluations.evalsets.services import ImportOutcome, evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalCase, EvalSetVersion, Project
from tests.conftest import REALWORLD

pytestmark = pytest.mark.django_db


def _folder(path: str) -> list[str]:
    return [str(p.relative_to(REALWORLD)) for p in sorted((REALWORLD / path).rglob("*.json"))]


# Every real eval-set file, with the companion files that come with it.
REAL_FILES = {
    "adk-ecommerce": [
        "google-adk/ecommerce_customer_service_agent/order_query.test.json",
        "google-adk/ecommerce_customer_service_agent/test_config.json",
    ],
    "adk-hello-world": [
        "google-adk/hello_world_agent/roll_die.test.json",
        "google-adk/hello_world_agent/test_config.json",
    ],
    "adk-trip-planner-oldest-list": ["google-adk/trip_planner_agent/trip_inquiry.test.json"],
    "adk-live-scenario": ["google-adk/live_non_blocking_tool_agent/live_non_blocking_tool_agent.evalset.json"],
    "uipath-weather-current": [
        "uipath/weather_tools/eval-sets/default.json",
        *_folder("uipath/weather_tools/evaluators"),
    ],
    "uipath-calculator-legacy": _folder("uipath/calculator"),
    "uipath-weather-alone": ["uipath/weather_tools/eval-sets/default.json"],
    "deepeval-goldens-json": ["deepeval/test_core_test_datasets_goldens.json"],
    "deepeval-goldens-csv": ["deepeval/test_core_test_datasets_goldens.csv"],
    "deepeval-convo-json": ["deepeval/test_core_test_datasets_convo_goldens.json"],
    "deepeval-convo-csv": ["deepeval/test_core_test_datasets_convo_goldens.csv"],
    "inspect-log-read-sample": ["inspect/log_read_sample.json"],
    "inspect-log-tool-call-error": ["inspect/log_tool_call_error.json"],
    "inspect-dataset-wikipedia": ["inspect/wikipedia.jsonl"],
}


def upload(project: Project, key: str) -> ImportOutcome:
    files = [SourceFile(p, (REALWORLD / p).read_bytes()) for p in REAL_FILES[key]]
    outcomes = evalset_import(project=project, files=files)
    assert len(outcomes) == 1
    return outcomes[0]


def reimport(project: Project, data: bytes, filename: str) -> ImportOutcome:
    outcomes = evalset_import(project=project, files=[SourceFile(filename, data)])
    assert len(outcomes) == 1
    return outcomes[0]


def case_hashes(version: EvalSetVersion) -> list[tuple[str, str]]:
    return list(EvalCase.objects.in_version(version).order_by("position").values_list("eval_id", "content_hash"))


def edited(case: dict[str, Any], fmt: str) -> dict[str, Any]:
    """The case with a new expected response, changed tool-call arguments and (where the format
    has tags) a tag: the edits a reviewer makes."""
    conversation = case["conversation"]
    if fmt == "uipath":
        answer: Any = [{"type": "json", "json": {"result": "edited <b>answer</b>"}}]
    else:
        answer = "an edited answer with <b>markup</b> & “quotes”"
    conversation[0]["expected_final_response"] = {"role": "assistant", "content": answer}
    for invocation in conversation:
        if invocation["expected_tool_trajectory"]:
            invocation["expected_tool_trajectory"][0]["args"]["edited"] = "yes"
            break
    if fmt == "uipath":
        # UiPath keeps the expected calls in the evaluators' criteria: a reviewer edits both.
        for criterion in case["criteria"].values():
            if criterion and criterion.get("toolCalls"):
                criterion["toolCalls"][0].setdefault("args", {})["edited"] = "yes"
    if fmt == "deepeval":
        case["tags"] = [*case["tags"], "edited"]
    return case


def edit_first_scripted_case(version: EvalSetVersion) -> EvalSetVersion:
    row = next(c for c in EvalCase.objects.in_version(version).order_by("position") if c.conversation)
    case = edited(case_native(row), version.source_format)
    evalset = version.evalset
    change = {
        "base_version": version.number,
        "note": "fix the expectation",
        "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}],
    }
    return evalset_edit(evalset=evalset, edit=parse_edit(change), user=None, how="edit").version


@pytest.mark.parametrize("key", list(REAL_FILES))
def test_an_uploaded_real_file_round_trips_through_its_tools_format(key: str, acme: Project, globex: Project) -> None:
    first = upload(acme, key).version
    export = tool_export(first, first.source_format)
    back = reimport(globex, export.data, export.filename).version
    assert back.content_hash == first.content_hash
    assert case_hashes(back) == case_hashes(first)


@pytest.mark.parametrize("key", list(REAL_FILES))
def test_an_edited_real_file_round_trips_through_its_tools_format(key: str, acme: Project, globex: Project) -> None:
    first = upload(acme, key).version
    second = edit_first_scripted_case(first)
    assert second.content_hash != first.content_hash and second.source_format == "native"
    try:
        export = tool_export(second, first.source_format)
    except ExportLossError as exc:
        raise AssertionError("\n".join(map(str, exc.losses))) from None
    back = reimport(globex, export.data, export.filename).version
    assert back.content_hash == second.content_hash
    assert case_hashes(back) == case_hashes(second)
    assert back.source_format == first.source_format
    # Re-uploading the download into the same project finds the edited version itself.
    again = reimport(acme, export.data, export.filename)
    assert not again.created and again.version.pk == second.pk


def test_an_export_of_uipath_with_evaluators_is_a_zip_with_its_evaluator_files(acme: Project) -> None:
    version = upload(acme, "uipath-weather-current").version
    export = tool_export(version, "uipath")
    assert export.filename.endswith(".zip")
    names = zipfile.ZipFile(io.BytesIO(export.data)).namelist()
    assert any(n.endswith("/eval-sets/WeatherToolsEval.json") for n in names)
    assert sum("/evaluators/" in n for n in names) == len(REAL_FILES["uipath-weather-current"]) - 1


def test_what_a_format_cannot_hold_is_listed_by_case_and_field(acme: Project) -> None:
    version = upload(acme, "adk-ecommerce").version
    row = EvalCase.objects.in_version(version).first()
    assert row is not None
    case = case_native(row)
    case["tags"] = ["billing"]
    change = {"base_version": version.number, "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}]}
    second = evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=None, how="edit").version
    with pytest.raises(ExportLossError) as caught:
        tool_export(second, "adk")
    assert [(loss.case, loss.path) for loss in caught.value.losses] == [(row.eval_id, "tags")]
    assert "ADK eval cases have no tags" in caught.value.losses[0].message


def test_only_the_tool_an_eval_set_came_from_is_offered(acme: Project) -> None:
    version = upload(acme, "deepeval-goldens-json").version
    with pytest.raises(ExportUnavailable, match="came from DeepEval, not ADK"):
        tool_export(version, "adk")


# --- API and pages ------------------------------------------------------------------------------


def api_export(client: Client, version: EvalSetVersion, fmt: str) -> Any:
    url = reverse("api_evalset_version_export", args=[version.evalset.pk, version.number])
    return client.get(url, {"format": fmt})


def test_the_api_exports_in_the_tools_format_and_native(acme: Project, globex: Project, alice_client: Client) -> None:
    version = edit_first_scripted_case(upload(acme, "deepeval-goldens-json").version)
    response = api_export(alice_client, version, "deepeval")
    assert response.status_code == 200, response.content
    assert 'filename="test_core_test_datasets_goldens.json"' in response["Content-Disposition"]
    back = reimport(globex, response.content, "test_core_test_datasets_goldens.json").version
    assert back.content_hash == version.content_hash
    native = api_export(alice_client, version, "native")
    assert native.status_code == 200
    again = reimport(globex, b"".join(native.streaming_content), "x.evalset.json").version
    assert again.content_hash == version.content_hash


def test_a_uipath_trajectory_that_disagrees_with_its_criteria_is_reported(acme: Project) -> None:
    version = upload(acme, "uipath-weather-current").version
    row = next(
        c
        for c in EvalCase.objects.in_version(version).order_by("position")
        if c.conversation[0]["expected_tool_trajectory"]
    )
    case = case_native(row)
    case["conversation"][0]["expected_tool_trajectory"][0]["args"] = {"city": "Paris"}
    change = {"base_version": version.number, "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}]}
    second = evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=None, how="edit").version
    with pytest.raises(ExportLossError) as caught:
        tool_export(second, "uipath")
    [loss] = caught.value.losses
    assert (loss.case, loss.path) == (row.eval_id, "conversation[0].expected_tool_trajectory")
    assert "ToolCallArgsEvaluator.toolCalls" in loss.message


def test_the_api_says_409_with_each_lost_field(acme: Project, alice_client: Client) -> None:
    version = upload(acme, "uipath-weather-current").version
    row = EvalCase.objects.in_version(version).order_by("position").first()
    assert row is not None
    case = case_native(row)
    case["tags"] = ["t"]
    case["rubrics"] = [{"name": "r", "description": "d"}]
    change = {"base_version": version.number, "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}]}
    second = evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=None, how="edit").version
    response = api_export(alice_client, second, "uipath")
    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "export_loses_content"
    assert {(p["case"], p["path"]) for p in body["problems"]} == {(row.eval_id, "tags"), (row.eval_id, "rubrics")}


def test_the_api_refuses_another_tools_format_and_another_projects_version(
    acme: Project, alice_client: Client, bob_client: Client
) -> None:
    version = upload(acme, "adk-hello-world").version
    wrong = api_export(alice_client, version, "uipath")
    assert wrong.status_code == 400 and wrong.json()["problems"][0]["path"] == "format"
    assert api_export(alice_client, version, "xml").status_code == 400
    assert api_export(bob_client, version, "adk").status_code == 404


def test_the_pages_link_the_tools_format_and_explain_a_loss(
    acme: Project, alice_client: Client, bob_client: Client
) -> None:
    version = upload(acme, "adk-ecommerce").version
    export_url = reverse("version_export", args=[version.pk, "adk"])
    for page in (
        reverse("evalset_versions", args=[version.evalset.pk]),
        reverse("evalset_detail", args=[version.evalset.pk]),
    ):
        assert export_url in alice_client.get(page).content.decode()
    download = alice_client.get(export_url)
    assert download.status_code == 200 and download["Content-Type"] == "application/zip"
    assert bob_client.get(export_url).status_code == 404
    assert alice_client.get(reverse("version_export", args=[version.pk, "deepeval"])).status_code == 404

    row = EvalCase.objects.in_version(version).first()
    assert row is not None
    case = case_native(row)
    case["tags"] = ["<script>alert(1)</script>"]
    change = {"base_version": version.number, "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}]}
    second = evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=None, how="edit").version
    page = alice_client.get(reverse("version_export", args=[second.pk, "adk"]))
    assert page.status_code == 409
    text = page.content.decode()
    assert "ADK eval cases have no tags" in text and row.eval_id in text


def test_an_edited_case_with_markup_is_escaped_in_the_loss_page(acme: Project, alice_client: Client) -> None:
    version = upload(acme, "deepeval-goldens-json").version
    row = EvalCase.objects.in_version(version).order_by("position").first()
    assert row is not None
    case = case_native(row)
    case["eval_id"] = "<img src=x onerror=alert(1)>"
    case["rubrics"] = [{"name": "r", "description": "d"}]
    change = {"base_version": version.number, "changes": [{"op": "put", "eval_id": row.eval_id, "case": case}]}
    second = evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=None, how="edit").version
    page = alice_client.get(reverse("version_export", args=[second.pk, "deepeval"]))
    assert page.status_code == 409
    text = page.content.decode()
    assert "<img src=x" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text


def test_realworld_files_are_all_covered() -> None:
    covered = {p for paths in REAL_FILES.values() for p in paths}
    eval_sets = [
        p
        for p in REALWORLD.rglob("*")
        if p.suffix in (".json", ".csv")
        and "_evaluator_types" not in p.parts
        and "evaluators" not in p.parts
        and p.name != "test_config.json"
        and "promptfoo" not in p.parts  # tests/test_format_promptfoo.py imports and round-trips each
    ]
    assert eval_sets and {str(Path(p).relative_to(REALWORLD)) for p in eval_sets} <= covered


def test_a_case_added_in_the_editor_keeps_its_id_in_deepeval(acme: Project, globex: Project) -> None:
    version = upload(acme, "deepeval-goldens-json").version
    new = {
        "eval_id": "refund-policy",
        "name": "Name 1",  # a name another golden has: the id must be written
        "tags": ["added"],
        "conversation": [
            {
                "invocation_id": "turn_1",
                "user_content": {"role": "user", "content": "Can I get a refund?"},
                "expected_final_response": {"role": "assistant", "content": "Within 30 days."},
                "expected_tool_trajectory": [{"name": "policy", "args": {"topic": "refunds"}}],
            }
        ],
    }
    change = {"base_version": version.number, "changes": [{"op": "put", "case": new}]}
    second = evalset_edit(evalset=version.evalset, edit=parse_edit(change), user=None, how="edit").version
    export = tool_export(second, "deepeval")
    back = reimport(globex, export.data, export.filename).version
    assert back.content_hash == second.content_hash
    assert case_hashes(back)[-1][0] == "refund-policy"
