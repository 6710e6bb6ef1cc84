"""Building blocks for the API tests: finished runs of the demo eval set (with node-level
scores), API clients that authenticate with a token, and the error-shape check."""

from __future__ import annotations

import copy
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from evaluations.models import Membership, Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs

ERROR_KEYS = {"code", "message", "problems", "problem_count"}
PROBLEM_KEYS = {"message", "path", "file", "case", "line", "column"}

# The demo's criteria plus a node-level one (watsonx `applies_to: node`).
CONFIG = EvalConfig(criteria={
    "trajectory_match": CriterionConfig(threshold=0.8, match_type="EXACT"),
    "response_match": CriterionConfig(threshold=0.5),
    "node_time": CriterionConfig(evaluator="node_latency_seconds", threshold=5.0),
})


def with_nodes(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The outputs with a planner and an executor node: tool calls run in the executor
    (0.5 s each), the planner takes 0.2 s."""
    outputs = copy.deepcopy(outputs)
    for output in outputs:
        output["trajectory"] = [{"step_type": "NODE", "name": "planner", "metadata": {"duration_seconds": 0.2}},
                                {"step_type": "NODE", "name": "executor"}]
        for turn in output["turns"]:
            for call in turn["tool_calls"]:
                call.update({"node": "executor", "latency_seconds": 0.5})
    return outputs


def finished_run(project: Project, outputs: list[dict[str, Any]] | None = None, *, version: Any = None,
                 config: EvalConfig | None = CONFIG, **labels: Any) -> Run:
    version = version or project.evalsets.get(eval_set_id="demo_travel_agent").latest_version
    run = runs.run_create(project=project, version=version, target_kind="uploaded", enqueue=False, config=config,
                          outputs=[AgentOutput.model_validate(o) for o in
                                   (outputs if outputs is not None else with_nodes(regressed_outputs()))],
                          labels=labels or None)
    return runs.run_execute_here(run.pk)


def demo_runs(project: Project) -> tuple[Run, Run]:
    """A perfect baseline and a candidate with two regressions (weather_tokyo, order_status)."""
    import_demo(project)
    base = finished_run(project, with_nodes(perfect_outputs()))
    run = finished_run(project)
    return base, run


def member(username: str, project: Project, role: str) -> Any:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", f"{username}-pass-123")
    Membership.objects.create(project=project, user=user, role=role)
    return user


def token_client(user: Any) -> Client:
    from evaluations.accounts.tokens import token_create

    return Client(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='tests').secret}")


def assert_error(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The response is an error in the one shape, with this status (and code)."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == ERROR_KEYS, body
    assert isinstance(body["message"], str) and body["message"]
    assert body["problem_count"] >= len(body["problems"])
    assert all(set(p) == PROBLEM_KEYS for p in body["problems"]), body["problems"]
    if code is not None:
        assert body["code"] == code, body
    return body
