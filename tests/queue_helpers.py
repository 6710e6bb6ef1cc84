"""A real django-q2 cluster (`manage.py qcluster`) on the test database, for the queue's
end-to-end tests, and what those tests check on a finished run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection

from evaluations.models import CaseResult, Run, Score
from tests.conftest import REPO


def database_url() -> str:
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    host = settings.get("HOST") or "127.0.0.1"
    return f"postgres://{user}@{host}:{settings.get('PORT') or 5432}/{settings['NAME']}"


@contextmanager
def qcluster(tmp_path: Path, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A qcluster with two workers on the test database (ORM broker), stopped on leaving.
    `env` overrides its settings (EVALSITE_BATCH_SIZE=..., ...)."""
    from django.conf import settings

    # The same SECRET_KEY as this process: django-q2 signs the tasks it queues with it.
    full = {**os.environ, "DATABASE_URL": database_url(), "EVALSITE_DATA_DIR": str(tmp_path),
            "SECRET_KEY": settings.SECRET_KEY,
            "EVALSITE_WORKERS": "2", "EVALSITE_BATCH_SIZE": "2", "EVALSITE_TASK_TIMEOUT": "60",
            "EVALSITE_TASK_RETRY": "120", **env}
    full.pop("REDIS_URL", None)
    with open(tmp_path / "qcluster.log", "w") as log:  # read it when a test fails
        # Its own process group: on leaving, nothing of it survives, even where a test killed
        # its sentinel or monitor and the cluster's stop leaves children behind. (A surviving
        # pusher would take the next test's tasks from the same database.)
        proc = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=full,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield proc
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _kill_group(proc.pid)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def wait_for(predicate: Any, timeout: float, message: Any) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, message() if callable(message) else message
        time.sleep(0.2)


def assert_each_result_once(run: Run) -> None:
    results = CaseResult.objects.filter(run=run)
    assert results.count() == run.cases_total
    assert results.filter(status="pending").count() == 0
    per_result = Score.objects.filter(run=run, applies_to="conversation").values("result", "criterion").distinct()
    assert per_result.count() == Score.objects.filter(run=run, applies_to="conversation").count()
    assert run.cases_done == results.exclude(status__in=["missing", "not_runnable"]).count()
