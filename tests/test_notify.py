"""Notifications (evaluations/notify): rules fired by what happens, delivered to real
receivers on 127.0.0.1 (a webhook server that checks signatures, an aiosmtpd SMTP server),
with retries, pausing, cooldown and grouping, the egress policy, and escaping."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from evaluations.accounts.tokens import token_create
from evaluations.models import (
    Membership,
    Monitor,
    Notification,
    NotifyAttempt,
    NotifyChannel,
    NotifyDelivery,
    NotifyEvent,
    NotifyMessage,
    NotifyRule,
    Project,
    Run,
    Trace,
)
from evaluations.monitors import scoring
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from evaluations.monitors.stats import criterion_window
from evaluations.notify import channels, delivery, events, payloads, rules, services
from evaluations.review import triage as triage_service
from tests.compare_helpers import baseline_and_candidate
from tests.monitor_helpers import agent_trace
from tests.monitor_helpers import spec as monitor_spec
from tests.notify_helpers import parts, smtp_server, smtp_settings, webhook_receiver
from tests.otlp_helpers import post as otlp_post

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "notify-webhook.schema.json").read_text())


def assert_documented(message: NotifyMessage) -> None:
    """The webhook body this message makes matches docs/notify-webhook.schema.json."""
    body = payloads.webhook_body(message.payload, delivery_id="5b0f7a8e-0c1d-4a43-9f0b-2f3f4c7d1e21",
                                 created_at=message.created_at.isoformat())
    jsonschema.validate(json.loads(json.dumps(body)), SCHEMA)


@pytest.fixture(autouse=True)
def quick_retries(settings: Any) -> None:
    settings.EVALSITE_NOTIFY_BACKOFF_SECONDS = 0.05
    settings.EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS = 1.0


@pytest.fixture
def sync_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 runs each task where it is queued


def channel(project: Project, kind: str, url: str = "", **values: Any) -> NotifyChannel:
    return services.channel_save(project=project, actor=None, values={"name": f"{kind}-{url[-6:]}", "kind": kind,
                                                                        "url": url, **values})


def rule(project: Project, chans: list[NotifyChannel], **values: Any) -> NotifyRule:
    values = {"name": "nightly regressions", "kind": "run_finished", **values}
    return services.rule_save(project=project, actor=None, values=values, channels=[c.pk for c in chans])


def test_a_run_that_regresses_sends_one_signed_webhook_matching_the_documented_schema(
        acme: Project, sync_queue: None, django_capture_on_commit_callbacks: Any) -> None:
    with webhook_receiver() as receiver:
        hook = channel(acme, "webhook", receiver.url)
        hook.secret = receiver.secret
        hook.save()
        rule(acme, [hook], condition="regressions")
        with django_capture_on_commit_callbacks(execute=True):
            baseline, candidate = baseline_and_candidate(acme)
        assert len(receiver.requests) == 1  # the baseline had nothing to regress against
        got = receiver.requests[0]
        assert got.signed and got.answered == 200
        jsonschema.validate(got.body, SCHEMA)
        sent = NotifyDelivery.objects.get()
        assert got.delivery_id == str(sent.idempotency_id) == got.body["id"] == got.headers["Idempotency-Key"]
        [item] = got.body["items"]
        assert item["run"]["id"] == candidate.pk and item["regressions"] == 2 and item["baseline"]["id"] == baseline.pk
        assert item["compare_url"].endswith(f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}")
        assert item["causes"] and all("&cause=" in c["url"] for c in item["causes"])
        assert sent.status == "sent" and sent.attempts == 1
        log = NotifyAttempt.objects.get()
        assert log.ok and log.status_code == 200 and log.latency_ms > 0 and '"ok"' in log.excerpt


def test_an_event_whose_outbox_row_was_never_written_is_found_by_the_sweep(acme: Project, sync_queue: None) -> None:
    """Recorded outside a transaction, an activity event and its outbox row are two writes; a
    process that died between them leaves the event with no row. The minute sweep writes it."""
    inbox = channel(acme, "inapp")
    rule(acme, [inbox], condition="regressions")
    _, candidate = baseline_and_candidate(acme)  # its events' rows are in the outbox, not yet handled
    finished = set(NotifyEvent.objects.values_list("audit_id", flat=True))
    assert len(finished) == 2
    NotifyEvent.objects.all().delete()  # as if the process died before writing them
    now = timezone.now() + timedelta(minutes=5)
    assert events.unrecorded(since=now - events.RECONCILE, until=now) == 2
    assert set(NotifyEvent.objects.values_list("audit_id", flat=True)) == finished
    assert events.unrecorded(since=now - events.RECONCILE, until=now) == 0  # written once
    events.process(list(NotifyEvent.objects.values_list("pk", flat=True)))
    [message] = NotifyMessage.objects.all()
    assert message.payload["items"][0]["run"]["id"] == candidate.pk
    # Events older than every rule that wants them are not a rule's business.
    NotifyEvent.objects.all().delete()
    NotifyRule.objects.update(created_at=now)
    assert events.unrecorded(since=now - events.RECONCILE, until=now + timedelta(minutes=1)) == 0


def test_a_tampered_body_fails_the_signature_check() -> None:
    good = channels.signature("k", "1700000000", b'{"a":1}')
    assert good == channels.signature("k", "1700000000", b'{"a":1}')
    assert good != channels.signature("k", "1700000000", b'{"a":2}')
    assert good != channels.signature("k", "1700000001", b'{"a":1}')


def test_a_receiver_that_fails_twice_gets_the_same_id_three_times_and_keeps_one(acme: Project) -> None:
    with webhook_receiver(fail_first=2) as receiver:
        hook = channel(acme, "webhook", receiver.url)
        hook.secret = receiver.secret
        hook.save()
        sent = delivery.send_test(hook)  # queued (no worker here): the task's work, done here
        assert delivery.deliver([sent.pk]) == 1
    assert [r.answered for r in receiver.requests] == [500, 500, 200]
    jsonschema.validate(receiver.requests[-1].body, SCHEMA)
    assert {r.delivery_id for r in receiver.requests} == {str(sent.idempotency_id)}
    assert all(r.signed for r in receiver.requests)
    assert receiver.distinct_ids() == {str(sent.idempotency_id)}
    log = list(NotifyAttempt.objects.filter(channel=hook).order_by("at", "pk").values_list("ok", "status_code"))
    assert log == [(False, 500), (False, 500), (True, 200)]
    sent.refresh_from_db()
    hook.refresh_from_db()
    assert sent.status == "sent" and sent.attempts == 3 and hook.failures_in_row == 0
    assert delivery.deliver([sent.pk]) == 0  # already sent: a second task sends nothing


def test_a_channel_that_keeps_failing_pauses_and_its_deliveries_wait_for_the_resume(acme: Project,
                                                                                      settings: Any) -> None:
    settings.EVALSITE_NOTIFY_PAUSE_AFTER = 3
    settings.EVALSITE_NOTIFY_MAX_ATTEMPTS = 50
    with webhook_receiver(fail_first=3) as receiver:
        hook = channel(acme, "webhook", receiver.url)
        sent = delivery.send_test(hook)
        assert delivery.deliver([sent.pk]) == 0
        hook.refresh_from_db()
        sent.refresh_from_db()
        assert hook.paused_at is not None and "3 failures in a row" in hook.pause_reason
        assert sent.status == "pending" and sent.attempts == 3 and len(receiver.requests) == 3
        assert delivery.sweep(timezone.now() + timedelta(hours=1)) == 0  # paused: nothing queued
        assert delivery.deliver([sent.pk]) == 0 and len(receiver.requests) == 3
        delivery.resume(hook)
        assert delivery.deliver([sent.pk]) == 1
    sent.refresh_from_db()
    assert sent.status == "sent" and [r.answered for r in receiver.requests] == [500, 500, 500, 200]


def test_out_of_attempts_a_delivery_fails_and_says_why(acme: Project, settings: Any) -> None:
    settings.EVALSITE_NOTIFY_MAX_ATTEMPTS = 2
    with webhook_receiver(fail_first=10) as receiver:
        sent = delivery.send_test(channel(acme, "webhook", receiver.url))
        delivery.deliver([sent.pk])
    sent.refresh_from_db()
    assert sent.status == "failed" and sent.attempts == 2 and "receiver says no" in sent.last_error


def test_a_killed_worker_leaves_a_lease_the_sweep_takes_back(acme: Project) -> None:
    with webhook_receiver() as receiver:
        sent = delivery.send_test(channel(acme, "webhook", receiver.url))
        assert delivery.claim(sent.pk)  # a worker took it ... and died before it answered
        assert delivery.deliver([sent.pk]) == 0  # its lease holds: nobody else sends it meanwhile
        later = timezone.now() + timedelta(seconds=61)
        NotifyDelivery.objects.filter(pk=sent.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
        assert delivery.sweep(later) == 1
        assert delivery.deliver([sent.pk]) == 1
    sent.refresh_from_db()
    assert sent.attempts == 2 and receiver.distinct_ids() == {str(sent.idempotency_id)}


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
                                 "http://240.0.0.1/hook", "http://[2002:a9fe:a9fe::1]/", "http://0xa9fea9fe/",
                                 "ftp://127.0.0.1/", "http://metadata.example/"])
def test_webhook_urls_go_through_the_egress_policy(acme: Project, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> Any:  # no test asks DNS anything
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    with pytest.raises(ValidationError) as refused:
        channel(acme, "webhook", url)
    assert "url" in refused.value.message_dict
    assert not NotifyChannel.objects.exists()
    # a channel whose name later resolves to a refused address is refused at send, not retried
    hook = NotifyChannel.objects.create(project=acme, name="x", kind="webhook", url=url, secret="k")
    sent = delivery.send_test(hook)
    assert delivery.deliver([sent.pk]) == 0
    sent.refresh_from_db()
    assert sent.status == "failed" and sent.attempts == 1 and sent.last_error.startswith("refused")


def test_cooldown_groups_what_fires_meanwhile_into_one_message(acme: Project, sync_queue: None,
                                                               django_capture_on_commit_callbacks: Any) -> None:
    inbox = channel(acme, "inapp")
    alice = get_user_model().objects.get(username="alice") if get_user_model().objects.filter(
        username="alice").exists() else get_user_model().objects.create_user("alice", "a@example.com", "x")
    Membership.objects.get_or_create(project=acme, user=alice, defaults={"role": "member"})
    rule(acme, [inbox], condition="any", cooldown_minutes=60)
    with django_capture_on_commit_callbacks(execute=True):
        baseline, candidate = baseline_and_candidate(acme)
        from tests.compare_helpers import make_run
        from tests.engine_helpers import perfect_outputs

        third = make_run(acme, candidate.evalset_version, perfect_outputs(), name="third")
    messages = list(NotifyMessage.objects.order_by("pk"))
    assert len(messages) == 1 and [i["run"]["id"] for i in messages[0].payload["items"]] == [baseline.pk]
    with django_capture_on_commit_callbacks(execute=True):
        events.sweep()  # still cooling down
    assert NotifyMessage.objects.count() == 1
    NotifyRule.objects.update(last_fired_at=timezone.now() - timedelta(minutes=61))
    with django_capture_on_commit_callbacks(execute=True):
        events.sweep()
    grouped = NotifyMessage.objects.order_by("pk").last()
    assert grouped is not None and [i["run"]["id"] for i in grouped.payload["items"]] == [candidate.pk, third.pk]
    assert grouped.subject.endswith("2 alerts")
    assert Notification.objects.filter(user=alice).count() == 2


def test_pass_rate_and_filters_decide_which_rules_a_run_fires(acme: Project) -> None:
    _, candidate = baseline_and_candidate(acme)
    candidate = Run.objects.select_related("evalset_version__evalset").get(pk=candidate.pk)
    rate = candidate.summary["pass_rate"]
    low = NotifyRule(project=acme, kind="run_finished", condition="pass_rate_below", pass_rate_below=rate + 0.01)
    high = NotifyRule(project=acme, kind="run_finished", condition="pass_rate_below", pass_rate_below=rate)
    assert rules.run_condition_holds(low, candidate, {}) and not rules.run_condition_holds(high, candidate, {})
    on_main = NotifyRule.objects.create(project=acme, name="main", kind="run_finished", branch="main")
    anywhere = NotifyRule.objects.create(project=acme, name="all", kind="run_finished")
    their_model = NotifyRule.objects.create(project=acme, name="m", kind="run_finished", model=candidate.model)
    other_model = NotifyRule.objects.create(project=acme, name="o", kind="run_finished", model="other")
    matched = {r.pk for r in rules.run_rules(candidate)}
    assert anywhere.pk in matched and their_model.pk in matched
    assert other_model.pk not in matched and (on_main.pk in matched) == (candidate.branch == "main")


def _monitor(project: Project, user: Any) -> Monitor:
    return monitor_create(project=project, spec=MonitorSpec.model_validate(monitor_spec()), user=user)


def _traces(user: Any, answers: list[str]) -> list[int]:
    """Received over OTLP as an exporter sends them; the pks of the traces made."""
    secret = token_create(user=user, name=f"agent-{len(answers)}").secret
    before = set(Trace.objects.values_list("pk", flat=True))
    for answer in answers:
        assert otlp_post(Client(), agent_trace(answer), secret).status_code == 200
    return sorted(set(Trace.objects.values_list("pk", flat=True)) - before)


def test_a_monitors_drop_fires_its_rule_through_the_signal_once_per_window(
        acme: Project, alice: Any, sync_queue: None, django_capture_on_commit_callbacks: Any) -> None:
    """Issues 31 and 32 together: a real monitor scores received traces; the signal it sends
    after the batch commits checks the monitor's rules over `criterion_window`, and the one
    whose pass rate fell below its threshold with enough scores says so in the in-app list."""
    monitor = _monitor(acme, alice)
    inbox = channel(acme, "inapp")
    below = rule(acme, [inbox], name="below", kind="monitor", monitor_id=monitor.pk, criterion="mentions_paris",
                 threshold=0.5, window_minutes=60, min_count=4)
    rule(acme, [inbox], name="above", kind="monitor", monitor_id=monitor.pk, criterion="mentions_paris",
         threshold=0.2, window_minutes=60, min_count=1)
    rule(acme, [inbox], name="too few", kind="monitor", monitor_id=monitor.pk, criterion="mentions_paris",
         threshold=1.0, window_minutes=60, min_count=10)
    pks = _traces(alice, ['{"city": "Paris"}', "Lyon", "Lyon", "Rome"])
    with django_capture_on_commit_callbacks(execute=True):
        assert scoring.score_traces(pks) == 4
    now = timezone.now()
    assert criterion_window(monitor.pk, "mentions_paris", now - timedelta(hours=1), now + timedelta(minutes=1)) \
        == (1, 4)
    [message] = NotifyMessage.objects.all()
    assert_documented(message)
    assert message.rule == below and message.payload["items"][0]["pass_rate"] == pytest.approx(0.25)
    assert Notification.objects.filter(user=alice, message=message).exists()  # alice is a member of acme
    # More traces in the same window: scored, the signal sent again, nothing fires twice.
    more = _traces(alice, ["Oslo"])
    with django_capture_on_commit_callbacks(execute=True):
        assert scoring.score_traces(more) == 1
    assert NotifyMessage.objects.count() == 1
    later = timezone.now() + timedelta(hours=3)  # a later window holds none of these scores
    assert not rules.monitor_check(below, criterion_window, later).fires


def test_monitor_rules_need_a_monitor_of_the_project_its_criterion_and_threshold(acme: Project, globex: Project,
                                                                               alice: Any) -> None:
    monitor = _monitor(acme, alice)
    elsewhere = _monitor(globex, alice)
    with pytest.raises(ValidationError) as bad:
        rule(acme, [], kind="monitor", monitor_id=monitor.pk, criterion="")
    assert "criterion" in bad.value.message_dict and not NotifyRule.objects.exists()
    with pytest.raises(ValidationError) as bad:
        rule(acme, [], kind="monitor", monitor_id=monitor.pk, criterion="mentions_paris", threshold="1.5")
    assert bad.value.message_dict["threshold"] == ["must be between 0 and 1"]
    with pytest.raises(ValidationError) as bad:
        rule(acme, [], kind="monitor", monitor_id=elsewhere.pk, criterion="mentions_paris", threshold="0.5")
    assert bad.value.message_dict["monitor_id"] == [f"no monitor {elsewhere.pk} in {acme.name}"]
    with pytest.raises(ValidationError) as bad:
        rule(acme, [], kind="monitor", monitor_id=monitor.pk, criterion="nope", threshold="0.5")
    assert "has no criterion 'nope'" in bad.value.message_dict["criterion"][0]
    assert not NotifyRule.objects.exists()


def test_an_assignment_is_emailed_to_the_assignee_in_text_and_escaped_html(
        acme: Project, alice: Any, settings: Any, sync_queue: None, django_capture_on_commit_callbacks: Any) -> None:
    dave = get_user_model().objects.create_user("dave", "dave@example.com", "x")
    Membership.objects.create(project=acme, user=dave, role="admin")
    with smtp_server() as box:
        smtp_settings(settings, box)
        mail = channel(acme, "email")
        rule(acme, [mail, channel(acme, "inapp")], name="assigned", kind="triage_assigned")
        baseline, candidate = baseline_and_candidate(acme)
        evalset = candidate.evalset_version.evalset
        with django_capture_on_commit_callbacks(execute=True):
            triage_service.triage_update(project=acme, evalset=evalset, eval_id="<img src=x onerror=alert(1)>",
                                         baseline=baseline, candidate=candidate, assignee=alice, actor=dave)
        [message] = box.messages
    assert message["X-Envelope-To"] == "alice@example.com"
    text, html = parts(message)
    assert "dave assigned <img src=x onerror=alert(1)> to alice" in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "<img" not in html
    assert Notification.objects.filter(user=alice).count() == 1 and not Notification.objects.filter(user=dave).exists()
    assert_documented(NotifyMessage.objects.get())


def test_a_mention_tells_the_person_mentioned_and_links_them_in_the_comment(
        acme: Project, alice: Any, sync_queue: None, django_capture_on_commit_callbacks: Any) -> None:
    carol = get_user_model().objects.create_user("carol", "carol@example.com", "x")
    Membership.objects.create(project=acme, user=carol, role="viewer")
    rule(acme, [channel(acme, "inapp")], name="mentions", kind="mention")
    baseline, candidate = baseline_and_candidate(acme)
    evalset = candidate.evalset_version.evalset
    triage = triage_service.triage_update(project=acme, evalset=evalset, eval_id="weather_tokyo", baseline=baseline,
                                          candidate=candidate, status="flaky", actor=alice)
    body = "@carol see <script>alert(1)</script>, and @nobody, and mail@carol.example"
    with django_capture_on_commit_callbacks(execute=True):
        triage_service.comment_add(triage=triage, body=body, author=alice)
    [note] = Notification.objects.all()
    assert_documented(note.message)
    assert note.user == carol and note.message.payload["items"][0]["mentioned"] == "carol"
    assert note.message.payload["items"][0]["excerpt"].startswith("@carol see <script>")  # data, escaped when shown
    [node] = triage_service.comment_tree(triage)
    assert '<a href="/review/?assignee=carol"' in node.html
    assert "@nobody" in node.html and "?assignee=nobody" not in node.html
    assert "<script>" not in node.html and "&lt;script&gt;" in node.html


def test_slack_text_escapes_untrusted_text_and_links_the_comparison(acme: Project) -> None:
    message = NotifyMessage(project=acme, event="run_finished", subject="[Acme] <!channel> run",
                            payload={"items": [{"type": "run_finished", "verdict": "run #3 (<@U1|x>) finished",
                                                "compare_url": "http://h/compare/?baseline=1&candidate=3",
                                                "run": {"url": "http://h/runs/3/"},
                                                "causes": [{"signature": "a<b>&c", "cases": 2, "change": "new",
                                                            "url": "http://h/compare/?cause=4"}]}]})
    text = channels.slack_text(message)
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text
    assert "<http://h/compare/?baseline=1&candidate=3|run #3 (&lt;@U1|x&gt;) finished>" in text
    assert "<http://h/compare/?cause=4|  2 cases: a&lt;b&gt;&amp;c (new)>" in text


def test_a_digest_sums_the_period_runs_regressions_causes_and_triage(acme: Project, sync_queue: None,
                                                                      django_capture_on_commit_callbacks: Any) -> None:
    inbox = channel(acme, "inapp")
    digest = rule(acme, [inbox], name="daily", kind="digest", period="daily")
    with django_capture_on_commit_callbacks(execute=True):
        baseline_and_candidate(acme)
    with django_capture_on_commit_callbacks(execute=True):
        events.sweep()
    assert not NotifyMessage.objects.filter(rule=digest).exists()  # a new rule waits for its first period
    NotifyRule.objects.filter(pk=digest.pk).update(created_at=timezone.now() - timedelta(days=1, minutes=1))
    with django_capture_on_commit_callbacks(execute=True):
        events.sweep()
    [message] = NotifyMessage.objects.filter(rule=digest)
    assert_documented(message)
    [item] = message.payload["items"]
    assert (item["runs"], item["regressions"]) == (2, 2) and item["regressed_runs"][0]["regressions"] == 2
    with django_capture_on_commit_callbacks(execute=True):
        events.sweep()  # not due again for a day
    assert NotifyMessage.objects.filter(rule=digest).count() == 1


def test_an_event_whose_task_was_lost_is_handled_by_the_sweep_once(acme: Project, settings: Any, sync_queue: None,
                                                                    django_capture_on_commit_callbacks: Any) -> None:
    from evaluations.models import NotifyEvent

    baseline_and_candidate(acme)  # no rules yet: nothing goes into the outbox
    assert not NotifyEvent.objects.exists()
    rule(acme, [channel(acme, "inapp")], condition="any")
    with django_capture_on_commit_callbacks(execute=False) as lost:  # the enqueue never happens
        baseline_and_candidate(acme)
    assert lost and NotifyEvent.objects.filter(done_at=None).count() == 2 and not NotifyMessage.objects.exists()
    settings.EVALSITE_NOTIFY_SWEEP_GRACE_SECONDS = 0
    with django_capture_on_commit_callbacks(execute=True):
        assert events.sweep()["events_requeued"] == 2
    assert not NotifyEvent.objects.filter(done_at=None).exists()
    assert NotifyMessage.objects.count() == 2
    with django_capture_on_commit_callbacks(execute=True):
        assert events.sweep()["events_requeued"] == 0
    assert events.process(list(NotifyEvent.objects.values_list("pk", flat=True))) == 0  # done: a rerun does nothing
    NotifyEvent.objects.update(done_at=None)  # as if a worker died after handling, before marking
    assert events.process(list(NotifyEvent.objects.values_list("pk", flat=True))) == 2
    assert NotifyMessage.objects.count() == 2  # handled twice, fired once


def test_slack_gets_the_verdict_line_linked_to_the_comparison_and_its_top_causes(
        acme: Project, sync_queue: None, django_capture_on_commit_callbacks: Any) -> None:
    with webhook_receiver() as receiver:
        rule(acme, [channel(acme, "slack", receiver.url)], condition="new_causes")
        with django_capture_on_commit_callbacks(execute=True):
            baseline, candidate = baseline_and_candidate(acme)
        [got] = receiver.requests
    text = got.body["text"]
    compare = f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}"
    assert set(got.body) == {"text"} and text.startswith("*[Acme] run #")
    # the branch and eval-set version travel with the verdict, the baseline named as the pages name it
    assert (f"{compare}|run #{candidate.pk} (candidate) finished on no branch (v1): 2 regressions "
            f"vs #{baseline.pk} · previous on no branch, 2 new causes") in text
    assert text.count(f"{compare}&cause=") == 2 and "missing get_order (new)>" in text
