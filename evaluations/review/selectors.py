"""Reads shared by the review pages and the API: how a run is labelled, the comparison a
drill-down belongs to (and the links that walk it), where a case's failing streak began on
the trend, and the trajectory settings a run scored with (so a diff shows what the score saw)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count
from django.urls import reverse
from pydantic import ValidationError

from evaluations.evaluators.diffing import ArgRules
from evaluations.evaluators.trajectory import AdkTrajectoryOptions, TrajectoryOptions
from evaluations.models import ComparisonCase, Project, Run
from evaluations.review import comparison
from evaluations.review.baselines import baseline_choice, baseline_label, branch_difference, mismatches, unlike_warning
from evaluations.review.comparison import FLAKY, IMPROVED, MIXED, REGRESSED, CaseRow, comparison_source, stored_counts
from evaluations.runs import listing as run_listing
from evaluations.runs.listing import HomePage
from evaluations.schemas.evalset import EvalConfig, MatchType


def run_label(run: Run) -> str:
    """`#12 nightly · gpt-x · main@abc1234`: the run and the labels that tell runs apart."""
    return label_of(run.pk, run.name, run.model, run.branch, run.git_commit)


def label_of(pk: int, name: str, model: str, branch: str, git_commit: str) -> str:
    parts = [f"#{pk}" + (f" {name}" if name else "")]
    if model:
        parts.append(model)
    if branch or git_commit:
        parts.append(f"{branch}@{git_commit[:7]}" if branch and git_commit else branch or git_commit[:7])
    return " · ".join(parts)


@dataclass(frozen=True)
class Walk:
    """The comparison a drill-down belongs to, as URL parameters that travel with it."""

    baseline: int
    candidate: int
    status: str
    q: str

    def query(self) -> str:
        params: dict[str, Any] = {"baseline": self.baseline, "status": self.status}
        if self.q:
            params["q"] = self.q
        return "?" + urlencode(params)

    def compare_url(self, page: int = 1) -> str:
        params: dict[str, Any] = {"baseline": self.baseline, "candidate": self.candidate, "status": self.status}
        if self.q:
            params["q"] = self.q
        if page > 1:
            params["page"] = page
        return reverse("compare") + "?" + urlencode(params)


def case_link(row: CaseRow, baseline: Run, candidate: Run, walk: Walk) -> str | None:
    """A case's drill-down: the candidate's result with the comparison along; a case only
    the baseline has opens the baseline's result on its own."""
    if row.candidate_result is not None:
        return reverse("run_case", args=[candidate.pk, row.candidate_result]) + walk.query()
    if row.baseline_result is not None:
        return reverse("run_case", args=[baseline.pk, row.baseline_result])
    return None


TREND_RUNS = 30


FAILING = (comparison.FAIL, comparison.ERROR)


def first_failing(cells: list[str]) -> int | None:
    """The run (index, oldest first) where the case's current failing streak began, or None
    when it passes in its latest run. Runs without the case neither break nor start a streak;
    mixed repeats (flaky) break it: they are not a clean failure."""
    start: int | None = None
    for index, cell in enumerate(cells):
        if cell in FAILING:
            if start is None:
                start = index
        elif cell != "none":
            start = None
    return start


def branch_streak(cells: list[str], branches: list[str]) -> tuple[int | None, int]:
    """Where a case's current failing streak began (index, oldest first) and how many runs it
    failed in since, counted over the runs on the latest run's branch only, as its causes'
    streaks are (`causes.causes_since`): a passing run of another branch does not end it. The
    trend page and its API say it alike: "since #10"."""
    if not cells:
        return None, 0
    on_branch = [i for i, branch in enumerate(branches) if branch == branches[-1]]
    streak = first_failing([cells[i] for i in on_branch])
    if streak is None:
        return None, 0
    since = on_branch[streak]
    return since, sum(1 for i in on_branch if i >= since and cells[i] in FAILING)


def trajectory_settings(config: dict[str, Any]) -> tuple[MatchType, ArgRules]:
    """The match type and argument rules the run scored trajectories with, so the diff shows
    what the score saw: `trajectory_match`'s, else ADK's `tool_trajectory_avg_score`'s, else
    IN_ORDER with exact arguments."""
    try:
        parsed = EvalConfig.model_validate(config)
    except ValidationError:
        return MatchType.IN_ORDER, ArgRules()
    for name, criterion in parsed.criteria.items():
        if (criterion.evaluator or name) == "trajectory_match":
            try:
                options = TrajectoryOptions.model_validate(criterion.options)
            except ValidationError:
                continue
            return options.match_type or criterion.match_type, options.rules()
    for name, criterion in parsed.criteria.items():
        if (criterion.evaluator or name) == "tool_trajectory_avg_score":
            try:
                adk = AdkTrajectoryOptions.model_validate(criterion.options)
            except ValidationError:
                continue
            return adk.match_type or criterion.match_type, ArgRules(mode="ignore" if adk.ignore_args else "exact")
    return MatchType.IN_ORDER, ArgRules()


def home_page(*, project: Project) -> HomePage:
    """The home page's runs (`runs.listing.home_page`), each branch's latest completed run
    linked to its comparison with the default baseline (named in words), and how many cases
    are newly flaky there (flaky in the candidate, not already mixed in the baseline; one
    GROUP BY over the stored comparisons' case rows)."""
    page = run_listing.home_page(project=project)
    completed = {b.latest.pk for b in page.rows if b.latest.status == Run.Status.COMPLETED}
    if not completed:
        return page
    latest = {run.pk: run for run in Run.objects.filter(pk__in=completed)
              .select_related("evalset_version__evalset__baseline_run")}
    links = {pk: baseline_link(run) for pk, run in latest.items()}
    flaky = _new_flaky({(link.baseline_pk, link.candidate_pk) for link in links.values() if link is not None})
    trends = []
    for t in page.trends:
        branches = []
        for b in t.branches:
            link = links.get(b.latest.pk)
            if link is not None:
                link = replace(link, new_flaky=flaky.get((link.baseline_pk, link.candidate_pk), 0))
            branches.append(replace(b, vs=link))
        trends.append(replace(t, default=branches[0], others=branches[1:]))
    return replace(page, trends=trends)


def _new_flaky(pairs: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(baseline, candidate) -> cases flaky in the candidate that were not in the baseline."""
    if not pairs:
        return {}
    rows = (ComparisonCase.objects.filter(comparison__candidate_id__in={c for _, c in pairs}, status=FLAKY,
                                          candidate_outcome=MIXED)
            .exclude(baseline_outcome=MIXED).order_by()
            .values_list("comparison__baseline_id", "comparison__candidate_id").annotate(n=Count("pk")))
    return {(b, c): n for b, c, n in rows if (b, c) in pairs}


@dataclass(frozen=True)
class BaselineLink:
    """A run against its default baseline, as home and the run page show it: "2 regressions
    vs #7 →" and the pass-rate change, linking to the comparison."""

    candidate_pk: int
    baseline_pk: int
    reason: str
    mismatches: tuple[str, ...]
    regressions: int | None  # None while either run is still going
    improvements: int | None
    pass_rate_delta: float | None  # candidate - baseline, as a fraction
    label: str = ""  # "vs #12 · main · pinned" (baselines.baseline_label)
    branch_note: str = ""  # "feat/x compared with main", said once and calmly
    new_flaky: int | None = None  # home adds it

    @property
    def warning(self) -> str:
        """"⚠ not like for like: model a → b", or "" (branches alone do not warn)."""
        return unlike_warning(self.mismatches)

    @property
    def url(self) -> str:
        from django.urls import reverse

        return reverse("compare") + f"?baseline={self.baseline_pk}&candidate={self.candidate_pk}"

    @property
    def delta_points(self) -> int | None:
        return None if self.pass_rate_delta is None else round(self.pass_rate_delta * 100)


def _pass_rate(run: Run) -> float | None:
    from evaluations.runs.selectors import progress_of

    return progress_of(run).pass_rate


def baseline_link(candidate: Run) -> BaselineLink | None:
    """The candidate's default baseline with the comparison's counts (the stored comparison's
    compact columns, computed and stored on first use); None without a baseline."""
    choice = baseline_choice(candidate)
    if choice is None:
        return None
    baseline = choice.run
    regressions = improvements = None
    if baseline.is_finished and candidate.is_finished:
        counts = (stored_counts(baseline=baseline, candidate=candidate)  # one small column
                  or comparison_source(baseline=baseline, candidate=candidate).head["counts"])
        regressions, improvements = counts.get(REGRESSED, 0), counts.get(IMPROVED, 0)
    before, after = _pass_rate(baseline), _pass_rate(candidate)
    return BaselineLink(candidate.pk, baseline.pk, choice.reason, tuple(mismatches(baseline, candidate)),
                        regressions, improvements, None if before is None or after is None else after - before,
                        label=baseline_label(baseline_pk=baseline.pk, baseline_branch=baseline.branch,
                                             reason=choice.reason, candidate_branch=candidate.branch),
                        branch_note=branch_difference(baseline, candidate))
