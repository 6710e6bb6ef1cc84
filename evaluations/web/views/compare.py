"""The compare page: a baseline run against a candidate, answer first.

`/compare/?candidate=<id>[&baseline=<id>][&status=regressed|...|all][&q=][&criterion=][&page=]`.
Everything the page shows comes from the stored comparison (`comparison.comparison_get`),
so a view costs the same few queries for 5 cases or 10,000; the filters live in the URL and
travel on to the drill-down, whose previous / next links walk the same filtered list.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from evaluations.converters import parse_id
from evaluations.models import Membership, Run, Triage
from evaluations.review import causes as cause_reads
from evaluations.review import comparison
from evaluations.review.baselines import baseline_choice, baseline_words, branch_difference, mismatches, reason_for
from evaluations.review.comparison import STATUSES, CaseRow, StatusStyle, signed, signed_seconds
from evaluations.review.findings import Finding, findings
from evaluations.review.notices import compared_notices
from evaluations.review.selectors import Walk, case_link, label_of, run_label
from evaluations.review.triage import (
    ASSIGNABLE_ROLES,
    TRIAGE_COLUMNS,
    branch_decisions,
    decisions_on_branch,
    thread_url,
    triage_by_case,
    triage_cells,
    triage_stamp_annotations,
)
from evaluations.review.verdict import MIN_CASES, NO_CHANGE, NOT_ENOUGH_DATA, p_shown, reproducibility_line
from evaluations.runs import exports
from evaluations.runs.listing import branch_stats
from evaluations.runs.selectors import Notice, runs_visible_to
from evaluations.web.charts import fmt_duration, to_html
from evaluations.web.charts.compare import (
    DeltaBar,
    ScatterPoint,
    TagPair,
    delta_bars,
    latency_ecdf,
    paired_scatter,
    tag_pass_rates,
)
from evaluations.web.views.common import SESSION_PROJECT_KEY, enter_project

CASES_PER_PAGE = 50
BASELINE_CHOICES = 50
CAUSE_BULK = 200  # a cause's cases its bulk forms post: as many as bulk triage takes (views/review.py)
BODY_CACHE_SECONDS = 24 * 3600
# Columns of a run and its eval set that the compare page's request path never reads.
_UNREAD_FIELDS = ("target", "input_overrides", "eval_ids", "error",
                  "evalset_version__description", "evalset_version__metadata", "evalset_version__default_config",
                  "evalset_version__evaluator_config", "evalset_version__warnings", "evalset_version__tags")
FILTERS = ("all", *STATUSES)


@dataclass(frozen=True)
class LinkedCase:
    row: CaseRow
    url: str | None
    triage: Triage | None = None  # the case's triage in this comparison, if anyone triaged it
    # on a feature branch: the default branch's standing decision on the case, and its thread
    main_triage: Triage | None = None
    main_url: str = ""

    @property
    def needs_triage(self) -> bool:
        """A regressed or otherwise changed case: one the table shows a triage state for."""
        return self.row.status.key not in (comparison.UNCHANGED_PASS, comparison.UNCHANGED_FAIL)


@dataclass(frozen=True)
class CriterionRow:
    name: str
    n: int
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str
    judged: int
    pass_to_fail: int
    fail_to_pass: int
    p_value: float
    flips_verdict: str

    @property
    def direction(self) -> str:
        """worse / better / same, for the arrow and its colour."""
        if self.delta is None or self.verdict in (NO_CHANGE, NOT_ENOUGH_DATA) or round(self.delta, 4) == 0:
            return "same"
        return "worse" if self.delta < 0 else "better"

    @property
    def delta_text(self) -> str:
        return signed(self.delta, 3)

    @property
    def ci_text(self) -> str:
        if self.ci_low is None or self.ci_high is None:
            return ""
        return f"[{signed(self.ci_low, 3, sign=False)}, {signed(self.ci_high, 3, sign=False)}]"

    @property
    def p_text(self) -> str:
        """The flips' p-value, or "" where it is no evidence (one pair, no flip: verdict.p_shown)."""
        if not p_shown(self.judged, self.pass_to_fail, self.fail_to_pass):
            return ""
        return "< 0.001" if self.p_value < 0.001 else f"{self.p_value:.3f}"


@dataclass(frozen=True)
class LatencyRow:
    label: str
    baseline: str
    candidate: str
    delta: str
    direction: str  # worse (slower) / better / same


def latency_rows(latency: dict[str, Any]) -> list[LatencyRow]:
    before, after = latency["baseline"], latency["candidate"]
    rows = []
    for key, label in (("p50", "p50"), ("p95", "p95"), ("mean", "mean")):
        x, y = before.get(key), after.get(key)
        delta = None if x is None or y is None else y - x
        direction = "same" if delta is None or abs(delta) < 0.005 else ("worse" if delta > 0 else "better")
        rows.append(LatencyRow(label, _seconds(x), _seconds(y), signed_seconds(delta), direction))
    rows.append(LatencyRow("results timed", f"{before['count']:,}", f"{after['count']:,}", "", "same"))
    return rows


def _seconds(value: float | None) -> str:
    return fmt_duration(value)


@dataclass(frozen=True)
class FilterChip:
    key: str
    style: StatusStyle | None  # None for "all"
    count: int
    url: str
    selected: bool


@dataclass(frozen=True)
class CauseFilter:
    pk: int
    signature: str
    of_candidate: bool  # a gone cause is the baseline's: nothing of the candidate to triage
    eval_ids: tuple[str, ...]  # the first MAX_BULK of its cases, for the bulk forms
    triage_keys: tuple[str, ...]
    clear_url: str
    triage_choices: tuple[tuple[str, str], ...] = tuple(Triage.Status.choices)
    assignees: tuple[tuple[int, str], ...] = ()  # members and admins: who the cause's cases can go to


@dataclass(frozen=True)
class ComparePage:
    baseline: Run
    candidate: Run
    baseline_label: str
    candidate_label: str
    live: bool  # a run is still going: computed afresh, not stored
    headline: str
    counts: list[tuple[StatusStyle, int]]
    total_cases: int
    criteria: list[CriterionRow]
    latency: list[LatencyRow]
    status: str
    q: str
    filters: list[FilterChip]
    cases: Page  # of LinkedCase
    criterion: str
    walk: Walk
    scatter_html: str
    latency_html: str
    deltas_html: str
    tags_html: str
    resamples: int
    per_case: str = ""  # is each flip reproducible (evaluations.review.verdict)
    mismatches: tuple[str, ...] = ()  # what makes the two runs unlike (evaluations.review.baselines)
    branch_note: str = ""  # "feat/x compared with main": said once, not a warning
    main_branch: str = ""  # the eval set's default branch, when the candidate is on another
    regressions: tuple[Finding, ...] = ()
    improvements: tuple[Finding, ...] = ()
    causes: cause_reads.RunCauses | None = None  # the candidate's, against the baseline's
    cause: CauseFilter | None = None  # the cases table shows this cause's cases only
    notices: tuple[Notice, ...] = ()  # criteria the candidate could not score, same or new against the baseline

    @property
    def unscored_url(self) -> str:
        return reverse("compare") + "?" + urlencode({"baseline": self.baseline.pk, "candidate": self.candidate.pk,
                                                     "status": comparison.UNSCORED}) + "#cases"

    @property
    def cause_base(self) -> str:
        """The URL a cause's id completes: the cases table, every status, of that cause."""
        params: dict[str, Any] = {"baseline": self.baseline.pk, "candidate": self.candidate.pk, "status": "all"}
        if self.criterion:
            params["criterion"] = self.criterion
        return reverse("compare") + "?" + urlencode(params) + "&cause="
    min_cases: int = MIN_CASES  # below this a criterion's change is not called (verdict.py)

    @property
    def regressed_count(self) -> int:
        return dict((style.key, n) for style, n in self.counts).get(comparison.REGRESSED, 0)

    @property
    def improved_count(self) -> int:
        return dict((style.key, n) for style, n in self.counts).get(comparison.IMPROVED, 0)


def compare_page(*, baseline: Run, candidate: Run, source: comparison.CaseSource, status: str, q: str,
                 criterion: str, page: Any, cause: int | None = None) -> ComparePage:
    """The page from the comparison's head and one page of its cases (`comparison.CaseSource`):
    the same few queries for 5 cases or 100,000."""
    summary = source.head
    chosen = cause_reads.cause_of(run_pks=[baseline.pk, candidate.pk], cause_pk=cause)
    only = cause_reads.eval_ids_of(chosen) if chosen is not None else None
    criteria = [CriterionRow(**c) for c in summary["criteria"]]
    names = [c.name for c in criteria]
    if criterion not in names:
        lead = comparison.lead_criteria(summary)
        criterion = lead[0]["name"] if lead else (names[0] if names else "")
    walk = Walk(baseline.pk, candidate.pk, status, q)
    paginated = Paginator(source.cases(status, q, only), CASES_PER_PAGE).get_page(page)
    rows = []
    eval_ids = [raw["id"] for raw in paginated]
    triage = triage_by_case(baseline=baseline, candidate=candidate, eval_ids=eval_ids)
    evalset_id = candidate.evalset_version.evalset_id
    _, defaults = branch_stats(project=candidate.project, evalset_ids=[evalset_id])
    main_branch = defaults.get(evalset_id, candidate.branch)
    failing = [raw["id"] for raw in paginated if raw["co"] in (comparison.FAIL, comparison.ERROR, comparison.MIXED)]
    on_main = (decisions_on_branch(evalset_id=evalset_id, branch=main_branch, eval_ids=failing)
               if main_branch != candidate.branch else {})
    for raw in paginated.object_list:
        pair = raw["sc"].get(criterion)
        row = comparison.case_row(raw, (pair[0], pair[1]) if pair else None)
        decided = on_main.get(row.eval_id)
        rows.append(LinkedCase(row, case_link(row, baseline, candidate, walk), triage.get(row.eval_id),
                               decided, thread_url(decided) if decided is not None else ""))
    paginated.object_list = rows

    base_url = reverse("compare")
    filters = []
    for key in FILTERS:
        count = comparison.total_of(summary) if key == "all" else summary["counts"].get(key, 0)
        if key != "all" and not count and key != status:
            continue
        params: dict[str, Any] = {"baseline": baseline.pk, "candidate": candidate.pk, "status": key}
        if q:
            params["q"] = q
        if criterion:
            params["criterion"] = criterion
        if chosen is not None:
            params["cause"] = chosen.pk
        filters.append(FilterChip(key, STATUSES.get(key), count, base_url + "?" + urlencode(params), key == status))

    latency = summary["latency"]
    found = findings(source, candidate, (comparison.REGRESSED, comparison.IMPROVED))
    return ComparePage(
        baseline=baseline, candidate=candidate, baseline_label=run_label(baseline),
        candidate_label=run_label(candidate), live=not (baseline.is_finished and candidate.is_finished),
        headline=comparison.headline(summary), counts=list(comparison.statuses_in(summary)),
        total_cases=comparison.total_of(summary), criteria=criteria, latency=latency_rows(latency), status=status,
        q=q, filters=filters, cases=paginated, criterion=criterion, walk=walk,
        scatter_html=_scatter(source, criterion, candidate, walk) if criterion else "",
        latency_html=to_html(latency_ecdf(latency["baseline"]["quantiles"], latency["candidate"]["quantiles"]))
        if latency["baseline"]["quantiles"] or latency["candidate"]["quantiles"] else "",
        deltas_html=to_html(delta_bars([DeltaBar(c.name, c.delta, c.ci_low, c.ci_high, c.n, c.verdict)
                                        for c in criteria if c.delta is not None and c.ci_low is not None
                                        and c.ci_high is not None])) if any(c.delta is not None for c in criteria)
        else "",
        tags_html=to_html(tag_pass_rates([TagPair(**t) for t in summary["tags"]])) if summary["tags"] else "",
        resamples=summary["resamples"],
        per_case="" if summary["counts"].get(comparison.PENDING) else reproducibility_line(summary),
        mismatches=tuple(mismatches(baseline, candidate)), branch_note=branch_difference(baseline, candidate),
        main_branch=main_branch if main_branch != candidate.branch else "",
        regressions=tuple(found[comparison.REGRESSED]), improvements=tuple(found[comparison.IMPROVED]),
        causes=cause_reads.compared_causes(baseline=baseline, candidate=candidate),
        cause=_cause_filter(chosen, baseline, candidate, status, criterion) if chosen is not None else None,
        notices=compared_notices(baseline=baseline, candidate=candidate),
    )


def _cause_filter(chosen: Any, baseline: Run, candidate: Run, status: str, criterion: str) -> CauseFilter:
    """The chosen cause with what its bulk forms post: its first `CAUSE_BULK` cases (one query)."""
    of_candidate = chosen.cause_set_id == candidate.pk
    eval_ids = tuple(dict.fromkeys(
        chosen.results.order_by("eval_id").values_list("eval_id", flat=True)[:CAUSE_BULK * 4]))[:CAUSE_BULK]
    params = {"baseline": baseline.pk, "candidate": candidate.pk, "status": status}
    if criterion:
        params["criterion"] = criterion
    assignees = tuple(Membership.objects.filter(project_id=candidate.project_id, role__in=ASSIGNABLE_ROLES,
                                                user__is_active=True).order_by("user__username")
                      .values_list("user_id", "user__username")) if of_candidate else ()
    return CauseFilter(chosen.pk, chosen.signature, of_candidate, eval_ids if of_candidate else (),
                       tuple(f"{candidate.pk}:{baseline.pk}:{e}" for e in eval_ids) if of_candidate else (),
                       reverse("compare") + "?" + urlencode(params) + "#cases", assignees=assignees)


def _scatter(source: comparison.CaseSource, criterion: str, candidate: Run, walk: Walk) -> str:
    """The paired scatter of one criterion, from its grouped points (`comparison.scatter_groups`:
    one point per score pair and status, saying how many cases it stands for; past
    `SCATTER_MAX_POINTS` every moved case and a sample of the rest, and the chart says so)."""
    groups, scored = source.scatter(criterion)
    # One reverse() for all points: a URL per point would cost more than the chart.
    marker = 987654321
    pattern = reverse("run_case", args=[candidate.pk, marker])
    query = walk.query()
    note = ""
    shown = sum(group[5] for group in groups)
    if shown < scored:  # the unchanged cases were sampled
        note = f"showing {shown:,} of {scored:,} cases: every changed one"
    points = [ScatterPoint(eval_id, x, y, status, pattern.replace(str(marker), str(cr)) + query, count)
              for x, y, status, eval_id, cr, count in groups]
    return to_html(paired_scatter(points, criterion, note=note)) if points else ""


def _pair(request: HttpRequest, candidate_id: int) -> tuple[Run, Run | None, str]:
    """The candidate run and the `?baseline=` run (default: the eval set's pinned run, else the
    previous completed one), both visible to the user and of one project, else 404, and why that
    baseline (`baselines.PINNED`, ..., `CHOSEN`). Both in one query, without the columns the
    compare pages never read (they are requested often)."""
    baseline_id = parse_id(request.GET.get("baseline"))
    if request.GET.get("baseline") and baseline_id is None:
        raise Http404("no such run")
    found = {run.pk: run for run in runs_visible_to(request.user)
             .select_related("project", "evalset_version__evalset").defer(*_UNREAD_FIELDS)
             .filter(pk__in={candidate_id, baseline_id or candidate_id})}
    candidate = found.get(candidate_id)
    if candidate is None:
        raise Http404("no such run")
    if baseline_id is None:
        choice = baseline_choice(candidate)  # the one default rule (comparison.default_baseline)
        return candidate, choice.run if choice else None, choice.reason if choice else ""
    baseline = found.get(baseline_id)
    if baseline is None or baseline.project_id != candidate.project_id:
        raise Http404("no such run")
    return candidate, baseline, reason_for(baseline=baseline, candidate=candidate)


@login_required
@require_GET
def compare(request: HttpRequest) -> HttpResponse:
    candidate_id = parse_id(request.GET.get("candidate"))
    if candidate_id is None:
        return render(request, "evaluations/compare/missing.html",
                      {"message": "Choose a candidate run to compare: /compare/?candidate=<run id>."}, status=400)
    partial = bool(request.htmx and not request.htmx.history_restore_request)  # type: ignore[attr-defined]
    key = _page_key(request, candidate_id, partial)
    if key is not None:
        cached = cache.get(key)  # a team server's Redis being away is a miss (evaluations/cache.py)
        if cached is not None:
            response = HttpResponse(cached)
            patch_vary_headers(response, ["HX-Request"])
            return response
    candidate, baseline, reason = _pair(request, candidate_id)
    enter_project(request, candidate.project)
    context: dict[str, Any] = {"candidate": candidate, "candidate_label": run_label(candidate),
                               "evalset": candidate.evalset_version.evalset}
    if not partial:
        context["choices"] = [(pk, label_of(pk, name, model, branch, commit)) for pk, name, model, branch, commit in
                              Run.objects.filter(evalset_version__evalset_id=candidate.evalset_version.evalset_id)
                              .exclude(pk=candidate.pk).exclude(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
                              .order_by("-created_at", "-pk")
                              .values_list("pk", "name", "model", "branch", "git_commit")[:BASELINE_CHOICES]]
    if baseline is None or baseline.pk == candidate.pk:
        context["baseline_id"] = baseline.pk if baseline else None
        return render(request, "evaluations/compare/missing.html", context,
                      status=400 if baseline is not None else 200)

    if not partial and all(pk != baseline.pk for pk, _ in context["choices"]):  # a pinned baseline older than those
        context["choices"] = [(baseline.pk, run_label(baseline)), *context["choices"]]
    context.update(baseline=baseline, baseline_id=baseline.pk, baseline_label=run_label(baseline),
                   baseline_named=baseline_words(baseline=baseline, candidate=candidate, reason=reason))
    body = _body(request, baseline, candidate, partial)
    if partial:
        response = HttpResponse(body)
    else:
        response = render(request, "evaluations/compare/compare.html", {**context, "body": body})
    patch_vary_headers(response, ["HX-Request"])
    if key is not None and response.status_code == 200:
        cache.set(key, response.content, timeout=BODY_CACHE_SECONDS)
    return response


# The whole page, for a pair of finished runs with a stored comparison: what a team reloads
# most while reviewing, and what a CI job's link opens. Its HTML is cached under everything
# it shows that can change, read in one SQL statement (below); a request that finds it costs
# that statement and the session's and user's, and no template. Each part is text, so one
# UNION serves both PostgreSQL and SQLite.
PAGE_CACHE_VERSION = 3  # 2: the header names the baseline (pinned or not, what differs); 3: notices, issue 41
_FINGERPRINT_SQL = """
SELECT 'r', CAST(r.id AS TEXT), CAST(r.project_id AS TEXT), r.status, CAST(r.finished_at AS TEXT),
       r.name, r.model, r.branch, r.git_commit, CAST(e.id AS TEXT), e.name, e.eval_set_id,
       CASE WHEN NOT EXISTS (SELECT 1 FROM evaluations_project ap WHERE ap.id = r.project_id
                             AND ap.archived_at IS NOT NULL)
             AND (%(superuser)s = 1 OR EXISTS (SELECT 1 FROM evaluations_membership m
            WHERE m.project_id = r.project_id AND m.user_id = %(user)s)) THEN '1' ELSE '0' END,
       CAST(e.baseline_run_id AS TEXT)
  FROM evaluations_run r
  JOIN evaluations_evalsetversion v ON v.id = r.evalset_version_id
  JOIN evaluations_evalset e ON e.id = v.evalset_id
 WHERE r.id IN (%(baseline)s, %(candidate)s)
UNION ALL
SELECT 'c', CAST(c.id AS TEXT), CAST(c.version AS TEXT), CAST(c.computed_at AS TEXT),
       CAST(c.baseline_finished_at AS TEXT), CAST(c.candidate_finished_at AS TEXT),
       (SELECT CAST(COUNT(*) AS TEXT) FROM evaluations_triage t
         JOIN evaluations_run tc ON tc.id = %(candidate)s
         JOIN evaluations_evalsetversion tv ON tv.id = tc.evalset_version_id
         WHERE t.evalset_id = tv.evalset_id AND t.branch = tc.branch),
       (SELECT CAST(MAX(t.updated_at) AS TEXT) FROM evaluations_triage t
         JOIN evaluations_run tc ON tc.id = %(candidate)s
         JOIN evaluations_evalsetversion tv ON tv.id = tc.evalset_version_id
         WHERE t.evalset_id = tv.evalset_id AND t.branch = tc.branch),
       NULL, NULL, NULL, NULL, NULL, NULL
  FROM evaluations_comparison c
 WHERE c.baseline_id = %(baseline)s AND c.candidate_id = %(candidate)s
UNION ALL
SELECT 'p', CAST(p.id AS TEXT), p.slug, p.name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM evaluations_project p
 WHERE p.archived_at IS NULL
   AND (%(superuser)s = 1 OR p.id IN (SELECT m.project_id FROM evaluations_membership m WHERE m.user_id = %(user)s))
UNION ALL
SELECT * FROM (
  SELECT 'o', CAST(o.id AS TEXT), o.name, o.model, o.branch, o.git_commit,
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM evaluations_run o
    JOIN evaluations_evalsetversion ov ON ov.id = o.evalset_version_id
   WHERE ov.evalset_id = (SELECT v.evalset_id FROM evaluations_run r
                            JOIN evaluations_evalsetversion v ON v.id = r.evalset_version_id
                           WHERE r.id = %(candidate)s)
     AND o.id <> %(candidate)s AND o.status NOT IN ('queued', 'running')
   ORDER BY o.created_at DESC, o.id DESC
   LIMIT %(choices)s
) choices
"""
_FINISHED = {Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED}


def _page_key(request: HttpRequest, candidate_id: int, partial: bool) -> str | None:
    """The cache key of this request's page, when it is one that can be served from the cache:
    an explicit baseline, both runs visible, of one project, finished, their comparison stored
    and current, the header's project already the runs' (else the view records it in the
    session), and no message waiting to be shown. Everything the page shows that can change is
    in the key: both runs' labels and states, the eval set's name, the baseline choices, the
    stored comparison and the pair's triage state, the user and their projects, the CSRF
    secret the page's forms carry, and the query string. None otherwise."""
    baseline_id = parse_id(request.GET.get("baseline"))
    csrf_secret = request.META.get("CSRF_COOKIE")
    user = request.user
    if (baseline_id is None or baseline_id == candidate_id or not csrf_secret or not user.is_authenticated
            or request.COOKIES.get("messages") or request.session.get("_messages")):
        return None
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, {"baseline": baseline_id, "candidate": candidate_id, "user": user.pk,
                                          "superuser": 1 if user.is_superuser else 0, "choices": BASELINE_CHOICES})
        rows = cursor.fetchall()
    runs = {int(row[1]): row for row in rows if row[0] == "r"}
    stored = [row for row in rows if row[0] == "c"]
    found_baseline, found_candidate = runs.get(baseline_id), runs.get(candidate_id)
    if found_baseline is None or found_candidate is None or len(stored) != 1:
        return None
    if (any(run[12] != "1" or run[3] not in _FINISHED or run[4] is None for run in runs.values())
            or found_baseline[2] != found_candidate[2]
            or str(request.session.get(SESSION_PROJECT_KEY)) != found_candidate[2]):
        return None
    _, _, version, _, baseline_finished, candidate_finished, *_ = stored[0]
    if (version != str(comparison.SUMMARY_VERSION) or baseline_finished != found_baseline[4]
            or candidate_finished != found_candidate[4]):
        return None
    identity = json.dumps([PAGE_CACHE_VERSION, user.pk, user.get_username(), csrf_secret, partial,
                           sorted(request.GET.lists()), sorted(rows, key=lambda row: (row[0], row[1]))])
    return "compare-page:" + hashlib.sha256(identity.encode()).hexdigest()


def _body(request: HttpRequest, baseline: Run, candidate: Run, partial: bool) -> SafeString:
    """The page below its head (or, for htmx, just the cases table) as HTML: nothing in it
    depends on who is looking.

    Two finished runs' comparison never changes until a run finishes again, so its HTML is
    kept in the cache, keyed by the stored comparison, the pair's triage state and the
    filters: a page that costs ~100 ms to build at 10,000 cases (decoding the summary,
    drawing four figures) is then a cache read."""
    params = [request.GET.get(name, "") for name in ("status", "q", "criterion", "page", "cause")]
    stamp = comparison.stored_stamp(baseline=baseline, candidate=candidate, **triage_stamp_annotations())
    key = None
    if stamp is not None:
        # the whole query string: the table's paging links repeat it ({% querystring %})
        # a cause's bulk forms carry a CSRF token: that body is the user's own
        identity = json.dumps([stamp, partial, sorted(request.GET.lists()),
                               request.META.get("CSRF_COOKIE") if params[4] else None])
        key = "compare-body:" + hashlib.sha256(identity.encode()).hexdigest()
        cached = cache.get(key)
        if cached is not None:
            return mark_safe(cached)  # noqa: S308 - our own rendered (escaped) template output
    source = comparison.comparison_source(baseline=baseline, candidate=candidate)
    status = params[0] or comparison.default_filter(source.head["counts"])
    if status not in FILTERS:
        status = "all"
    page = compare_page(baseline=baseline, candidate=candidate, source=source, status=status,
                        q=params[1].strip(), criterion=params[2], page=params[3] or 1, cause=parse_id(params[4]))
    template = "evaluations/compare/_cases.html" if partial else "evaluations/compare/_body.html"
    body = render_to_string(template, {"page": page}, request)
    if key is not None:
        cache.set(key, str(body), timeout=BODY_CACHE_SECONDS)
    return body


RUN_COLUMNS = ("baseline_run", "baseline_branch", "baseline_evalset_version",
               "candidate_run", "candidate_branch", "candidate_evalset_version")


def _with_runs(rows: Any, baseline: Run, candidate: Run) -> Any:
    """The two runs, their branches and eval-set versions as the last columns of every row, so a
    downloaded comparison says what it compared wherever it goes."""
    iterator = iter(rows)
    header = next(iterator, None)
    if header is None:
        return
    yield [*header, *RUN_COLUMNS]
    said = [baseline.pk, baseline.branch, baseline.evalset_version.number,
            candidate.pk, candidate.branch, candidate.evalset_version.number]
    for row in iterator:
        yield [*row, *said]


@login_required
@require_GET
def compare_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The comparison's cases as CSV (`?baseline=&candidate=`, and the page's `status` / `q`
    filters): one row per case with both outcomes, per-criterion scores and deltas, and the
    case's triage on the candidate's branch (status, assignee, who decided, last comment)."""
    candidate, baseline, _ = _pair(request, parse_id(request.GET.get("candidate")) or 0)
    if baseline is None or baseline.pk == candidate.pk:
        raise Http404("no baseline to compare with")
    summary = comparison.comparison_get(baseline=baseline, candidate=candidate)
    status = request.GET.get("status", "all")
    cases = comparison.filter_cases(summary, status if status in FILTERS else "all", request.GET.get("q", ""))
    decided, comments = branch_decisions(evalset_id=candidate.evalset_version.evalset_id, branch=candidate.branch)

    def with_triage() -> Any:  # each case's decision on the candidate's branch and its last comment
        rows = iter(_with_runs(comparison.csv_rows(summary, cases), baseline, candidate))
        yield [*next(rows), *TRIAGE_COLUMNS]
        for row in rows:
            t = decided.get(row[0])
            yield [*row, *triage_cells(t, comments.get(t.pk) if t is not None else None)]

    lines: Any = with_triage()
    if candidate.is_finished:  # a last column: the candidate's causes of the case
        lines = cause_reads.with_causes_column(lines, candidate)
    response = StreamingHttpResponse(exports.csv_lines(lines), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="compare-{baseline.pk}-{candidate.pk}.csv"'
    return response

