"""Monitors (issue 31): received traces scored per trace and per thread, once per monitor
version whatever is retried; the hourly aggregates; the interface issue 32 reads."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pydantic import ValidationError

from evaluations.accounts.tokens import token_create
from evaluations.models import (
    Monitor,
    MonitorBucket,
    MonitorResult,
    MonitorScore,
    MonitorVersion,
    Project,
    Trace,
    TraceThread,
)
from evaluations.monitors import scoring, stats
from evaluations.monitors.services import monitor_create, monitor_update
from evaluations.monitors.signals import monitor_scored
from evaluations.monitors.spec import MonitorSpec, sampled
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="agent").secret


def send(token: str, *requests: Any) -> list[int]:
    before = set(Trace.objects.values_list("pk", flat=True))
    for message in requests:
        assert post(Client(), message, token).status_code == 200
    return sorted(set(Trace.objects.values_list("pk", flat=True)) - before)


def make(project: Project, user: Any, **overrides: Any) -> Monitor:
    return monitor_create(project=project, spec=MonitorSpec.model_validate(spec(**overrides)), user=user)


def test_each_trace_is_scored_by_each_criterion_once(acme: Project, alice: Any, token: str) -> None:
    monitor = make(acme, alice)
    pks = send(token, agent_trace('{"city": "Paris"}'), agent_trace("Lyon", tool_error="timeout"),
               agent_trace('{"city": "Paris"}', seconds=9))
    assert scoring.score_traces(pks) == 3
    results = {r.trace_id: r for r in MonitorResult.objects.filter(monitor=monitor)}
    assert [results[pk].passed for pk in pks] == [True, False, False]
    assert sorted(results[pks[1]].failed) == ["json", "mentions_paris", "tools_ok"]
    assert results[pks[2]].failed == ["fast"]
    assert results[pks[2]].latency_seconds == pytest.approx(9.0)
    assert results[pks[0]].tokens == 100 and results[pks[0]].environment == "prod"
    assert MonitorScore.objects.filter(result__monitor=monitor).count() == 12
    tool = MonitorScore.objects.get(result=results[pks[1]], criterion="tools_ok")
    assert tool.passed is False and tool.detail["failed"] == ["lookup: timeout"]

    # Again, as after a retried task or a dead worker: nothing new, aggregates unchanged.
    whole = list(MonitorBucket.objects.filter(monitor=monitor).values_list("criterion", "total", "passed"))
    assert scoring.score_traces(pks) == 0
    assert MonitorResult.objects.filter(monitor=monitor).count() == 3
    assert list(MonitorBucket.objects.filter(monitor=monitor).values_list("criterion", "total", "passed")) == whole
    assert ("", 3, 1) in whole and ("mentions_paris", 3, 2) in whole

    summary = stats.summary(monitor, since=timezone.now() - timedelta(days=1))
    assert (summary.total, summary.passed, summary.traces) == (3, 1, 3)
    assert summary.criteria["fast"] == (2, 3, pytest.approx(2 / 3))
    assert summary.tokens == 300 and summary.p50 is not None and summary.p95 is not None
    assert summary.p50 <= 1.0 < summary.p95
    now = timezone.now()
    assert stats.criterion_window(monitor.pk, "mentions_paris", now - timedelta(hours=3), now + timedelta(hours=1)) \
        == (2, 3)
    assert stats.criterion_window(monitor.pk, "mentions_paris", now + timedelta(hours=1), now + timedelta(hours=2)) \
        == (0, 0)


def test_the_signal_is_sent_once_per_scoring_batch(acme: Project, alice: Any, token: str,
                                                   django_capture_on_commit_callbacks: Any) -> None:
    monitor = make(acme, alice)
    pks = send(token, agent_trace("Paris"), agent_trace("Paris"))
    sent: list[int] = []
    monitor_scored.connect(lambda **kw: sent.append(kw["monitor_id"]), weak=False, dispatch_uid="t2")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            scoring.score_traces(pks)
            scoring.score_traces(pks)  # nothing new: no signal
    finally:
        monitor_scored.disconnect(dispatch_uid="t2")
    assert sent == [monitor.pk]


def test_criterion_window_takes_three_queries(acme: Project, alice: Any, token: str,
                                              django_assert_max_num_queries: Any) -> None:
    monitor = make(acme, alice)
    scoring.score_traces(send(token, agent_trace("Paris")))
    now = timezone.now()
    with django_assert_max_num_queries(3):
        assert stats.criterion_window(monitor.pk, "mentions_paris", now - timedelta(days=2), now + timedelta(minutes=1)) \
            == (1, 1)


def test_an_edit_makes_a_new_version_and_scores_name_it(acme: Project, alice: Any, token: str) -> None:
    monitor = make(acme, alice)
    pks = send(token, agent_trace("Paris"))
    scoring.score_traces(pks)
    monitor_update(monitor=monitor, spec=MonitorSpec.model_validate(spec(name="renamed")), user=alice)
    assert monitor.version == 1  # a new name scores nothing differently
    changed = spec(criteria={"short": {"evaluator": "regex_match", "options": {"pattern": "^.{0,10}$"}}})
    monitor_update(monitor=monitor, spec=MonitorSpec.model_validate(changed), user=alice)
    assert monitor.version == 2 and MonitorVersion.objects.filter(monitor=monitor).count() == 2
    assert scoring.score_traces(pks) == 1
    assert sorted(MonitorResult.objects.filter(monitor=monitor).values_list("version", flat=True)) == [1, 2]
    assert MonitorScore.objects.get(result__version=2).criterion == "short"
    assert stats.summary(monitor, since=timezone.now() - timedelta(days=1)).total == 1  # the current version's


def test_filters_and_sampling(acme: Project, alice: Any, token: str) -> None:
    staging = make(acme, alice, name="staging", filters={"environment": "staging"})
    bob_only = make(acme, alice, name="bob", filters={"end_user": "bob", "service": "travel-agent"})
    planner = make(acme, alice, name="planner", filters={"root_name": "planner", "attributes": {"enduser.id": "ann"}})
    half = make(acme, alice, name="half", sample_rate=0.5)
    pks = send(token, agent_trace("a", env="staging"), agent_trace("b", user="bob"),
               agent_trace("c", user="ann", root="planner"), agent_trace("d", user="bob", root="planner"),
               *[agent_trace("x") for _ in range(16)])
    scoring.score_traces(pks)
    assert MonitorResult.objects.filter(monitor=staging).count() == 1
    assert set(MonitorResult.objects.filter(monitor=bob_only).values_list("end_user", flat=True)) == {"bob"}
    assert MonitorResult.objects.filter(monitor=bob_only).count() == 2
    assert MonitorResult.objects.filter(monitor=planner).count() == 1
    trace_ids = dict(Trace.objects.filter(pk__in=pks).values_list("pk", "trace_id"))
    expected = {pk for pk in pks if sampled(trace_ids[pk], 0.5)}
    assert set(MonitorResult.objects.filter(monitor=half).values_list("trace_id", flat=True)) == expected
    assert 0 < len(expected) < len(pks)


def test_a_thread_is_scored_as_one_conversation_once_idle(acme: Project, alice: Any, token: str) -> None:
    from django_q.models import Schedule

    monitor = make(acme, alice, name="conversations", level="thread", idle_seconds=60,
                   criteria={"no_tool_errors": {"evaluator": "tool_errors"},
                             "cheap": {"evaluator": "total_tokens", "threshold": 250}})
    sweep = Schedule.objects.get(name="evalsite: monitor threads")
    assert (sweep.func, sweep.schedule_type, sweep.minutes) == ("evaluations.tasks.monitor_threads_sweep", "I", 1)
    send(token, agent_trace("hi", session="s-1", user="ann"), agent_trace("Paris", session="s-1"),
         agent_trace("bye", session="s-1", tool_error="boom"), agent_trace("alone", session="s-2"),
         agent_trace("no thread"))
    assert scoring.sweep_threads(timezone.now()) == 0  # not idle yet
    later = timezone.now() + timedelta(seconds=61)
    assert scoring.sweep_threads(later) == 2
    result = MonitorResult.objects.get(monitor=monitor, thread_id="s-1")
    assert result.trace_id is None and result.traces == 3 and result.end_user == "ann"
    assert result.passed is False and sorted(result.failed) == ["cheap", "no_tool_errors"]
    assert MonitorResult.objects.get(monitor=monitor, thread_id="s-2").passed is True
    Monitor.objects.filter(pk=monitor.pk).update(threads_swept_to=None)
    assert scoring.sweep_threads(later) == 0  # swept again from the start: nothing twice


def test_a_backfill_scores_a_time_range_once(acme: Project, alice: Any, token: str) -> None:
    pks = send(token, agent_trace("Paris"), agent_trace("Paris"), agent_trace("Paris"))
    Trace.objects.filter(pk=pks[0]).update(received_at=timezone.now() - timedelta(days=3))
    monitor = make(acme, alice)
    now = timezone.now()
    assert scoring.backfill(monitor.pk, now - timedelta(days=1), now + timedelta(minutes=1)) == 2
    assert scoring.backfill(monitor.pk, now - timedelta(days=7), now + timedelta(minutes=1)) == 1
    assert scoring.backfill(monitor.pk, now - timedelta(days=7), now + timedelta(minutes=1)) == 0


def test_ingest_queues_one_task_per_request_only_with_trace_monitors(acme: Project, alice: Any, token: str,
                                                                     django_capture_on_commit_callbacks: Any) -> None:
    from django_q.models import OrmQ

    with django_capture_on_commit_callbacks(execute=True):
        send(token, agent_trace("Paris"))
    assert OrmQ.objects.count() == 0
    make(acme, alice)
    with django_capture_on_commit_callbacks(execute=True):
        send(token, agent_trace("Paris"), agent_trace("Lyon"))
    assert OrmQ.objects.count() == 2
    assert OrmQ.objects.first().task["func"] == "evaluations.tasks.monitor_traces"


@pytest.mark.parametrize(("criteria", "message"), [
    ({"x": {"evaluator": "trajectory_match"}}, "criteria.x: 'trajectory_match' needs an expected answer"),
    ({"x": {"evaluator": "nope"}}, "criteria.x: no evaluator named 'nope'"),
    ({"x": {"evaluator": "json_schema", "options": {"schema": {"type": 5}}}}, "criteria.x.options.schema"),
    ({"x": {"evaluator": "contains", "options": {"bogus": 1}}}, "criteria.x.options.bogus"),
])
def test_a_bad_spec_says_which_field(criteria: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        MonitorSpec.model_validate(spec(criteria=criteria))
    assert message in str(caught.value)


def test_json_schema_and_retries(acme: Project, alice: Any, token: str) -> None:
    monitor = make(acme, alice, criteria={
        "shape": {"evaluator": "json_schema", "options": {"schema": {"type": "object", "required": ["city"]}}},
        "retries": {"evaluator": "tool_retries"}})
    pks = send(token, agent_trace('{"city": "Paris"}'), agent_trace('{"town": "Paris"}', retries=2))
    scoring.score_traces(pks)
    good, bad = (MonitorResult.objects.get(monitor=monitor, trace_id=pk) for pk in pks)
    assert good.passed and sorted(bad.failed) == ["retries", "shape"]
    shape = MonitorScore.objects.get(result=bad, criterion="shape")
    assert shape.detail["problems"] == ["(root): 'city' is a required property"]
    assert MonitorScore.objects.get(result=bad, criterion="retries").value == 2


def test_a_trace_whose_root_comes_later_joins_its_thread_then(acme: Project, alice: Any, token: str) -> None:
    from tests.otlp_helpers import request_of, span

    trace_id, root, tool = b"\x01" * 16, b"\x02" * 8, b"\x03" * 8
    first = request_of([span(trace_id, tool, root, "tool lookup", 10, 20, {"openinference.span.kind": "TOOL"})])
    second = request_of([span(trace_id, root, b"", "agent", 0, 30, {"session.id": "late", "output.value": "hi"})])
    send(token, first)
    assert not TraceThread.objects.exists()
    send(token, second, second)  # and a retry of the root's request
    thread = TraceThread.objects.get(thread_id="late")
    assert thread.traces == 1 and Trace.objects.get().thread_id == "late"
