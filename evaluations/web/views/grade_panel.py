"""The drill-down's grades panel (`grades/_drill_grades.html`): each criterion's automatic
verdict beside people's grades. Its own module, so the drill-down and the grading pages share
it without importing each other."""

from __future__ import annotations

from typing import Any

from evaluations.models import CaseResult, Membership, Run
from evaluations.review import grades

WRITERS = {Membership.Role.MEMBER, Membership.Role.ADMIN}


def panel_context(
    *, user: Any, run: Run, result: CaseResult, error: str = "", role: str | None = None
) -> dict[str, Any]:
    """What `grades/_drill_grades.html` shows: each criterion's automatic verdict and grades."""
    if role is None:
        role = run.project.role_of(user)
    return {
        "criteria": grades.result_grades(result=result, user=user),
        "can_grade": role in WRITERS,
        "run": run,
        "result": result,
        "error": error,
    }
