"""Projects made and removed from the pages and the API: a project created by a superuser (or
by anyone, when the settings say so), and what project admins remove: a run, an eval set
with its runs (after a confirmation naming what goes), a whole project (archived). Every
removal is recorded in the activity feed, and rows go in bounded batches."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.accounts.tokens import token_create
from evaluations.models import (
    AuditEvent,
    CaseResult,
    Comparison,
    ComparisonCase,
    EvalCase,
    EvalSet,
    EvalSetVersion,
    Membership,
    Project,
    Run,
    Score,
    Triage,
)
from evaluations.review import comparison
from evaluations.review.deletion import run_delete
from tests.compare_helpers import generated_outputs, generated_version, make_run
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs

pytestmark = pytest.mark.django_db


def _user(username: str, project: Project | None = None, role: str = "", **extra: Any) -> Any:
    user = get_user_model().objects.create_user(username, f"{username}@example.com", f"{username}-pass-123", **extra)
    if project is not None:
        Membership.objects.create(project=project, user=user, role=role)
    return user


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def dave(acme: Project) -> Any:
    return _user("dave", acme, Membership.Role.ADMIN)


@pytest.fixture
def two_runs(acme: Project) -> tuple[Run, Run]:
    """The demo set, a good run and a regressed one, compared, with a triaged case."""
    version = import_demo(acme)
    base = make_run(acme, version, perfect_outputs())
    run = make_run(acme, version, regressed_outputs())
    comparison.comparison_get(baseline=base, candidate=run)
    Triage.objects.create(project=acme, evalset=version.evalset, eval_id="weather_tokyo", baseline=base,
                          candidate=run)
    return base, run


def test_an_admin_deletes_a_run_after_a_confirmation_and_the_rest_stays(dave: Any, two_runs: tuple[Run, Run]) -> None:
    base, run = two_runs
    client = _client(dave)
    page = client.get(reverse("run_delete", args=[run.pk])).content.decode()
    assert f"Delete run #{run.pk}?" in page and "8 results with their scores" in page
    assert client.get(reverse("run_detail", args=[run.pk])).content.decode().count('data-testid="run-delete"') == 1
    response = client.post(reverse("run_delete", args=[run.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("evalset_detail",
                                                                           args=[run.evalset_version.evalset_id])
    assert not Run.objects.filter(pk=run.pk).exists()
    assert not CaseResult.objects.filter(run_id=run.pk).exists() and not Score.objects.filter(run_id=run.pk).exists()
    assert not Comparison.objects.filter(candidate_id=run.pk).exists() and not ComparisonCase.objects.exists()
    assert not Triage.objects.exists()
    assert CaseResult.objects.filter(run=base).count() == 8  # the other run is whole
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.RUN_DELETED)
    assert (event.actor, event.object_id, event.data["results"]) == (dave, str(run.pk), 8)
    assert event.summary == f"deleted run #{run.pk} (8 results) through the run page"


def test_members_cannot_delete_and_a_running_run_is_not_deleted(alice: Any, alice_client: Client, dave: Any,
                                                                two_runs: tuple[Run, Run]) -> None:
    _, run = two_runs
    assert alice_client.get(reverse("run_delete", args=[run.pk])).status_code == 403
    assert alice_client.post(reverse("run_delete", args=[run.pk])).status_code == 403
    assert 'data-testid="run-delete"' not in alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    client = _client(dave)
    page = client.get(reverse("run_delete", args=[run.pk])).content.decode()
    assert "The run is still running: cancel it first." in page and "button-danger" not in page
    client.post(reverse("run_delete", args=[run.pk]))
    assert Run.objects.filter(pk=run.pk).exists()
    token = token_create(user=dave, name="ci").secret
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    refused = api.delete(f"/api/v1/runs/{run.pk}/")
    assert refused.status_code == 409 and "cancel it before deleting it" in refused.json()["message"]


def test_the_api_deletes_a_run_for_admins_only(alice: Any, dave: Any, two_runs: tuple[Run, Run], bob: Any) -> None:
    base, run = two_runs
    for user, status in ((alice, 403), (bob, 404)):
        api = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='x').secret}")
        assert api.delete(f"/api/v1/runs/{run.pk}/").status_code == status
    api = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=dave, name='ci').secret}")
    body = api.delete(f"/api/v1/runs/{run.pk}/").json()
    assert (body["runs"], body["results"], body["versions"]) == (1, 8, 0) and body["rows"] > 8
    assert api.get(f"/api/v1/runs/{run.pk}/").status_code == 404
    assert api.get(f"/api/v1/runs/{base.pk}/").status_code == 200
    assert AuditEvent.objects.get(verb=AuditEvent.Verb.RUN_DELETED).summary.endswith("through the API")


def test_rows_go_in_bounded_batches(acme: Project) -> None:
    version = generated_version(acme, 60)
    run = make_run(acme, version, generated_outputs(60))
    scores = Score.objects.filter(run=run).count()
    assert scores > 100
    with CaptureQueriesContext(connection) as queries:
        run_delete(run=run, actor=None, via="a test", batch=25)
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE FROM")]
    score_deletes = [sql for sql in deletes if '"evaluations_score"' in sql.split(" WHERE", 1)[0]]
    assert len(score_deletes) >= scores // 25
    for sql in deletes:  # every statement takes at most a batch: by a LIMIT, or a short list of ids
        limit = re.search(r"LIMIT (\d+)\)$", sql)
        listed = re.search(r"\bIN \(([^()]*)\)", sql)
        assert limit is not None or listed is not None, sql
        assert int(limit.group(1)) == 25 if limit else len(listed.group(1).split(",")) <= 25, sql  # type: ignore[union-attr]
    assert not Score.objects.exists() and not Run.objects.exists()


def test_an_eval_set_goes_with_its_versions_and_runs_after_naming_them(dave: Any, acme: Project,
                                                                      two_runs: tuple[Run, Run]) -> None:
    _, run = two_runs
    evalset = run.evalset_version.evalset
    other = generated_version(acme, 3, eval_set_id="other")
    other_run = make_run(acme, other, generated_outputs(3))
    client = _client(dave)
    assert 'data-testid="evalset-delete"' in client.get(reverse("evalset_detail", args=[evalset.pk])).content.decode()
    page = client.get(reverse("evalset_delete", args=[evalset.pk])).content.decode()
    assert "1 version (8 cases in all)" in page
    assert "2 runs of it, with 16 results and their scores" in page
    assert f'Type <span class="mono">{evalset.eval_set_id}</span> to confirm' in page
    wrong = client.post(reverse("evalset_delete", args=[evalset.pk]), {"confirm": "nope"})
    assert wrong.status_code == 302 and EvalSet.objects.filter(pk=evalset.pk).exists()
    done = client.post(reverse("evalset_delete", args=[evalset.pk]), {"confirm": evalset.eval_set_id})
    assert done.status_code == 302 and done["Location"] == reverse("evalset_list")
    assert not EvalSet.objects.filter(pk=evalset.pk).exists()
    assert not EvalSetVersion.objects.filter(evalset_id=evalset.pk).exists()
    assert not EvalCase.objects.filter(evalset_id=evalset.pk).exists()
    assert list(Run.objects.values_list("pk", flat=True)) == [other_run.pk]
    assert EvalCase.objects.filter(evalset=other.evalset).count() == 3
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.EVALSET_DELETED)
    assert event.summary == ("deleted eval set Demo travel agent (1 versions, 2 runs, 16 results) "
                             "through the eval set page")


def test_the_api_deletes_an_eval_set_and_members_cannot(alice: Any, dave: Any, two_runs: tuple[Run, Run]) -> None:
    _, run = two_runs
    evalset_id = run.evalset_version.evalset_id
    member = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='x').secret}")
    assert member.delete(f"/api/v1/evalsets/{evalset_id}/").status_code == 403
    admin = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=dave, name='ci').secret}")
    body = admin.delete(f"/api/v1/evalsets/{evalset_id}/").json()
    assert (body["runs"], body["results"], body["versions"]) == (2, 16, 1)
    assert admin.get(f"/api/v1/evalsets/{evalset_id}/").status_code == 404 and not Run.objects.exists()


def test_an_archived_project_disappears_and_keeps_its_data(alice: Any, alice_client: Client, dave: Any, acme: Project,
                                                          two_runs: tuple[Run, Run]) -> None:
    _, run = two_runs
    assert alice_client.get(reverse("project_archive", args=["acme"])).status_code == 403
    client = _client(dave)
    members = client.get(reverse("project_members", args=["acme"])).content.decode()
    assert 'data-testid="project-archive"' in members
    page = client.get(reverse("project_archive", args=["acme"])).content.decode()
    assert "Archive the project Acme?" in page
    assert client.post(reverse("project_archive", args=["acme"]))["Location"] == reverse("home")
    assert client.get(reverse("run_detail", args=[run.pk])).status_code == 404
    assert alice_client.get(f"/api/v1/runs/{run.pk}/").status_code == 404
    assert alice_client.get("/api/v1/projects/").json()["count"] == 0
    assert Run.objects.filter(pk=run.pk).exists()  # kept
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.PROJECT_ARCHIVED)
    assert (event.project_id, event.actor) == (acme.pk, dave)


def test_the_api_archives_a_project_for_its_admins(alice: Any, dave: Any, acme: Project) -> None:
    member = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='x').secret}")
    assert member.post("/api/v1/projects/acme/archive/").status_code == 403
    admin = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=dave, name='ci').secret}")
    assert admin.post("/api/v1/projects/acme/archive/").status_code == 204
    assert admin.get("/api/v1/projects/acme/").status_code == 404
    acme.refresh_from_db()
    assert acme.archived_at is not None


def test_a_superuser_creates_a_project_from_the_page_and_becomes_its_admin(alice_client: Client) -> None:
    root = _user("root", is_superuser=True, is_staff=True)
    client = _client(root)
    assert "New project" in client.get(reverse("project_new")).content.decode()
    response = client.post(reverse("project_new"), {"name": "Search team", "slug": "search", "description": ""})
    assert response.status_code == 302 and response["Location"] == reverse("project_members", args=["search"])
    project = Project.objects.get(slug="search")
    assert Membership.objects.get(project=project).user == root
    assert Membership.objects.get(project=project).role == Membership.Role.ADMIN
    assert AuditEvent.objects.get(verb=AuditEvent.Verb.PROJECT_CREATED).project == project
    again = client.post(reverse("project_new"), {"name": "Other", "slug": "search"})
    assert again.status_code == 400 and "a project with the slug &#x27;search&#x27; already exists" in (
        again.content.decode())
    bad = client.post(reverse("project_new"), {"name": "x", "slug": "not a slug!"})
    assert bad.status_code == 400 and Project.objects.count() == 2  # acme and search
    assert alice_client.get(reverse("project_new")).status_code == 403  # not by default


def test_any_signed_in_user_creates_projects_when_the_setting_says_everyone(alice: Any, alice_client: Client,
                                                                            settings: Any) -> None:
    api = Client(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='ci').secret}")
    refused = api.post("/api/v1/projects/", {"slug": "mine", "name": "Mine"}, content_type="application/json")
    assert refused.status_code == 403 and not Project.objects.filter(slug="mine").exists()
    settings.EVALSITE_PROJECT_CREATORS = "everyone"
    made = api.post("/api/v1/projects/", {"slug": "mine", "name": "Mine"}, content_type="application/json")
    assert made.status_code == 201, made.json()
    assert (made.json()["slug"], made.json()["role"]) == ("mine", "admin")
    duplicate = api.post("/api/v1/projects/", {"slug": "mine", "name": "Again"}, content_type="application/json")
    assert duplicate.status_code == 400 and duplicate.json()["problems"][0]["path"] == "slug"
    assert alice_client.get(reverse("project_new")).status_code == 200


def test_a_superuser_sees_an_archived_project_in_the_admin_to_restore_it(acme: Project, dave: Any) -> None:
    from evaluations.accounts.services import project_archive

    project_archive(project=acme, actor=dave)
    root = _user("root", is_superuser=True, is_staff=True)
    client = _client(root)
    listed = client.get("/admin/evaluations/project/?archived_at__isempty=0").content.decode()
    assert "Acme" in listed
    change = client.get(f"/admin/evaluations/project/{acme.pk}/change/").content.decode()
    assert 'name="archived_at_0"' in change or 'name="archived_at"' in change


def test_a_run_goes_with_its_failure_causes_and_queue_batches(acme: Project) -> None:
    """A finished run carries rows of later features (its grouped causes, its queue batches):
    deleting it takes them too, and nothing of the other run."""
    from evaluations.models import CauseSet, ResultCause, RunBatch, RunCause
    from evaluations.review.causes import cause_set_for

    version = import_demo(acme)
    base = make_run(acme, version, perfect_outputs())
    run = make_run(acme, version, regressed_outputs())
    assert cause_set_for(run) is not None and RunCause.objects.filter(cause_set__run=run).exists()
    if not RunBatch.objects.filter(run=run).exists():  # runs made inline may have handed theirs back
        RunBatch.objects.create(run=run, first_pk=0, last_pk=0)
    run_delete(run=run, actor=None, via="a test")
    assert not Run.objects.filter(pk=run.pk).exists()
    assert not CauseSet.objects.filter(run_id=run.pk).exists() and not RunBatch.objects.filter(run_id=run.pk).exists()
    assert not ResultCause.objects.filter(cause__cause_set__run_id=run.pk).exists()
    assert CaseResult.objects.filter(run=base).count() == 8
