"""Recovery benchmark: how long a run's work stops when the database drops its connections
(every backend terminated with `pg_terminate_backend`, as a PostgreSQL restart or failover
does; PostgreSQL only) and when a queue worker is killed with SIGKILL mid-batch, on a real
`qcluster` with 2 workers and the demo agent (0.2 s an answer, batches of 4 results).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_recoverybench python bench/recovery_bench.py
    python bench/recovery_bench.py --lease 15        # SQLite: the killed worker only
    python bench/recovery_bench.py --json

Figures: for the drop, the seconds from the termination until results settle again (more
than the one a chunk in flight may finish with), and until the run completes (issue 27: the
batches cut off waited for EVALSITE_LEASE_SECONDS, 180 s by default); for the
kill, the seconds from the kill until the batch the dead worker held is settled, with a
lease of --lease seconds and the watchdog every third of it (as `up` runs it), next to its
floor, the lease itself (issue 27: lease + a watchdog tick after the run's OTHER batches
had finished). Each run ends with every result written once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

AGENT = {"callable": "evaluations.demo.agent:respond", "timeout_seconds": 10,
         "metadata": {"faults": {"slow_answer_seconds": 0.2, "rate": 1.0}}}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lease", type=int, default=15, help="EVALSITE_LEASE_SECONDS for the killed worker")
    parser.add_argument("--iterations", type=int, default=8, help="of the demo set's 8 cases, per run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalsite-recovery-") as tmp:
        figures = measure(args, Path(tmp))
    if args.json:
        print(json.dumps(figures))
    return figures


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    os.environ.setdefault("EVALSITE_DATA_DIR", str(tmp))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    os.environ["EVALSITE_BATCH_SIZE"] = "4"
    os.environ["EVALSITE_LEASE_SECONDS"] = str(args.lease)
    import django

    django.setup()
    import psutil
    import scratch
    from django.conf import settings
    from django.db import connection
    from django.db.models import Count

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.models import CaseResult, Run, RunBatch, Score
    from evaluations.runs import services as runs

    scratch.migrate()
    project = project_get_or_create_default()
    demo = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"
    [outcome] = evalset_import(project=project, files=[SourceFile(demo.name, demo.read_bytes())])

    def start() -> Run:
        run = runs.run_create(project=project, version=outcome.version, target_kind="python",
                              iterations=args.iterations, target=AGENT)
        while Run.objects.get(pk=run.pk).cases_done < 4:
            time.sleep(0.05)
        return run

    def settled(pks: list[int]) -> bool:
        return not CaseResult.objects.filter(pk__in=pks, status="pending").exists()

    def finish(run: Run) -> None:
        while Run.objects.get(pk=run.pk).status != "completed":
            runs.resume_stalled_runs()
            time.sleep(max(0.5, args.lease / 3))
        doubled = (Score.objects.filter(run=run, applies_to="conversation").values("result", "criterion")
                   .annotate(n=Count("id")).filter(n__gt=1).count())
        assert doubled == 0 and not CaseResult.objects.filter(run=run, status="pending").exists()

    env = {**os.environ, "EVALSITE_WORKERS": "2", "SECRET_KEY": settings.SECRET_KEY}
    env.pop("REDIS_URL", None)
    log = open(tmp / "qcluster.log", "w")  # noqa: SIM115 - closed below
    cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    time.sleep(2.0)
    figures: dict[str, Any] = {"db": connection.vendor, "lease": args.lease}
    try:
        if connection.vendor == "postgresql":
            run = start()
            done_at_drop = Run.objects.get(pk=run.pk).cases_done
            dropped = time.perf_counter()
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()")
                terminated = cursor.fetchone()[0]
            connection.close()
            # The first result settled after the drop: a batch wrote again, on a new connection.
            while Run.objects.get(pk=run.pk).cases_done <= done_at_drop + 1:
                time.sleep(0.05)
            figures["drop_seconds"] = time.perf_counter() - dropped
            while Run.objects.get(pk=run.pk).status != "completed":
                time.sleep(0.05)
            figures["drop_run_seconds"] = time.perf_counter() - dropped
            finish(run)
            print(f"database drop ({terminated} backends terminated mid-run, none of them waited for): results "
                  f"settled again {figures['drop_seconds']:.2f} s later, and the run completed "
                  f"{figures['drop_run_seconds']:.1f} s after the drop (was: nothing for EVALSITE_LEASE_SECONDS, "
                  f"180 s by default); each result once")
        run = start()
        while True:  # a batch in a worker's hands with most of its work ahead of it
            batch = RunBatch.objects.filter(run=run, heartbeat_at__isnull=False).order_by("first_pk").first()
            lost = [] if batch is None else list(CaseResult.objects.filter(
                pk__range=(batch.first_pk, batch.last_pk), status="pending").values_list("pk", flat=True))
            if batch is not None and len(lost) >= 3:
                break
            time.sleep(0.05)
        victim = psutil.Process(int(batch.owner.rsplit(":", 1)[1]))
        victim.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        others_done = None
        while not settled(lost):
            runs.resume_stalled_runs()  # the watchdog, every third of the lease as `up` runs it
            if others_done is None and not CaseResult.objects.filter(run=run, status="pending").exclude(
                    pk__in=lost).exists():
                others_done = time.perf_counter() - killed
            time.sleep(max(0.5, args.lease / 3))
        figures["kill_seconds"] = time.perf_counter() - killed
        figures["kill_others_done_seconds"] = others_done
        finish(run)
        left = "before the run's other batches had finished" if others_done is None else \
            f"after the run's other batches finished at {others_done:.1f} s"
        print(f"worker killed mid-batch (lease {args.lease} s, watchdog every {args.lease / 3:.0f} s): its "
              f"{len(lost)} results settled {figures['kill_seconds']:.1f} s later, {left}; floor (the lease) "
              f"{args.lease} s, ratio {figures['kill_seconds'] / args.lease:.2f}x; run completed, each result once")
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(timeout=60)
        log.close()
    return figures


if __name__ == "__main__":
    main()
