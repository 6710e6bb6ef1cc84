"""Runs whose target is "traces": the run waits, each case's trace on /v1/traces becomes its
output once, the run is queued when every case has one or at its deadline (the rest
`missing`), and is scored by the normal engine."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.test import Client
from django_q.models import Schedule

from evaluations.accounts.tokens import token_create
from evaluations.ingest.runs import NO_TRACE, traces_run_create, traces_run_deadline, traces_runs_overdue
from evaluations.models import CaseResult, Project, Run, Span, Trace
from evaluations.runs import services as runs
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs
from tests.otlp_helpers import answer, case_spans, demo_requests, post, request_of


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="otel").secret


def _run(acme: Project, alice: Any, django_capture_on_commit_callbacks: Any, **kwargs: Any) -> Run:
    version = import_demo(acme)
    with django_capture_on_commit_callbacks(execute=True):
        return traces_run_create(project=acme, version=version, user=alice, **kwargs)


@pytest.mark.django_db
def test_every_case_traced_completes_the_run_with_tool_call_diffs(
    acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks)
    assert run.status == "queued" and run.target_kind == "traces" and run.cases_total == 8
    schedule = Schedule.objects.get(name=f"evalsite: traces deadline of run {run.pk}")
    assert schedule.func == "evaluations.tasks.traces_run_deadline" and schedule.args == f"({run.pk},)"
    client = Client()
    for number, output in enumerate(regressed_outputs()):
        message = request_of(case_spans(output, (number + 1).to_bytes(4, "big") + os.urandom(12), run_id=run.pk))
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            response = post(client, message, token)
        assert response.status_code == 200 and not answer(response).HasField("partial_success")
        assert Run.objects.get(pk=run.pk).status == ("running" if number == 7 else "queued")
        assert len(callbacks) == (1 if number == 7 else 0)  # queued for scoring once, by the last
    assert runs.resume_stalled_runs() == []
    run = runs.run_execute_here(run.pk)
    assert run.status == "completed" and run.cases_done == 8 and run.cases_missing == 0
    assert run.cases_failed == 2  # the two regressions the traces carry
    failed = CaseResult.objects.get(run=run, case__eval_id="weather_tokyo")
    assert failed.status == "failed"
    assert failed.output["turns"][0]["tool_calls"][0]["args"] == {"city": "Kyoto"}
    trace = Trace.objects.get(result=failed)
    assert trace.received and trace.run_id == run.pk and trace.eval_id == "weather_tokyo"
    # the drill-down shows the calls aligned against the expected ones, and the trace's waterfall
    viewer = Client()
    viewer.force_login(alice)
    page = viewer.get(f"/runs/{run.pk}/cases/{failed.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Kyoto" in html and 'data-testid="waterfall"' in html
    multi = CaseResult.objects.get(run=run, case__eval_id="weather_paris_followup")
    assert multi.status == "passed" and len(multi.output["turns"]) == 3


@pytest.mark.django_db
def test_the_deadline_makes_the_rest_missing(
    acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks, deadline_seconds=0)
    client = Client()
    requests = demo_requests(run_id=run.pk)
    for message in requests[:6]:
        assert post(client, message, token).status_code == 200
    assert Run.objects.get(pk=run.pk).status == "queued"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert traces_run_deadline(run.pk) == 2
    assert len(callbacks) == 1
    assert traces_run_deadline(run.pk) == 0  # twice changes nothing
    missing = CaseResult.objects.filter(run=run, status="missing")
    assert missing.count() == 2 and set(missing.values_list("error", flat=True)) == {NO_TRACE}
    # a trace arriving after the deadline is kept in the trace list, not used
    late = post(client, requests[7], token)
    assert late.status_code == 200
    assert "no longer waiting" in answer(late).partial_success.error_message
    assert missing.filter(output__isnull=False).count() == 0
    run = runs.run_execute_here(run.pk)
    assert run.status == "completed" and run.cases_missing == 2 and run.cases_done == 6
    assert run.summary["pass_rate"] == 1.0


@pytest.mark.django_db
def test_a_second_trace_for_a_case_is_kept_but_never_replaces_the_first(
    acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks)
    client = Client()
    good, bad = perfect_outputs()[0], regressed_outputs()[0]
    assert post(client, request_of(case_spans(good, os.urandom(16), run_id=run.pk)), token).status_code == 200
    again = post(client, request_of(case_spans(bad, os.urandom(16), run_id=run.pk)), token)
    assert "already has its output" in answer(again).partial_success.error_message
    result = CaseResult.objects.get(run=run, case__eval_id="weather_tokyo")
    assert result.output["turns"][0]["tool_calls"][0]["args"] == {"city": "Tokyo"}
    assert Trace.objects.filter(run=run).count() == 2 and Trace.objects.filter(result=result).count() == 1


@pytest.mark.django_db
def test_spans_naming_another_projects_run_are_refused(
    acme: Project, globex: Project, alice: Any, bob: Any, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks)
    [message] = demo_requests(run_id=run.pk, eval_ids=["weather_tokyo"])
    response = post(Client(), message, token_create(user=bob, name="b").secret)
    assert response.status_code == 403
    from google.rpc.status_pb2 import Status

    status = Status()
    status.ParseFromString(response.content)
    assert status.message == (
        f"evalsite.run_id {run.pk} is not a run of project 'globex': spans naming another project's run are refused"
    )
    assert not Trace.objects.exists() and not Span.objects.exists()
    assert CaseResult.objects.filter(run=run, output__isnull=False).count() == 0


@pytest.mark.django_db
def test_a_case_the_run_does_not_have_is_a_partial_success(
    acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks)
    output = {**perfect_outputs()[0], "eval_id": "no_such_case"}
    kept = demo_requests(run_id=None, eval_ids=["order_status"])[0].resource_spans[0].scope_spans[0].spans
    rejected = case_spans(output, os.urandom(16), run_id=run.pk)
    response = post(Client(), request_of([*rejected, *kept]), token)
    assert response.status_code == 200
    partial = answer(response).partial_success
    assert partial.rejected_spans == len(rejected)
    assert "eval set has no case 'no_such_case'" in partial.error_message
    assert Trace.objects.count() == 1  # the other trace was stored


@pytest.mark.django_db
def test_attributes_on_the_resource_name_the_case(
    acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks, eval_ids=["order_status"])
    output = next(o for o in perfect_outputs() if o["eval_id"] == "order_status")
    message = request_of(
        case_spans(output, os.urandom(16), run_id=run.pk, on_resource=True),
        resource={"evalsite.run_id": str(run.pk), "evalsite.eval_id": "order_status"},
    )
    assert post(Client(), message, token).status_code == 200
    assert Run.objects.get(pk=run.pk).status == "running"


@pytest.mark.django_db
def test_a_failed_root_span_is_an_errored_case(
    acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any
) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks, eval_ids=["order_status"])
    output = next(o for o in perfect_outputs() if o["eval_id"] == "order_status")
    spans = case_spans(output, os.urandom(16), run_id=run.pk, root_error="upstream timed out")
    assert post(Client(), request_of(spans), token).status_code == 200
    run = runs.run_execute_here(run.pk)
    result = CaseResult.objects.get(run=run)
    assert result.status == "error" and "upstream timed out" in result.error


@pytest.mark.django_db
def test_the_watchdog_leaves_a_waiting_run_and_settles_an_overdue_one(
    acme: Project, alice: Any, django_capture_on_commit_callbacks: Any, settings: Any
) -> None:
    settings.EVALSITE_LEASE_SECONDS = 0
    waiting = _run(acme, alice, django_capture_on_commit_callbacks, deadline_seconds=3600)
    overdue = _run(acme, alice, django_capture_on_commit_callbacks, deadline_seconds=0)
    assert runs.resume_stalled_runs() == []
    with django_capture_on_commit_callbacks(execute=False):
        assert traces_runs_overdue() == [overdue.pk]
    assert Run.objects.get(pk=waiting.pk).status == "queued"
    assert traces_run_deadline(waiting.pk) == 0  # before its deadline: nothing
    overdue.refresh_from_db()
    assert overdue.status == "running" and overdue.cases_missing == 8


@pytest.mark.django_db
def test_the_api_creates_a_traces_run(acme: Project, alice: Any, django_capture_on_commit_callbacks: Any) -> None:
    from tests.api_helpers import token_client

    version = import_demo(acme)
    client = token_client(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/v1/runs/",
            {"evalset": version.evalset_id, "target_kind": "traces", "target": {"deadline_seconds": 600}},
            content_type="application/json",
        )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued" and body["target_kind"] == "traces"
    assert body["target"]["deadline_seconds"] == 600
    assert Schedule.objects.filter(name=f"evalsite: traces deadline of run {body['id']}").exists()
    bad = client.post(
        "/api/v1/runs/",
        {"evalset": version.evalset_id, "target_kind": "traces", "target": {"deadline_seconds": "soon"}},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "deadline_seconds" in bad.content.decode()


@pytest.mark.django_db
def test_the_new_run_page_creates_a_traces_run_and_its_page_says_what_it_waits_for(
        acme: Project, alice: Any, alice_client: Client, token: str) -> None:
    version = import_demo(acme)
    form = alice_client.get("/runs/new/").content.decode()
    assert 'value="traces"' in form and "Traces your agent sends" in form
    response = alice_client.post("/runs/new/", {"version": version.pk, "config_source": "default",
                                                "target_kind": "traces", "traces_deadline_minutes": 5,
                                                "iterations": 1, "warmups": 0})
    assert response.status_code == 302
    run = Run.objects.get()
    assert run.target_kind == "traces" and run.target["deadline_seconds"] == 300 and run.status == "queued"
    for message in demo_requests(run_id=run.pk)[:3]:
        assert post(Client(), message, token).status_code == 200
    page = alice_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Waiting for traces: 3 of 8 cases have one" in page and "traces sent to /v1/traces" in page


@pytest.mark.django_db
def test_a_waiting_run_cancelled_then_resumed_says_which_cases_had_no_trace(
        acme: Project, alice: Any, token: str, django_capture_on_commit_callbacks: Any) -> None:
    run = _run(acme, alice, django_capture_on_commit_callbacks, eval_ids=["order_status", "weather_tokyo"])
    [message] = demo_requests(run_id=run.pk, eval_ids=["order_status"])
    assert post(Client(), message, token).status_code == 200
    assert runs.run_cancel(run=run)
    assert runs.run_retry_failed(run=Run.objects.get(pk=run.pk)) == 0  # resumes what was left pending
    run = runs.run_execute_here(run.pk)
    assert run.status == "completed"
    assert CaseResult.objects.get(run=run, case__eval_id="order_status").status == "passed"
    lost = CaseResult.objects.get(run=run, case__eval_id="weather_tokyo")
    assert lost.status == "error" and lost.error == "no output was stored for this case (no trace arrived for it)"
