"""Monitors end to end (issue 31): an agent instrumented with the OpenTelemetry SDK exports
over real HTTP to a live server; a real django-q2 cluster scores each trace with the trace
monitors and, once idle, the thread with the thread monitor; the failures are listed and one
is promoted into an eval set. Exporter retries and a worker killed with SIGKILL while it
scores double nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
from django.db.models import Sum
from django.test import Client
from django_q.tasks import async_task
from openinference.semconv.trace import SpanAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from evaluations.accounts.tokens import token_create
from evaluations.models import EvalCase, MonitorBucket, MonitorResult, MonitorScore, Project, Trace, TraceThread
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post
from tests.queue_helpers import wait_for
from tests.test_pages_evalsets import import_generated
from tests.test_queue_e2e import cluster  # noqa: F401 - the fixture

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND


def agent(server: str, token: str) -> TracerProvider:
    exporter = OTLPSpanExporter(endpoint=f"{server}/v1/traces", headers={"Authorization": f"Bearer {token}"})
    provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent",
                                                        "deployment.environment": "prod"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def turn(provider: TracerProvider, question: str, answer: str, *, session: str, user: str, fail: bool = False) -> None:
    tracer = provider.get_tracer("travel-agent")
    with tracer.start_as_current_span("agent", attributes={
            KIND: "AGENT", SpanAttributes.INPUT_VALUE: question, SpanAttributes.SESSION_ID: session,
            "enduser.id": user}) as root:
        with tracer.start_as_current_span("tool get_weather", attributes={
                KIND: "TOOL", SpanAttributes.TOOL_NAME: "get_weather",
                SpanAttributes.INPUT_VALUE: '{"city": "Paris"}'}) as tool:
            if fail:
                tool.set_status(Status(StatusCode.ERROR, "weather service down"))
        root.set_attribute(SpanAttributes.OUTPUT_VALUE, answer)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_instrumented_agent_is_scored_by_monitors_on_the_cluster(
        acme: Project, alice: Any, live_server: Any, cluster: subprocess.Popen[bytes]) -> None:  # noqa: F811
    token = token_create(user=alice, name="agent").secret
    api = requests.Session()
    api.headers["Authorization"] = f"Token {token}"
    created = api.post(f"{live_server.url}/api/v1/monitors/", timeout=30, json={
        "name": "answers", "criteria": {"mentions_paris": {"evaluator": "contains", "options": {"substrings": "Paris"}},
                                        "tools_ok": {"evaluator": "tool_errors"}}})
    assert created.status_code == 201, created.text
    monitor_id = created.json()["id"]
    conversations = api.post(f"{live_server.url}/api/v1/monitors/", timeout=30, json={
        "name": "conversations", "level": "thread", "idle_seconds": 1,
        "criteria": {"tools_ok": {"evaluator": "tool_errors"}}}).json()["id"]

    provider = agent(live_server.url, token)
    turn(provider, "Weather in Paris?", "Sunny in Paris.", session="conv-1", user="ann")
    turn(provider, "And tomorrow?", "Rain, sorry.", session="conv-1", user="ann", fail=True)
    turn(provider, "Museums?", "The Louvre, in Paris.", session="conv-2", user="bob")
    provider.shutdown()
    assert Trace.objects.filter(project=acme, received=True).count() == 3

    wait_for(lambda: MonitorResult.objects.filter(monitor_id=monitor_id).count() == 3, 90,
             "the cluster did not score the traces")
    failing = api.get(f"{live_server.url}/api/v1/monitors/{monitor_id}/failing/", timeout=30).json()
    assert failing["count"] == 1 and sorted(failing["results"][0]["failed"]) == ["mentions_paris", "tools_ok"]
    failed_trace = failing["results"][0]["trace"]

    # The threads, once idle: the sweep the schedule runs every minute, queued now.
    time.sleep(1.2)
    async_task("evaluations.tasks.monitor_threads_sweep")
    wait_for(lambda: MonitorResult.objects.filter(monitor_id=conversations).count() == 2, 90,
             "the cluster did not score the threads")
    conv = MonitorResult.objects.get(monitor_id=conversations, thread_id="conv-1")
    assert conv.traces == 2 and conv.failed == ["tools_ok"] and conv.end_user == "ann"
    assert MonitorResult.objects.get(monitor_id=conversations, thread_id="conv-2").passed
    assert TraceThread.objects.get(thread_id="conv-1").traces == 2

    # The monitor's page lists the failure; its trace page shows why, and it becomes a case.
    viewer = Client()
    viewer.force_login(alice)
    page = viewer.get(f"/monitors/{monitor_id}/").content.decode()
    assert f'href="/traces/{failed_trace}/"' in page
    trace_page = viewer.get(f"/traces/{failed_trace}/").content.decode()
    assert "weather service down" in trace_page and 'data-testid="trace-promote"' in trace_page
    target = import_generated(acme, 2, eval_set_id="support")
    promoted = api.post(f"{live_server.url}/api/v1/traces/{failed_trace}/promote/", timeout=30,
                        json={"evalset": target.evalset.pk, "eval_id": "rain-from-prod"})
    assert promoted.status_code == 201, promoted.text
    version = target.evalset.versions.get(number=2)
    assert EvalCase.objects.in_version_by_eval_id(version, "rain-from-prod").exists()


def monitor_traces_noting_pid(trace_pks: list[int], pid_file: str) -> int:
    """The monitor_traces task; the first worker to take it writes down its pid and stays busy
    after scoring, so the process the test kills is surely a worker in a task. (Picking the
    cluster's busiest process could pick django-q2's sentinel, pusher or monitor, or an idle
    worker, whose deaths test django-q2 rather than evalsite.)"""
    from evaluations.tasks import monitor_traces

    try:
        fd = os.open(pid_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return monitor_traces(trace_pks)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    written = monitor_traces(trace_pks)
    time.sleep(30)  # killed before this ends
    return written


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_retries_and_a_killed_worker_double_nothing(
        acme: Project, alice: Any, cluster: subprocess.Popen[bytes], tmp_path: Path) -> None:  # noqa: F811
    from evaluations.monitors.services import monitor_create
    from evaluations.monitors.spec import MonitorSpec

    token = token_create(user=alice, name="agent").secret
    for n in range(3):
        monitor_create(project=acme, spec=MonitorSpec.model_validate(spec(name=f"m{n}")), user=alice)
    messages = [agent_trace("Paris" if i % 3 else "Lyon") for i in range(300)]
    client = Client()
    for message in messages:
        assert post(client, message, token).status_code == 200
    for message in messages[:50]:  # the exporter retries some: stored once, scored once
        assert post(client, message, token).status_code == 200
    pks = list(Trace.objects.filter(project=acme).values_list("pk", flat=True))
    pid_file = tmp_path / "worker.pid"
    for _ in range(3):  # and a big batch queued several times over, killed while it is scored
        async_task("tests.test_monitors_e2e.monitor_traces_noting_pid", pks, str(pid_file))
    wait_for(lambda: pid_file.exists() and pid_file.read_text(), 60, "no worker took the batch")
    victim = psutil.Process(int(pid_file.read_text()))
    assert victim.pid in {p.pid for p in psutil.Process(cluster.pid).children(recursive=True)}
    victim.send_signal(signal.SIGKILL)
    async_task("evaluations.tasks.monitor_traces", pks)  # what django-q2 would retry
    wait_for(lambda: MonitorResult.objects.count() == 900, 120,
             lambda: f"{MonitorResult.objects.count()} of 900 results")
    time.sleep(2)  # the other queued copies finish, writing nothing
    assert MonitorResult.objects.count() == 900
    assert MonitorScore.objects.count() == 900 * 4
    whole = MonitorBucket.objects.filter(criterion="").aggregate(t=Sum("total"), p=Sum("passed"))
    assert whole["t"] == 900 and whole["p"] == MonitorResult.objects.filter(passed=True).count()
    assert cluster.poll() is None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_hostile_answers_to_a_monitor_do_not_hold_the_workers(
        acme: Project, alice: Any, cluster: subprocess.Popen[bytes]) -> None:  # noqa: F811
    """Issue 38: two 30-byte traces held both workers until the task timeout, and their scores
    were lost. Now a pattern RE2 can run is linear, one only backtracking can run stops at its
    bound as the score's error, and the cluster scores every trace, the ordinary one too."""
    from evaluations.monitors.services import monitor_create
    from evaluations.monitors.spec import MonitorSpec

    token = token_create(user=alice, name="agent").secret
    monitor_create(project=acme, user=alice, spec=MonitorSpec.model_validate(spec(criteria={
        "backtracking": {"evaluator": "regex_match", "options": {"pattern": "(?=(a|aa)+$)"}},
        "linear": {"evaluator": "regex_match", "options": {"pattern": "(a+)+$"}},
        "tools_ok": {"evaluator": "tool_errors"}})))
    client = Client()
    for answer in ("a" * 40 + "!", "a" * 39 + "!!", "aaaa"):
        assert post(client, agent_trace(answer), token).status_code == 200
    wait_for(lambda: MonitorResult.objects.count() == 3, 60, lambda: f"{MonitorResult.objects.count()} of 3 results")
    scores = {(s.result.trace_id, s.criterion): s for s in MonitorScore.objects.select_related("result")}
    hostile, other, ordinary = sorted(Trace.objects.values_list("pk", flat=True))
    for pk in (hostile, other):
        assert "did not finish within 0.5 s" in scores[pk, "backtracking"].error
        assert scores[pk, "linear"].passed is False and scores[pk, "linear"].error == ""
        assert scores[pk, "tools_ok"].passed is True
    assert scores[ordinary, "backtracking"].passed is True and scores[ordinary, "linear"].passed is True
    assert cluster.poll() is None
