"""A comparison is computed once however many first views arrive together: 16 browsers
open a fresh compare link at the same moment against a live server (its own threads and
database connections); one computes and stores it, the others wait and read it. Run on
PostgreSQL too (DATABASE_URL=postgres://...), where the lock is an advisory lock."""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from evaluations.models import Comparison, Project
from tests.api_helpers import demo_runs

VIEWERS = 16


@pytest.mark.django_db(transaction=True)
def test_16_concurrent_first_views_compute_the_comparison_once(live_server: Any, acme: Project, alice: Any,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    baseline, candidate = demo_runs(acme)
    Comparison.objects.all().delete()  # the candidate's worker stored it; make these views the first
    client = Client()
    client.force_login(alice)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    url = f"{live_server.url}/compare/?baseline={baseline.pk}&candidate={candidate.pk}"
    start = threading.Barrier(VIEWERS)
    answers: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def view() -> None:
        start.wait()
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Cookie": cookie}), timeout=120) as response:
            body = response.read()
            with lock:
                answers.append((response.status, body))

    caplog.set_level(logging.INFO, logger="evaluations.review.comparison")
    threads = [threading.Thread(target=view) for _ in range(VIEWERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert len(answers) == VIEWERS and {status for status, _ in answers} == {200}
    assert all(b"weather_tokyo" in body for _, body in answers)
    computed = [r for r in caplog.records if r.getMessage().startswith("comparison computed")]
    assert len(computed) == 1, [r.getMessage() for r in computed]
    assert Comparison.objects.filter(baseline=baseline, candidate=candidate).count() == 1


@pytest.mark.django_db
def test_the_stored_rows_read_as_the_summary_does(acme: Project) -> None:
    """The pages read a stored comparison a page at a time (its head and case rows); a
    comparison of runs still going is read from its summary in memory. Both give the same
    cases, filters, scatter and neighbours."""
    from evaluations.review import comparison
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 120)
    baseline = make_run(acme, version, generated_outputs(120, wrong={5, 7}))
    candidate = make_run(acme, version, generated_outputs(120, wrong=set(range(1, 120, 9))))
    stored = comparison.comparison_source(baseline=baseline, candidate=candidate)
    assert stored.comparison_id is not None
    summary = comparison.compare(comparison.run_data(baseline), comparison.run_data(candidate))
    memory = comparison.CaseSource(comparison.head_of(summary), None, summary)
    assert stored.head == json.loads(json.dumps(memory.head))
    for status in ("all", comparison.REGRESSED, comparison.IMPROVED, comparison.UNCHANGED_PASS):
        for q in ("", "case_01", "CASE_00"):
            rows, expected = stored.cases(status, q), memory.cases(status, q)
            assert rows.count() == len(expected)
            assert list(rows[0:len(expected)]) == json.loads(json.dumps(expected)), (status, q)
            for case in expected[:3] + expected[-3:]:
                assert stored.neighbours(case["id"], status, q) == memory.neighbours(case["id"], status, q)
        assert stored.first(status, 4) == json.loads(json.dumps(memory.first(status, 4)))
    for criterion in summary["points"]:
        assert list(stored.scatter(criterion)) == json.loads(json.dumps(memory.scatter(criterion)))
    assert stored.neighbours("no such case", "all") == memory.neighbours("no such case", "all")
