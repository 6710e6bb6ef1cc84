"""Judge calibration: how far a project's LLM judges agree with the people who graded them.

A criterion is **LLM-judged** when its scores say who judged them: evalsite's judges
(`llm_judge`, UiPath's LLM judges, ADK's judged criteria) write
`justification["judge"] = {"model", "prompt_version"}` on every score
(`evaluators.judge.stamp_judge`); DeepEval results imported with `evaluation_model` are
judged by that model (no prompt version is recorded: it shows as "not recorded").

Per criterion, judge model and prompt version, the judge's conversation-level pass/fail is
set against people's verdict on the same result: the majority of its grades (a tie is left
out and counted). The database does the counting, one GROUP BY over the graded items
(judge verdict, number of passes, number of grades → items); the statistics
(`review.agreement.calibrate`: accuracy, Cohen's kappa, the confusion matrix, Fleiss' kappa
among the people where several graded) are computed from those counts. Two queries whatever
the number of cases or grades.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import Case, Count, IntegerField, OuterRef, Subquery, Sum, When
from django.urls import reverse

from evaluations.models import HumanGrade, Project
from evaluations.review.agreement import Calibration, calibrate
from evaluations.review.grades import conversation_scores, judge_model_expression, judged, prompt_version_expression


@dataclass(frozen=True)
class CalibrationRow:
    criterion: str
    judge_model: str
    prompt_version: str
    calibration: Calibration
    queue_url: str

    @property
    def version_label(self) -> str:
        return self.prompt_version or "not recorded"


def _tally(field: str) -> Any:
    grades = HumanGrade.objects.filter(result_id=OuterRef("result_id"), criterion=OuterRef("criterion"))
    if field == "passes":
        aggregate: Any = Sum(Case(When(passed=True, then=1), default=0, output_field=IntegerField()))
    else:
        aggregate = Count("pk")
    return Subquery(grades.values("result_id").annotate(v=aggregate).values("v")[:1], output_field=IntegerField())


def calibration_rows(*, project: Project, criterion: str = "") -> list[CalibrationRow]:
    """One row per judged criterion, judge model and prompt version with human grades."""
    graded = HumanGrade.objects.filter(project=project)
    if criterion:
        graded = graded.filter(criterion=criterion)
    scores = judged(conversation_scores().filter(result_id__in=graded.values("result_id"), passed__isnull=False))
    if criterion:
        scores = scores.filter(criterion=criterion)
    counted = (
        scores.annotate(
            judge_model=judge_model_expression(),
            prompt_version=prompt_version_expression(),
            passes=_tally("passes"),
            graded=_tally("count"),
        )
        .filter(graded__gt=0)
        .values("criterion", "judge_model", "prompt_version", "passed", "passes", "graded")
        .annotate(items=Count("pk"))
        .order_by("criterion", "judge_model", "prompt_version")
    )
    groups: dict[tuple[str, str, str], list[tuple[bool, int, int, int]]] = {}
    for row in counted:
        key = (row["criterion"], row["judge_model"], row["prompt_version"])
        groups.setdefault(key, []).append((bool(row["passed"]), row["passes"], row["graded"], row["items"]))
    base = reverse("grading_queue")
    rows = []
    for (name, model, version), tallies in sorted(groups.items()):
        query = {"criterion": name, "judge_model": model, "prompt_version": version or "-"}
        rows.append(CalibrationRow(name, model, version, calibrate(tallies), f"{base}?{urlencode(query)}"))
    return rows
