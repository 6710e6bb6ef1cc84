"""Team review benchmark: an eval set of N one-turn cases run twice (the second run with a
tenth of the cases regressed), then, through the Django test client, the untriaged queue,
one bulk action over every regression (confirm, assign, comment: "select all" by filter),
the assigned queue, a case's history through the API, and the review report.

    python bench/review_bench.py [--cases 2000] [--repeat 5] [--json]   # SQLite, a scratch data dir

Printed next to two floors measured in the same run: a logged-in page that renders the site's
frame only (for the pages), and the same number of triage rows, audit events and comments
written as plain inserts (for the bulk action: what it must write at least).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON (bench/all.py reads it)")
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-review-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import logging

    logging.getLogger("axes").setLevel(logging.WARNING)  # a line per login otherwise
    import scratch
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.test import Client
    from django.test.utils import setup_test_environment

    from evaluations.evalsets.services import project_get_or_create_default
    from evaluations.models import AuditEvent, Comment, Membership, Triage
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    setup_test_environment()
    scratch.migrate()
    project = project_get_or_create_default()
    lead, fixer = (get_user_model().objects.create_user(n, f"{n}@example.com", f"{n}-pass-123")
                   for n in ("lead", "fixer"))
    for user in (lead, fixer):
        Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    n = args.cases
    wrong = set(range(1, n, 10))  # case 0 looks up item 0 either way
    version = generated_version(project, n, eval_set_id="bench")
    base = make_run(project, version, generated_outputs(n), labels={"branch": "main"})
    make_run(project, version, generated_outputs(n, wrong=wrong), labels={"branch": "main"})

    client = Client()
    client.force_login(lead)

    def get(path: str) -> None:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)

    get("/")
    floor_page = _median_ms(lambda: get("/account/"), args.repeat)
    untriaged = _median_ms(lambda: get("/review/?tab=untriaged"), args.repeat)

    # The floor of the bulk action: the rows it writes, as plain inserts, rolled back.
    t = time.perf_counter()
    with transaction.atomic():
        for i in sorted(wrong):
            triage = Triage.objects.create(project=project, evalset=version.evalset, eval_id=f"case_{i:04d}",
                                           branch="main", baseline=base, candidate=base, assignee=fixer)
            AuditEvent.objects.create(project=project, actor=lead, verb=AuditEvent.Verb.TRIAGE_CHANGED,
                                      object_type="triage", object_id=str(triage.pk), summary="x")
            comment = Comment.objects.create(triage=triage, author=lead, body="on it")
            AuditEvent.objects.create(project=project, actor=lead, verb=AuditEvent.Verb.COMMENT_ADDED,
                                      object_type="comment", object_id=str(comment.pk), summary="x")
        transaction.set_rollback(True)
    floor_bulk = time.perf_counter() - t

    t = time.perf_counter()
    response = client.post("/review/bulk/", {"tab": "untriaged", "scope": "all", "branch": "main",
                                             "status": "confirmed", "assignee": fixer.pk, "comment": "on it"})
    bulk = time.perf_counter() - t
    assert response.status_code == 302 and Triage.objects.filter(status="confirmed").count() == len(wrong)

    assigned = _median_ms(lambda: get("/review/?tab=assigned&assignee=fixer"), args.repeat)
    some = Triage.objects.order_by("pk").first()
    history = _median_ms(lambda: get(f"/api/v1/triage/{some.pk}/history/"), args.repeat)
    report = _median_ms(lambda: get("/projects/default/report/"), args.repeat)
    report_csv = _median_ms(lambda: b"".join(client.get("/projects/default/report.csv").streaming_content),
                            args.repeat)

    out = {"cases": n, "regressions": len(wrong), "bulk_seconds": bulk, "bulk_floor_seconds": floor_bulk,
           "bulk_ratio": bulk / floor_bulk, "floor_page_ms": floor_page, "untriaged_ms": untriaged,
           "assigned_ms": assigned, "history_ms": history, "report_ms": report, "report_csv_ms": report_csv,
           "report_ratio": report / floor_page}
    print(f"{n:,} cases, {len(wrong):,} regressions")
    print(f"bulk action over every regression   {bulk:8.2f} s   floor (plain inserts) {floor_bulk:.2f} s   "
          f"{bulk / floor_bulk:.2f}x")
    print(f"floor: the account page             {floor_page:8.1f} ms")
    for label, value in (("untriaged queue", untriaged), ("assigned queue", assigned),
                         ("a case's history (API)", history), ("review report", report),
                         ("review report CSV", report_csv)):
        print(f"{label:<36}{value:8.1f} ms   {value / floor_page:.2f}x floor")
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
