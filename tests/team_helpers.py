"""A team's week of runs, built the way users build them: a 40-case generated eval set with a
tool call per case, uploaded outputs run twice per case (repeats), on `main` and a feature
branch. Day 1 all pass; day 2 five regressions on main; day 3 the same five plus three flaky
cases; day 4 a feature branch with two regressions of its own; day 5 the five fixed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model

from evaluations.models import EvalSetVersion, Membership, Project, Run
from tests.compare_helpers import generated_outputs, generated_version, make_run

CASES = 40
REGRESSED = {1, 2, 3, 4, 5}
FLAKY = {10, 11, 12}
FEATURE_OWN = {20, 21}


def eval_id(i: int) -> str:
    return f"case_{i:04d}"


def user_in(project: Project, name: str, role: str) -> Any:
    user = get_user_model().objects.create_user(name, f"{name}@example.com", f"{name}-pass-123")
    Membership.objects.create(project=project, user=user, role=role)
    return user


def day_run(project: Project, version: EvalSetVersion, *, wrong: set[int] = frozenset(),
            flaky: set[int] = frozenset(), branch: str = "main", name: str = "") -> Run:
    """Two repeats of every case: `wrong` fail in both, `flaky` fail in the second only."""
    outputs = generated_outputs(CASES, wrong=set(wrong))
    second = generated_outputs(CASES, wrong=set(wrong) | set(flaky))
    for output in second:
        output["iteration"] = 1
    return make_run(project, version, outputs + second, name=name,
                    labels={"branch": branch, "model": "agent-v1"})


def team_version(project: Project) -> EvalSetVersion:
    return generated_version(project, CASES, eval_set_id="support")
