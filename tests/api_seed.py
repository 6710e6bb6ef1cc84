"""A small world for exercising the API against a real server (schemathesis): a project, an
admin with an API token, the demo eval set, a baseline and a regressed candidate run (with
node-level scores), a triage of one regression with a comment, and a saved config.

    python -m tests.api_seed        # prints the token; run `manage.py migrate` first

The database is whatever the settings point at (EVALSITE_DATA_DIR / DATABASE_URL): use a
throwaway one.
"""

from __future__ import annotations

import os


def seed() -> str:
    """Create the world; returns the API token."""
    from django.contrib.auth import get_user_model

    from evaluations.accounts.tokens import token_create
    from evaluations.models import EvaluationConfig, Membership, Project
    from evaluations.review import comparison, triage
    from tests.api_helpers import demo_runs

    user = get_user_model().objects.create_user("ci", "ci@example.com", "ci-pass-12345")
    project = Project.objects.create(slug="ci", name="CI")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ADMIN)
    base, run = demo_runs(project)
    comparison.comparison_get(baseline=base, candidate=run)
    case = triage.triage_update(project=project, evalset=run.evalset_version.evalset, eval_id="weather_tokyo",
                                baseline=base, candidate=run, status="confirmed", assignee=user, actor=user)
    triage.comment_add(triage=case, body="Kyoto is not Tokyo", author=user)
    EvaluationConfig.objects.create(project=project, name="strict", config={"criteria": {}}, created_by=user)
    return token_create(user=user, name="schemathesis").secret


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    print(seed())
