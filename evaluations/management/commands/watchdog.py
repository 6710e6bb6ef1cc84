"""`manage.py watchdog`: what `up --team` does beside its children, for a team server run
under systemd (docs/team-server.md): every EVALSITE_WATCHDOG_SECONDS, send the run batches the
broker refused or lost, resume stalled runs, score received traces whose monitor task was lost,
and kill a `qcluster` of this machine that hangs (its unit's `Restart=always` starts it again).

`manage.py watchdog --check` is the one-shot form: it watches this machine's clusters for
EVALSITE_CLUSTER_HUNG_SECONDS and exits 1, naming them, if one is hung (0 otherwise); with
`--kill` it also kills them. A systemd timer can run it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections, connection

from evaluations.management.clusters import HangWatch, hung_clusters_report, local_clusters, marks_end


def _kill(pid: int) -> None:
    """SIGKILL the cluster's process group (its sentinel and workers: `qcluster` under systemd
    or `up` leads its own group), else the process and its children."""
    import psutil

    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
            return
    with contextlib.suppress(psutil.NoSuchProcess):
        main = psutil.Process(pid)
        for proc in [*main.children(recursive=True), main]:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()


class Command(BaseCommand):
    help = "Resume lost and stalled work, score traces whose monitor task was lost, restart hung clusters."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true",
                            help="watch this machine's clusters once (EVALSITE_CLUSTER_HUNG_SECONDS) and exit 1 "
                                 "if one is hung")
        parser.add_argument("--kill", action="store_true", help="with --check: kill the hung clusters")
        parser.add_argument("--no-kill", action="store_true",
                            help="without --check: report hung clusters, do not kill them")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            raise SystemExit(self._check(kill=options["kill"]))
        watch = HangWatch()
        every = float(settings.EVALSITE_WATCHDOG_SECONDS)
        self.stdout.write(f"watchdog: looking every {every:g}s")
        self.stdout.flush()
        while True:
            try:
                close_old_connections()
                self._tick(watch, kill=not options["no_kill"])
            except Exception as exc:  # the database or the broker is away: the next round tries again
                self.stderr.write(f"watchdog: {type(exc).__name__}: {exc}")
                connection.close()
            time.sleep(every)

    def _tick(self, watch: HangWatch, *, kill: bool) -> None:
        from evaluations.monitors.pending import pending_sweep
        from evaluations.runs.services import lost_tasks_requeue, lost_work_resume, resume_stalled_runs

        resumed = sorted(set(lost_work_resume()) | set(resume_stalled_runs()))
        if resumed:
            self.stdout.write(f"watchdog: resumed stalled runs {', '.join(map(str, resumed))}")
        swept = pending_sweep(budget_seconds=10.0)
        if swept.traces:
            self.stdout.write(f"watchdog: scored {swept.traces} received traces whose monitor task was lost")
        pids = local_clusters()
        hung = watch.look({str(pid): pid for pid in pids})
        for name in hung:
            pid = int(name)
            self.stderr.write(f"watchdog: qcluster {hung_clusters_report([pid])} is hung while tasks wait"
                              + ("; killing it" if kill else ""))
            if kill:
                _kill(pid)
                marks_end(pid)
        if hung and kill:
            lost_tasks_requeue()
        self.stdout.flush()

    def _check(self, *, kill: bool) -> int:
        watch = HangWatch()
        deadline = time.time() + watch.seconds + 1
        hung: list[str] = []
        while time.time() <= deadline:
            hung = watch.look({str(pid): pid for pid in local_clusters()})
            if hung:
                break
            time.sleep(1.0)
        if not hung:
            self.stdout.write("clusters: none hung")
            return 0
        pids = [int(name) for name in hung]
        self.stderr.write(f"hung: {hung_clusters_report(pids)}")
        if kill:
            for pid in pids:
                _kill(pid)
                marks_end(pid)
        return 1
