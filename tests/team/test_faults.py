"""Faults on the team-server shape: a `qcluster` killed outright (both brokers), PostgreSQL
stopped and started mid-run, an agent endpoint that hangs, answers 500 or garbage, and a run
cancelled mid-way. Each ends with no lost and no duplicated result, a clear status and
error message, and the run resumed where that makes sense."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection

from evaluations.models import CaseResult, Project, Run
from evaluations.runs.engine import CHUNK
from evaluations.runs.services import CANCELLED_BEFORE_RUN
from tests.team.agent import ERROR_500, GARBAGE, HANG, Agent, answers_for
from tests.team.conftest import TeamServer
from tests.team.helpers import (
    CRITERIA,
    Api,
    Progress,
    assert_consistent,
    assert_summary_matches_recount,
    generate,
    import_evalset,
    member_with_token,
    wait_for,
)

pytestmark = [pytest.mark.team, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PG_VERSION = next(iter(sorted(p.name for p in Path("/etc/postgresql").iterdir())), "") \
    if Path("/etc/postgresql").is_dir() else ""


def _setup(server: TeamServer, cases: int) -> tuple[Api, dict, list, dict, int]:  # type: ignore[type-arg]
    project = Project.objects.create(slug="team", name="Team")
    api = Api(server.url, member_with_token(project))
    evalset, outputs, expected = generate(cases)
    version = import_evalset(project, evalset)
    return api, evalset, outputs, expected, version.evalset_id


def _done(run_id: int) -> int:
    return Run.objects.filter(pk=run_id).values_list("cases_done", flat=True).get()


def test_a_cluster_killed_outright_is_restarted_and_the_run_completes_with_each_result_once(
        server: TeamServer) -> None:
    cases = 600
    api, evalset, _, _, evalset_id = _setup(server, cases)
    ids = [case["eval_id"] for case in evalset["eval_cases"]]
    # A slow agent keeps every cluster busy in the middle of a batch until the queue drains.
    with Agent(answers_for(evalset), delay=0.05) as agent:
        try:
            run = api.create_run(evalset=evalset_id, target_kind="http", target={"url": agent.url, "concurrency": 2},
                                 config={"criteria": CRITERIA})
            wait_for(lambda: _done(run["id"]) >= 100, 60, lambda: f"no progress\n{server.tail()}", interval=0.05)
            # The cluster working on the run right now, with everything it forked: its batch
            # in hand and those it had fetched die with it (lost for good on Redis, locked for
            # `retry` seconds on the ORM broker).
            owner = Run.objects.get(pk=run["id"]).lease_owner
            victim = server.cluster_of(int(owner.rsplit(":", 1)[1]))
            assert victim is not None, (owner, server.tail())
            server.kill_cluster(victim)
            assert _done(run["id"]) < cases
            wait_for(lambda: "restarted" in server.log() and victim not in {p.pid for p in server.clusters()}, 30,
                     lambda: f"up did not restart the killed cluster\n{server.tail()}")
            final = Progress(api, run["id"]).wait({"completed", "failed", "cancelled"}, 120, server.tail)
        finally:
            api.close()
        asked = [agent.asked(eval_id) for eval_id in ids]
    assert final["status"] == "completed"
    assert f"resumed stalled runs {run['id']}" in server.log()  # the lease ran out; the watchdog took over
    assert assert_consistent(run["id"], criteria=len(CRITERIA)) == {"passed": cases}
    assert_summary_matches_recount(run["id"])
    # Only the chunk the dead worker had in hand was asked again, once: at most one chunk of
    # cases. On the ORM broker the dead cluster's tasks are handed out again once their `retry`
    # runs out, after the watchdog has sent their batches anew: their claims are stale, so they
    # ask nothing (evaluations/runs/queue.py; before claims, 160 cases were asked twice).
    assert set(asked) <= {1, 2} and asked.count(2) <= CHUNK, sorted(asked)
    server.wait_clusters_ready()


def _pg_ctl(action: str) -> None:
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", PG_VERSION, "main", action], check=True,
                   capture_output=True, timeout=60)


def _pg_ready() -> bool:
    return subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"], check=False).returncode == 0


@pytest.mark.skipif(not PG_VERSION, reason="no local PostgreSQL cluster to stop (/etc/postgresql)")
def test_postgresql_stopped_and_started_mid_run_loses_and_doubles_nothing(redis_server: TeamServer) -> None:
    cases = 3000
    api, _, outputs, expected, evalset_id = _setup(redis_server, cases)
    try:
        run = api.create_run(evalset=evalset_id, outputs=outputs, config={"criteria": CRITERIA})
        wait_for(lambda: _done(run["id"]) >= 300, 60, lambda: f"no progress\n{redis_server.tail()}", interval=0.05)
        connection.close()
        try:
            _pg_ctl("stop")  # fast shutdown: every session is cut off mid-transaction
            time.sleep(3)  # short: other programs on this machine share this server
        finally:
            _pg_ctl("start")
            wait_for(_pg_ready, 60, "PostgreSQL did not come back")
        final = Progress(api, run["id"]).wait({"completed", "failed", "cancelled"}, 120, redis_server.tail)
        assert httpx.get(f"{redis_server.url}/healthz", trust_env=False).status_code == 200
    finally:
        api.close()
    assert final["status"] == "completed"
    assert assert_consistent(run["id"], criteria=len(CRITERIA)) == {"passed": 2400, "failed": 600}
    assert dict(CaseResult.objects.filter(run_id=run["id"]).values_list("case__eval_id", "status")) == expected
    assert_summary_matches_recount(run["id"])
    redis_server.wait_clusters_ready()  # survived, or restarted by `up`


def test_an_agent_that_hangs_fails_or_answers_garbage_is_recorded_per_case_and_retried(
        redis_server: TeamServer) -> None:
    api, evalset, _, _, evalset_id = _setup(redis_server, 40)
    ids = [case["eval_id"] for case in evalset["eval_cases"]]
    hang, error, garbage, good = ids[0:10], ids[10:20], ids[20:30], ids[30:40]
    target = {"timeout_seconds": 1, "retries": 1, "backoff_seconds": 0.1, "concurrency": 8}
    with Agent(answers_for(evalset), hang_seconds=20) as agent:
        agent.behaviour = {**dict.fromkeys(hang, HANG), **dict.fromkeys(error, ERROR_500),
                           **dict.fromkeys(garbage, GARBAGE)}
        try:
            run = api.create_run(evalset=evalset_id, target_kind="http", target={"url": agent.url, **target},
                                 config={"criteria": CRITERIA})
            progress = Progress(api, run["id"])
            final = progress.wait({"completed", "failed", "cancelled"}, 90, redis_server.tail)
            assert final["status"] == "completed"
            assert (final["cases_done"], final["cases_errored"]) == (40, 30)
            assert assert_consistent(run["id"], criteria=len(CRITERIA)) == {"passed": 10, "error": 30}
            errors = dict(CaseResult.objects.filter(run_id=run["id"]).values_list("case__eval_id", "error"))
            for eval_id in hang:
                assert errors[eval_id] == "turn t1: timed out after 1s (after 2 attempts)"
            for eval_id in error:
                assert errors[eval_id].startswith("turn t1: HTTP 500: ")
                assert errors[eval_id].endswith("(after 2 attempts)")
            for eval_id in garbage:
                assert errors[eval_id].startswith("turn t1: the reply is not JSON: '<html><body>502 Bad Gateway")
            assert all(errors[eval_id] == "" for eval_id in good)
            # Each turn was sent as often as the retry policy says, never more: the batch that
            # waited on the hanging agent kept its lease, so no second worker took its cases.
            expected = {**dict.fromkeys(hang + error, 2), **dict.fromkeys(garbage + good, 1)}
            assert agent.asked_each(ids, expected) == expected

            agent.behaviour = {}  # the agent is fixed: retry what errored
            reset = api.post(f"/api/v1/runs/{run['id']}/retry/")["reset"]
            assert reset == 30
            progress = Progress(api, run["id"])  # the retried results left the counters
            final = progress.wait({"completed", "failed", "cancelled"}, 60, redis_server.tail)
        finally:
            api.close()
        assert final["status"] == "completed"
        assert assert_consistent(run["id"], criteria=len(CRITERIA)) == {"passed": 40}
        expected = {**dict.fromkeys(hang + error, 3), **dict.fromkeys(garbage, 2), **dict.fromkeys(good, 1)}
        assert agent.asked_each(ids, expected) == expected
        assert_summary_matches_recount(run["id"])


def test_a_run_cancelled_mid_way_stops_keeps_its_results_and_resumes_where_it_stopped(
        orm_server: TeamServer) -> None:
    cases = 600
    api, evalset, _, _, evalset_id = _setup(orm_server, cases)
    ids = [case["eval_id"] for case in evalset["eval_cases"]]
    with Agent(answers_for(evalset), delay=0.05) as agent:
        try:
            run = api.create_run(evalset=evalset_id, target_kind="http",
                                 target={"url": agent.url, "concurrency": 2}, config={"criteria": CRITERIA})
            wait_for(lambda: _done(run["id"]) >= 50, 60, lambda: f"no progress\n{orm_server.tail()}", interval=0.05)
            cancelled = api.post(f"/api/v1/runs/{run['id']}/cancel/")
            assert cancelled["status"] == "cancelled"

            # The batches in hand finish the chunk they are on, then stop.
            last = [-1]

            def settled_down() -> bool:
                now = CaseResult.objects.filter(run_id=run["id"]).exclude(status="pending").count()
                still, last[0] = now == last[0], now
                return still

            wait_for(settled_down, 60, "the cancelled run kept going", interval=2)  # > a chunk's time
            statuses = assert_consistent(run["id"], criteria=len(CRITERIA))
            assert 50 <= statuses["passed"] < cases and statuses["passed"] + statuses["pending"] == cases
            pending = CaseResult.objects.filter(run_id=run["id"], status="pending")
            assert set(pending.values_list("error", flat=True)) == {CANCELLED_BEFORE_RUN}
            assert Run.objects.get(pk=run["id"]).status == "cancelled"
            asked = {eval_id: agent.asked(eval_id) for eval_id in ids}
            never = set(pending.values_list("case__eval_id", flat=True))
            assert {e for e, n in asked.items() if n == 0} == never and set(asked.values()) == {0, 1}

            resumed = api.post(f"/api/v1/runs/{run['id']}/retry/")
            assert resumed["run"]["status"] in {"queued", "running", "completed"}
            final = Progress(api, run["id"]).wait({"completed", "failed", "cancelled"}, 90, orm_server.tail)
        finally:
            api.close()
        assert final["status"] == "completed"
        assert assert_consistent(run["id"], criteria=len(CRITERIA)) == {"passed": cases}
        assert {agent.asked(eval_id) for eval_id in ids} == {1}  # resumed where it stopped: nobody asked twice
        assert_summary_matches_recount(run["id"])
