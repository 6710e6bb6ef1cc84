"""Runs on a real django-q2 cluster (a `manage.py qcluster` process on the test database):
queued batches, and a worker killed with SIGKILL mid-run losing and doubling nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from django.db import connection

from evaluations.models import CaseResult, Project, Run, Score
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import REPO
from tests.engine_helpers import import_demo, perfect_outputs


def _database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    host = settings.get("HOST") or "127.0.0.1"
    return f"postgres://{user}@{host}:{settings.get('PORT') or 5432}/{settings['NAME']}"


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A qcluster with two workers on the test database, stopped after the test."""
    from django.conf import settings

    # The same SECRET_KEY as this process: django-q2 signs the tasks it queues with it.
    env = {**os.environ, "DATABASE_URL": _database_url(), "EVALSITE_DATA_DIR": str(tmp_path),
           "SECRET_KEY": settings.SECRET_KEY,
           "EVALSITE_WORKERS": "2", "EVALSITE_BATCH_SIZE": "2", "EVALSITE_TASK_TIMEOUT": "60",
           "EVALSITE_TASK_RETRY": "120"}
    env.pop("REDIS_URL", None)
    with open(tmp_path / "qcluster.log", "w") as log:  # read it when a test here fails
        proc = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT)
        yield proc
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for(predicate: Any, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message
        time.sleep(0.2)


def _assert_each_result_once(run: Run) -> None:
    results = CaseResult.objects.filter(run=run)
    assert results.count() == run.cases_total
    assert results.filter(status="pending").count() == 0
    per_result = Score.objects.filter(run=run, applies_to="conversation").values("result", "criterion").distinct()
    assert per_result.count() == Score.objects.filter(run=run, applies_to="conversation").count()
    assert run.cases_done == results.exclude(status__in=["missing", "not_runnable"]).count()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_queued_run_is_executed_by_the_cluster(acme: Project, cluster: subprocess.Popen[bytes],
                                                 settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    version = import_demo(acme)
    run = runs.run_create(project=acme, version=version, target_kind="uploaded",
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    _wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed", 90, "the cluster did not finish the run")
    run.refresh_from_db()
    _assert_each_result_once(run)
    assert run.summary["pass_rate"] == 1.0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_run_loses_and_doubles_nothing(acme: Project, cluster: subprocess.Popen[bytes],
                                                           settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    settings.EVALSITE_LEASE_SECONDS = 2
    version = import_demo(acme)
    # The demo agent answers slowly, so a worker is surely busy when it is killed.
    run = runs.run_create(project=acme, version=version, target_kind="python", iterations=3,
                          target={"callable": "evaluations.demo.agent:respond",
                                  "metadata": {"faults": {"slow_answer_seconds": 0.4, "rate": 1.0}},
                                  "timeout_seconds": 10})
    _wait_for(lambda: Run.objects.get(pk=run.pk).cases_done >= 2, 60, "no progress before the kill")
    # The worker holding the run's lease is busy with a batch right now: kill it.
    owner = Run.objects.get(pk=run.pk).lease_owner
    victim = psutil.Process(int(owner.rsplit(":", 1)[1]))
    assert victim.pid != cluster.pid and victim.pid in {p.pid for p in psutil.Process(cluster.pid).children(True)}
    victim.send_signal(signal.SIGKILL)
    done_at_kill = Run.objects.get(pk=run.pk).cases_done
    assert done_at_kill < run.cases_total
    # The application notices the stalled work (the lease) and resumes it; the cluster
    # replaced the dead worker.
    deadline = time.monotonic() + 120
    while Run.objects.get(pk=run.pk).status != "completed":
        assert time.monotonic() < deadline, "the run never completed after the kill"
        runs.resume_stalled_runs()
        time.sleep(1)
    run.refresh_from_db()
    _assert_each_result_once(run)
    assert run.cases_total == 24
    assert cluster.poll() is None  # the cluster survived its worker
