"""Building blocks for the engine tests: the demo eval set and outputs derived from it."""

from __future__ import annotations

import copy
import json
from typing import Any

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalSetVersion, Project
from tests.conftest import REPO

DEMO = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"


def import_demo(project: Project) -> EvalSetVersion:
    [outcome] = evalset_import(project=project, files=[SourceFile(DEMO.name, DEMO.read_bytes())])
    return outcome.version


def perfect_outputs(iteration: int = 0) -> list[dict[str, Any]]:
    """Outputs that do exactly what each case expects."""
    doc = json.loads(DEMO.read_text())
    outputs = []
    for case in doc["eval_cases"]:
        turns = []
        for inv in case["conversation"]:
            turns.append({
                "invocation_id": inv["invocation_id"],
                "final_response": (inv.get("expected_final_response") or {}).get("content", ""),
                "tool_calls": [{"name": c["name"], "args": c["args"]} for c in inv.get("expected_tool_trajectory", [])],
                "latency_seconds": 0.5 + 0.1 * len(turns),
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "cost_usd": 0.001},
            })
        outputs.append({"eval_id": case["eval_id"], "iteration": iteration, "turns": turns})
    return outputs


def regressed_outputs() -> list[dict[str, Any]]:
    """The perfect outputs with two regressions: a wrong argument and a missing call."""
    outputs = copy.deepcopy(perfect_outputs())
    by_id = {o["eval_id"]: o for o in outputs}
    by_id["weather_tokyo"]["turns"][0]["tool_calls"][0]["args"]["city"] = "Kyoto"
    by_id["order_status"]["turns"][0]["tool_calls"] = []
    return outputs


def as_file(outputs: list[dict[str, Any]], name: str = "outputs.json") -> SourceFile:
    return SourceFile(name, json.dumps(outputs).encode())
