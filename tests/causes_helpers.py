"""Real eval sets (tests/data/realworld/) run twice through the engine: once with outputs that
do what each case expects, once with failures injected whose causes are known beforehand (a
tool call removed in 30 % of the cases, an argument reformatted in another 20 %, a timeout
in 10 %). `expected_causes` says which signature each injection must produce, and how many
cases it hits."""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalCase, EvalSetVersion, Project, Run
from evaluations.runs.exports import case_native_dict
from evaluations.schemas.evalset import EvalConfig
from tests.compare_helpers import make_run

REALWORLD = Path(__file__).parent / "data" / "realworld"
# The real files whose cases expect tool calls.
TOOL_SETS = {
    "deepeval-goldens": "deepeval/test_core_test_datasets_goldens.csv",
    "uipath-weather": "uipath/weather_tools/eval-sets/default.json",
    "adk-ecommerce": "google-adk/ecommerce_customer_service_agent/order_query.test.json",
}
CONFIG = EvalConfig.model_validate({"criteria": {
    "trajectory_match": {"threshold": 1.0, "options": {"strict": True}},
    "tool_trajectory_avg_score": {"threshold": 1.0},
}})
TIMEOUT = "Agent call timed out after 30.0 s (request {n})"


def import_real(project: Project, key: str) -> EvalSetVersion:
    path = REALWORLD / TOOL_SETS[key]
    [outcome] = evalset_import(project=project, files=[SourceFile(path.name, path.read_bytes())])
    return outcome.version


def perfect(version: EvalSetVersion) -> list[dict[str, Any]]:
    """Outputs that call exactly the expected tools and answer what is expected."""
    outputs = []
    for row in EvalCase.objects.in_version(version).order_by("position"):
        case = case_native_dict(row)
        turns = []
        for inv in case["conversation"]:
            expected = inv.get("expected_final_response") or {}
            parts = expected.get("parts") or [] if isinstance(expected, dict) else []
            text = " ".join(p.get("text", "") for p in parts if isinstance(p, dict)) or "done"
            turns.append({"invocation_id": inv["invocation_id"], "final_response": text,
                          "tool_calls": [{"name": c["name"], "args": c["args"]}
                                         for c in inv.get("expected_tool_trajectory") or []],
                          "latency_seconds": 0.4})
        outputs.append({"eval_id": case["eval_id"], "turns": turns})
    return outputs


@dataclass
class Injected:
    outputs: list[dict[str, Any]]
    causes: Counter[str]  # signature -> cases
    removed: list[str]  # eval ids
    reformatted: list[str]
    timed_out: list[str]


def _reformat(value: Any) -> tuple[Any, str]:
    """A value in another format, and the kind of change the causes must name."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return [value], "type"
    if isinstance(value, (int, float)):
        return str(value), "type"
    if value.isdigit():
        return int(value), "type"
    return value.upper() if value != value.upper() else value.lower(), "format: case or spacing"


def inject(outputs: list[dict[str, Any]], *, removed: float = 0.3, reformatted: float = 0.2,
           timed_out: float = 0.1) -> Injected:
    """Failures by position: the first 30 % of the cases lose the last tool call of their
    first turn that has any, the next 20 % get that call's first argument reformatted, the
    next 10 % time out. Returns the outputs and the causes they must produce."""
    out = copy.deepcopy(outputs)
    n = len(out)
    cut1 = round(removed * n)
    cut2 = cut1 + round(reformatted * n)
    cut3 = cut2 + max(1, round(timed_out * n)) if timed_out else cut2
    causes: Counter[str] = Counter()
    done: dict[str, list[str]] = {"removed": [], "reformatted": [], "timed_out": []}
    for index, output in enumerate(out):
        turn = next((t for t in output["turns"] if t["tool_calls"]), None)
        if index < cut1 and turn is not None:
            call = turn["tool_calls"].pop()
            causes[f"missing {call['name']}"] += 1
            done["removed"].append(output["eval_id"])
        elif index < cut2 and turn is not None and turn["tool_calls"][-1]["args"]:
            call = turn["tool_calls"][-1]
            key = next(iter(call["args"]))
            call["args"][key], kind = _reformat(call["args"][key])
            causes[f"{call['name']}.{key} differs ({kind})"] += 1
            done["reformatted"].append(output["eval_id"])
        elif cut2 <= index < cut3:
            output["turns"] = []
            output["error"] = TIMEOUT.format(n=1000 + index)
            causes["timeout"] += 1
            done["timed_out"].append(output["eval_id"])
    return Injected(out, causes, done["removed"], done["reformatted"], done["timed_out"])


def runs_with_injected(project: Project, key: str, **shares: float) -> tuple[Run, Run, Injected]:
    """A real eval set's baseline (every case right) and candidate (failures injected)."""
    version = import_real(project, key)
    good = perfect(version)
    baseline = make_run(project, version, good, name="baseline", config=CONFIG, labels={"branch": "main"})
    injected = inject(good, **shares)
    candidate = make_run(project, version, injected.outputs, name="candidate", config=CONFIG,
                         labels={"branch": "main"})
    return baseline, candidate, injected
