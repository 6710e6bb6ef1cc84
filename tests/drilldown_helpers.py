"""A four-turn case with three tool calls a turn, and runs of it: what a drill-down has to make
short (most calls match; turn 2 misses one, turn 3 sends a different `value`)."""

from __future__ import annotations

import copy
import json
from typing import Any

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalSetVersion, Project, Run
from tests.compare_helpers import make_run

EVAL_ID = "four_turns"


def calls(turn: int) -> list[dict[str, Any]]:
    return [{"name": "lookup", "args": {"key": f"k{turn}", "value": turn, "options": {"fresh": True, "depth": 2}}},
            {"name": "fetch", "args": {"url": f"https://example.test/{turn}", "retries": 3}},
            {"name": "store", "args": {"key": f"k{turn}", "value": turn * 10}}]


def four_turn_version(project: Project, eval_id: str = EVAL_ID) -> EvalSetVersion:
    conversation = [{
        "invocation_id": f"turn_{turn}",
        "user_content": {"role": "user", "content": f"Step {turn}: look up, fetch and store"},
        "expected_tool_trajectory": calls(turn),
        "expected_final_response": {"role": "assistant", "content": f"Stored step {turn}."},
    } for turn in range(1, 5)]
    doc = {"eval_set_id": "four", "eval_cases": [{"eval_id": eval_id, "conversation": conversation}]}
    [outcome] = evalset_import(project=project, files=[SourceFile("four.evalset.json", json.dumps(doc).encode())])
    return outcome.version


def outputs(*, regressed: bool, eval_id: str = EVAL_ID) -> list[dict[str, Any]]:
    turns = []
    for turn in range(1, 5):
        made = copy.deepcopy(calls(turn))
        if regressed and turn == 2:
            made.pop(1)  # fetch is missing
        if regressed and turn == 3:
            made[2]["args"]["value"] = 99
        turns.append({"invocation_id": f"turn_{turn}", "final_response": f"Stored step {turn}.",
                      "tool_calls": made, "latency_seconds": 0.4})
    return [{"eval_id": eval_id, "turns": turns}]


def four_turn_runs(project: Project, eval_id: str = EVAL_ID) -> tuple[Run, Run]:
    version = four_turn_version(project, eval_id)
    return (make_run(project, version, outputs(regressed=False, eval_id=eval_id), name="before"),
            make_run(project, version, outputs(regressed=True, eval_id=eval_id), name="after"))
