"""A database connection that drops (a backend terminated with `pg_terminate_backend`, as a
PostgreSQL restart or failover does to every session): a read-only page is answered from a
new connection instead of a 500, and queue batches cut off mid-way start again at once, on a
new connection, instead of waiting for the lease, each result written once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Run
from evaluations.runs import services as runs
from tests.engine_helpers import import_demo
from tests.queue_helpers import assert_each_result_once, database_url, qcluster, wait_for

pytestmark = pytest.mark.skipif(
    django_settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
    reason="terminates PostgreSQL backends (pg_terminate_backend): DATABASE_URL is not PostgreSQL",
)


@pytest.fixture(autouse=True)
def reconnect_after() -> Any:
    """A test that fails leaves its connection dead: the database's teardown needs a live one."""
    yield
    if connection.connection is not None and not connection.is_usable():
        connection.close()


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _terminate(pid: int) -> None:
    """From a session of its own, as an operator (or a failover) would."""
    with psycopg.connect(database_url(), autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone() == (True,)


def _terminate_all_others() -> int:
    """Every other session on the test database (the cluster's workers, its broker, their
    lease threads); returns how many."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_a_page_whose_connection_drops_is_answered_from_a_new_connection(alice_client: Client,
                                                                         acme: Project) -> None:
    version = import_demo(acme)
    url = reverse("evalset_detail", args=[version.evalset_id])
    assert alice_client.get(url).status_code == 200
    before = _backend_pid()
    _terminate(before)  # the connection this process holds is dead; Django does not know yet
    response = alice_client.get(url)
    assert response.status_code == 200
    assert "travel" in response.content.decode().lower()
    assert _backend_pid() != before  # answered on a new connection


@pytest.mark.django_db(transaction=True)
def test_an_api_read_whose_connection_drops_is_answered_from_a_new_connection(alice: Any, acme: Project) -> None:
    from evaluations.accounts.tokens import token_create

    version = import_demo(acme)
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='t').secret}")
    url = f"/api/v1/evalsets/{version.evalset_id}/"
    assert client.get(url).status_code == 200
    for _ in range(3):  # three drops in a row, each answered
        before = _backend_pid()
        _terminate(before)
        response = client.get(url)
        assert response.status_code == 200, response.content[:500]
        assert response.json()["id"] == version.evalset_id
        assert _backend_pid() != before


@pytest.mark.django_db(transaction=True)
def test_an_api_write_whose_connection_drops_is_not_run_again(alice: Any, acme: Project) -> None:
    from evaluations.accounts.tokens import token_create

    version = import_demo(acme)
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='t').secret}")
    _terminate(_backend_pid())
    response = client.post("/api/v1/runs/", {"evalset": version.evalset_id, "outputs": []},
                           content_type="application/json")
    assert response.status_code == 500 and response.json()["code"] == "server_error"
    connection.close()  # the test client keeps Django from closing it at the request's end
    assert Run.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_post_whose_connection_drops_is_not_run_again(alice: Any, acme: Project) -> None:
    version = import_demo(acme)
    client = Client(raise_request_exception=False)
    client.force_login(alice)
    _terminate(_backend_pid())
    response = client.post(reverse("case_new", args=[version.evalset_id]), {"eval_id": "new_case"})
    assert response.status_code == 500  # the user sees the failure and decides; nothing is done twice
    assert client.get(reverse("evalset_detail", args=[version.evalset_id])).status_code == 200


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_batches_cut_off_from_the_database_start_again_at_once_each_result_written_once(
        acme: Project, tmp_path: Path, settings: Any) -> None:
    settings.EVALSITE_BATCH_SIZE = 2
    # A lease far longer than the test waits: only the batches' own retry can finish the run.
    settings.EVALSITE_LEASE_SECONDS = 3600
    with qcluster(tmp_path, EVALSITE_LEASE_SECONDS="3600"):
        version = import_demo(acme)
        run = runs.run_create(project=acme, version=version, target_kind="python", iterations=2,
                              target={"callable": "evaluations.demo.agent:respond",
                                      "metadata": {"faults": {"slow_answer_seconds": 0.3, "rate": 1.0}},
                                      "timeout_seconds": 10})
        wait_for(lambda: Run.objects.get(pk=run.pk).cases_done >= 2, 60, "no progress before the drop")
        terminated = 0
        for _ in range(3):  # three bursts, so batches in the middle of their work are surely hit
            terminated += _terminate_all_others()
            time.sleep(0.8)
        assert terminated >= 3
        assert CaseResult.objects.filter(run=run, status="pending").exists()
        log = tmp_path / "qcluster.log"
        wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed", 90,
                 lambda: f"the run stalled after the drop\n{log.read_text()[-3000:]}")
    run.refresh_from_db()
    assert_each_result_once(run)
    assert run.cases_total == 16
    assert "lost the database connection" in log.read_text()  # the batches' retry, not the watchdog
