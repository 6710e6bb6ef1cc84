"""What a monitor's pages and notifications read: answered from the hourly aggregates
(`MonitorBucket`, `MonitorLatencyBucket`), a fixed number of queries whatever the number of
traces; the partial hours at a window's edges from the results themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, F, Max, Q, QuerySet, Sum
from django.db.models.functions import TruncDay, TruncHour

from evaluations.models import Monitor, MonitorBucket, MonitorLatencyBucket, MonitorResult, MonitorScore
from evaluations.monitors.scoring import LATENCY_EDGES, latency_bin


def _ceil_hour(at: datetime) -> datetime:
    floor = at.replace(minute=0, second=0, microsecond=0)
    return floor if floor == at else floor + timedelta(hours=1)


def criterion_window(monitor_id: int, criterion: str, since: datetime, until: datetime) -> tuple[int, int]:
    """(passed, total) of one criterion of the monitor's current version over [since, until):
    the whole hours inside from the aggregates, the edges from the scores; three queries."""
    version = Monitor.objects.filter(pk=monitor_id).values_list("version", flat=True).first()
    if version is None or until <= since:
        return 0, 0
    start, end = _ceil_hour(since), until.replace(minute=0, second=0, microsecond=0)
    passed = total = 0
    if start < end:
        agg = MonitorBucket.objects.filter(monitor_id=monitor_id, version=version, criterion=criterion,
                                           hour__gte=start, hour__lt=end).aggregate(p=Sum("passed"), t=Sum("total"))
        passed, total = agg["p"] or 0, agg["t"] or 0
        edges = Q(result__at__gte=since, result__at__lt=start) | Q(result__at__gte=end, result__at__lt=until)
    else:
        edges = Q(result__at__gte=since, result__at__lt=until)
    rows = MonitorScore.objects.filter(edges, result__monitor_id=monitor_id, result__version=version,
                                       criterion=criterion).aggregate(p=Count("pk", filter=Q(passed=True)),
                                                                      t=Count("pk"))
    return passed + (rows["p"] or 0), total + (rows["t"] or 0)


@dataclass
class Point:
    at: datetime
    total: int = 0
    passed: int = 0
    traces: int = 0
    tokens: float = 0.0
    cost: float = 0.0
    criteria: dict[str, float | None] = field(default_factory=dict)  # mean score per criterion

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None


@dataclass
class Summary:
    total: int
    passed: int
    traces: int
    tokens: float
    cost: float
    p50: float | None
    p95: float | None
    criteria: dict[str, tuple[int, int, float | None]]  # name -> (passed, total, mean score)
    points: list[Point]

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.total if self.total else None


def _buckets(monitor: Monitor, since: datetime, environment: str) -> QuerySet[MonitorBucket]:
    qs = MonitorBucket.objects.filter(monitor=monitor, version=monitor.version, hour__gte=since)
    return qs.filter(environment=environment) if environment else qs


def summary(monitor: Monitor, *, since: datetime, step: str = "hour", environment: str = "",
            end_user: str = "") -> Summary:
    """The monitor's current version since `since`, per hour or day. With an end user, read
    from that user's results (an index on monitor, end user and time); else from the
    aggregates."""
    if end_user:
        return _summary_of_user(monitor, since=since, step=step, environment=environment, end_user=end_user)
    trunc = TruncDay("hour") if step == "day" else TruncHour("hour")
    rows = (_buckets(monitor, since, environment).annotate(at=trunc).values("at", "criterion")
            .annotate(total=Sum("total"), passed=Sum("passed"), scored=Sum("scored"), score_sum=Sum("score_sum"),
                      traces=Sum("traces"), tokens=Sum("tokens_sum"), cost=Sum("cost_sum"))
            .order_by("at", "criterion"))
    points: dict[datetime, Point] = {}
    criteria: dict[str, list[float]] = {}
    total = passed = traces = 0
    tokens = cost = 0.0
    for r in rows:
        point = points.setdefault(r["at"], Point(r["at"]))
        if r["criterion"] == "":
            point.total, point.passed, point.traces = r["total"], r["passed"], r["traces"]
            point.tokens, point.cost = r["tokens"] or 0.0, r["cost"] or 0.0
            total, passed, traces = total + r["total"], passed + r["passed"], traces + r["traces"]
            tokens, cost = tokens + (r["tokens"] or 0.0), cost + (r["cost"] or 0.0)
        else:
            point.criteria[r["criterion"]] = r["score_sum"] / r["scored"] if r["scored"] else None
            c = criteria.setdefault(r["criterion"], [0, 0, 0, 0.0])
            c[0] += r["passed"]
            c[1] += r["total"]
            c[2] += r["scored"]
            c[3] += r["score_sum"]
    hist = [0] * (len(LATENCY_EDGES) + 1)
    tops: list[float | None] = [None] * len(hist)
    lat = MonitorLatencyBucket.objects.filter(monitor=monitor, version=monitor.version, hour__gte=since)
    if environment:
        lat = lat.filter(environment=environment)
    for b, n, top, unknown in (lat.values("bin").annotate(n=Sum("count"), top=Max("max_seconds"),
                                                          unknown=Count("pk", filter=Q(max_seconds=None)))
                               .values_list("bin", "n", "top", "unknown")):
        hist[b] += n
        tops[b] = None if unknown else top  # rows counted before maxima were kept: the bin's edge
    return Summary(total, passed, traces, tokens, cost, percentile(hist, 0.5, tops), percentile(hist, 0.95, tops),
                   {k: (int(v[0]), int(v[1]), v[3] / v[2] if v[2] else None) for k, v in criteria.items()},
                   list(points.values()))


def _summary_of_user(monitor: Monitor, *, since: datetime, step: str, environment: str, end_user: str) -> Summary:
    results = MonitorResult.objects.filter(monitor=monitor, version=monitor.version, end_user=end_user, at__gte=since)
    if environment:
        results = results.filter(environment=environment)
    trunc = TruncDay("at") if step == "day" else TruncHour("at")
    points = [Point(r["t"], r["total"], r["passed"], r["traces"], r["tokens"] or 0.0, r["cost"] or 0.0)
              for r in results.annotate(t=trunc).values("t").annotate(
                  total=Count("pk"), passed=Count("pk", filter=Q(passed=True)), traces=Sum("traces"),
                  tokens=Sum("tokens"), cost=Sum("cost_usd")).order_by("t")]
    scores = (MonitorScore.objects.filter(result__in=results).values("criterion")
              .annotate(p=Count("pk", filter=Q(passed=True)), t=Count("pk"), s=Sum("score"),
                        n=Count("score")).order_by("criterion"))
    hist = [0] * (len(LATENCY_EDGES) + 1)
    tops: list[float | None] = [None] * len(hist)
    latest = results.exclude(latency_seconds=None).order_by("-at").values_list("latency_seconds", flat=True)
    for seconds in latest[:10000]:
        b = latency_bin(seconds or 0.0)
        hist[b] += 1
        tops[b] = max(tops[b] or 0.0, seconds or 0.0)
    return Summary(sum(p.total for p in points), sum(p.passed for p in points), sum(p.traces for p in points),
                   sum(p.tokens for p in points), sum(p.cost for p in points),
                   percentile(hist, 0.5, tops), percentile(hist, 0.95, tops),
                   {r["criterion"]: (r["p"], r["t"], (r["s"] / r["n"]) if r["n"] else None) for r in scores}, points)


def percentile(hist: list[int], q: float, tops: list[float | None] | None = None) -> float | None:
    """The q-quantile of a latency histogram, linear within its bin from the bin's lower edge
    up to the slowest latency counted in it (`tops[i]`; unknown: the bin's upper edge, or for
    the last, open bin its lower edge). So it never exceeds the slowest latency observed, and
    is off by at most the width of the bin it falls in (docs/monitors.md)."""
    n = sum(hist)
    if not n:
        return None
    rank, seen = q * n, 0
    for i, count in enumerate(hist):
        if count and seen + count >= rank:
            low = LATENCY_EDGES[i - 1] if i > 0 else 0.0
            top = tops[i] if tops is not None else None
            high = LATENCY_EDGES[i] if i < len(LATENCY_EDGES) else low
            if top is not None:
                high = max(low, min(top, high) if i < len(LATENCY_EDGES) else top)
            return low + (high - low) * (rank - seen) / count
        seen += count
    return LATENCY_EDGES[-1]


def last_day(monitor_ids: list[int], now: datetime) -> dict[int, tuple[int, int]]:
    """(passed, total) of each monitor's current version over the last 24 h (whole hours): one query."""
    since = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=23)
    rows = (MonitorBucket.objects.filter(monitor_id__in=monitor_ids, criterion="", hour__gte=since,
                                         version=F("monitor__version"))
            .values("monitor_id").annotate(p=Sum("passed"), t=Sum("total")))
    return {r["monitor_id"]: (r["p"] or 0, r["t"] or 0) for r in rows}
