"""Reads shared by the review pages and the API: how a run is labelled, the comparison a
drill-down belongs to (and the links that walk it), where a case's failing streak began on
the trend, and the trajectory settings a run scored with (so a diff shows what the score saw)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from pydantic import ValidationError

from evaluations.evaluators.diffing import ArgRules
from evaluations.evaluators.trajectory import AdkTrajectoryOptions, TrajectoryOptions
from evaluations.models import Run
from evaluations.review import comparison
from evaluations.review.comparison import CaseRow
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
