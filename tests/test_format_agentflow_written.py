"""Files 10xscale-agentflow 0.10.1 writes (tests/data/results/agentflow-written/README.md): its
eval set imports and exports back in the shape it was read in, its report imports as a run."""

from __future__ import annotations

import json
from pathlib import Path

from evaluations.evalsets.services import evalset_import
from evaluations.interop.base import SourceFile
from evaluations.models import EvalCase, Project, Run, Score
from evaluations.runs.exports import version_native_text
from evaluations.runs.imports import results_import

WRITTEN = Path(__file__).resolve().parent / "data" / "results" / "agentflow-written"


def _source(name: str) -> SourceFile:
    return SourceFile(name, (WRITTEN / name).read_bytes())


def test_an_eval_set_agentflow_wrote_imports_and_exports_in_the_shape_it_was_read(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[_source("flow_set.evalset.json")])
    version = outcome.version
    assert version.source_format == "native"
    booked = EvalCase.objects.in_version(version).get(eval_id="book_trip")
    assert booked.description == "The planner searches, then books."
    assert booked.conversation[0]["expected_node_order"] == ["planner", "search", "book"]
    assert booked.session_input == {"app_name": "travel", "user_id": "u1", "state": {"tier": "gold"},
                                    "config": {"k": 1}}
    theirs = json.loads((WRITTEN / "flow_set.evalset.json").read_text())
    ours = json.loads(version_native_text(version))
    for mine, raw in zip(ours["eval_cases"], theirs["eval_cases"], strict=True):
        assert mine.get("description", "") == raw["description"]
        assert mine["session_input"] == raw["session_input"]
        assert [i.get("expected_node_order", []) for i in mine["conversation"]] == [
            i["expected_node_order"] for i in raw["conversation"]]
    [again] = evalset_import(project=acme, files=[SourceFile("again.evalset.json", json.dumps(ours).encode())])
    assert again.version == version and again.created is False  # the export is the same content


def test_a_case_without_a_description_hashes_as_before_descriptions_existed(acme: Project) -> None:
    doc = {"eval_set_id": "plain", "eval_cases": [{"eval_id": "a", "conversation": []}]}
    [first] = evalset_import(project=acme, files=[SourceFile("plain.evalset.json", json.dumps(doc).encode())])
    doc["eval_cases"][0]["description"] = "now with one"
    [second] = evalset_import(project=acme, files=[SourceFile("plain.evalset.json", json.dumps(doc).encode())])
    assert second.version != first.version
    assert EvalCase.objects.in_version(second.version).get().description == "now with one"


def test_an_agentflow_report_without_a_report_id_imports_with_node_order_scores(acme: Project) -> None:
    evalset_import(project=acme, files=[_source("flow_set.evalset.json")])
    run = results_import(project=acme, file=_source("flow_set.report.json"))
    assert run.status == Run.Status.COMPLETED and run.tags == ["imported:agentflow"]
    node = Score.objects.get(run=run, result__case__eval_id="book_trip", criterion="node_order_score")
    assert (node.raw_value, node.passed) == (1 / 3, False)
