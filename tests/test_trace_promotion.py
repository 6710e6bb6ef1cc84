"""A received trace promoted into a case: proposed from its spans (user input, final answer,
tool calls with arguments), edited in the case editor, saved as a promotion naming the trace;
members and admins only; the API and `manage.py curate promote-trace` do the same."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evaluations.accounts.tokens import token_create
from evaluations.evalsets.curation import case_native
from evaluations.models import EvalCase, EvalSetVersion, Project
from evaluations.review.promotion import proposed_case_from_trace
from tests.api_helpers import assert_error, member, token_client
from tests.test_pages_evalsets import import_generated
from tests.trace_promotion_helpers import ANSWER, QUESTION, send_agent_trace

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(alice: Any) -> str:
    return token_create(user=alice, name="otel").secret


@pytest.mark.parametrize("genai", [False, True], ids=["openinference", "genai"])
def test_the_proposal_reads_the_input_answer_and_tool_calls_off_the_spans(
    genai: bool, acme: Project, token: str
) -> None:
    trace = send_agent_trace(token, genai=genai)
    case = proposed_case_from_trace(trace, taken={f"trace-{trace.trace_id[:12]}"})
    assert case["eval_id"] == f"trace-{trace.trace_id[:12]}-2"  # the id was taken
    [turn] = case["conversation"]
    assert turn["user_content"]["content"] == QUESTION
    assert turn["expected_final_response"]["content"] == ANSWER
    assert turn["expected_tool_trajectory"] == [{"name": "get_weather", "args": {"city": "Paris", "unit": "C"}}]
    assert case["tags"] == ["promoted"] and case["metadata"]["source_trace_id"] == trace.trace_id


def _versions(outcome: Any) -> list[int]:
    return list(outcome.evalset.versions.order_by("number").values_list("number", flat=True))


def test_a_member_sees_the_action_and_saves_the_trace_as_a_case(
    acme: Project, alice_client: Client, token: str
) -> None:
    target = import_generated(acme, 3, eval_set_id="support")
    trace = send_agent_trace(token)
    page = alice_client.get(reverse("trace_detail", args=[trace.pk])).content.decode()
    assert 'data-testid="trace-promote"' in page and f'value="{target.evalset.pk}"' in page

    url = reverse("trace_promote", args=[trace.pk]) + f"?evalset={target.evalset.pk}"
    form = alice_client.get(url)
    assert form.status_code == 200
    html = form.content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Weather in &lt;b&gt;Paris&lt;/b&gt; &amp; Rome?" in html
    assert "get_weather" in html and trace.trace_id in html

    response = alice_client.post(
        url,
        {
            "base_version": "1",
            "note": "the failing production trace",
            "eval_id": "weather-paris",
            "name": "",
            "turn_count": "1",
            "tags": "promoted, production",
            "metadata": form.context["fields"].metadata,
            "original": form.context["fields"].original,
            "turn-0-user": QUESTION,
            "turn-0-expected": "It is sunny",
            "turn-0-role": "model",
            "turn-0-tools": '[{"name": "get_weather", "args": {"city": "Paris"}}]',
            "turn-0-rubrics": "[]",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    version = target.evalset.versions.order_by("-number").first()
    assert version is not None and version.number == 2
    assert version.how_created == EvalSetVersion.How.PROMOTION
    assert trace.trace_id in version.note and version.note.startswith("the failing production trace")
    case = case_native(EvalCase.objects.in_version_by_eval_id(version, "weather-paris").get())
    assert case["conversation"][0]["expected_tool_trajectory"][0]["args"] == {"city": "Paris"}
    assert case["tags"] == ["promoted", "production"]
    assert case["metadata"]["source_trace_id"] == trace.trace_id


def test_a_viewer_sees_no_action_and_cannot_promote(acme: Project, token: str) -> None:
    target = import_generated(acme, 2, eval_set_id="support")
    trace = send_agent_trace(token)
    viewer = Client()
    viewer.force_login(member("vera", acme, "viewer"))
    page = viewer.get(reverse("trace_detail", args=[trace.pk]))
    assert page.status_code == 200 and 'data-testid="trace-promote"' not in page.content.decode()
    url = reverse("trace_promote", args=[trace.pk]) + f"?evalset={target.evalset.pk}"
    assert viewer.get(url).status_code == 403
    assert viewer.post(url, {"base_version": "1", "eval_id": "x", "turn-0-user": "hi"}).status_code == 403
    assert _versions(target) == [1]


def test_another_projects_trace_or_eval_set_is_not_found(
    acme: Project, globex: Project, alice_client: Client, bob_client: Client, token: str
) -> None:
    target = import_generated(acme, 2, eval_set_id="support")
    theirs = import_generated(globex, 2, eval_set_id="theirs")
    trace = send_agent_trace(token)
    assert (
        bob_client.get(reverse("trace_promote", args=[trace.pk]) + f"?evalset={theirs.evalset.pk}").status_code == 404
    )
    assert (
        alice_client.get(reverse("trace_promote", args=[trace.pk]) + f"?evalset={theirs.evalset.pk}").status_code == 404
    )
    assert _versions(target) == [1] and _versions(theirs) == [1]


# --- API ------------------------------------------------------------------------------------------


def test_the_api_promotes_a_trace(acme: Project, alice: Any, token: str) -> None:
    target = import_generated(acme, 2, eval_set_id="support")
    trace = send_agent_trace(token, genai=True)
    client = token_client(alice)
    response = client.post(
        reverse("api_trace_promote", args=[trace.pk]),
        {"evalset": target.evalset.pk, "eval_id": "from-prod"},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["version"]["number"] == 2 and body["added"] == 1
    version = target.evalset.versions.get(number=2)
    assert version.how_created == "promotion" and version.note == f"from trace {trace.trace_id}"
    case = case_native(EvalCase.objects.in_version_by_eval_id(version, "from-prod").get())
    assert case["conversation"][0]["user_content"]["content"] == QUESTION


def test_the_api_says_what_is_wrong_and_writes_nothing(
    acme: Project, globex: Project, alice: Any, bob: Any, token: str
) -> None:
    target = import_generated(acme, 2, eval_set_id="support")
    theirs = import_generated(globex, 2, eval_set_id="theirs")
    trace = send_agent_trace(token)
    client = token_client(alice)
    url = reverse("api_trace_promote", args=[trace.pk])

    def problems(data: Any) -> list[str | None]:
        body = assert_error(client.post(url, data, content_type="application/json"), 400)
        return [p["path"] for p in body["problems"]]

    assert problems({}) == ["evalset"]
    assert problems({"evalset": "seven"}) == ["evalset"]
    assert problems({"evalset": theirs.evalset.pk}) == ["evalset"]  # another project's
    assert problems({"evalset": target.evalset.pk, "eval_id": "case_0001"}) == ["eval_id"]  # taken
    assert problems({"evalset": target.evalset.pk, "eval_id": "x" * 300}) == ["eval_id"]
    assert_error(
        client.post(url, {"evalset": target.evalset.pk, "base_version": 7}, content_type="application/json"), 409
    )
    assert_error(token_client(bob).post(url, {"evalset": theirs.evalset.pk}, content_type="application/json"), 404)
    viewer = token_client(member("vera", acme, "viewer"))
    assert_error(viewer.post(url, {"evalset": target.evalset.pk}, content_type="application/json"), 403)
    assert _versions(target) == [1] and _versions(theirs) == [1]


def test_the_cli_promotes_a_trace(acme: Project, token: str) -> None:
    target = import_generated(acme, 2, eval_set_id="support")
    trace = send_agent_trace(token)
    out = StringIO()
    call_command("curate", "promote-trace", str(trace.pk), "--target", "support", "--note", "nightly", stdout=out)
    assert "1 added" in out.getvalue()
    version = target.evalset.versions.get(number=2)
    assert version.how_created == "promotion" and version.note == f"nightly (from trace {trace.trace_id})"
    assert EvalCase.objects.in_version_by_eval_id(version, f"trace-{trace.trace_id[:12]}").exists()
