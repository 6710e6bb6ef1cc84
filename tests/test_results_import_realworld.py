"""Results import of real, published results files (tests/data/results/realworld/, provenance and
licences in tests/data/results/README.md): each becomes a completed run whose scores, thresholds,
verdicts and reasons are the ones in the file.

The expected values are read from the file here with plain `json`, not through the importer, and
compared with what the run stores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluations.interop.base import SourceFile
from evaluations.interop.deepeval.metrics import criterion_for
from evaluations.models import CaseResult, Project, Run, Score
from evaluations.runs.engine import native_case
from evaluations.runs.imports import results_import

REALWORLD = Path(__file__).resolve().parent / "data" / "results" / "realworld"
DEEPEVAL = sorted((REALWORLD / "deepeval").glob("*/.latest_test_run.json"))


def test_the_real_files_are_there_each_with_its_licence() -> None:
    assert len(DEEPEVAL) >= 3
    for path in DEEPEVAL:
        assert (path.parent / "LICENSE").read_text(encoding="utf-8").strip()
        assert path.stat().st_size < 300_000
    readme = (REALWORLD.parent / "README.md").read_text(encoding="utf-8")
    for path in DEEPEVAL:
        assert str(path.relative_to(REALWORLD.parent)) in readme


def _criterion(name: str) -> str:
    """A metric evalsite computes too is kept under its criterion's name; a G-Eval under its own."""
    criterion = criterion_for(name)
    return name if criterion is None or criterion == "deepeval_g_eval" else criterion


def _deepeval_cases(doc: dict[str, Any]) -> list[dict[str, Any]]:
    data = doc.get("testRunData", doc)
    cases = (data.get("testCases") or []) + (data.get("conversationalTestCases") or [])
    names = [c.get("name") for c in cases]
    assert len(set(names)) == len(names) and all(names), "eval ids are the names when they are unique"
    return cases


@pytest.mark.parametrize("path", DEEPEVAL, ids=[p.parent.name for p in DEEPEVAL])
def test_a_real_deepeval_test_run_imports_with_deepevals_own_scores(acme: Project, path: Path) -> None:
    doc = json.loads(path.read_bytes())
    cases = _deepeval_cases(doc)
    run = results_import(project=acme, file=SourceFile(path.name, path.read_bytes()))
    assert run.status == Run.Status.COMPLETED
    assert run.tags == ["imported:deepeval"]
    data = doc.get("testRunData", doc)
    # Created from the test cases, named after the test file DeepEval ran when it says which.
    named = data.get("identifier") or (Path(data["testFile"]).stem if data.get("testFile") else "latest_test_run")
    assert run.evalset_version.evalset.eval_set_id == named
    assert run.evalset_version.case_count == len(cases)
    assert CaseResult.objects.filter(run=run).count() == len(cases)
    assert Score.objects.filter(run=run).count() == sum(len(c.get("metricsData") or []) for c in cases)
    for case in cases:
        result = CaseResult.objects.get(run=run, case__eval_id=case["name"])
        assert result.status == ("passed" if case["success"] else "failed")
        if "actualOutput" in case:
            assert result.output["turns"][-1]["final_response"] == case["actualOutput"]
        called = case.get("toolsCalled") or []
        assert [(c["name"], c.get("args", {})) for c in result.output["turns"][-1].get("tool_calls", [])] == [
            (t["name"], t.get("inputParameters") or {}) for t in called
        ]
        # The eval set made of the test cases: DeepEval's input, expected output and tools.
        [turn] = native_case(result.case).conversation
        assert turn.user_content.content == case["input"]
        if case.get("expectedOutput") is not None:
            assert turn.expected_final_response is not None
            assert turn.expected_final_response.content == case["expectedOutput"]
        assert [(t.name, t.args) for t in turn.expected_tool_trajectory] == [
            (t["name"], t.get("inputParameters") or {}) for t in case.get("expectedTools") or []
        ]
        for metric in case.get("metricsData") or []:
            score = Score.objects.get(run=run, result=result, criterion=_criterion(metric["name"]))
            assert score.evaluator == "imported:deepeval"
            assert score.raw_value == metric.get("score")
            assert score.score == metric.get("score")
            assert score.passed is metric["success"]
            assert score.threshold == {"lower_limit": metric["threshold"]}
            assert score.justification.get("reason") == metric.get("reason")
            assert score.justification.get("evaluation_model") == metric.get("evaluationModel")
            assert score.error == (metric.get("error") or "")
    assert run.cases_failed == data["testFailed"]
    assert run.cases_done - run.cases_failed == data["testPassed"]
    # The run's metrics: DeepEval's names (or the criteria evalsite computes them with) with DeepEval's thresholds.
    for metric in data["metricsScores"]:
        assert _criterion(metric["metric"]) in run.config["criteria"]
