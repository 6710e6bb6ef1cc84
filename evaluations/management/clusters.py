"""Seeing a `qcluster` that hangs, from outside it (django-q2#23, docs/operations.md).

An idle worker killed with SIGKILL can leave its cluster's task queue locked: the cluster
takes no task again, and its own stop waits for workers that never hear it. Each cluster
started by evalsite's `qcluster` (evaluations/management/commands/qcluster.py) keeps marks in
`EVALSITE_DATA_DIR/clusters/<its pid>/`: `started`, `worker-<pid>` (touched when that worker is
ready for work, after its imports), `taken` (touched each time one of its workers takes a
task) and `busy-<worker pid>` (while that worker runs one). A cluster is
**hung** when, for `EVALSITE_CLUSTER_HUNG_SECONDS`, tasks waited (in the broker, or a run's
batch handed to the broker and taken by no worker) while it took none and none of its workers
was busy, counted from when its newest worker was ready: a healthy cluster with a free worker
takes a waiting task within a second.

`manage.py up --team` looks every watchdog tick and restarts a hung cluster;
`manage.py watchdog --check` does the same look for systemd (docs/team-server.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

ENV = "EVALSITE_CLUSTER_DIR"


def marks_root() -> Path:
    return Path(settings.DATA_DIR) / "clusters"


def marks_dir(pid: int) -> Path:
    return marks_root() / str(pid)


def marks_start(pid: int) -> Path:
    """In a starting cluster's main process, before it forks its workers (they inherit `ENV`)."""
    where = marks_dir(pid)
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True, exist_ok=True)
    (where / "started").touch()
    os.environ[ENV] = str(where)
    return where


def marks_end(pid: int) -> None:
    shutil.rmtree(marks_dir(pid), ignore_errors=True)


def on_worker_started(sender: Any = None, proc_name: str = "", **kwargs: Any) -> None:
    """django-q2's `post_spawn` (sent by workers only), in a new worker: its pid, for an
    operator (and the tests)."""
    where = os.environ.get(ENV)
    if where:
        with contextlib.suppress(OSError):
            Path(where, f"worker-{os.getpid()}").touch()


def cluster_workers(pid: int) -> list[int]:
    """The live worker processes of the cluster whose main process is `pid`."""
    found = []
    with contextlib.suppress(OSError):
        for mark in marks_dir(pid).glob("worker-*"):
            worker = int(mark.name.removeprefix("worker-") or 0)
            if worker and _alive(worker):
                found.append(worker)
    return sorted(found)


def on_task_taken(sender: Any = None, **kwargs: Any) -> None:
    """django-q2's `pre_execute`, in the worker: this cluster took a task; the worker is busy."""
    where = os.environ.get(ENV)
    if where:
        with contextlib.suppress(OSError):
            Path(where, "taken").touch()
            Path(where, f"busy-{os.getpid()}").touch()


def on_task_done(sender: Any = None, **kwargs: Any) -> None:
    """django-q2's `post_execute_in_worker`: the worker is free again."""
    where = os.environ.get(ENV)
    if where:
        with contextlib.suppress(OSError):
            Path(where, f"busy-{os.getpid()}").unlink()


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class ClusterState:
    pid: int
    ready: float | None  # when its newest live worker was ready for work (None: none is yet)
    last_taken: float | None
    busy: bool

    def idle_for(self, now: float) -> float:
        """How long it has had a worker ready and taken no task (0 while none is ready: a
        starting cluster imports for seconds before it can take anything)."""
        if self.ready is None:
            return 0.0
        return now - max(self.ready, self.last_taken or 0.0)


def cluster_state(pid: int) -> ClusterState | None:
    where = marks_dir(pid)
    if _mtime(where / "started") is None:
        return None
    busy, ready = False, None
    with contextlib.suppress(OSError):
        for mark in where.glob("busy-*"):
            worker = int(mark.name.removeprefix("busy-") or 0)
            if worker and _alive(worker):
                busy = True
        for mark in where.glob("worker-*"):
            worker = int(mark.name.removeprefix("worker-") or 0)
            at = _mtime(mark)
            if worker and at is not None and _alive(worker):
                ready = at if ready is None else max(ready, at)
    return ClusterState(pid, ready, _mtime(where / "taken"), busy)


def local_clusters() -> list[int]:
    """The clusters on this machine that left marks and are alive."""
    root = marks_root()
    pids = []
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            if entry.name.isdigit():
                pid = int(entry.name)
                if _alive(pid):
                    pids.append(pid)
                else:
                    shutil.rmtree(entry, ignore_errors=True)  # a cluster killed outright
    return sorted(pids)


def broker_waiting() -> int:
    """Tasks in the broker that any cluster may take now."""
    from django_q.brokers import get_broker

    broker = get_broker()
    if settings.Q_CLUSTER.get("orm"):
        from django_q.models import OrmQ

        return int(OrmQ.objects.using(settings.Q_CLUSTER["orm"])
                   .filter(key=broker.list_key, lock__lte=timezone.now()).count())
    return int(broker.connection.llen(broker.list_key))


def batches_waiting(seconds: float) -> bool:
    """Whether a run's batch was handed to the broker `seconds` ago or more and no worker took it."""
    from evaluations.models import Run, RunBatch

    since = timezone.now() - timedelta(seconds=seconds)
    return RunBatch.objects.filter(run__status=Run.Status.RUNNING, heartbeat_at=None, queued_at__lte=since).exists()


@dataclass
class HangWatch:
    """Looks at the clusters now and then (`look`); says which are hung. Keeps, between looks,
    since when tasks have waited in the broker without a break."""

    seconds: float = field(default_factory=lambda: float(settings.EVALSITE_CLUSTER_HUNG_SECONDS))
    waiting_since: float | None = None
    # Clusters (by name) restarted because a batch waited: not again for that reason until
    # their new process took a task (the batch may have waited in a busy cluster's hands).
    restarted_for_batches: set[str] = field(default_factory=set)

    def look(self, clusters: dict[str, int], now: float | None = None) -> list[str]:
        """The names of the hung clusters among `clusters` (name -> pid of its main process)."""
        now = time.time() if now is None else now
        if broker_waiting() > 0:
            self.waiting_since = self.waiting_since if self.waiting_since is not None else now
        else:
            self.waiting_since = None
        broker_long = self.waiting_since is not None and now - self.waiting_since >= self.seconds
        batch_long: bool | None = None  # read once, only when needed
        hung = []
        for name, pid in sorted(clusters.items()):
            state = cluster_state(pid)
            if state is None:
                continue
            if state.last_taken is not None:
                self.restarted_for_batches.discard(name)
            if state.busy or state.idle_for(now) < self.seconds:
                continue
            if broker_long:
                hung.append(name)
                continue
            if name in self.restarted_for_batches:
                continue
            if batch_long is None:
                batch_long = batches_waiting(self.seconds)
            if batch_long:
                hung.append(name)
                self.restarted_for_batches.add(name)
        return hung


def hung_clusters_report(pids: list[int], now: float | None = None) -> str:
    now = time.time() if now is None else now
    parts = []
    for pid in pids:
        state = cluster_state(pid)
        if state is not None:
            parts.append(f"{pid} (no task taken for {state.idle_for(now):.0f}s)")
    return ", ".join(parts)
