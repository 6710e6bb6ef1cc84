"""Numbers in query strings, forms and files are read with one rule (`converters.whole_number`):
ASCII digits, bounded. Found by CI's schemathesis: `GET /api/v1/compare/runs/?runs=³` answered
500, since "³".isdigit() is true and int("³") raises. The same test guarded a dozen pages, the
OTLP reader and trace promotion; each of them answers 4xx or reads nothing now, and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.test import Client

from evaluations.converters import MAX_ID, parse_id, whole_number
from evaluations.interop.otel.spans import Span, TraceError, parse_otlp, span_usage
from evaluations.models import Membership, Project
from evaluations.prompts.services import prompt_create
from evaluations.review.nway import NwayError, parse_run_ids
from evaluations.review.promotion import user_input
from tests.api_helpers import demo_runs, token_client

# Each passes str.isdigit() and is refused by int(), or is a number no id column holds.
LOOKALIKES = ["³", "²", "①", "1³", "٣" + "³"]
TOO_BIG = ["9" * 19, "9" * 30, "7" * 5000]


def _counts() -> dict[str, int]:
    models = list(apps.get_app_config("evaluations").get_models())
    return {m.__name__: m.objects.count() for m in [*models, get_user_model()]}


@pytest.mark.parametrize("text", [*LOOKALIKES, *TOO_BIG, "", " ", "-1", "+1", "1.0", "1e3", "0x10", "1_000"])
def test_whole_number_refuses_what_int_or_a_column_would_not_take(text: str) -> None:
    assert whole_number(text) is None
    assert parse_id(text) is None


def test_whole_number_reads_ascii_digits_within_its_bounds() -> None:
    assert whole_number(" 42 ") == 42
    assert whole_number("0") == 0 and parse_id("0") is None
    assert parse_id(str(MAX_ID)) == MAX_ID and parse_id(str(MAX_ID + 1)) is None
    assert whole_number("3650", minimum=1, maximum=3650) == 3650
    assert whole_number("3651", minimum=1, maximum=3650) is None
    assert whole_number("٣") is None  # int() would read an Arabic-Indic three; ids are written in ASCII
    assert whole_number(7) is None  # only text is read


@pytest.mark.parametrize("text", [*LOOKALIKES, *TOO_BIG, str(2**31)])
def test_run_ids_that_look_like_digits_are_an_nway_error(text: str) -> None:
    with pytest.raises(NwayError, match="is not a run id"):
        parse_run_ids(f"1,{text}")


@pytest.fixture
def world(acme: Project, alice: Any) -> dict[str, Any]:
    base, run = demo_runs(acme)
    Membership.objects.filter(user=alice, project=acme).update(role=Membership.Role.ADMIN)
    prompt = prompt_create(project=acme, name="support", system="Be brief.", user="{{ input }}", note="",
                           actor=alice).prompt
    client = Client()
    client.force_login(alice)
    return {"base": base, "run": run, "evalset": run.evalset_version.evalset_id, "prompt": prompt.pk,
            "client": client, "api": token_client(alice)}


def test_the_api_answers_400_for_run_ids_that_look_like_digits(world: dict[str, Any]) -> None:
    api, pair = world["api"], f"{world['base'].pk},{world['run'].pk}"
    for text in [*LOOKALIKES, *TOO_BIG]:
        for url in (f"/api/v1/compare/runs/?runs={text}", f"/api/v1/compare/runs/?runs={pair},{text}",
                    f"/api/v1/compare/runs/?runs={pair}&page={text}",
                    f"/api/v1/compare/runs/trajectories/?runs={pair},{text}"):
            response = api.get(url)
            assert response.status_code == 400, (url, response.status_code)
            assert response.json()["code"] in ("invalid", "bad_request"), response.json()
    # The schemathesis case as it was found, every parameter included.
    response = api.get(f"/api/v1/compare/runs/?=&criterion=%C2%A9%26o%C2%82&page=61&reference={world['run'].pk}"
                       "&runs=%C2%B3&sort=case&0D=6.612582751111941e%2B16")
    assert response.status_code == 400 and "runs" in response.content.decode()


def test_pages_never_answer_500_to_digits_that_int_refuses(world: dict[str, Any]) -> None:
    client, run, evalset, prompt = world["client"], world["run"].pk, world["evalset"], world["prompt"]
    before = _counts()
    for text in [*LOOKALIKES, *TOO_BIG]:
        gets = [f"/threads/?page={text}", f"/runs/?evalset={text}&watch=1,{text}", f"/runs/compare/?run={run}&run={text}",
                f"/runs/new/?version={text}", f"/prompts/{prompt}/?version={text}",
                f"/prompts/{prompt}/diff/?from={text}&to=1", f"/evalsets/{evalset}/diff/?from={text}&to=1",
                f"/experiments/new/?evalset={text}"]
        for url in gets:
            response = client.get(url)
            assert response.status_code < 500, (url, response.status_code)
        posts: list[tuple[str, dict[str, str]]] = [
            ("/projects/switch/", {"project": text}),
            ("/notifications/read/", {"notification": text}),
            ("/projects/acme/retention/", {"days": text}),
        ]
        for url, form in posts:
            response = client.post(url, form)
            assert response.status_code in (302, 400, 404), (url, form, response.status_code)
    assert _counts() == before
    # And a number it may read still works: the retention form saves 30 days.
    assert client.post("/projects/acme/retention/", {"days": "30"}).status_code == 302
    assert Project.objects.get(slug="acme").retention.days == 30


def test_a_version_that_looks_like_a_number_is_not_found_not_a_500(world: dict[str, Any]) -> None:
    client, prompt = world["client"], world["prompt"]
    assert client.get(f"/prompts/{prompt}/?version=1").status_code == 200
    assert client.get(f"/prompts/{prompt}/?version=³").status_code == 404
    assert client.get(f"/prompts/{prompt}/diff/?from=³&to=1").status_code == 404
    assert client.get(f"/evalsets/{world['evalset']}/diff/?from=①&to=1").status_code == 404


def _otlp(start: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "agent", "startTimeUnixNano": start,
         "endTimeUnixNano": "1700000001000000000"}]}]}]}


@pytest.mark.parametrize("start", [*LOOKALIKES, "9" * 30])
def test_an_otlp_time_that_int_refuses_is_a_trace_error_naming_the_field(start: str) -> None:
    with pytest.raises(TraceError) as info:
        parse_otlp(_otlp(start))
    assert "startTimeUnixNano" in str(info.value)
    # A fixed64 written as a string, the largest there is, is still read.
    spans = parse_otlp(_otlp(str(2**64 - 1)))
    assert spans[0].start_time_unix_nano == 2**64 - 1


def test_token_counts_and_message_indexes_that_look_like_digits_are_not_read() -> None:
    span = Span(trace_id="ab" * 16, span_id="cd" * 8, name="llm", start_time_unix_nano=1,
                attributes={"llm.token_count.prompt": "³", "llm.token_count.completion": "12",
                            "llm.input_messages.³.message.role": "user",
                            "llm.input_messages.³.message.content": "from a lookalike index",
                            "llm.input_messages.0.message.role": "user",
                            "llm.input_messages.0.message.content": "the real question"})
    usage = span_usage(span)
    assert usage is not None and usage.prompt_tokens is None and usage.completion_tokens == 12
    assert user_input(span) == "the real question"


def test_a_notify_rule_for_an_eval_set_that_looks_like_a_number_is_refused(world: dict[str, Any]) -> None:
    from django.core.exceptions import ValidationError

    from evaluations.notify.services import rule_save

    acme, alice = Project.objects.get(slug="acme"), get_user_model().objects.get(username="alice")
    before = _counts()
    for text in ["³", "9" * 30]:
        with pytest.raises(ValidationError) as info:
            rule_save(project=acme, actor=alice, values={"name": "r", "kind": "run_finished", "evalset": text})
        assert "evalset" in str(info.value)
    assert _counts() == before
    rule = rule_save(project=acme, actor=alice, values={"name": "r", "kind": "run_finished",
                                                         "evalset": str(world["evalset"])})
    assert rule.evalset_id == world["evalset"]
