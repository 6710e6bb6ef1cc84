"""The review report: what a lead sends at the end of a week. Per project and period (the
dates are in the URL, so the link is stable and can be shared with the project's members):
the runs per eval set and branch with the latest pass rate, the triage decisions made or
still open in the period (status, assignee, who decided, how long a fixed case took to fix,
the last comment), and the counts by status. The page, the Markdown and the CSV are the same
report; a fixed number of queries whatever the number of runs or decisions (the page lists
the first REPORT_ROWS decisions, the downloads all of them).

Causes of regressions are not stored per case yet; when they are, they are one more column
of `DecisionRow`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from evaluations.models import AuditEvent, Project, Run, Triage
from evaluations.review import triage as triage_service
from evaluations.runs.listing import RunRow, run_rows

REPORT_ROWS = 200
DEFAULT_DAYS = 7
MAX_DAYS = 366


@dataclass(frozen=True)
class Period:
    start: date
    end: date  # inclusive

    @property
    def bounds(self) -> tuple[datetime, datetime]:
        tz = timezone.get_current_timezone()
        return (datetime.combine(self.start, time.min, tzinfo=tz),
                datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=tz))

    def query(self) -> dict[str, str]:
        return {"from": self.start.isoformat(), "to": self.end.isoformat()}


def report_period(params: Any, *, today: date | None = None) -> Period:
    """The period from `from` and `to` (YYYY-MM-DD, both included); the last DEFAULT_DAYS
    days when neither is given. A malformed or reversed range is refused with what is wrong."""
    today = today or timezone.localdate()
    parsed: dict[str, date | None] = {}
    for key in ("from", "to"):
        raw = (params.get(key) or "").strip()
        try:
            parsed[key] = date.fromisoformat(raw) if raw else None
        except ValueError:
            raise ValidationError(f"{key}: {raw[:40]!r} is not a date (YYYY-MM-DD)") from None
    end = parsed["to"] or today
    start = parsed["from"] or end - timedelta(days=DEFAULT_DAYS - 1)
    if start > end:
        raise ValidationError(f"from ({start}) is after to ({end})")
    if (end - start).days >= MAX_DAYS:
        raise ValidationError(f"a report covers at most {MAX_DAYS} days")
    return Period(start, end)


@dataclass(frozen=True)
class BranchRuns:
    evalset_name: str
    branch: str
    runs: int
    completed: int
    latest: RunRow | None  # the latest completed run in the period


@dataclass(frozen=True)
class DecisionRow:
    pk: int
    evalset_name: str
    branch: str
    eval_id: str
    status: str
    status_label: str
    assignee: str
    decided_by: str  # the last person who changed it
    closed_by_run: bool  # fixed by evalsite: the case passed again
    opened_at: datetime
    updated_at: datetime
    time_to_fix: timedelta | None  # fixed: from the first decision to the passing run
    last_comment: str
    thread_url: str


@dataclass(frozen=True)
class Report:
    project: Project
    period: Period
    runs: list[BranchRuns]
    run_count: int
    status_counts: list[tuple[str, str, int]]  # value, label, count
    decisions: list[DecisionRow]  # the first REPORT_ROWS
    decision_count: int
    untriaged: int  # regressions still failing and undecided now
    median_time_to_fix: timedelta | None


def _decisions(project: Project, period: Period) -> Any:
    """The decisions made in the period, or made before it and still open in it."""
    start, end = period.bounds
    return (Triage.objects.filter(project=project, created_at__lt=end)
            .filter(Q(updated_at__gte=start) | Q(status__in=triage_service.OPEN_STATES)))


def _deciders(triage_pks: list[int]) -> dict[int, str]:
    """triage pk -> the last person who changed it (evalsite's own "passed again" is not a
    decision): one windowed query over the audit log."""
    if not triage_pks:
        return {}
    last = (AuditEvent.objects.filter(object_type="triage", object_id__in=[str(pk) for pk in triage_pks],
                                      verb=AuditEvent.Verb.TRIAGE_CHANGED, actor__isnull=False)
            .annotate(rank=Window(RowNumber(), partition_by=[F("object_id")],
                                  order_by=[F("created_at").desc(), F("pk").desc()]))
            .filter(rank=1).values_list("object_id", "actor__username"))
    return {int(pk): name for pk, name in last}


def _decision_rows(triage: list[Triage], comments: dict[int, triage_service.LastComment]) -> list[DecisionRow]:
    rows = []
    deciders = _deciders([t.pk for t in triage])
    for t in triage:
        last = comments.get(t.pk)
        rows.append(DecisionRow(
            pk=t.pk, evalset_name=t.evalset.display_name, branch=t.branch, eval_id=t.eval_id, status=t.status,
            status_label=t.get_status_display(), assignee=t.assignee.get_username() if t.assignee else "",
            decided_by=deciders.get(t.pk, ""),
            closed_by_run=t.updated_by_id is None and t.status == Triage.Status.FIXED,
            opened_at=t.created_at, updated_at=t.updated_at,
            time_to_fix=t.updated_at - t.created_at if t.status == Triage.Status.FIXED else None,
            last_comment=f"{last.author}: {last.body}" if last else "", thread_url=triage_service.thread_url(t)))
    return rows


def review_report(*, project: Project, period: Period, limit: int | None = REPORT_ROWS) -> Report:
    start, end = period.bounds
    in_period = Run.objects.filter(project=project, created_at__gte=start, created_at__lt=end)
    counts = list(in_period.order_by().values_list("evalset_version__evalset_id", "evalset_version__evalset__name",
                                                   "evalset_version__evalset__eval_set_id", "branch")
                  .annotate(n=Count("pk"), done=Count("pk", filter=Q(status=Run.Status.COMPLETED)))
                  .order_by("evalset_version__evalset__name", "branch"))
    latest = {(r.evalset_pk, r.branch): r for r in run_rows(
        in_period.filter(status=Run.Status.COMPLETED)
        .annotate(rank=Window(RowNumber(), partition_by=[F("evalset_version__evalset_id"), F("branch")],
                              order_by=[F("created_at").desc(), F("pk").desc()])).filter(rank=1))}
    runs = [BranchRuns(name or eval_set_id, branch, n, done, latest.get((evalset_id, branch)))
            for evalset_id, name, eval_set_id, branch, n, done in counts]
    decided = _decisions(project, period)
    by_status = dict(decided.order_by().values_list("status").annotate(n=Count("pk")))
    fixed = [t.updated_at - t.created_at for t in decided.filter(status=Triage.Status.FIXED)
             .only("created_at", "updated_at")]
    listed = (decided.select_related("evalset", "assignee", "updated_by")
              .order_by("evalset__name", "branch", "eval_id"))
    shown = list(listed[:limit] if limit is not None else listed)
    comments = triage_service.last_comments(decided.values("pk"))
    return Report(
        project=project, period=period, runs=runs, run_count=sum(r.runs for r in runs),
        status_counts=[(value, label, by_status.get(value, 0)) for value, label in Triage.Status.choices],
        decisions=_decision_rows(shown, comments), decision_count=sum(by_status.values()),
        untriaged=triage_service.untriaged_count(project),
        median_time_to_fix=statistics.median(fixed) if fixed else None,
    )


def duration_text(value: timedelta | None) -> str:
    """`2 d 3 h`, `5 h 10 min`, `12 min`; "" for none."""
    if value is None:
        return ""
    minutes = int(value.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min"


CSV_HEADER = ["eval_set", "branch", "eval_id", "status", "assignee", "decided_by", "closed_by_run", "opened_at",
              "updated_at", "time_to_fix_hours", "last_comment"]


def report_csv_rows(report: Report) -> Iterable[list[Any]]:
    yield CSV_HEADER
    for d in report.decisions:
        yield [d.evalset_name, d.branch, d.eval_id, d.status, d.assignee, d.decided_by, d.closed_by_run,
               d.opened_at.isoformat(),
               d.updated_at.isoformat(),
               round(d.time_to_fix.total_seconds() / 3600, 2) if d.time_to_fix is not None else "", d.last_comment]


def _md(text: str) -> str:
    """A table cell: its pipes escaped, on one line, and Markdown's markup characters
    escaped (a comment or case name is text, not markup)."""
    out = " ".join(str(text).split())
    for ch in "\\`*_[]<>|#":
        out = out.replace(ch, "\\" + ch)
    return out


def report_markdown(report: Report, link: str) -> str:
    p = report.period
    lines = [f"# Review report: {_md(report.project.name)}, {p.start} to {p.end}", "", f"Link: {link}", "",
             f"- Runs: {report.run_count}",
             f"- Decisions made or open in the period: {report.decision_count} ("
             + ", ".join(f"{label.lower()} {n}" for _, label, n in report.status_counts if n) + ")",
             f"- Regressions still undecided now: {report.untriaged}"]
    if report.median_time_to_fix is not None:
        lines.append(f"- Median time to fix: {duration_text(report.median_time_to_fix)}")
    lines += ["", "## Runs", "", "| Eval set | Branch | Runs | Completed | Latest pass rate |",
              "|---|---|---:|---:|---:|"]
    for r in report.runs:
        rate = r.latest.progress.pass_rate if r.latest else None
        lines.append(f"| {_md(r.evalset_name)} | {_md(r.branch or '(none)')} | {r.runs} | {r.completed} | "
                     + (f"{rate:.0%} (#{r.latest.pk})" if rate is not None and r.latest else "—") + " |")
    lines += ["", "## Decisions", "", "| Eval set | Branch | Case | Status | Assignee | Decided by | Time to fix | "
              "Last comment |", "|---|---|---|---|---|---|---|---|"]
    for d in report.decisions:
        lines.append(" | ".join(["", _md(d.evalset_name), _md(d.branch or "(none)"), _md(d.eval_id), d.status_label,
                                 _md(d.assignee or "—"), _md(d.decided_by or "—")
                                 + (" (fixed: passed again)" if d.closed_by_run else ""),
                                 duration_text(d.time_to_fix) or "—", _md(d.last_comment[:200]) or "—", ""]).strip())
    return "\n".join(lines) + "\n"
