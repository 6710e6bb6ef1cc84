"""Sign-in log benchmark (issue 34): the superusers' `/signins/` page over a log of N events
(sign-ins and failures, among as many project events), first page and one near the oldest (by keyset), through
Django's test client on a fresh SQLite database, next to its floor measured in the same run:
a logged-in page of the same frame with no table (`/account/2fa/`). Also the statements each
page runs, at N and at N/10: the page must not grow with the log.

    python bench/signins_bench.py [--events 100000] [--repeat 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _median_ms(call: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def measure(events: int, repeat: int) -> dict[str, Any]:
    import django

    django.setup()
    import scratch
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from evaluations.models import AuditEvent, Project

    setup_test_environment()
    scratch.migrate()
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123456")
    project = Project.objects.create(slug="acme", name="Acme")
    client = Client()
    client.force_login(admin)

    def fill(n: int) -> None:
        rows = []
        for i in range(n):
            failed = i % 3 == 0
            rows.append(AuditEvent(project=None, verb="signin.failed" if failed else "signin.succeeded",
                                   summary=f"sign-in {i}", data={"method": "password", "reason": "wrong" if failed
                                                                 else "", "address": "10.0.0.1"}))
            rows.append(AuditEvent(project=project, verb="run.started", summary=f"run {i}"))
        AuditEvent.objects.bulk_create(rows, batch_size=5000)

    def statements(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    fill(events // 10)
    small = statements("/signins/")
    fill(events - events // 10)
    large = statements("/signins/")
    deep = AuditEvent.objects.filter(project=None).order_by("created_at", "pk").values_list("pk", flat=True)[50]
    first_ms = _median_ms(lambda: client.get("/signins/"), repeat)
    last_ms = _median_ms(lambda: client.get(f"/signins/?before={deep}"), repeat)
    failures_ms = _median_ms(lambda: client.get("/signins/?failures=1"), repeat)
    floor_ms = _median_ms(lambda: client.get("/account/2fa/"), repeat)
    return {"events": events, "first_page_ms": first_ms, "last_page_ms": last_ms, "failures_ms": failures_ms,
            "floor_ms": floor_ms, "ratio": first_ms / floor_ms, "statements_small": small, "statements_large": large}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = parser.parse_args()
    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-signins-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    os.environ.pop("DATABASE_URL", None)
    figures = measure(args.events, args.repeat)
    print(f"sign-in log over {figures['events']:,} events: first page {figures['first_page_ms']:.1f} ms, "
          f"a page near the oldest {figures['last_page_ms']:.1f} ms, failures only {figures['failures_ms']:.1f} ms; "
          f"floor (the frame, no table) {figures['floor_ms']:.1f} ms; ratio {figures['ratio']:.2f}x; "
          f"statements {figures['statements_small']} at {figures['events'] // 10:,} events, "
          f"{figures['statements_large']} at {figures['events']:,}")
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
