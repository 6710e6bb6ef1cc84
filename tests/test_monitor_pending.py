"""Monitor scoring that cannot be lost (issue 40): a pending row per stored trace, written with
it; the task scores and clears the rows; the sweep scores what a lost task left, each trace
once per monitor version; a monitor saved takes effect for the next trace, with no per-process
memory; OTLP answers 200 once it stored, even when the task cannot be queued."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import Monitor, MonitorPending, MonitorResult, MonitorScore, Project, Trace
from evaluations.monitors import pending
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from evaluations.tasks import monitor_pending_sweep, monitor_traces
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post, request_of, span


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="agent").secret


def send(token: str, *requests: Any) -> list[int]:
    before = set(Trace.objects.values_list("pk", flat=True))
    for message in requests:
        response = post(Client(), message, token)
        assert response.status_code == 200, response.content
    return sorted(set(Trace.objects.values_list("pk", flat=True)) - before)


def make(project: Project, user: Any, **overrides: Any) -> Monitor:
    return monitor_create(project=project, spec=MonitorSpec.model_validate(spec(**overrides)), user=user)


def _age_pending(seconds: float) -> None:
    MonitorPending.objects.update(created_at=timezone.now() - timedelta(seconds=seconds))


def test_a_stored_trace_waits_in_the_database_until_its_task_scores_it(acme: Project, alice: Any,
                                                                        token: str) -> None:
    assert send(token, agent_trace("Paris"))  # no monitor yet: nothing waits
    assert MonitorPending.objects.count() == 0
    monitor = make(acme, alice)
    pks = send(token, agent_trace("Paris"), agent_trace("Lyon"))
    assert sorted(MonitorPending.objects.values_list("trace_id", flat=True)) == pks
    assert pending.pending_waiting(acme.pk).count == 2
    assert monitor_traces(pks) == 2
    assert MonitorPending.objects.count() == 0
    assert monitor_traces(pks) == 0  # the broker hands the task out again: nothing new
    assert MonitorResult.objects.filter(monitor=monitor).count() == 2


def test_the_sweep_scores_what_lost_tasks_left_each_trace_once_per_monitor(acme: Project, alice: Any,
                                                                            token: str) -> None:
    first = make(acme, alice)
    second = make(acme, alice, name="second", criteria={"json": {"evaluator": "json_valid"}})
    pks = send(token, *[agent_trace("Paris") for _ in range(7)])  # every task lost (never run)
    assert monitor_pending_sweep() == {"traces": 0, "results": 0, "left": 0}  # within the grace: the tasks' turn
    _age_pending(31)
    assert monitor_pending_sweep() == {"traces": 7, "results": 14, "left": 0}
    assert MonitorPending.objects.count() == 0
    assert monitor_pending_sweep()["traces"] == 0
    assert monitor_traces(pks) == 0  # a late task after the sweep writes nothing
    for monitor in (first, second):
        results = MonitorResult.objects.filter(monitor=monitor)
        assert sorted(results.values_list("trace_id", flat=True)) == pks
    assert MonitorScore.objects.filter(result__monitor=first).count() == 7 * 4


def test_the_sweep_reads_what_waits_not_what_is_stored(acme: Project, alice: Any, token: str,
                                                       django_assert_max_num_queries: Any) -> None:
    make(acme, alice)
    send(token, *[agent_trace("Paris") for _ in range(5)])
    monitor_traces(list(Trace.objects.values_list("pk", flat=True)))
    with django_assert_max_num_queries(1):  # one indexed look at the pending rows
        assert pending.pending_sweep().traces == 0


def test_a_root_span_stored_while_its_trace_is_scored_is_scored_after(acme: Project, alice: Any,
                                                                       token: str) -> None:
    monitor = make(acme, alice)
    trace_id = b"\x01" * 16
    child = span(trace_id, b"\x02" * 8, b"\x03" * 8, "tool lookup", 10, 20, {"openinference.span.kind": "TOOL"})
    [pk] = send(token, request_of([child], {"service.name": "travel-agent"}))
    [(_, touches)] = MonitorPending.objects.values_list("trace_id", "touches")
    root = span(trace_id, b"\x03" * 8, b"", "agent", 0, 30,
                {"openinference.span.kind": "AGENT", "output.value": "Paris"})
    send(token, request_of([root], {"service.name": "travel-agent"}))  # the root comes meanwhile
    assert MonitorPending.objects.get().touches == touches + 1
    # What a task that read the row before the root came does: its delete must miss the row.
    MonitorPending.objects.filter(trace_id=pk, touches=touches).delete()
    assert MonitorPending.objects.count() == 1
    assert monitor_traces([pk]) == 1
    assert MonitorResult.objects.filter(monitor=monitor, trace_id=pk).count() == 1
    assert MonitorPending.objects.count() == 0


def test_a_monitor_saved_anywhere_takes_effect_for_the_next_trace(acme: Project, alice: Any, token: str) -> None:
    send(token, agent_trace("Paris"))  # the project has no monitor: nothing remembered anywhere
    # Written straight to the database, as another process's save would be: no cache to clear.
    monitor = Monitor.objects.create(project=acme, name="elsewhere", criteria=spec()["criteria"])
    pks = send(token, *[agent_trace("Paris") for _ in range(20)])
    assert MonitorPending.objects.count() == 20
    assert monitor_traces(pks) == 20
    assert MonitorResult.objects.filter(monitor=monitor).count() == 20
    Monitor.objects.filter(pk=monitor.pk).update(enabled=False)
    send(token, agent_trace("Paris"))
    assert MonitorPending.objects.count() == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.django_db(transaction=True)
def test_stored_spans_are_answered_200_when_their_task_cannot_be_queued(acme: Project, alice: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    token = token_create(user=alice, name="agent").secret
    monitor = make(acme, alice)
    # The broker is a Redis that does not answer: queuing raises after the commit.
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "REDIS", f"redis://127.0.0.1:{_closed_port()}/0")
    pks = send(token, agent_trace("Paris"), agent_trace("Lyon"))
    assert len(pks) == 2 and MonitorPending.objects.count() == 2
    monkeypatch.undo()
    _age_pending(31)
    assert monitor_pending_sweep()["results"] == 2
    assert MonitorResult.objects.filter(monitor=monitor).count() == 2


def test_the_monitor_page_and_its_stats_say_how_many_traces_wait(acme: Project, alice: Any, token: str) -> None:
    monitor = make(acme, alice)
    send(token, agent_trace("Paris"), agent_trace("Paris"), agent_trace("Paris"))
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    body = client.get(f"/api/v1/monitors/{monitor.pk}/stats/").json()
    assert body["pending"] == 3 and body["pending_since"] is not None
    client.force_login(alice)
    page = client.get(f"/monitors/{monitor.pk}/").content.decode()
    assert "Waiting to be scored" in page
    assert ">3<" in page.split('data-testid="monitor-waiting"')[1][:300]
    monitor_traces(list(MonitorPending.objects.values_list("trace_id", flat=True)))
    assert client.get(f"/api/v1/monitors/{monitor.pk}/stats/").json()["pending"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_monitor_save_waits_for_an_ingest_that_read_no_monitor(acme: Project, alice: Any) -> None:
    """The ingest read "no monitor" inside its transaction: the save cannot commit between that
    read and the ingest's commit (it waits on the project's row), so no trace committed after
    the save goes unscored."""
    import threading

    from django.db import connection, transaction

    [pk] = [Trace.objects.create(project=acme, trace_id="ab" * 16, received=True, complete=True).pk]
    read, release, saved = threading.Event(), threading.Event(), threading.Event()

    def ingest() -> None:
        try:
            with transaction.atomic():
                assert pending.pending_record(acme.pk, [pk]) is False  # no monitor yet
                read.set()
                release.wait(10)
        finally:
            connection.close()

    def save() -> None:
        try:
            read.wait(10)
            make(acme, alice)
            saved.set()
        finally:
            connection.close()

    threads = [threading.Thread(target=ingest), threading.Thread(target=save)]
    for thread in threads:
        thread.start()
    assert read.wait(10)
    assert not saved.wait(1.0)  # the save waits for the ingest's transaction
    release.set()
    for thread in threads:
        thread.join(20)
    assert saved.is_set()
    assert pending.pending_record(acme.pk, [pk]) is True  # the next ingest sees the monitor
