"""The monitors' pending sweep (issue 40) on a large store: what it costs an idle server, and
what it costs to finish a lost task's traces; each beside a floor measured in the same run.

    python bench/monitor_sweep_bench.py [--traces 1000000] [--lost 1000] [--json]

On SQLite in a scratch data directory (DATABASE_URL and REDIS_URL are ignored). Seeds
`--traces` received traces (as ingest leaves them, without spans: the sweep never reads a
stored trace it was not asked to) in a project with three trace monitors, all scored already
(no pending row), then:

- idle: `pending_sweep()` with nothing pending, as the clusters' schedule (once a minute) and
  `up --team`'s watchdog (every 5 s) call it: 13 calls a minute. Target: under 50 ms a
  minute. The floor beside it: counting the stored traces, what a sweep that read the store
  would pay at the least.
- a lost task: `--lost` traces of three spans each left pending (their task lost), scored by
  the sweep; the floor: `score_traces` over the same traces, as the task would have.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

CALLS_PER_MINUTE = 13  # the minute schedule, and up --team's watchdog every 5 s


def _setup() -> None:
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-sweep-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import scratch

    scratch.migrate()


def _seed(project_id: int, count: int) -> float:
    """`count` received, complete traces, one statement per 100k rows."""
    from django.db import connection, transaction

    from evaluations.models import Trace

    table = Trace._meta.db_table
    started = time.perf_counter()
    step = 100_000
    with transaction.atomic(), connection.cursor() as cursor:
        for first in range(0, count, step):
            n = min(step, count - first)
            cursor.execute(
                f"WITH RECURSIVE seq(i) AS (SELECT %s UNION ALL SELECT i + 1 FROM seq WHERE i < %s) "
                f"INSERT INTO {table} (project_id, trace_id, thread_id, name, start_ns, end_ns, received, "
                "received_at, service_name, eval_id, span_count, error_count, complete, resource, end_user, "
                "environment) SELECT %s, printf('%%032x', i), '', 'agent', i * 1000, i * 1000 + 500, 1, "
                "datetime('now', '-1 day'), 'travel-agent', '', 3, 0, 1, '{}', '', 'prod' FROM seq",
                [first, first + n - 1, project_id])
    return time.perf_counter() - started


def _time(call: Any, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def measure(traces: int, lost: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from evaluations.accounts.tokens import token_create
    from evaluations.models import Membership, MonitorPending, Project, Trace
    from evaluations.monitors.pending import pending_sweep
    from evaluations.monitors.scoring import score_traces
    from evaluations.monitors.services import monitor_create
    from evaluations.monitors.spec import MonitorSpec
    from tests.monitor_helpers import agent_trace, spec
    from tests.otlp_helpers import post

    project = Project.objects.create(slug="sweep", name="Sweep")
    user = get_user_model().objects.create_user("sweeper", "s@example.com", "sweep-pass-123")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    for name, criteria in (("a", spec()["criteria"]), ("b", {"json": {"evaluator": "json_valid"}}),
                           ("c", {"fast": {"evaluator": "latency_seconds", "threshold": 5}})):
        monitor_create(project=project, spec=MonitorSpec.model_validate(spec(name=name, criteria=criteria)),
                       user=user)
    seeded = _seed(project.pk, traces)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    def count_all() -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT COUNT(*) FROM {Trace._meta.db_table} WHERE project_id = %s", [project.pk])
            cursor.fetchone()

    pending_sweep()  # warm
    idle = _time(pending_sweep, 50)
    floor = _time(count_all, 5)
    idle_call = statistics.median(idle)

    # A lost task: `lost` traces stored through the receiver (pending rows written), never scored.
    token = token_create(user=user, name="bench").secret
    client = Client(HTTP_HOST="localhost")
    for start in range(0, lost, 50):
        message = agent_trace("Paris")
        for _ in range(min(50, lost - start) - 1):
            message.resource_spans.extend(agent_trace("Paris").resource_spans)
        answer = post(client, message, token, project="sweep")
        assert answer.status_code == 200, answer.content[:300]
    pks = list(MonitorPending.objects.values_list("trace_id", flat=True))
    assert len(pks) == lost, len(pks)
    MonitorPending.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    started = time.perf_counter()
    swept = pending_sweep()
    sweep_seconds = time.perf_counter() - started
    assert swept.traces == lost and swept.results == 3 * lost, swept
    # The floor: the same scoring as the task does it (after the results are gone again).
    from evaluations.models import MonitorBucket, MonitorLatencyBucket, MonitorResult

    MonitorResult.objects.filter(trace_id__in=pks).delete()
    MonitorBucket.objects.all().delete()
    MonitorLatencyBucket.objects.all().delete()
    started = time.perf_counter()
    for first in range(0, len(pks), 500):
        score_traces(pks[first:first + 500])
    task_seconds = time.perf_counter() - started
    return {
        "traces": traces, "seed_seconds": round(seeded, 1),
        "idle_call_ms": idle_call * 1000, "idle_call_max_ms": max(idle) * 1000,
        "idle_per_minute_ms": idle_call * 1000 * CALLS_PER_MINUTE,
        "floor_count_ms": statistics.median(floor) * 1000,
        "lost": lost, "sweep_seconds": sweep_seconds, "task_seconds": task_seconds,
        "sweep_ratio": sweep_seconds / task_seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=1_000_000)
    parser.add_argument("--lost", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    _setup()
    found = measure(args.traces, args.lost)
    print(f"{found['traces']:,} stored traces seeded in {found['seed_seconds']} s")
    print(f"idle sweep: {found['idle_call_ms']:.3f} ms a call (max {found['idle_call_max_ms']:.3f}), "
          f"{found['idle_per_minute_ms']:.2f} ms a minute at {CALLS_PER_MINUTE} calls (target < 50 ms); "
          f"floor, counting the stored traces: {found['floor_count_ms']:.1f} ms")
    print(f"a lost task's {found['lost']} traces scored by the sweep in {found['sweep_seconds']:.2f} s; "
          f"by score_traces as the task would: {found['task_seconds']:.2f} s ({found['sweep_ratio']:.2f}x)")
    if args.json:
        print(json.dumps(found))


if __name__ == "__main__":
    main()
