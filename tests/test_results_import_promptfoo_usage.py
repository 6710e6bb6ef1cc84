"""Issue 41, item 12: imported promptfoo results keep the tokens and cost promptfoo recorded,
per case and summed per run like any run's usage (they were dropped), and a token count that
is not one is refused saying where."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from django.test import Client

from evaluations.interop import SourceFile
from evaluations.interop.base import EvalSetImportError
from evaluations.models import CaseResult, Project, Run
from evaluations.runs.imports import results_import
from tests.conftest import REPO

SAMPLE = json.loads((REPO / "tests" / "data" / "results" / "promptfoo" / "results.json").read_text())
SPENT = [(120, 30, 0.0012), (95, 41, 0.0009), (310, 12, 0.0021)]  # prompt, completion, cost per test


def with_usage(*, on_response: bool = False) -> dict[str, Any]:
    """The sample as a paid provider would have written it: each test's tokens and cost."""
    doc = copy.deepcopy(SAMPLE)
    for entry, (prompt, completion, cost) in zip(doc["results"]["results"], SPENT, strict=True):
        holder = entry["response"] if on_response else entry
        if on_response:
            entry.pop("tokenUsage", None)
            entry.pop("cost", None)
        holder["tokenUsage"] = {**holder.get("tokenUsage", {}), "prompt": prompt, "completion": completion,
                                "total": prompt + completion,
                                "assertions": {"total": 999, "prompt": 900, "completion": 99}}  # the grader's
        holder["cost"] = cost
    return doc


def imported(project: Project, doc: dict[str, Any]) -> Run:
    return results_import(project=project, file=SourceFile("results.json", json.dumps(doc).encode()))


@pytest.mark.parametrize("on_response", [False, True])
def test_each_case_keeps_its_tokens_and_cost_and_the_run_sums_them(acme: Project, alice: Any, alice_client: Client,
                                                                  on_response: bool) -> None:
    run = imported(acme, with_usage(on_response=on_response))
    rows = sorted(CaseResult.objects.filter(run=run).values_list("prompt_tokens", "completion_tokens", "cost_usd"))
    assert rows == sorted(SPENT)
    summary = alice_client.get(f"/api/v1/runs/{run.pk}/summary/").json()
    assert summary["tokens"]["prompt"] == sum(p for p, _, _ in SPENT)
    assert summary["tokens"]["completion"] == sum(c for _, c, _ in SPENT)
    assert summary["cost_usd"] == pytest.approx(sum(c for _, _, c in SPENT))


def test_a_token_count_that_is_not_one_is_refused_with_its_path_and_nothing_is_written(acme: Project) -> None:
    doc = with_usage()
    doc["results"]["results"][1]["tokenUsage"]["completion"] = -4
    doc["results"]["results"][2]["cost"] = "cheap"
    with pytest.raises(EvalSetImportError) as refused:
        imported(acme, doc)
    said = [(p.path, p.message) for p in refused.value.problems]
    assert ("results.results[1].tokenUsage.completion", "expected a whole number of tokens from 0, not -4") in [
        (path, message) for path, message in said], said
    assert any(path == "results.results[2].cost" and "expected a number" in message for path, message in said), said
    assert not Run.objects.exists()
