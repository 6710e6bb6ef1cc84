"""Issue 41, item 7: a monitor's p50 and p95 never exceed the slowest latency observed (they
read 6.80 s beside a slowest trace of 4.20 s: interpolated to the 8 s edge of its bin), and
are off by at most the width of their bin; the chart's time axis fits the data within the
window, in one time zone."""

from __future__ import annotations

import json
import math
import random
import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import plotly.io as pio
import pytest
from django.test import Client
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import Monitor, MonitorLatencyBucket, Project, Trace
from evaluations.monitors import scoring, stats
from evaluations.monitors.scoring import LATENCY_EDGES, latency_bin
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from evaluations.web.charts.monitor import monitor_chart
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post


def scored(project: Project, user: Any, latencies: list[float]) -> Monitor:
    monitor = monitor_create(project=project, spec=MonitorSpec.model_validate(spec(name="answers")), user=user)
    token = token_create(user=user, name="agent").secret
    for seconds in latencies:
        assert post(Client(), agent_trace('{"city": "Paris"}', seconds=seconds), token).status_code == 200
    scoring.score_traces(list(Trace.objects.values_list("pk", flat=True)))
    return monitor


def test_p95_never_passes_the_slowest_trace(acme: Project, alice: Any, alice_client: Client) -> None:
    latencies = [4.05, 4.1, 4.12, 4.15, 4.2] * 4  # all in the (4, 8] s bin: the 8 s edge is far away
    monitor = scored(acme, alice, latencies)
    [row] = MonitorLatencyBucket.objects.filter(monitor=monitor)
    assert (row.bin, row.count, row.max_seconds) == (latency_bin(4.2), 20, pytest.approx(4.2))
    summary = stats.summary(monitor, since=timezone.now() - timedelta(days=1))
    assert summary.p50 is not None and summary.p95 is not None
    assert 4.0 <= summary.p50 <= summary.p95 <= 4.2
    page = alice_client.get(f"/monitors/{monitor.pk}/").content.decode()
    shown = re.search(r'Latency p50 · p95</div>\s*<div class="card-value">([\d.]+) · ([\d.]+)<', page)
    assert shown is not None and float(shown.group(2)) <= 4.2 and shown.group(2) == f"{summary.p95:.2f}"
    by_user = stats.summary(monitor, since=timezone.now() - timedelta(days=1), end_user="nobody")
    assert by_user.p95 is None


def test_later_batches_keep_the_slowest_of_the_hour(acme: Project, alice: Any) -> None:
    monitor = scored(acme, alice, [5.0, 4.5])
    token = token_create(user=alice, name="more").secret
    before = set(Trace.objects.values_list("pk", flat=True))
    for seconds in (4.1, 6.5, 4.3):
        post(Client(), agent_trace("x", seconds=seconds), token)
    scoring.score_traces(sorted(set(Trace.objects.values_list("pk", flat=True)) - before))
    [row] = MonitorLatencyBucket.objects.filter(monitor=monitor)
    assert row.count == 5 and row.max_seconds == pytest.approx(6.5)


def test_a_percentile_is_off_by_at_most_its_bins_width_and_never_above_the_max() -> None:
    chance = random.Random(41)
    for _ in range(300):
        values = sorted(chance.lognormvariate(0.5, 1.2) for _ in range(chance.randint(1, 400)))
        hist = [0] * (len(LATENCY_EDGES) + 1)
        tops: list[float | None] = [None] * len(hist)
        for v in values:
            b = latency_bin(v)
            hist[b] += 1
            tops[b] = max(tops[b] or 0.0, v)
        for q in (0.5, 0.95):
            estimate = stats.percentile(hist, q, tops)
            assert estimate is not None
            true = values[max(0, math.ceil(q * len(values)) - 1)]  # the value at rank q·n, as the bins count
            b = latency_bin(true)
            low = LATENCY_EDGES[b - 1] if b else 0.0
            assert estimate <= values[-1] + 1e-9
            assert abs(estimate - true) <= (tops[b] or low) - low + 1e-9, (q, true, estimate)


def _range_of(points: list[Any], since: datetime, until: datetime, step: str = "hour") -> tuple[list[str], Any]:
    layout = json.loads(pio.to_json(monitor_chart(points, [], step, since, until)))
    return layout["layout"]["xaxis"]["range"], layout["data"][0]["x"]


def point(at: datetime) -> Any:
    return SimpleNamespace(at=at, total=4, passed=3, pass_rate=0.75, criteria={})


def test_the_time_axis_fits_the_data_within_the_window() -> None:
    until = datetime(2026, 11, 29, 6, 30, tzinfo=UTC)
    since = until.replace(minute=0) - timedelta(hours=24)
    last_hour = until.replace(minute=0)
    (start, end), _ = _range_of([point(last_hour)], since, until)
    assert start.startswith("2026-11-29T00:30") and end.startswith("2026-11-29T07:00")  # six hours, not 24
    _, end = _range_of([point(until.replace(minute=0))], since, until.replace(minute=3))[0]
    assert end.startswith("2026-11-29T07:00")  # the current hour's bar, at 06:30, is inside the axis
    (start, _), _ = _range_of([point(last_hour - timedelta(hours=20)), point(last_hour)], since, until)
    assert start.startswith("2026-11-28T10:00")  # from the first bucket with data
    (start, _), _ = _range_of([point(since - timedelta(hours=3))], since, until)
    assert start.startswith("2026-11-28T06:00")  # never before the window


def test_points_and_range_share_one_time_zone(settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Paris"
    until = datetime(2026, 11, 29, 6, 30, tzinfo=UTC)
    with timezone.override("Europe/Paris"):
        paris_hour = timezone.localtime(until).replace(minute=0, second=0)  # as TruncHour gives it
        (start, end), xs = _range_of([point(paris_hour)], until - timedelta(hours=24), until)
    assert xs == ["2026-11-29T07:30:00+01:00"] and start.endswith("+01:00") and end.startswith("2026-11-29T08:00")
