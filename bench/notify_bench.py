"""Notifications benchmark (issue 32): what rules add to a run's completion, and how fast a
real qcluster drains queued deliveries to a local webhook receiver.

    python bench/notify_bench.py [--rules 10] [--deliveries 1000] [--repeat 5] [--json]

Printed, each beside its floor measured in the same run:

- "completion with N rules": the completion of a regressed run (its comparison with the
  baseline, its causes, the stored rows, the activity event, and what the event sets off on
  the completion's path: the rules' check and the outbox row, queued on the ORM broker), N
  rules matching, median of `--repeat`. The floor: the same completion of the same run with
  no rules. Target: adds <= 50 ms at 10 rules. Beside it, what a worker then spends on the
  event: the rules matched, alerts, a message per rule, two deliveries per message, queued;
- "drain": `--deliveries` webhook deliveries queued (25 a task) for a running 2-worker
  `qcluster`, from the enqueue until the last is marked sent, each a signed POST to a
  ThreadingHTTPServer on 127.0.0.1 and its log row. Target: >= 100/s. The floor: the same
  number of POSTs of a same-sized body from one thread with one keep-alive client (what the
  HTTP part alone costs).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TARGET_ADDED_MS = 50.0
TARGET_RATE = 100.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each answer waits out the client's delayed ACK (40 ms)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.ids.add(self.headers.get("X-Evalsite-Delivery", ""))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


def receiver() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.ids = set()  # type: ignore[attr-defined]
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    return server


def measure(rules: int, deliveries: int, repeat: int, tmp: Path) -> dict[str, Any]:
    os.environ.setdefault("EVALSITE_DATA_DIR", str(tmp))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import httpx
    import scratch
    from django.conf import settings
    from django.db import transaction
    from django.utils import timezone

    from evaluations.evalsets.services import project_get_or_create_default
    from evaluations.models import NotifyAlert, NotifyDelivery, NotifyEvent, NotifyMessage
    from evaluations.notify import delivery, events, services
    from evaluations.review.completion import on_run_completion
    from tests.compare_helpers import baseline_and_candidate

    scratch.migrate()
    project = project_get_or_create_default()
    _, candidate = baseline_and_candidate(project)
    server = receiver()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"

    def complete() -> float:
        began = time.perf_counter()
        done = on_run_completion(candidate)
        with transaction.atomic():
            assert done.store is not None
            done.store(candidate)
        assert done.after is not None
        done.after(candidate)  # outside a transaction: the event's handlers run here, as in a worker
        return time.perf_counter() - began

    def median_of(setup: Any) -> float:
        times = []
        for _ in range(repeat):
            setup()
            times.append(complete())
        return statistics.median(times)

    def clean() -> None:
        NotifyAlert.objects.all().delete()
        NotifyMessage.objects.all().delete()

    complete()  # warm: imports, statistics, prepared statements
    floor = median_of(clean)
    hook = services.channel_save(project=project, actor=None, values={"name": "hook", "kind": "webhook", "url": url})
    inbox = services.channel_save(project=project, actor=None, values={"name": "inbox", "kind": "inapp"})
    for i in range(rules):
        services.rule_save(project=project, actor=None, channels=[hook.pk, inbox.pk],
                           values={"name": f"rule {i}", "kind": "run_finished", "condition": "regressions"})
    clean()
    complete()  # warm the rules' path too
    with_rules = median_of(clean)
    added_ms = (with_rules - floor) * 1000
    # What a worker then does with the event: the rules matched, alerts, a message per rule,
    # a webhook and an in-app delivery per message, queued.
    handled = []
    for outbox in list(NotifyEvent.objects.order_by("-pk")[:repeat]):
        clean()
        began = time.perf_counter()
        events.process([outbox.pk])
        handled.append(time.perf_counter() - began)
        made = NotifyDelivery.objects.count()
        assert made == 2 * rules, f"{made} deliveries for {rules} rules"
    worker_ms = statistics.median(handled) * 1000

    # Drain: a running cluster, then the deliveries queued all at once.
    NotifyMessage.objects.all().delete()
    env = {**os.environ, "EVALSITE_WORKERS": "2", "SECRET_KEY": settings.SECRET_KEY}
    env.pop("REDIS_URL", None)
    log = open(tmp / "qcluster.log", "w")  # noqa: SIM115 - closed below
    cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        warm = delivery.send_test(hook)  # the workers are up and have imported the sender
        while NotifyDelivery.objects.get(pk=warm.pk).status != "sent":
            time.sleep(0.05)
        now = timezone.now()
        message = NotifyMessage.objects.create(project=project, event="test", subject="bench",
                                               payload=NotifyMessage.objects.get(pk=warm.message_id).payload)
        rows = NotifyDelivery.objects.bulk_create([
            NotifyDelivery(message=message, channel=hook, idempotency_id=uuid.uuid4(), next_attempt_at=now,
                           created_at=now) for _ in range(deliveries)])
        ids = [r.pk for r in rows] if rows[0].pk else list(
            NotifyDelivery.objects.filter(message=message).values_list("pk", flat=True))
        began = time.perf_counter()
        delivery.enqueue(ids)
        while NotifyDelivery.objects.filter(message=message, status="sent").count() < deliveries:
            assert time.perf_counter() - began < 300, "the deliveries did not drain in 5 minutes"
            time.sleep(0.02)
        drained = time.perf_counter() - began
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(timeout=60)
        log.close()
    received = len(server.ids)  # type: ignore[attr-defined]
    body = b"x" * len(json.dumps(message.payload))
    with httpx.Client(trust_env=False) as client:
        began = time.perf_counter()
        for _ in range(deliveries):
            client.post(url, content=body, headers={"Content-Type": "application/json"})
        raw = time.perf_counter() - began
    server.shutdown()
    rate, raw_rate = deliveries / drained, deliveries / raw
    print(f"completion of a regressed run: {floor * 1000:.1f} ms with no rules (the floor), "
          f"{with_rules * 1000:.1f} ms with {rules} rules matching: adds {added_ms:.1f} ms "
          f"(target <= {TARGET_ADDED_MS:.0f} ms): {'OK' if added_ms <= TARGET_ADDED_MS else 'OVER TARGET'}; "
          f"then a worker matches them and queues {2 * rules} deliveries in {worker_ms:.1f} ms")
    print(f"drain: {deliveries} deliveries by a 2-worker qcluster in {drained:.2f} s = {rate:.0f}/s "
          f"(target >= {TARGET_RATE:.0f}/s): {'OK' if rate >= TARGET_RATE else 'UNDER TARGET'}; "
          f"the floor, bare POSTs from one client: {raw_rate:.0f}/s; receiver saw {received} distinct ids")
    return {"floor_ms": floor * 1000, "with_rules_ms": with_rules * 1000, "added_ms": added_ms, "rules": rules,
            "worker_ms": worker_ms,
            "deliveries": deliveries, "drain_seconds": drained, "per_second": rate, "floor_per_second": raw_rate,
            "ratio": raw_rate / rate, "distinct_ids": received}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, default=10)
    parser.add_argument("--deliveries", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalsite-notify-") as tmp:
        figures = measure(args.rules, args.deliveries, args.repeat, Path(tmp))
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
