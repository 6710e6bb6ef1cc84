"""Runs to compare, built the way users build them: the demo eval set (or a generated one)
imported through the import service, uploaded outputs, `run_create` + `run_execute_here`."""

from __future__ import annotations

import copy
import json
from typing import Any

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalSetVersion, Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs

__all__ = ["baseline_and_candidate", "generated_outputs", "generated_version", "import_demo", "make_run",
           "perfect_outputs", "regressed_outputs"]


def make_run(project: Project, version: EvalSetVersion, outputs: list[dict[str, Any]], **kwargs: Any) -> Run:
    run = runs.run_create(project=project, version=version, target_kind="uploaded",
                          outputs=[AgentOutput.model_validate(o) for o in outputs], enqueue=False, **kwargs)
    return runs.run_execute_here(run.pk)


def baseline_and_candidate(project: Project) -> tuple[Run, Run]:
    """The demo eval set run twice: perfect outputs, then the same with two regressions
    (weather_tokyo asks for Kyoto instead of Tokyo; order_status skips get_order)."""
    version = import_demo(project)
    baseline = make_run(project, version, perfect_outputs(), name="baseline", labels={"model": "agent-v1"})
    candidate = make_run(project, version, regressed_outputs(), name="candidate", labels={"model": "agent-v2"})
    return baseline, candidate


def generated_version(project: Project, count: int, *, eval_set_id: str = "generated") -> EvalSetVersion:
    """A native eval set of `count` one-turn cases, each expecting `lookup(id=i)`."""
    cases = [
        {
            "eval_id": f"case_{i:04d}",
            "tags": ["even" if i % 2 == 0 else "odd"],
            "conversation": [{
                "invocation_id": "turn_1",
                "user_content": {"role": "user", "content": f"Look up item {i}"},
                "expected_tool_trajectory": [{"name": "lookup", "args": {"id": i}}],
                "expected_final_response": {"role": "assistant", "content": f"Item {i} is in stock."},
            }],
        }
        for i in range(count)
    ]
    doc = {"eval_set_id": eval_set_id, "eval_cases": cases}
    [outcome] = evalset_import(project=project, files=[SourceFile(f"{eval_set_id}.evalset.json",
                                                                   json.dumps(doc).encode())])
    return outcome.version


def generated_outputs(count: int, *, wrong: set[int] = frozenset(), slow: float = 0.0) -> list[dict[str, Any]]:
    """Outputs for `generated_version`: right, except the cases in `wrong` look up item 0."""
    outputs = []
    for i in range(count):
        outputs.append({
            "eval_id": f"case_{i:04d}",
            "turns": [{
                "invocation_id": "turn_1",
                "final_response": f"Item {i} is in stock.",
                "tool_calls": [{"name": "lookup", "args": {"id": 0 if i in wrong else i}}],
                "latency_seconds": 0.5 + slow + (i % 10) / 10,
            }],
        })
    return copy.deepcopy(outputs)
