"""`manage.py qcluster`: django-q2's cluster, made to stop within seconds and to be seen.

- SIGTERM (or Ctrl+C) asks the cluster to stop as django-q2 does: it fetches nothing more and
  lets its workers finish their task. If it has not stopped after `EVALSITE_QCLUSTER_STOP_SECONDS`
  (a long batch, or django-q2#23: an idle worker killed holding the task queue's lock, so no
  worker ever hears the stop), its processes are killed and the batches its workers held are
  queued again at once (their settled results stay), instead of a process manager waiting
  minutes for a cluster that will never stop.
- It keeps marks for the hang watch (evaluations/management/clusters.py).
- As it starts, it queues again the run batches that no worker holds and the broker no
  longer has (a cluster that died took the tasks it had fetched with it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from typing import Any

from django.conf import settings
from django_q.management.commands.qcluster import Command as DjangoQCommand

from evaluations.management.clusters import marks_end, marks_start

log = logging.getLogger("evalsite.qcluster")


def _kill_tree(pid: int) -> list[int]:
    """SIGKILL every process below `pid`; their pids."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for child in children:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(children, timeout=2)
    return [c.pid for c in children]


def batches_of_workers_requeue(pids: list[int]) -> list[int]:
    """The batches that workers with these pids (on this host) held: queued again now."""
    from django.db import close_old_connections

    from evaluations.models import RunBatch
    from evaluations.runs import queue

    close_old_connections()
    owners = [f"{socket.gethostname()}:{pid}" for pid in pids]
    return sorted({b.run_id for b in RunBatch.objects.filter(owner__in=owners) if queue.batch_requeue(b)})


class Command(DjangoQCommand):
    help = "Starts a django-q2 cluster that stops within EVALSITE_QCLUSTER_STOP_SECONDS of SIGTERM."

    def handle(self, *args: Any, **options: Any) -> None:
        from django_q.cluster import Cluster

        settings.SECRET_KEY  # noqa: B018 - tasks are signed with it: fail now, not in a worker
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        me = os.getpid()
        marks_start(me)
        self._resume_lost()
        cluster = Cluster()
        deadline = float(settings.EVALSITE_QCLUSTER_STOP_SECONDS)
        stopping = threading.Event()
        forcing = threading.Event()
        threads: list[threading.Thread] = []

        def force_stop() -> None:
            if stopping.wait(deadline):
                return
            forcing.set()
            killed = _kill_tree(me)
            try:
                runs = batches_of_workers_requeue(killed)
            except Exception:  # the database is away: the lease finds them
                log.exception("qcluster: could not queue again the batches of the killed workers")
                runs = []
            self.stderr.write(f"qcluster: not stopped {deadline:g}s after the signal; killed {len(killed)} "
                              f"processes{f' and queued again the batches of runs {runs}' if runs else ''}")
            self.stderr.flush()
            marks_end(me)
            os._exit(0)

        def on_signal(signum: int, frame: Any) -> None:
            if not threads:
                threads.append(threading.Thread(target=force_stop, daemon=True, name="qcluster-stop-deadline"))
                threads[0].start()
                cluster.sig_handler(signum, frame)  # blocks until the cluster stops (or the deadline)
                stopping.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        try:
            cluster.start()
            if options.get("run_once", False):
                cluster.stop()
            while cluster.sentinel is not None and cluster.sentinel.is_alive():
                time.sleep(0.5)
            if forcing.is_set():
                threads[0].join(30)  # it queues the killed workers' batches again, then exits
        finally:
            marks_end(me)

    def _resume_lost(self) -> None:
        from evaluations.runs.services import lost_tasks_requeue

        try:
            runs = lost_tasks_requeue()
        except Exception as exc:  # the broker or the database is away: the watchdog does it later
            self.stderr.write(f"qcluster: could not look for lost batches ({type(exc).__name__}: {exc})")
            return
        if runs:
            self.stdout.write(f"qcluster: queued again the lost batches of runs {', '.join(map(str, runs))}")
