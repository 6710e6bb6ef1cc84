"""The run page says when a criterion named after another tool's criterion scores differently
from that tool (evaluations/evaluators/parity.py), and says nothing when the run uses the
tool's own evaluator."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.evaluators.parity import parity_notes
from evaluations.models import Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs

pytestmark = pytest.mark.django_db


def run_with(project: Project, config: EvalConfig) -> Run:
    run = runs.run_create(project=project, version=import_demo(project), target_kind="uploaded", config=config,
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()], enqueue=False)
    return runs.run_execute_here(run.pk)


def notes_section(client: Client, run: Run) -> str:
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    if 'class="parity-notes"' not in page:
        return ""
    body = page.split("<body", 1)[1]
    # Below the run's numbers, folded: the notes never push the pass rate down the page (issue 28).
    assert 'class="parity-notes"' in body.split('aria-label="Summary"', 1)[1]
    assert '<details class="parity-notes" data-testid="parity-notes">' in body  # closed until opened
    return body.split('class="parity-notes"', 1)[1].split("</details>", 1)[0]


def test_agentflow_names_scored_by_evalsite_say_so_and_name_the_agentflow_evaluator(
        acme: Project, alice_client: Client) -> None:
    run = run_with(acme, EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.8),
                                              "response_match": CriterionConfig(threshold=0.7)}))
    section = notes_section(alice_client, run)
    assert '<strong class="mono">trajectory_match</strong> is not another tool\'s score' in section
    assert "use the evaluator agentflow_trajectory_match" in section
    assert "AgentFlow 0.10.1&#x27;s response_match is an LLM judge" in section


def test_no_note_when_the_run_uses_the_tools_own_evaluators(acme: Project, alice_client: Client) -> None:
    run = run_with(acme, EvalConfig(criteria={
        "trajectory_match": CriterionConfig(evaluator="agentflow_trajectory_match", threshold=0.8),
        "response_match": CriterionConfig(evaluator="agentflow_rouge_match", threshold=0.7)}))
    assert notes_section(alice_client, run) == ""


@pytest.mark.parametrize(("config", "names"), [
    ({"criteria": {"exact_match": {}, "tool_trajectory_avg_score": {}}}, ["exact_match"]),
    ({"criteria": {"trajectory_match": {"enabled": False}}}, []),
    ({"criteria": "not a mapping"}, []),
    (None, []),
])
def test_which_criteria_get_a_note(config: Any, names: list[str]) -> None:
    assert [name for name, _ in parity_notes(config)] == names
