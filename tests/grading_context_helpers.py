"""Runs for the grading-in-context tests: an eval set of multi-turn cases whose first turn
expects `search(q=…)` then `lookup(id=…)`, and outputs that get it right except for the
cases in `wrong` (turn 1 looks up the wrong id, turn 2 makes no call). Scored by two
deterministic criteria: `trajectory_match` (a tool-call criterion) and `exact_match`."""

from __future__ import annotations

import json
from typing import Any

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import Project, Run
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from tests.compare_helpers import make_run


def user_text(case: int, turn: int) -> str:
    return f"Question {turn} about item {case}"


def answer(case: int, turn: int) -> str:
    return f"Answer {turn}: item {case} is in stock."


def expected_calls(case: int, turn: int) -> list[dict[str, Any]]:
    calls = [{"name": "lookup", "args": {"id": case}}]
    return [{"name": "search", "args": {"q": f"item {case}"}}, *calls] if turn == 1 else calls


def context_run(project: Project, count: int, *, turns: int = 2, wrong: frozenset[int] = frozenset(),
                responses: dict[int, str] | None = None) -> Run:
    """`count` cases of `turns` turns each, run with the outputs described above; `responses`
    replaces the actual final response of a case's first turn (hostile or long text)."""
    cases = [
        {
            "eval_id": f"case_{i:04d}",
            "conversation": [
                {
                    "invocation_id": f"turn_{t}",
                    "user_content": {"role": "user", "content": user_text(i, t)},
                    "expected_tool_trajectory": expected_calls(i, t),
                    "expected_final_response": {"role": "assistant", "content": answer(i, t)},
                }
                for t in range(1, turns + 1)
            ],
        }
        for i in range(count)
    ]
    [outcome] = evalset_import(project=project, files=[SourceFile(
        "context.evalset.json", json.dumps({"eval_set_id": "context", "eval_cases": cases}).encode())])
    outputs = []
    for i in range(count):
        out_turns = []
        for t in range(1, turns + 1):
            calls = expected_calls(i, t)
            if i in wrong and t == 1:
                calls = [calls[0], {"name": "lookup", "args": {"id": 999}}]
            elif i in wrong and t == 2:
                calls = []
            text = (responses or {}).get(i) if t == 1 and i in (responses or {}) else answer(i, t)
            out_turns.append({"invocation_id": f"turn_{t}", "final_response": text, "tool_calls": calls})
        outputs.append({"eval_id": f"case_{i:04d}", "turns": out_turns})
    config = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.8),
                                  "exact_match": CriterionConfig(threshold=1.0)})
    return make_run(project, outcome.version, outputs, config=config)
