"""Runs on a real django-q2 cluster (a `manage.py qcluster` process on the test database):
queued batches, and a worker killed with SIGKILL mid-run losing and doubling nothing."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from evaluations.models import Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import import_demo, perfect_outputs
from tests.queue_helpers import assert_each_result_once, qcluster, wait_for


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A qcluster with two workers on the test database, stopped after the test."""
    with qcluster(tmp_path) as proc:
        yield proc


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_queued_run_is_executed_by_the_cluster(acme: Project, cluster: subprocess.Popen[bytes],
                                                 settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    version = import_demo(acme)
    run = runs.run_create(project=acme, version=version, target_kind="uploaded",
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed", 90, "the cluster did not finish the run")
    run.refresh_from_db()
    assert_each_result_once(run)
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
    wait_for(lambda: Run.objects.get(pk=run.pk).cases_done >= 2, 60, "no progress before the kill")
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
    assert_each_result_once(run)
    assert run.cases_total == 24
    assert cluster.poll() is None  # the cluster survived its worker
