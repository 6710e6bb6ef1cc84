"""Regression triage: the review decision on a case, its threaded comments, and the review
queue.

A `Triage` row belongs to one case (by `eval_id`) of one eval set on one branch (the
candidate's): decided once, it shows on every later comparison of that branch until the
case passes again there (a finished run sets it `fixed`: `triage_resolve_passed`) or
someone changes it. It is created the first time someone triages or comments on the case
and remembers the comparison it was last decided in. Every change is written to the audit
log (`evaluations.audit`).

Comments are Markdown from people: `render_comment` turns them into HTML with raw HTML and
images disabled in the Markdown parser, then runs the result through nh3 with a small
allow-list. Only nh3's output is ever marked safe. An @mention of a project member becomes a
link to the cases assigned to them (and tells them, through evaluations.notify).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import markdown  # type: ignore[import-untyped,unused-ignore]
import nh3
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import IntegrityError, transaction
from django.db.models import CharField, Count, F, Max, OuterRef, Q, QuerySet, Subquery, Window
from django.db.models.functions import Cast, RowNumber
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from evaluations.audit import audit_record
from evaluations.models import (
    AuditEvent,
    CaseResult,
    Comment,
    Comparison,
    ComparisonCase,
    EvalSet,
    Membership,
    Project,
    Run,
    Triage,
)
from evaluations.review import comparison

COMMENT_MAX_CHARS = 10_000
QUEUE_PER_PAGE = 50
# Statuses that still need someone: an OPEN triage is as good as none for the queue, and a
# FIXED one (the case passed again) no longer speaks for a new regression.
UNTRIAGED = Triage.Status.OPEN
NOT_DECIDED = (Triage.Status.OPEN, Triage.Status.FIXED)


class _Keep:
    """`assignee` default: leave the assignee as it is (None unassigns)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()


# --- Services -----------------------------------------------------------------------------


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


ASSIGNABLE_ROLES = (Membership.Role.MEMBER, Membership.Role.ADMIN)


def _check_assignable(project: Project, user: Any) -> None:
    """Only someone who can act on a case can be given it: a member or an admin."""
    role = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
    if role is None:
        raise ValidationError(f"{user.get_username()} is not a member of {project.name}")
    if role not in ASSIGNABLE_ROLES:
        raise ValidationError(f"{user.get_username()} is a viewer of {project.name} and cannot act on a case: "
                              "only members and admins can be assigned")


def triage_update(*, project: Project, evalset: EvalSet, eval_id: str, baseline: Run, candidate: Run,
                  status: str | None = None, assignee: Any = KEEP, actor: Any) -> Triage:
    """Get or create the case's triage and set its status and/or assignee.

    `status=None` keeps the status; `assignee` keeps the assignee unless given (None
    unassigns). The assignee must be a member or admin of the project (a viewer cannot act
    on the case, so is refused). A change is
    recorded in the audit log with its before and after values; creating the row without a
    change records nothing."""
    if evalset.project_id != project.pk or baseline.project_id != project.pk or candidate.project_id != project.pk:
        raise ValidationError("the eval set and both runs must belong to the project")
    if candidate.evalset_version.evalset_id != evalset.pk:
        raise ValidationError("the candidate run is not a run of this eval set")
    if baseline.pk == candidate.pk:
        raise ValidationError("a run cannot be triaged against itself")
    if not eval_id:
        raise ValidationError("which case?")
    if status is not None and status not in Triage.Status.values:
        raise ValidationError(f"unknown status {status!r}")
    if assignee is not KEEP and assignee is not None:
        _check_assignable(project, assignee)

    key = {"evalset": evalset, "eval_id": eval_id, "branch": candidate.branch}
    with transaction.atomic():
        triage = Triage.objects.select_for_update(of=("self",)).select_related("assignee").filter(**key).first()
        if triage is None:
            try:
                with transaction.atomic():
                    triage = Triage.objects.create(project=project, updated_by=actor, baseline=baseline,
                                                   candidate=candidate, **key)
            except IntegrityError:  # someone created it between our read and write
                triage = Triage.objects.select_for_update(of=("self",)).select_related("assignee").get(**key)
        before = {"status": triage.status, "assignee": _username(triage.assignee)}
        if status is not None:
            triage.status = status
        if assignee is not KEEP:
            triage.assignee = assignee
        after = {"status": triage.status, "assignee": _username(triage.assignee)}
        if after != before:
            triage.updated_at = timezone.now()
            triage.updated_by = actor
            triage.baseline, triage.candidate = baseline, candidate  # the comparison it was decided in
            triage.save(update_fields=["status", "assignee", "updated_at", "updated_by", "baseline", "candidate"])
            changes = [f"{field} {before[field] or 'none'} → {after[field] or 'none'}"
                       for field in ("status", "assignee") if before[field] != after[field]]
            audit_record(project=project, actor=actor, verb=AuditEvent.Verb.TRIAGE_CHANGED, obj=triage,
                         summary=f"triaged {eval_id} (run #{candidate.pk} vs #{baseline.pk}): " + ", ".join(changes),
                         data={"before": before, "after": after, "eval_id": eval_id, "branch": candidate.branch,
                               "triage": triage.pk, "baseline": baseline.pk, "candidate": candidate.pk})
    return triage


def comment_add(*, triage: Triage, parent: Comment | None = None, body: str, author: Any) -> Comment:
    """Add a comment (a reply when `parent` is given, which must be on the same triage)."""
    body = (body or "").strip()
    if not body:
        raise ValidationError("a comment cannot be empty")
    if len(body) > COMMENT_MAX_CHARS:
        raise ValidationError(f"a comment can be at most {COMMENT_MAX_CHARS:,} characters")
    if parent is not None and parent.triage_id != triage.pk:
        raise ValidationError("a reply must be on the same case as the comment it answers")
    with transaction.atomic():
        comment = Comment.objects.create(triage=triage, parent=parent, author=author, body=body)
        audit_record(project=triage.project, actor=author, verb=AuditEvent.Verb.COMMENT_ADDED, obj=comment,
                     summary=f"commented on {triage.eval_id} (run #{triage.candidate_id} vs #{triage.baseline_id})",
                     data={"triage": triage.pk, "parent": parent.pk if parent else None, "eval_id": triage.eval_id,
                           "branch": triage.branch, "candidate": triage.candidate_id,
                           "baseline": triage.baseline_id})
    return comment


# --- Rendering comments -------------------------------------------------------------------

ALLOWED_TAGS = {"p", "br", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li", "a", "hr"}
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}}
URL_SCHEMES = {"http", "https", "mailto"}


def _markdown() -> markdown.Markdown:
    """Markdown without raw HTML (it is shown as text) and without images."""
    md = markdown.Markdown(extensions=[], output_format="html")
    md.preprocessors.deregister("html_block")
    for name in ("html", "image_link", "image_reference", "short_image_ref"):
        md.inlinePatterns.deregister(name)
    return md


MENTION = re.compile(r"(?<![\w@/\[])@([\w.+-]*[\w+-])")


def mentioned(body: str) -> list[str]:
    """The usernames @mentioned in a comment, each once, in order."""
    return list(dict.fromkeys(MENTION.findall(body or "")))


def _link_mentions(body: str, members: Collection[str]) -> str:
    def link(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in members:
            return match.group(0)
        return f"[@{name}]({reverse('review_queue')}?{urlencode({'assignee': name})})"

    return MENTION.sub(link, body)


def render_comment(body: str, members: Collection[str] = ()) -> SafeString:
    """A comment's Markdown as sanitised HTML: emphasis, code, lists, quotes and links
    (http, https, mailto; rel="nofollow noopener"); everything else is text or dropped.
    An @mention of one of `members` (usernames) links to their assigned cases."""
    html = _markdown().convert(_link_mentions(body, members) if members else body)
    cleaned = nh3.clean(html, tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRIBUTES, url_schemes=URL_SCHEMES,
                        link_rel="nofollow noopener", strip_comments=True)
    return mark_safe(cleaned)  # noqa: S308 - nh3's output, nothing else


@dataclass
class CommentNode:
    comment: Comment
    html: SafeString
    replies: list[CommentNode]


def comment_tree(triage: Triage | None) -> list[CommentNode]:
    """The triage's comments as threads, oldest first at each level: one query."""
    if triage is None:
        return []
    nodes: dict[int, CommentNode] = {}
    roots: list[CommentNode] = []
    members = set(Membership.objects.filter(project_id=triage.project_id).values_list("user__username", flat=True))
    for comment in Comment.objects.filter(triage=triage).select_related("author").order_by("created_at", "pk"):
        node = nodes[comment.pk] = CommentNode(comment, render_comment(comment.body, members), [])
        parent = nodes.get(comment.parent_id) if comment.parent_id else None
        (parent.replies if parent is not None else roots).append(node)
    return roots


# --- Selectors ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryEntry:
    """One change to a case's triage, or one comment on it: who, when, what."""

    at: datetime
    actor: str  # "" for evalsite itself (a run that passed again)
    kind: str  # "change" or "comment"
    summary: str
    before: dict[str, Any]
    after: dict[str, Any]
    comment_id: int | None

    @property
    def change(self) -> str:
        """`status open → confirmed, assignee none → bob` (a comment: "commented")."""
        if self.kind == "comment":
            return "commented"
        parts = [f"{field} {self.before.get(field) or 'none'} → {value or 'none'}"
                 for field, value in self.after.items() if self.before.get(field) != value]
        return ", ".join(parts) or self.summary


def case_history(triage: Triage | None, *, limit: int = 200) -> list[HistoryEntry]:
    """Every status and assignee change of the case's decision and every comment on it,
    oldest first, from the audit log: one query (the triage's own events, and those of its
    comments, both by the object index). The newest `limit` are kept."""
    if triage is None:
        return []
    comments = Comment.objects.filter(triage=triage).values_list(Cast("pk", CharField()), flat=True)
    events = list(AuditEvent.objects.filter(
        Q(object_type="triage", object_id=str(triage.pk)) | Q(object_type="comment", object_id__in=comments))
        .select_related("actor").order_by("-created_at", "-pk")[:limit])
    entries = []
    for e in reversed(events):
        data = e.data if isinstance(e.data, dict) else {}
        comment = e.object_type == "comment"
        entries.append(HistoryEntry(
            at=e.created_at, actor=e.actor.get_username() if e.actor is not None else "",
            kind="comment" if comment else "change", summary=e.summary,
            before=data.get("before") or {}, after=data.get("after") or {},
            comment_id=int(e.object_id) if comment and e.object_id.isdigit() else None))
    return entries


def triage_for(*, evalset_id: int, eval_id: str, baseline: Run, candidate: Run) -> Triage | None:
    """The case's triage on the candidate's branch (whichever comparison decided it)."""
    return (Triage.objects.select_related("assignee", "updated_by")
            .filter(evalset_id=evalset_id, eval_id=eval_id, branch=candidate.branch).first())


def triage_by_case(*, baseline: Run, candidate: Run, eval_ids: list[str]) -> dict[str, Triage]:
    """eval_id -> triage on the candidate's branch, for a page of the compare table: one query."""
    if not eval_ids:
        return {}
    return {t.eval_id: t for t in Triage.objects.select_related("assignee")
            .filter(branch=candidate.branch, evalset_id=candidate.evalset_version.evalset_id,
                    eval_id__in=eval_ids)}


def decisions_on_branch(*, evalset_id: int, branch: str, eval_ids: list[str]) -> dict[str, Triage]:
    """eval_id -> the case's decision on `branch` while it stands (not fixed: the case still
    fails there), for a feature branch's comparison to show the default branch's decision
    on the cases that fail on both: one query."""
    if not eval_ids:
        return {}
    return {t.eval_id: t for t in Triage.objects.select_related("assignee")
            .filter(evalset_id=evalset_id, branch=branch, eval_id__in=eval_ids).exclude(status=Triage.Status.FIXED)}


def thread_url(triage: Triage) -> str:
    """A decision's thread: the case's drill-down in the comparison it was decided in."""
    return (reverse("run_case_by_eval_id", args=[triage.candidate_id]) + "?"
            + urlencode({"eval_id": triage.eval_id, "baseline": triage.baseline_id}) + "#triage")


def triage_stamp_annotations() -> dict[str, Any]:
    """Expressions over a Comparison row that change whenever a triage its compare page shows
    is created or changed (those of the candidate's eval set, on any branch: a feature
    branch's page shows the default branch's decisions too): a cached compare page is keyed
    by them (`comparison.stored_stamp`), in the same query as the comparison."""
    pair = Triage.objects.filter(evalset_id=OuterRef("candidate__evalset_version__evalset_id"))
    return {
        "triage_count": Subquery(pair.order_by().values("evalset").annotate(n=Count("pk")).values("n")[:1]),
        "triage_last": Subquery(pair.order_by("-updated_at").values("updated_at")[:1]),
    }


def project_members(project: Project) -> list[Any]:
    """Who a case can be assigned to: the project's members and admins (not its viewers),
    by username."""
    return [m.user for m in Membership.objects.filter(project=project, role__in=ASSIGNABLE_ROLES)
            .select_related("user").order_by("user__username")]


@dataclass(frozen=True)
class QueueRow:
    evalset_name: str
    eval_id: str
    baseline_id: int
    baseline_name: str
    candidate_id: int
    candidate_name: str
    status: str  # a Triage.Status value; "open" for a case nobody triaged yet
    status_label: str
    triaged: bool
    assignee: str | None
    last_comment_at: datetime | None
    url: str | None
    branch: str = ""  # the branch the decision belongs to (the candidate's)
    evalset_id: int = 0  # with `branch` and `eval_id`: what a triage decision belongs to


@dataclass(frozen=True)
class QueuePage:
    rows: list[QueueRow]
    number: int
    num_pages: int
    count: int
    has_previous: bool
    has_next: bool


OPEN_STATES = (Triage.Status.OPEN, Triage.Status.CONFIRMED, Triage.Status.FLAKY)  # still someone's work


@dataclass(frozen=True)
class QueueFilters:
    """What narrows the review queue (all in the URL). `assignee` is a username, or "none"
    for nobody; on the assigned tab it says whose cases (default: yours). `criterion` keeps
    the regressions whose score on that criterion dropped. `state` on the assigned tab:
    "open" (open, confirmed or flaky: still someone's work) or "all"."""

    evalset: int | None = None
    branch: str | None = None  # None: any branch ("" is the runs without one)
    criterion: str = ""
    assignee: str = ""
    state: str = "open"

    def query(self) -> dict[str, Any]:
        """The filters as URL parameters (only those set)."""
        params: dict[str, Any] = {}
        if self.evalset:
            params["evalset"] = self.evalset
        if self.branch is not None:
            params["branch"] = self.branch
        for key in ("criterion", "assignee"):
            if getattr(self, key):
                params[key] = getattr(self, key)
        if self.state != "open":
            params["state"] = self.state
        return params


def _drill_url(candidate_id: int, result_id: int | None, baseline_id: int, status: str) -> str | None:
    if result_id is None:
        return None
    return reverse("run_case", args=[candidate_id, result_id]) + f"?baseline={baseline_id}&status={status}"


def _queue_page(rows: list[Any], page: Any) -> tuple[Any, Paginator[Any]]:
    paginator = Paginator(rows, QUEUE_PER_PAGE)
    return paginator.get_page(page), paginator


def _page(current: Any, paginator: Paginator[Any], rows: list[QueueRow]) -> QueuePage:
    return QueuePage(rows, current.number, paginator.num_pages, paginator.count, current.has_previous(),
                     current.has_next())


def _run_name(run: Run) -> str:
    return run.name or ""


def _assigned(*, user: Any, project: Project, filters: QueueFilters) -> QuerySet[Triage]:
    triage = Triage.objects.filter(project=project)
    if filters.assignee == "none":
        triage = triage.filter(assignee__isnull=True)
    elif filters.assignee:
        triage = triage.filter(assignee__username=filters.assignee)
    else:
        triage = triage.filter(assignee=user)
    if filters.state == "open":
        triage = triage.filter(status__in=OPEN_STATES)
    if filters.evalset:
        triage = triage.filter(evalset_id=filters.evalset)
    if filters.branch is not None:
        triage = triage.filter(branch=filters.branch)
    return triage


def assigned_to(*, user: Any, project: Project, page: Any = 1, filters: QueueFilters = QueueFilters()) -> QueuePage:
    """The cases of `project` assigned to `user` (or to whom `filters.assignee` names), open
    ones only unless `filters.state` is "all", most recently changed first; a fixed number of
    queries whatever the page size (count, then the page with everything joined)."""
    first_result = (CaseResult.objects.filter(run_id=OuterRef("candidate_id"), case__eval_id=OuterRef("eval_id"))
                    .order_by("iteration", "pk").values("pk")[:1])
    triage: QuerySet[Triage] = (
        _assigned(user=user, project=project, filters=filters)
        .select_related("evalset", "baseline", "candidate", "assignee")
        .annotate(last_comment_at=Max("comments__created_at"), result_id=Subquery(first_result))
        .order_by("-updated_at", "-pk")
    )
    paginator = Paginator(triage, QUEUE_PER_PAGE)
    current = paginator.get_page(page)
    rows = [QueueRow(
        evalset_name=t.evalset.display_name, eval_id=t.eval_id, baseline_id=t.baseline_id,
        baseline_name=_run_name(t.baseline), candidate_id=t.candidate_id, candidate_name=_run_name(t.candidate),
        status=t.status, status_label=t.get_status_display(), triaged=True,
        assignee=_username(t.assignee), last_comment_at=t.last_comment_at,
        url=_drill_url(t.candidate_id, t.result_id, t.baseline_id, "all"), branch=t.branch,
        evalset_id=t.evalset_id,
    ) for t in current.object_list]
    return _page(current, paginator, rows)


# A regression found in one of a branch's last few runs stays in the queue while the case
# still fails in the branch's latest run (a passing run after it does not hide it, only a
# decision or the case passing again does).
RECENT_RUNS = 5
STILL_FAILING = frozenset({comparison.REGRESSED, comparison.UNCHANGED_FAIL})


def _recent_comparisons(project: Project) -> tuple[list[Comparison], dict[tuple[int, str], int]]:
    """The stored comparisons whose candidate is one of the last RECENT_RUNS completed runs of
    its eval set on its branch (newest first), and each (eval set, branch)'s latest run."""
    recent = list(
        Run.objects.filter(project=project, status=Run.Status.COMPLETED)
        .annotate(rank=Window(RowNumber(), partition_by=[F("evalset_version__evalset_id"), F("branch")],
                              order_by=[F("created_at").desc(), F("pk").desc()]))
        .filter(rank__lte=RECENT_RUNS)
        .values_list("pk", "evalset_version__evalset_id", "branch", "rank")
    )
    latest = {(evalset_id, branch): pk for pk, evalset_id, branch, rank in recent if rank == 1}
    comparisons = list(
        Comparison.objects.filter(candidate_id__in=[pk for pk, *_ in recent], baseline__project=project)
        .select_related("baseline", "candidate", "candidate__evalset_version__evalset")
        .order_by("-candidate__created_at", "-candidate_id", "-baseline__created_at", "-baseline_id")
    )
    return comparisons, latest


def _untriaged_items(project: Project) -> list[tuple[Comparison, dict[str, Any], Triage | None]]:
    comparisons, latest = _recent_comparisons(project)
    triage: dict[tuple[int, str, str], Triage] = {}
    if comparisons:
        for t in (Triage.objects.filter(project=project, branch__in={c.candidate.branch for c in comparisons},
                                        evalset_id__in={c.candidate.evalset_version.evalset_id for c in comparisons})
                  .select_related("assignee").annotate(last_comment_at=Max("comments__created_at"))):
            triage[(t.evalset_id, t.branch, t.eval_id)] = t
    # What still fails in each branch's latest run, from that run's comparisons.
    def where(c: Comparison) -> tuple[int, str]:
        return (c.candidate.evalset_version.evalset_id, c.candidate.branch)

    newest = {c.pk: c for c in comparisons if latest.get(where(c)) == c.candidate_id}
    failing_now: dict[tuple[int, str], set[str]] = {}
    for c_pk, cases in comparison.cases_with_status(list(newest.values()), STILL_FAILING).items():
        failing_now.setdefault(where(newest[c_pk]), set()).update(case["id"] for case in cases)
    items: list[tuple[Comparison, dict[str, Any], Triage | None]] = []
    seen: set[tuple[int, str, str]] = set()
    regressed = comparison.cases_with_status(comparisons, comparison.REGRESSED)
    for c in comparisons:  # newest first: a case is listed with the latest run it regressed in
        evalset_id, branch = where(c)
        is_latest = latest.get((evalset_id, branch)) == c.candidate_id
        for case in regressed[c.pk]:
            if not is_latest and case["id"] not in failing_now.get((evalset_id, branch), ()):
                continue  # it passes again (or the latest run was not compared yet)
            key = (evalset_id, c.candidate.branch, case["id"])
            if key in seen:  # the same case against another baseline, or in an older run
                continue
            seen.add(key)
            found = triage.get(key)
            if found is None or found.status in NOT_DECIDED:
                items.append((c, case, found))
    return items


def _dropped(case: dict[str, Any], criterion: str) -> bool:
    pair = (case.get("sc") or {}).get(criterion)
    return pair is not None and len(pair) == 2 and pair[1] < pair[0]


def _filtered(items: list[tuple[Comparison, dict[str, Any], Triage | None]],
              filters: QueueFilters) -> list[tuple[Comparison, dict[str, Any], Triage | None]]:
    """The untriaged items the filters keep. (A filter on a regression's cause, once causes
    are stored per case, is one more clause here.)"""
    kept = []
    for c, case, t in items:
        if filters.evalset and c.candidate.evalset_version.evalset_id != filters.evalset:
            continue
        if filters.branch is not None and c.candidate.branch != filters.branch:
            continue
        if filters.criterion and not _dropped(case, filters.criterion):
            continue
        assignee = _username(t.assignee) if t is not None else None
        if filters.assignee == "none" and assignee is not None:
            continue
        if filters.assignee not in ("", "none") and assignee != filters.assignee:
            continue
        kept.append((c, case, t))
    return kept


def untriaged_count(project: Project) -> int:
    return len(_untriaged_items(project))


def assigned_count(*, user: Any, project: Project) -> int:
    """The open cases assigned to `user` (what the navigation's count says): one query."""
    return Triage.objects.filter(project=project, assignee=user, status__in=OPEN_STATES).count()


def untriaged_criteria(project: Project) -> list[str]:
    """The criteria the untriaged regressions have scores for (the queue's criterion filter)."""
    return sorted({name for _, case, _ in _untriaged_items(project) for name in (case.get("sc") or {})})


@dataclass(frozen=True)
class QueueKey:
    """What one triage of the bulk action names: a case in a comparison."""

    candidate_id: int
    baseline_id: int
    eval_id: str


def queue_keys(*, user: Any, project: Project, tab: str, filters: QueueFilters) -> list[QueueKey]:
    """Every case of a queue tab the filters keep, on every page (the bulk action's "select
    all"): the same queries as one page of it."""
    if tab == "assigned":
        return [QueueKey(c, b, e) for c, b, e in _assigned(user=user, project=project, filters=filters)
                .order_by("-updated_at", "-pk").values_list("candidate_id", "baseline_id", "eval_id")]
    return [QueueKey(c.candidate_id, c.baseline_id, case["id"])
            for c, case, _ in _filtered(_untriaged_items(project), filters)]


@dataclass(frozen=True)
class LastComment:
    author: str
    body: str
    at: datetime


def last_comments(triage_ids: Any) -> dict[int, LastComment]:
    """triage pk -> its newest comment (one windowed query; `triage_ids` may be a queryset)."""
    newest = (Comment.objects.filter(triage_id__in=triage_ids)
              .annotate(rank=Window(RowNumber(), partition_by=[F("triage_id")],
                                    order_by=[F("created_at").desc(), F("pk").desc()]))
              .filter(rank=1).values_list("triage_id", "author__username", "body", "created_at"))
    return {t: LastComment(author or "", body, at) for t, author, body, at in newest}


def branch_decisions(*, evalset_id: int, branch: str) -> tuple[dict[str, Triage], dict[int, LastComment]]:
    """Every decision of an eval set on a branch (with who made it) and their last comments:
    what the compare CSV adds to its rows, in two queries whatever the run's size."""
    decided = Triage.objects.filter(evalset_id=evalset_id, branch=branch)
    return ({t.eval_id: t for t in decided.select_related("assignee", "updated_by")},
            last_comments(decided.values("pk")))


TRIAGE_COLUMNS = ["triage_status", "assignee", "decided_by", "decided_at", "last_comment_by", "last_comment"]


def triage_cells(triage: Triage | None, last: LastComment | None) -> list[Any]:
    """The triage columns of an export row (`TRIAGE_COLUMNS`)."""
    if triage is None:
        return ["", "", "", "", "", ""]
    return [triage.status, _username(triage.assignee) or "", _username(triage.updated_by) or "",
            triage.updated_at.isoformat(), last.author if last else "", last.body if last else ""]


def queue_export(*, user: Any, project: Project, tab: str, filters: QueueFilters) -> list[list[Any]]:
    """A queue tab with its filters, every page, as rows under a header: the case and its
    comparison, then its triage (`TRIAGE_COLUMNS`). A fixed number of queries."""
    keys = queue_keys(user=user, project=project, tab=tab, filters=filters)
    where = {pk: (evalset_id, branch) for pk, evalset_id, branch in Run.objects.filter(
        pk__in={k.candidate_id for k in keys}).values_list("pk", "evalset_version__evalset_id", "branch")}
    decided = {(t.evalset_id, t.branch, t.eval_id): t for t in Triage.objects.filter(project=project)
               .select_related("assignee", "updated_by", "evalset")}
    names = dict(EvalSet.objects.filter(project=project).values_list("pk", "name"))
    comments = last_comments(Triage.objects.filter(project=project).values("pk"))
    rows: list[list[Any]] = [["eval_set", "branch", "eval_id", "candidate_run", "baseline_run", *TRIAGE_COLUMNS]]
    for k in keys:
        evalset_id, branch = where.get(k.candidate_id, (0, ""))
        t = decided.get((evalset_id, branch, k.eval_id))
        rows.append([t.evalset.display_name if t else names.get(evalset_id, ""), branch, k.eval_id,
                     k.candidate_id, k.baseline_id, *triage_cells(t, comments.get(t.pk) if t else None)])
    return rows


MAX_BULK = 1000


@dataclass(frozen=True)
class BulkOutcome:
    cases: int
    commented: int


def triage_bulk(*, project: Project, keys: list[QueueKey], status: str | None = None, assignee: Any = KEEP,
                comment: str = "", actor: Any) -> BulkOutcome:
    """Set the status and/or assignee of many cases and add the same comment to each, all or
    nothing: one refused case (not in the project, no such case, a viewer as assignee, an
    empty action) writes nothing. Each change is audited as a single triage would be."""
    if not keys:
        raise ValidationError("select the cases first")
    if len(keys) > MAX_BULK:
        raise ValidationError(f"at most {MAX_BULK:,} cases at once ({len(keys):,} selected): narrow the filters")
    comment = (comment or "").strip()
    if status is None and assignee is KEEP and not comment:
        raise ValidationError("choose a status, an assignee or a comment to apply")
    if status is not None and status not in Triage.Status.values:
        raise ValidationError(f"unknown status {status!r}")
    if assignee is not KEEP and assignee is not None:
        _check_assignable(project, assignee)
    runs = {r.pk: r for r in Run.objects.filter(project=project, pk__in={k.candidate_id for k in keys}
                                                | {k.baseline_id for k in keys})
            .select_related("evalset_version__evalset")}
    present = set(CaseResult.objects.filter(run_id__in={k.candidate_id for k in keys},
                                            case__eval_id__in={k.eval_id for k in keys})
                  .values_list("run_id", "case__eval_id").distinct())
    commented = 0
    with transaction.atomic():
        for key in dict.fromkeys(keys):
            candidate, baseline = runs.get(key.candidate_id), runs.get(key.baseline_id)
            if candidate is None or baseline is None or (key.candidate_id, key.eval_id) not in present:
                raise ValidationError(f"no case {key.eval_id!r} in run #{key.candidate_id} of {project.name}")
            triage = triage_update(project=project, evalset=candidate.evalset_version.evalset, eval_id=key.eval_id,
                                   baseline=baseline, candidate=candidate, status=status, assignee=assignee,
                                   actor=actor)
            if comment:
                comment_add(triage=triage, body=comment, author=actor)
                commented += 1
    return BulkOutcome(len(dict.fromkeys(keys)), commented)


def untriaged_regressions(*, project: Project, page: Any = 1, filters: QueueFilters = QueueFilters()) -> QueuePage:
    """The regressed cases of the latest completed run of each eval set on each branch (its
    stored comparisons) that nobody decided on that branch yet (no triage row, an open one,
    or a fixed one: the case had passed again).

    Two queries whatever the number of cases: the comparisons (with their runs and eval
    sets) and the triage rows of their eval sets and branches."""
    items = _filtered(_untriaged_items(project), filters)
    current, paginator = _queue_page(items, page)
    rows = []
    for c, case, t in current.object_list:
        rows.append(QueueRow(
            evalset_name=c.candidate.evalset_version.evalset.display_name, eval_id=case["id"],
            baseline_id=c.baseline_id, baseline_name=_run_name(c.baseline), candidate_id=c.candidate_id,
            candidate_name=_run_name(c.candidate), status=UNTRIAGED, status_label=Triage.Status.OPEN.label,
            triaged=t is not None, assignee=_username(t.assignee) if t is not None else None,
            last_comment_at=t.last_comment_at if t is not None else None,
            url=_drill_url(c.candidate_id, case.get("cr"), c.baseline_id, comparison.REGRESSED),
            branch=c.candidate.branch, evalset_id=c.candidate.evalset_version.evalset_id,
        ))
    return _page(current, paginator, rows)


def triage_resolve_passed(run: Run) -> int:
    """A finished run's cases that passed in every repeat end the decisions on them on the
    run's branch: their triage becomes `fixed` (recorded in the audit log), so a later
    regression of the case is untriaged again. Returns how many were resolved. Two queries
    when nothing was triaged on the branch."""
    open_triage = list(Triage.objects.filter(evalset_id=run.evalset_version.evalset_id, branch=run.branch)
                       .exclude(status__in=NOT_DECIDED))
    if not open_triage:
        return 0
    outcomes: dict[str, list[str]] = {}
    for eval_id, status in (CaseResult.objects.filter(run=run, case__eval_id__in=[t.eval_id for t in open_triage])
                            .values_list("case__eval_id", "status")):
        outcomes.setdefault(eval_id, []).append(status)
    passed = {eval_id for eval_id, statuses in outcomes.items()
              if statuses and all(s == CaseResult.Status.PASSED for s in statuses)}
    resolved = 0
    for triage in open_triage:
        if triage.eval_id not in passed:
            continue
        before = triage.status
        with transaction.atomic():
            updated = Triage.objects.filter(pk=triage.pk, status=before).update(
                status=Triage.Status.FIXED, updated_at=timezone.now(), updated_by=None)
            if updated:
                resolved += 1
                audit_record(project=run.project, actor=None, verb=AuditEvent.Verb.TRIAGE_CHANGED, obj=triage,
                             summary=f"{triage.eval_id} passed again in run #{run.pk} on "
                                     f"{run.branch or 'no branch'}: status {before} → fixed",
                             data={"before": {"status": before}, "after": {"status": Triage.Status.FIXED},
                                   "eval_id": triage.eval_id, "branch": triage.branch, "triage": triage.pk,
                                   "candidate": run.pk, "baseline": triage.baseline_id})
    return resolved


# --- Regressions still open on a branch (the CI gate) ----------------------------------------

# Decisions that accept a regression: it no longer fails the gate of later runs on the branch.
# A confirmed regression, an open one, or one that was fixed and came back still does.
ACCEPTED = (Triage.Status.EXPECTED, Triage.Status.FLAKY)


@dataclass(frozen=True)
class OpenRegression:
    """A case that regressed in an earlier run on the candidate's branch and still fails in
    the candidate, neither fixed since (it has not passed in a run on the branch after the
    regression) nor accepted (triaged expected or flaky, or failing in the pinned run)."""

    eval_id: str
    regressed_in: int  # the run the regression landed in
    regressed_against: int  # the baseline it regressed against there
    candidate_outcome: str  # fail / error / mixed, in the candidate
    triage: str | None  # the case's triage status on the branch, if anyone triaged it


def open_regressions(*, baseline: Run, candidate: Run, cases: list[dict[str, Any]]) -> list[OpenRegression]:
    """The regressions that landed before `candidate` on its branch and that `candidate`
    still fails, beyond the ones its comparison with `baseline` shows itself: comparing with
    the run before keeps no memory (a regressed run becomes the next run's baseline, and the
    same failures then read as "unchanged fail"), this does.

    `cases` are the comparison's case entries (the summary's `cases`). Empty when the
    baseline is the eval set's pinned run: a person chose it, and what it fails is accepted.
    At most four queries, whatever the number of cases: the regressions of earlier runs on
    the branch (usually few), the last pass of those cases on the branch, their triage, and
    the pinned run's outcome for them."""
    evalset = candidate.evalset_version.evalset
    if evalset.baseline_run_id is not None and evalset.baseline_run_id == baseline.pk:
        return []
    failing = {case["id"]: case["co"] for case in cases
               if case.get("s") != comparison.REGRESSED and case.get("co") not in (None, comparison.PASS)}
    if not failing:
        return []
    before = (Q(comparison__candidate__created_at__lt=candidate.created_at)
              | Q(comparison__candidate__created_at=candidate.created_at, comparison__candidate_id__lt=candidate.pk))
    on_branch = ComparisonCase.objects.filter(
        before, comparison__candidate__evalset_version__evalset_id=evalset.pk,
        comparison__candidate__project_id=candidate.project_id, comparison__candidate__branch=candidate.branch,
        comparison__candidate__status=Run.Status.COMPLETED)
    landed: dict[str, tuple[Any, int, int]] = {}  # eval_id -> the latest regression: (when, run, baseline)
    for eval_id, when, run_id, baseline_id in (
            on_branch.filter(status=comparison.REGRESSED)
            .values_list("eval_id", "comparison__candidate__created_at", "comparison__candidate_id",
                         "comparison__baseline_id")):
        if eval_id in failing and (eval_id not in landed or (when, run_id) > landed[eval_id][:2]):
            landed[eval_id] = (when, run_id, baseline_id)
    if not landed:
        return []
    passed_since = dict(on_branch.filter(eval_id__in=list(landed), candidate_outcome=comparison.PASS)
                        .values("eval_id").annotate(last=Max("comparison__candidate__created_at"))
                        .values_list("eval_id", "last"))
    still = {eval_id for eval_id, (when, _, _) in landed.items()
             if passed_since.get(eval_id) is None or passed_since[eval_id] < when}
    if not still:
        return []
    decided = dict(Triage.objects.filter(evalset_id=evalset.pk, branch=candidate.branch, eval_id__in=list(still))
                   .values_list("eval_id", "status"))
    still -= {eval_id for eval_id, status in decided.items() if status in ACCEPTED}
    pinned = evalset.baseline_run_id
    if still and pinned is not None and pinned != candidate.pk:
        # A pinned run that fails the case too: whoever pinned it accepted that failure.
        still -= set(CaseResult.objects.filter(run_id=pinned, case__eval_id__in=list(still))
                     .exclude(status=CaseResult.Status.PASSED).values_list("case__eval_id", flat=True))
    order = {case["id"]: index for index, case in enumerate(cases)}
    return [OpenRegression(eval_id, landed[eval_id][1], landed[eval_id][2], failing[eval_id], decided.get(eval_id))
            for eval_id in sorted(still, key=order.__getitem__)]
