"""A run and its "run started" audit event are written in one transaction, whichever way the run
is started: when the audit row cannot be written (the database refuses it, through a trigger
made here), no run is left behind either, so no run exists that the activity log does not
show, and the client sees a failure it may retry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from evaluations.models import AuditEvent, Project, Run
from tests.engine_helpers import import_demo

pytestmark = pytest.mark.django_db

DEMO = {"callable": "evaluations.demo.agent:respond"}


@pytest.fixture
def audit_refused() -> Iterator[None]:
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"CREATE TRIGGER refuse_audit BEFORE INSERT ON {table} "
                           "BEGIN SELECT RAISE(ABORT, 'audit refused by the test'); END")
        else:
            cursor.execute("CREATE FUNCTION refuse_audit() RETURNS trigger AS $$ BEGIN "
                           "RAISE EXCEPTION 'audit refused by the test'; END $$ LANGUAGE plpgsql")
            cursor.execute(f"CREATE TRIGGER refuse_audit BEFORE INSERT ON {table} "
                           "FOR EACH ROW EXECUTE FUNCTION refuse_audit()")
    yield
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("DROP TRIGGER refuse_audit")
        else:
            cursor.execute(f"DROP TRIGGER refuse_audit ON {table}")
            cursor.execute("DROP FUNCTION refuse_audit()")


def quiet(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def test_the_api_writes_no_run_when_its_audit_event_cannot_be_written(acme: Project, alice: Any,
                                                                       audit_refused: None) -> None:
    version = import_demo(acme)
    response = quiet(alice).post("/api/v1/runs/", data=json.dumps(
        {"evalset": version.evalset_id, "target_kind": "python", "target": DEMO}), content_type="application/json")
    assert response.status_code == 500
    assert Run.objects.count() == 0


def test_the_new_run_page_writes_no_run_when_its_audit_event_cannot_be_written(acme: Project, alice: Any,
                                                                              audit_refused: None) -> None:
    version = import_demo(acme)
    response = quiet(alice).post(reverse("run_new"), {
        "version": version.pk, "config_source": "default", "target_kind": "demo", "iterations": 1, "warmups": 0})
    assert response.status_code == 500
    assert Run.objects.count() == 0


def test_with_the_audit_written_the_run_and_its_event_are_both_there(acme: Project, alice: Any) -> None:
    version = import_demo(acme)
    response = quiet(alice).post("/api/v1/runs/", data=json.dumps(
        {"evalset": version.evalset_id, "target_kind": "python", "target": DEMO}), content_type="application/json")
    assert response.status_code == 201, response.content
    run = Run.objects.get()
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.RUN_STARTED)
    assert event.object_id == str(run.pk) or str(run.pk) in event.summary
