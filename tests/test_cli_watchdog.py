"""`manage.py watchdog --check` (issue 40) against a real `qcluster` on the test database: a
healthy cluster passes; one hung as django-q2#23 leaves it (its idle worker killed while it
held the task queue's lock) fails the check, named, and `--kill` ends it. And the hung
cluster stops within its deadline on SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.queue_helpers import database_url, qcluster, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ENV = {"EVALSITE_WORKERS": "1", "EVALSITE_CLUSTER_HUNG_SECONDS": "3", "EVALSITE_QCLUSTER_STOP_SECONDS": "3"}


def _workers(data_dir: Path, pid: int) -> list[int]:
    marks = data_dir / "clusters" / str(pid)
    return [w for w in (int(m.name.removeprefix("worker-")) for m in marks.glob("worker-*"))
            if Path(f"/proc/{w}").exists()]


def _wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return ""


def _check(data_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    from django.conf import settings

    env = {**os.environ, "DATABASE_URL": database_url(), "EVALSITE_DATA_DIR": str(data_dir),
           "SECRET_KEY": settings.SECRET_KEY, **ENV}
    env.pop("REDIS_URL", None)
    env["PYTHONFAULTHANDLER"] = "1"
    proc = subprocess.Popen([sys.executable, "manage.py", "watchdog", "--check", *extra], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate()
        raise AssertionError(err[-3000:]) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_the_check_passes_a_healthy_cluster_and_names_and_kills_a_hung_one(tmp_path: Path) -> None:
    from django_q.tasks import async_task

    with qcluster(tmp_path, **ENV) as proc:
        wait_for(lambda: [w for w in _workers(tmp_path, proc.pid) if _wchan(w) == "anon_pipe_read"], 90,
                 lambda: (tmp_path / "qcluster.log").read_text())
        async_task("math.floor", 1.5)
        healthy = _check(tmp_path)
        assert healthy.returncode == 0, healthy.stderr
        assert "none hung" in healthy.stdout

        [idle] = [w for w in _workers(tmp_path, proc.pid) if _wchan(w) == "anon_pipe_read"]
        os.kill(idle, signal.SIGKILL)  # waiting for its next task, holding the queue's lock
        wait_for(lambda: [w for w in _workers(tmp_path, proc.pid) if _wchan(w) == "futex_do_wait"], 60,
                 "the cluster did not hang")
        for _ in range(4):
            async_task("math.floor", 1.5)  # tasks wait; the hung cluster takes none
        hung = _check(tmp_path)
        assert hung.returncode == 1, (hung.stdout, hung.stderr)
        assert f"hung: {proc.pid} (no task taken for" in hung.stderr

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)  # django-q2 alone would wait for the worker forever
        proc.wait(30)
        assert time.monotonic() - started < 3 + 5
        assert "not stopped 3s after the signal" in (tmp_path / "qcluster.log").read_text()


def test_the_check_kills_a_hung_cluster_with_kill(tmp_path: Path) -> None:
    from django_q.tasks import async_task

    with qcluster(tmp_path, **ENV) as proc:
        wait_for(lambda: [w for w in _workers(tmp_path, proc.pid) if _wchan(w) == "anon_pipe_read"], 90,
                 lambda: (tmp_path / "qcluster.log").read_text())
        [idle] = [w for w in _workers(tmp_path, proc.pid) if _wchan(w) == "anon_pipe_read"]
        os.kill(idle, signal.SIGKILL)
        wait_for(lambda: [w for w in _workers(tmp_path, proc.pid) if _wchan(w) == "futex_do_wait"], 60,
                 "the cluster did not hang")
        for _ in range(4):  # more than the hung cluster's pusher takes in: some wait in the broker
            async_task("math.floor", 1.5)
        assert _check(tmp_path, "--kill").returncode == 1
        proc.wait(10)  # killed: a process manager starts it again
        assert proc.returncode == -signal.SIGKILL
