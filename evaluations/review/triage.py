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
allow-list. Only nh3's output is ever marked safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import markdown  # type: ignore[import-untyped,unused-ignore]
import nh3
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Max, OuterRef, QuerySet, Subquery, Window
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from evaluations.audit import audit_record
from evaluations.models import AuditEvent, CaseResult, Comment, Comparison, EvalSet, Membership, Project, Run, Triage
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


def triage_update(*, project: Project, evalset: EvalSet, eval_id: str, baseline: Run, candidate: Run,
                  status: str | None = None, assignee: Any = KEEP, actor: Any) -> Triage:
    """Get or create the case's triage and set its status and/or assignee.

    `status=None` keeps the status; `assignee` keeps the assignee unless given (None
    unassigns). The assignee must be a member of the project (any role). A change is
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
    if assignee is not KEEP and assignee is not None and not (
        Membership.objects.filter(project=project, user=assignee).exists()
    ):
        raise ValidationError(f"{assignee.get_username()} is not a member of {project.name}")

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
                         data={"before": before, "after": after, "eval_id": eval_id,
                               "baseline": baseline.pk, "candidate": candidate.pk})
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
                           "candidate": triage.candidate_id, "baseline": triage.baseline_id})
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


def render_comment(body: str) -> SafeString:
    """A comment's Markdown as sanitised HTML: emphasis, code, lists, quotes and links
    (http, https, mailto; rel="nofollow noopener"); everything else is text or dropped."""
    html = _markdown().convert(body)
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
    for comment in Comment.objects.filter(triage=triage).select_related("author").order_by("created_at", "pk"):
        node = nodes[comment.pk] = CommentNode(comment, render_comment(comment.body), [])
        parent = nodes.get(comment.parent_id) if comment.parent_id else None
        (parent.replies if parent is not None else roots).append(node)
    return roots


# --- Selectors ----------------------------------------------------------------------------


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


def triage_stamp_annotations() -> dict[str, Any]:
    """Expressions over a Comparison row that change whenever a triage its compare page shows
    is created or changed (those of the candidate's eval set and branch): a cached compare
    page is keyed by them (`comparison.stored_stamp`), in the same query as the comparison."""
    pair = Triage.objects.filter(evalset_id=OuterRef("candidate__evalset_version__evalset_id"),
                                 branch=OuterRef("candidate__branch"))
    return {
        "triage_count": Subquery(pair.order_by().values("evalset").annotate(n=Count("pk")).values("n")[:1]),
        "triage_last": Subquery(pair.order_by("-updated_at").values("updated_at")[:1]),
    }


def project_members(project: Project) -> list[Any]:
    """Who a case can be assigned to: the project's members, by username."""
    return [m.user for m in Membership.objects.filter(project=project).select_related("user")
            .order_by("user__username")]


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


def assigned_to(*, user: Any, project: Project, page: Any = 1) -> QueuePage:
    """The cases of `project` assigned to `user`, most recently changed first; a fixed
    number of queries whatever the page size (count, then the page with everything joined)."""
    first_result = (CaseResult.objects.filter(run_id=OuterRef("candidate_id"), case__eval_id=OuterRef("eval_id"))
                    .order_by("iteration", "pk").values("pk")[:1])
    triage: QuerySet[Triage] = (
        Triage.objects.filter(project=project, assignee=user)
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


def untriaged_count(project: Project) -> int:
    return len(_untriaged_items(project))


def assigned_count(*, user: Any, project: Project) -> int:
    return Triage.objects.filter(project=project, assignee=user).count()


def untriaged_regressions(*, project: Project, page: Any = 1) -> QueuePage:
    """The regressed cases of the latest completed run of each eval set on each branch (its
    stored comparisons) that nobody decided on that branch yet (no triage row, an open one,
    or a fixed one: the case had passed again).

    Two queries whatever the number of cases: the comparisons (with their runs and eval
    sets) and the triage rows of their eval sets and branches."""
    items = _untriaged_items(project)
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
                                   "eval_id": triage.eval_id, "candidate": run.pk,
                                   "baseline": triage.baseline_id})
    return resolved
