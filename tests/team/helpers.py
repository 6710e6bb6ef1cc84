"""Building blocks of the team-server tests: generated eval sets with known outcomes, an API
client for the running server, and a recount of a run from the database."""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from django.contrib.auth import get_user_model
from django.db.models import Count

from evaluations.accounts.tokens import token_create
from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import CaseResult, EvalSetVersion, Membership, Project, Run, Score

# The engine benchmark's six deterministic evaluators.
CRITERIA: dict[str, dict[str, Any]] = {
    "trajectory_match": {"threshold": 0.8, "match_type": "IN_ORDER"},
    "tool_trajectory_avg_score": {"threshold": 1.0},
    "response_match_score": {"threshold": 0.5},
    "exact_match": {"threshold": 1.0},
    "reliability": {"threshold": 1.0},
    "latency_seconds": {"threshold": 5.0},
}
TOOLS = ["get_weather", "get_forecast", "search_flights", "book_flight", "get_order", "cancel_order"]
CITIES = ["Tokyo", "Paris", "Lisbon", "Oslo", "Nairobi", "Lima", "Toronto", "Seoul"]


def generate(cases: int, seed: int = 7) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    """An eval set of `cases` one-turn cases, outputs for all of them, and the status each
    must end with: every tenth case (i % 10 == 3) calls a tool with a wrong argument, and
    every tenth (i % 10 == 7) words its answer differently (exact match fails)."""
    r = random.Random(seed)
    eval_cases, outputs, expected = [], [], {}
    for i in range(cases):
        eval_id = f"case_{i:05d}"
        city = r.choice(CITIES)
        calls = [{"name": name, "args": {"city": city, "days": r.randint(1, 5)}}
                 for name in r.sample(TOOLS, r.randint(2, 4))]
        answer = f"In {city} it will be {r.randint(-5, 35)} degrees with light wind; bring a jacket after sunset."
        eval_cases.append({"eval_id": eval_id, "tags": [r.choice(["weather", "flights", "orders"])],
                           "conversation": [{"invocation_id": "t1",
                                             "user_content": {"role": "user", "content": f"Plan my day in {city}"},
                                             "expected_tool_trajectory": calls,
                                             "expected_final_response": {"role": "assistant", "content": answer}}]})
        actual = [dict(c, args=dict(c["args"])) for c in calls]
        reply = answer
        expected[eval_id] = "passed"
        if i % 10 == 3:
            actual[0]["args"]["city"] = "Nowhere"
            expected[eval_id] = "failed"
        elif i % 10 == 7:
            reply = answer.replace("jacket", "umbrella")
            expected[eval_id] = "failed"
        outputs.append({"eval_id": eval_id, "turns": [{
            "invocation_id": "t1", "final_response": reply, "tool_calls": actual,
            "latency_seconds": round(r.uniform(0.2, 3.0), 3),
            "usage": {"prompt_tokens": 800, "completion_tokens": 60, "cost_usd": 0.001}}]})
    return {"eval_set_id": f"team_{cases}", "name": f"Team test ({cases} cases)", "eval_cases": eval_cases}, \
        outputs, expected


def import_evalset(project: Project, evalset: dict[str, Any]) -> EvalSetVersion:
    [outcome] = evalset_import(project=project, files=[SourceFile("team.evalset.json", json.dumps(evalset).encode())])
    return outcome.version


def member_with_token(project: Project, username: str = "carol") -> str:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", "carol-pass-123")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    return token_create(user=user, name="team tests").secret


class Api:
    """The running server's REST API, as a script would use it."""

    def __init__(self, base: str, token: str) -> None:
        self.client = httpx.Client(base_url=base, headers={"Authorization": f"Token {token}"}, timeout=120,
                                   trust_env=False)

    def close(self) -> None:
        self.client.close()

    def create_run(self, **body: Any) -> dict[str, Any]:
        response = self.client.post("/api/v1/runs/", json=body)
        assert response.status_code == 201, response.text[:2000]
        return dict(response.json())

    def run(self, run_id: int) -> dict[str, Any]:
        response = self.client.get(f"/api/v1/runs/{run_id}/")
        assert response.status_code == 200, response.text[:2000]
        return dict(response.json())

    def post(self, path: str) -> dict[str, Any]:
        response = self.client.post(path)
        assert response.status_code == 200, response.text[:2000]
        return dict(response.json())


def wait_for(predicate: Callable[[], Any], timeout: float, message: str | Callable[[], str],
             interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(interval)


class Progress:
    """Follows a run through the API until it settles, checking on the way that the
    progress counters only ever grow and never pass the total."""

    def __init__(self, api: Api, run_id: int) -> None:
        self.api = api
        self.run_id = run_id
        self.seen: list[int] = []

    def poll(self) -> dict[str, Any]:
        run = self.api.run(self.run_id)
        done = run["cases_done"]
        assert not self.seen or done >= self.seen[-1], f"cases_done went back: {self.seen[-1]} -> {done}"
        assert done <= run["cases_total"], run
        self.seen.append(done)
        return run

    def wait(self, statuses: set[str], timeout: float, log: Callable[[], str] = lambda: "") -> dict[str, Any]:
        result: dict[str, Any] = {}

        def settled() -> bool:
            nonlocal result
            result = self.poll()
            return result["status"] in statuses

        wait_for(settled, timeout, lambda: f"run {self.run_id} is {result.get('status')} "
                                           f"({result.get('cases_done')}/{result.get('cases_total')}) after "
                                           f"{timeout}s\n{log()}", interval=0.25)
        return result


def assert_consistent(run_id: int, *, criteria: int) -> dict[str, int]:
    """Every result once, with one score per criterion if settled and none if pending, and
    counters equal to a recount of the rows. Returns the statuses counted."""
    run = Run.objects.get(pk=run_id)
    results = CaseResult.objects.filter(run=run)
    assert results.count() == run.cases_total
    assert results.values("case_id", "iteration").distinct().count() == run.cases_total
    statuses = Counter(results.values_list("status", flat=True))
    settled = statuses["passed"] + statuses["failed"] + statuses["error"]
    assert (run.cases_done, run.cases_failed, run.cases_errored) == (settled, statuses["failed"], statuses["error"])
    assert (run.cases_missing, run.cases_not_runnable) == (statuses["missing"], statuses["not_runnable"])
    top = Score.objects.filter(run=run, applies_to="conversation")
    assert top.values("result_id", "criterion").distinct().count() == top.count()  # no score twice
    per_result = dict(top.values_list("result_id").annotate(n=Count("pk")).values_list("result_id", "n"))
    for pk, status in results.values_list("pk", "status"):
        want = 0 if status == "pending" else criteria
        assert per_result.get(pk, 0) == want, (pk, status, per_result.get(pk))
    return dict(statuses)


def assert_summary_matches_recount(run_id: int) -> None:
    """The run's stored aggregates against the same figures computed here, in Python, from
    every score and result row."""
    run = Run.objects.get(pk=run_id)
    summary = run.summary
    assert summary is not None
    assert summary["statuses"] == dict(Counter(CaseResult.objects.filter(run=run).values_list("status", flat=True)))
    rows = list(Score.objects.filter(run=run, applies_to="conversation").values_list("criterion", "score", "passed"))
    by_criterion: dict[str, list[tuple[float | None, bool | None]]] = {}
    for criterion, score, passed in rows:
        by_criterion.setdefault(criterion, []).append((score, passed))
    assert set(summary["criteria"]) == set(by_criterion)
    for criterion, values in by_criterion.items():
        stored = summary["criteria"][criterion]
        scores = [s for s, _ in values if s is not None]
        judged = [p for _, p in values if p is not None]
        assert stored["count"] == len(values), criterion
        assert stored["passed"] == sum(1 for p in judged if p), criterion
        if scores:
            assert math.isclose(stored["mean"], statistics.fmean(scores), abs_tol=1e-9), criterion
            assert math.isclose(stored["min"], min(scores)) and math.isclose(stored["max"], max(scores))
        if judged:
            assert math.isclose(stored["pass_rate"], sum(1 for p in judged if p) / len(judged)), criterion
    latencies = [v for v in CaseResult.objects.filter(run=run).values_list("latency_seconds", flat=True)
                 if v is not None]
    assert summary["latency"]["count"] == len(latencies)
    if latencies:
        assert math.isclose(summary["latency"]["mean"], statistics.fmean(latencies), abs_tol=1e-9)
