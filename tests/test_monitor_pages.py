"""Monitor pages, API and CLI (issue 31): creating and editing through the form (problems
named, nothing saved), the figures and the failing traces, the verdicts beside a trace's
waterfall, threads read as conversations, home's last 24 h, retention; query counts that do
not grow with the traces."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import (
    AuditEvent,
    Membership,
    Monitor,
    MonitorResult,
    Project,
    Retention,
    RetentionSweep,
    Span,
    Trace,
    TraceThread,
)
from evaluations.monitors import retention, scoring
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post
from tests.test_access_matrix import make_user


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


def form(**overrides: Any) -> dict[str, Any]:
    data = {"name": "answers", "level": "trace", "sample_rate": "1", "idle_seconds": "300", "enabled": "on",
            "environment": "prod", "attributes": "tier=gold",
            "criteria": json.dumps({"json": {"evaluator": "json_valid"}})}
    return {**data, **overrides}


def test_the_form_creates_and_edits_a_monitor_and_names_problems(acme: Project, alice_client: Client) -> None:
    bad = alice_client.post("/monitors/new/", form(criteria='{"x": {"evaluator": "trajectory_match"}}'))
    assert bad.status_code == 400 and Monitor.objects.count() == 0
    assert "criteria.x: &#x27;trajectory_match&#x27; needs an expected answer" in bad.content.decode()
    assert alice_client.post("/monitors/new/", form(criteria="{nope")).status_code == 400
    assert alice_client.post("/monitors/new/", form(attributes="no equals sign")).status_code == 400
    created = alice_client.post("/monitors/new/", form())
    monitor = Monitor.objects.get()
    assert created.status_code == 302 and created["Location"] == f"/monitors/{monitor.pk}/"
    assert monitor.filters["environment"] == "prod" and monitor.filters["attributes"] == {"tier": "gold"}
    assert AuditEvent.objects.filter(verb="monitor.created", object_id=str(monitor.pk)).exists()
    page = alice_client.get(f"/monitors/{monitor.pk}/edit/").content.decode()
    assert 'value="answers"' in page and "tier=gold" in page
    alice_client.post(f"/monitors/{monitor.pk}/edit/", form(sample_rate="0.5"))
    monitor.refresh_from_db()
    assert (monitor.version, monitor.sample_rate) == (2, 0.5)
    assert AuditEvent.objects.filter(verb="monitor.edited", object_id=str(monitor.pk)).count() == 1
    assert alice_client.post("/monitors/new/", form()).status_code == 400  # the same name again


def test_the_detail_page_shows_figures_and_failing_traces_that_open_the_trace(
        acme: Project, alice: Any, alice_client: Client, token: str) -> None:
    monitor = make(acme, alice)
    pks = send(token, agent_trace('{"city": "Paris"}', user="ann"), agent_trace("<b>Lyon</b>", tool_error="timeout",
                                                                                user="ann"),
               agent_trace('{"city": "Paris"}', env="staging"))
    scoring.score_traces(pks)
    html = alice_client.get(f"/monitors/{monitor.pk}/").content.decode()
    assert 'data-testid="monitor-chart"' in html and "2 of 3 traces" in html
    assert f'href="/traces/{pks[1]}/"' in html and "json, mentions_paris, tools_ok" in html
    assert f'href="/traces/{pks[0]}/"' not in html
    staging = alice_client.get(f"/monitors/{monitor.pk}/?environment=staging").content.decode()
    assert "1 of 1 traces" in staging and f'href="/traces/{pks[1]}/"' not in staging
    ann = alice_client.get(f"/monitors/{monitor.pk}/?end_user=ann").content.decode()
    assert "1 of 2 traces" in ann

    trace = alice_client.get(f"/traces/{pks[1]}/").content.decode()
    assert 'data-testid="trace-verdicts"' in trace and "✗ failed 3 criteria" in trace
    assert "lookup: timeout" in trace and 'data-testid="trace-promote"' in trace
    assert "&lt;b&gt;Lyon&lt;/b&gt;" in trace and "<b>Lyon</b>" not in trace

    home = alice_client.get("/").content.decode()
    assert 'data-testid="home-monitors"' in home and f'href="/monitors/{monitor.pk}/"' in home
    listing = alice_client.get("/monitors/").content.decode()
    assert "67%" in listing


def _scored(project: Project, user: Any, token: str, n: int) -> Monitor:
    monitor = Monitor.objects.filter(project=project).first() or make(project, user)
    scoring.score_traces(send(token, *[agent_trace("Lyon" if i % 2 else '{"a": "Paris"}', session=f"s{i % 3}",
                                                   user=f"u{i % 2}") for i in range(n)]))
    return monitor


@pytest.mark.parametrize("path", ["/monitors/{m}/", "/monitors/{m}/?end_user=u1", "/monitors/{m}/?range=30d",
                                  "/monitors/", "/", "/threads/", "/threads/view/?id=s1", "/traces/?end_user=u1"])
def test_pages_take_the_same_queries_for_few_and_many_traces(
        path: str, acme: Project, alice: Any, alice_client: Client, token: str,
        django_assert_max_num_queries: Any) -> None:
    monitor = _scored(acme, alice, token, 4)
    url = path.format(m=monitor.pk)
    few = 0

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        nonlocal few
        few += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert alice_client.get(url).status_code == 200
    assert 0 < few <= 25
    _scored(acme, alice, token, 60)
    with django_assert_max_num_queries(few):
        assert alice_client.get(url).status_code == 200


def test_a_thread_reads_as_a_conversation(acme: Project, alice: Any, alice_client: Client, token: str) -> None:
    send(token, agent_trace("Hello! Where to?", session="conv-1", user="ann"),
         agent_trace("Paris, <script>alert(1)</script>", session="conv-1", tool_error="boom"),
         agent_trace("other", session="conv-2", user="bob"))
    thread = TraceThread.objects.get(project=acme, thread_id="conv-1")
    assert (thread.traces, thread.errors, thread.end_user) == (2, 1, "ann")  # one trace with a failed span
    html = alice_client.get("/threads/view/?id=conv-1").content.decode()
    assert html.index("Hello! Where to?") < html.index("Paris, &lt;script&gt;")
    assert "<script>alert(1)</script>" not in html and "lookup ✗" in html
    listing = alice_client.get("/threads/?end_user=ann").content.decode()
    assert "conv-1" in listing and "conv-2" not in listing
    assert alice_client.get("/threads/view/?id=nope").status_code == 404
    by_user = alice_client.get("/traces/?end_user=bob").content.decode()
    assert "1 trace" in by_user


def test_retention_is_set_by_admins_and_deletes_old_traces_in_batches(
        acme: Project, alice: Any, alice_client: Client, token: str) -> None:
    dave = make_user("dave", acme, Membership.Role.ADMIN)
    admin = Client()
    admin.force_login(dave)
    assert alice_client.post("/projects/acme/retention/", {"days": "7"}).status_code == 403
    assert admin.post("/projects/acme/retention/", {"days": "zero"}).status_code == 400
    assert admin.post("/projects/acme/retention/", {"days": "7"}).status_code == 302
    assert Retention.objects.get(project=acme).days == 7
    from django_q.models import Schedule

    assert Schedule.objects.filter(name="evalsite: retention", func="evaluations.tasks.retention_sweep").exists()
    assert AuditEvent.objects.filter(verb="retention.changed").count() == 1
    monitor = make(acme, alice)
    pks = send(token, *[agent_trace("Paris", session="old") for _ in range(5)], agent_trace("Paris"))
    scoring.score_traces(pks)
    old = timezone.now() - timedelta(days=8)
    Trace.objects.filter(pk__in=pks[:5]).update(received_at=old)
    TraceThread.objects.filter(thread_id="old").update(last_at=old)
    sweep = retention.project_sweep(acme.pk, 7, batch=2)
    assert (sweep.traces, sweep.results) == (5, 5)
    assert list(Trace.objects.values_list("pk", flat=True)) == [pks[5]]
    assert Span.objects.filter(trace_id__in=pks[:5]).count() == 0
    assert MonitorResult.objects.filter(monitor=monitor).count() == 1
    assert not TraceThread.objects.filter(thread_id="old").exists()
    page = alice_client.get("/projects/acme/retention/").content.decode()
    assert "7 days" in page and 'data-testid="retention-sweeps"' in page
    assert retention.retention_sweep() == {"acme": 0}
    assert RetentionSweep.objects.count() == 2
    # The API twin: members read the setting and the sweeps, admins set it.
    url = "/api/v1/projects/acme/retention/"
    read = alice_client.get(url).json()
    assert read["days"] == 7 and [s["traces"] for s in read["sweeps"]] == [0, 5]
    assert alice_client.put(url, {"days": 30}, content_type="application/json").status_code == 403
    assert admin.put(url, {"days": 0}, content_type="application/json").status_code == 400
    assert Retention.objects.get(project=acme).days == 7
    assert admin.put(url, {"days": None}, content_type="application/json").json()["days"] is None
    assert Retention.objects.get(project=acme).days is None
    assert AuditEvent.objects.filter(verb="retention.changed").count() == 2


def test_the_api_creates_edits_and_reads_monitors(acme: Project, alice: Any, token: str) -> None:
    api = Client(HTTP_AUTHORIZATION=f"Token {token}")
    bad = api.post("/api/v1/monitors/", {"name": "x", "criteria": {"x": {"evaluator": "json_schema"}}},
                   content_type="application/json")
    assert bad.status_code == 400 and "criteria.x.options.schema" in json.dumps(bad.json())
    created = api.post("/api/v1/monitors/", spec(), content_type="application/json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    edited = api.patch(f"/api/v1/monitors/{pk}/", {"sample_rate": 0.5}, content_type="application/json")
    assert edited.json()["version"] == 2 and edited.json()["name"] == "answers"
    api.patch(f"/api/v1/monitors/{pk}/", {"sample_rate": 1.0}, content_type="application/json")
    scoring.score_traces(send(token, agent_trace("Lyon", session="t1"), agent_trace('{"c": "Paris"}')))
    stats = api.get(f"/api/v1/monitors/{pk}/stats/?hours=48").json()
    assert (stats["version"], stats["total"], stats["passed"]) == (3, 2, 1)
    assert stats["criteria"]["json"] == {"passed": 1, "total": 2, "mean_score": 0.5}
    failing = api.get(f"/api/v1/monitors/{pk}/failing/").json()
    assert failing["count"] == 1 and sorted(failing["results"][0]["failed"]) == ["json", "mentions_paris"]
    assert api.get("/api/v1/threads/").json()["results"][0]["thread_id"] == "t1"
    assert api.post(f"/api/v1/monitors/{pk}/backfill/", {"since": "2026-01-01T00:00:00Z"},
                    content_type="application/json").status_code == 202
    assert [m["id"] for m in api.get("/api/v1/monitors/").json()["results"]] == [pk]
    schema = Client().get("/api/schema/").content.decode()
    assert "/api/v1/monitors/{id}/stats/" in schema and "/api/v1/threads/" in schema


def test_the_cli(acme: Project, alice: Any, token: str, tmp_path: Any) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec()))
    out = StringIO()
    call_command("monitors", "create", "--file", str(path), "--project", "acme", stdout=out)
    pk = json.loads(out.getvalue())["id"]
    path.write_text(json.dumps({"criteria": {"x": {"evaluator": "nope"}}}))
    with pytest.raises(CommandError, match=r"criteria\.x: no evaluator named 'nope'"):
        call_command("monitors", "edit", str(pk), "--file", str(path))
    send(token, agent_trace("Paris"))
    out = StringIO()
    call_command("monitors", "backfill", str(pk), "--since", "2020-01-01T00:00:00+00:00", "--here", stdout=out)
    assert json.loads(out.getvalue()) == {"id": pk, "scored": 1}
    out = StringIO()
    call_command("monitors", "show", str(pk), stdout=out)
    assert json.loads(out.getvalue())["total"] == 1
    out = StringIO()
    call_command("monitors", "retention", "--project", "acme", "--days", "30", "--sweep", stdout=out)
    assert json.loads(out.getvalue()) == {"project": "acme", "days": 30, "deleted": {"traces": 0, "results": 0}}


def test_the_threads_list_pages_without_counting(acme: Project, alice_client: Client) -> None:
    now = timezone.now()
    TraceThread.objects.bulk_create([TraceThread(project=acme, thread_id=f"t{n:03}", first_at=now,
                                                 last_at=now - timedelta(seconds=n), traces=1) for n in range(55)])
    first = alice_client.get("/threads/").content.decode()
    assert "t000" in first and "t049" in first and "t050" not in first and "Older →" in first
    second = alice_client.get("/threads/?page=2").content.decode()
    assert "t050" in second and "t054" in second and "t049" not in second and "Older →" not in second
    assert "← Newer" in second and alice_client.get("/threads/?page=x").status_code == 200
