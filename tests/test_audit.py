"""The audit log: uploads, runs, baselines recorded where they happen; the project's activity
feed in a fixed number of queries; each object's history on its page; summaries escaped."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.audit import audit_record, object_history, project_activity
from evaluations.models import AuditEvent, Membership, Project, Run
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import DEMO, import_demo, perfect_outputs


@pytest.fixture
def dave(acme: Project) -> Any:
    """An admin of acme: pins baselines."""
    user = get_user_model().objects.create_user("dave", "dave@example.com", "dave-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def dave_client(dave: Any) -> Client:
    client = Client()
    client.force_login(dave)
    return client


def finished_run(project: Project, version: Any, name: str = "") -> Run:
    run = runs.run_create(project=project, version=version, target_kind="uploaded", enqueue=False, name=name,
                          outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    return runs.run_execute_here(run.pk)


def verbs(project: Project) -> list[str]:
    return list(AuditEvent.objects.filter(project=project).order_by("pk").values_list("verb", flat=True))


def test_an_upload_through_the_page_records_one_event_per_new_version(alice_client: Client, acme: Project) -> None:
    with DEMO.open("rb") as fh:
        assert alice_client.post(reverse("evalset_upload"), {"files": fh}).status_code == 200
    with DEMO.open("rb") as fh:  # the same content again is the same version: nothing new to record
        alice_client.post(reverse("evalset_upload"), {"files": fh})
    [event] = AuditEvent.objects.filter(project=acme)
    assert event.verb == AuditEvent.Verb.EVALSET_UPLOADED and event.actor is not None
    assert event.actor.username == "alice" and event.object_type == "evalset"
    assert event.data["version"] == 1
    assert "through the upload page" in event.summary


def test_an_upload_through_the_api_is_recorded(alice_client: Client, acme: Project) -> None:
    with DEMO.open("rb") as fh:
        assert alice_client.post(reverse("api_evalsets"), {"file": fh, "project": "acme"}).status_code == 201
    assert verbs(acme) == ["evalset.uploaded"]
    assert AuditEvent.objects.get().summary.endswith("through the API")


def test_starting_cancelling_and_retrying_runs_through_the_api_is_recorded(alice_client: Client,
                                                                            acme: Project) -> None:
    version = import_demo(acme)
    started = alice_client.post(reverse("api_runs"), {"evalset": version.evalset_id, "target_kind": "uploaded",
                                                      "outputs": perfect_outputs()}, content_type="application/json")
    assert started.status_code == 201
    run_id = started.json()["id"]
    assert alice_client.post(reverse("api_run_cancel", args=[run_id])).status_code == 200
    alice_client.post(reverse("api_run_cancel", args=[run_id]))  # already cancelled: nothing more to record
    assert verbs(acme) == ["run.started", "run.cancelled"]
    assert {e.object_id for e in AuditEvent.objects.all()} == {str(run_id)}


def test_cancel_and_retry_on_the_run_page_are_recorded(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    queued = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False,
                             outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    alice_client.post(reverse("run_cancel", args=[queued.pk]))
    alice_client.post(reverse("run_retry", args=[queued.pk]))
    assert verbs(acme) == ["run.cancelled", "run.retried"]
    assert AuditEvent.objects.get(verb="run.retried").data == {"reset": 0}


def test_a_run_started_on_the_new_run_page_is_recorded(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    import json

    response = alice_client.post(reverse("run_new"), {
        "version": version.pk, "config_source": "default", "target_kind": "uploaded", "iterations": 1, "warmups": 0,
        "outputs_file": SimpleUploadedFile("outputs.json", json.dumps(perfect_outputs()).encode()),
    })
    assert response.status_code == 302
    [event] = AuditEvent.objects.filter(verb=AuditEvent.Verb.RUN_STARTED)
    assert event.actor is not None and event.actor.username == "alice"
    assert event.object_id == response["Location"].strip("/").split("/")[-1]


def test_the_cli_records_its_runs_with_no_actor(acme: Project, tmp_path: Any) -> None:
    import json

    version = import_demo(acme)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(perfect_outputs()))
    with pytest.raises(SystemExit):
        call_command("eval", version.evalset.eval_set_id, "--project", "acme",
                     "--outputs", str(outputs))
    [event] = AuditEvent.objects.filter(verb=AuditEvent.Verb.RUN_STARTED)
    assert event.actor is None and event.project == acme
    assert "manage.py eval" in event.summary


def test_pinning_a_baseline_records_from_and_to_and_shows_on_both_pages(dave_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    first, second = finished_run(acme, version, "first"), finished_run(acme, version, "second")
    run_page = dave_client.get(reverse("run_detail", args=[first.pk])).content.decode()
    assert "Pin as baseline" in run_page and "pinned baseline" not in run_page
    dave_client.post(reverse("run_pin_baseline", args=[first.pk]))
    dave_client.post(reverse("run_pin_baseline", args=[second.pk]))
    dave_client.post(reverse("run_pin_baseline", args=[second.pk]))  # already pinned: not recorded again
    version.evalset.refresh_from_db()
    assert version.evalset.baseline_run_id == second.pk
    events = AuditEvent.objects.filter(verb=AuditEvent.Verb.BASELINE_PINNED).order_by("pk")
    assert [e.data for e in events] == [{"from": None, "to": first.pk}, {"from": first.pk, "to": second.pk}]
    run_page = dave_client.get(reverse("run_detail", args=[second.pk])).content.decode()
    assert "pinned baseline" in run_page and "Pin as baseline" not in run_page
    evalset_page = dave_client.get(reverse("evalset_detail", args=[version.evalset_id])).content.decode()
    assert f"pinned baseline: run #{second.pk}" in evalset_page
    assert f"was run #{first.pk}" in evalset_page  # the eval set's history


def test_a_run_still_going_cannot_be_pinned(dave_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    queued = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False,
                             outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    dave_client.post(reverse("run_pin_baseline", args=[queued.pk]))
    version.evalset.refresh_from_db()
    assert version.evalset.baseline_run_id is None


def test_the_activity_feed_lists_events_newest_first_and_escapes_them(alice_client: Client, acme: Project,
                                                                      alice: Any) -> None:
    audit_record(project=acme, actor=alice, verb=AuditEvent.Verb.COMMENT_ADDED, summary="older")
    audit_record(project=acme, actor=None, verb=AuditEvent.Verb.RUN_STARTED, summary="<script>alert(1)</script>")
    page = alice_client.get(reverse("project_activity", args=["acme"])).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert page.index("alert(1)") < page.index("older")
    assert "system" in page


def test_another_projects_feed_is_not_found(bob_client: Client, acme: Project) -> None:
    assert bob_client.get(reverse("project_activity", args=["acme"])).status_code == 404


def test_events_of_another_project_never_show_in_this_feed(alice: Any, acme: Project, globex: Project) -> None:
    audit_record(project=globex, actor=None, verb=AuditEvent.Verb.RUN_STARTED, summary="globex secret")
    assert project_activity(project=acme).events == []


def add_events(project: Project, count: int) -> None:
    users = [get_user_model().objects.create_user(f"user{project.pk}-{n}-{AuditEvent.objects.count()}")
             for n in range(3)]
    for n in range(count):
        audit_record(project=project, actor=users[n % 3], verb=AuditEvent.Verb.COMMENT_ADDED, summary=f"event {n}")


def test_the_feed_selector_runs_a_fixed_number_of_queries(acme: Project, django_assert_num_queries: Any) -> None:
    add_events(acme, 5)
    with django_assert_num_queries(2):  # the count, and one page of events with their actors
        assert len(project_activity(project=acme).events) == 5
    add_events(acme, 55)
    with django_assert_num_queries(2):
        assert len(project_activity(project=acme).events) == 50


def test_the_feed_page_runs_as_many_queries_for_60_events_as_for_5(alice_client: Client, acme: Project) -> None:
    url = reverse("project_activity", args=["acme"])
    add_events(acme, 5)
    alice_client.get(url)  # settle the session
    with CaptureQueriesContext(connection) as few:
        assert alice_client.get(url).status_code == 200
    add_events(acme, 55)
    with CaptureQueriesContext(connection) as many:
        page = alice_client.get(url).content.decode()
    assert len(many) == len(few)
    assert page.count('class="event ') == 50 and "page 1 of 2" in page
    second = alice_client.get(url + "?page=2").content.decode()
    assert second.count('class="event ') == 10


def test_a_run_page_shows_the_runs_history(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    run = finished_run(acme, version)
    audit_record(project=acme, actor=None, verb=AuditEvent.Verb.RUN_RETRIED, obj=run, summary="retried by hand")
    assert [e.summary for e in object_history(run)] == ["retried by hand", f"run #{run.pk} finished: nothing to compare with"]
    assert "retried by hand" in alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()


