"""Numbers in query strings, forms and files are read with one rule (`converters.whole_number`):
ASCII digits, bounded. Found by CI's schemathesis: `GET /api/v1/compare/runs/?runs=³` answered
500, since "³".isdigit() is true and int("³") raises. The same check stood in front of a dozen
pages, the OTLP reader and trace promotion; each of them answers 4xx or reads nothing now, and
writes nothing. The sweeps below also send a NUL, which PostgreSQL refuses in text: a query
string holding one is a 400 (`api.errors.NulMiddleware`), a form field refuses it itself."""

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


# Every name a page reads from its query string (`request.GET.get(...)` in evaluations/web/views).
QUERY_NAMES = ["page", "baseline", "version", "to", "q", "from", "evalset", "criterion", "status", "sort", "model",
               "land", "end_user", "case", "candidate", "branch", "watch", "tag", "runs", "reload", "reference",
               "range", "prompt", "next", "mode", "id", "faults", "failures", "failing", "eval_id", "environment",
               "before", "axis", "run", "cause", "filter", "per_page"]
HOSTILE = ["\x00", "³", "9" * 30, "-1", "1e400", " "]


def test_every_page_answers_hostile_query_values_without_a_500(world: dict[str, Any]) -> None:
    """Each page that reads its query string, with every name it reads set to a NUL (which
    PostgreSQL refuses in text), a digit lookalike, a number no column holds, a negative one, a
    float past the largest double and a blank: never a 500, and nothing written."""
    from urllib.parse import quote

    from evaluations.models import CaseResult

    client, run, base = world["client"], world["run"], world["base"]
    evalset, prompt = world["evalset"], world["prompt"]
    result = CaseResult.objects.filter(run=run).order_by("pk").first()
    assert result is not None
    pages = ["/", "/evalsets/", f"/evalsets/{evalset}/", f"/evalsets/{evalset}/trend/",
             f"/evalsets/{evalset}/leaderboard/", f"/evalsets/{evalset}/versions/", f"/evalsets/{evalset}/diff/",
             f"/cases/{result.case_id}/", "/compare/", "/compare/export.csv", "/compare/runs/", "/compare/runs/case/",
             "/compare/runs/trajectories/", "/compare/runs/export.csv", "/prompts/", f"/prompts/{prompt}/",
             f"/prompts/{prompt}/diff/", "/experiments/", "/experiments/new/", f"/runs/{run.pk}/cases/{result.pk}/",
             "/review/", "/review/count/", "/review/export.csv", "/grading/", "/calibration/",
             f"/runs/{run.pk}/case/", "/runs/", "/runs/new/", "/runs/import/", f"/runs/{run.pk}/rescore/",
             "/runs/compare/", f"/runs/{run.pk}/", f"/runs/{run.pk}/progress/", f"/runs/{run.pk}/promote/form/",
             "/traces/", "/notifications/", "/notifications/count/", "/monitors/", "/monitors/new/", "/threads/",
             "/threads/view/", "/projects/acme/activity/", "/projects/acme/report/", "/projects/acme/report.md",
             "/projects/acme/report.csv", "/projects/acme/members/", "/projects/acme/notifications/",
             "/projects/acme/retention/", "/help/"]
    before = _counts()
    checked = 0
    for value in HOSTILE:
        query = "&".join(f"{name}={quote(value)}" for name in QUERY_NAMES)
        for page in pages:
            response = client.get(f"{page}?{query}")
            assert response.status_code < 500, (page, value, response.status_code)
            checked += 1
        # The same with the pages' own ids where one is asked for, the hostile value beside them.
        for page in ("/compare/", "/compare/runs/", "/compare/export.csv", "/compare/runs/export.csv"):
            ids = f"baseline={base.pk}&candidate={run.pk}&runs={base.pk},{run.pk}&reference={base.pk}"
            rest = "&".join(f"{name}={quote(value)}" for name in QUERY_NAMES
                            if name not in ("baseline", "candidate", "runs", "reference"))
            response = client.get(f"{page}?{ids}&{rest}")
            assert response.status_code < 500, (page, value, response.status_code)
    assert checked == len(HOSTILE) * len(pages)
    assert _counts() == before


def test_a_nul_in_a_query_string_is_a_400_naming_the_parameter_on_pages_and_the_api(
        world: dict[str, Any]) -> None:
    """PostgreSQL keeps no NUL in text: a filter holding one failed there with a 500 (the trend
    page, found by the sweep above on PostgreSQL). Refused before any view reads it."""
    client, api = world["client"], world["api"]
    page = client.get("/runs/?model=gpt%00x&page=2")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/plain")
    assert "'model' holds a NUL character" in page.content.decode()
    answer = api.get("/api/v1/runs/?status=completed&branch=ma%00in")
    assert answer.status_code == 400
    assert answer.json()["code"] == "invalid" and answer.json()["problems"][0]["path"] == "branch"
    named = api.get("/api/v1/runs/?a%00b=1")
    assert named.status_code == 400 and named.json()["problems"][0]["path"] == "a%00b"
    # "%00" that is not a NUL once decoded (an escaped percent sign) is read as before.
    assert client.get("/runs/?q=%2500").status_code == 200
    assert api.get("/api/v1/runs/?branch=%2500").status_code == 200


def test_api_versions_pages_and_the_signin_log_refuse_lookalikes_without_a_500(world: dict[str, Any]) -> None:
    api, prompt, evalset = world["api"], world["prompt"], world["evalset"]
    for text in ["³", "①", "9" * 30]:
        for url in (f"/api/v1/prompts/{prompt}/diff/?from={text}&to=1",
                    f"/api/v1/evalsets/{evalset}/diff/?from=1&to={text}"):
            answer = api.get(url)
            assert answer.status_code == 400, (url, answer.status_code)
            assert answer.json()["problems"][0]["path"] in ("from", "to")
        # A page number it cannot read is the first page, as it was for letters.
        diff = api.get(f"/api/v1/evalsets/{evalset}/diff/?from=1&to=1&page={text}")
        assert diff.status_code == 200, diff.content
        compare = api.get(f"/api/v1/compare/?candidate={world['run'].pk}&baseline={text}")
        assert compare.status_code == 400, compare.content
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    client = Client()
    client.force_login(admin)
    for text in ["³", "9" * 30, "-1"]:
        assert client.get(f"/signins/?before={text}").status_code == 200


POST_NAMES = ["action", "assignee", "assignee_filter", "base_version", "based_on", "baseline", "body", "case", "code",
              "comment", "confirm", "criterion", "days", "disagreement", "enabled", "eval_ids", "from_table", "hours",
              "judge", "membership", "mode", "name", "next", "note", "notification", "parent", "position", "project",
              "result", "role", "scope", "score", "status", "tab", "tag", "target", "user", "verdict", "view",
              "evalset", "branch", "state", "triage", "run", "version", "kind", "url", "emails", "monitor_id",
              "threshold", "system", "description", "eval_id", "slug", "label", "model", "channels", "prompt",
              "v0-model", "v0-prompt", "v0-temperature", "model_prompt", "target_kind", "iterations"]


def test_every_form_answers_hostile_values_without_a_500(world: dict[str, Any]) -> None:
    """Every form a member posts, each name a view reads set to a NUL, a digit lookalike, a
    number no column holds and a float past the largest double: never a 500."""
    from evaluations.models import CaseResult

    client, run = world["client"], world["run"]
    evalset, prompt = world["evalset"], world["prompt"]
    result = CaseResult.objects.filter(run=run).order_by("pk").first()
    assert result is not None
    case = result.case_id
    forms = [f"/evalsets/{evalset}/cases/new/", f"/cases/{case}/edit/", f"/evalsets/{evalset}/cases/bulk/",
             f"/runs/{run.pk}/cases/{result.pk}/promote/", f"/runs/{run.pk}/promote/", "/projects/switch/",
             f"/evalsets/{evalset}/rename/", "/experiments/new/", "/grades/", "/projects/new/", "/monitors/new/",
             "/projects/acme/retention/", "/projects/acme/notifications/rules/new/",
             "/projects/acme/notifications/channels/new/", "/notifications/read/", "/notifications/mine/acme/",
             "/projects/acme/members/", f"/runs/{run.pk}/pin/", "/prompts/", f"/prompts/{prompt}/",
             f"/runs/{run.pk}/rescore/", "/review/bulk/", "/runs/new/", "/triage/", "/account/",
             f"/cases/{case}/duplicate/", f"/runs/{run.pk}/retry/", f"/runs/{run.pk}/delete/",
             f"/evalsets/{evalset}/delete/", f"/cases/{case}/delete/", "/projects/acme/archive/"]
    for value in ["\x00", "³", "9" * 30, "1e400"]:
        data = {name: value for name in POST_NAMES}
        for url in forms:
            response = client.post(url, data)
            assert response.status_code < 500, (url, repr(value), response.status_code)


def test_a_nul_in_the_eval_ids_a_run_promotes_is_looked_up_as_stored_not_a_500(world: dict[str, Any]) -> None:
    """The one form the sweep above found failing on PostgreSQL with a NUL (every other field
    refuses it with its own message, a name's "no control characters"): the cases a run
    promotes, looked up by eval id. Stored eval ids keep a NUL as U+FFFD, so it is read so."""
    from evaluations.models import EvalCase, EvalSet

    client, run = world["client"], world["run"]
    target = EvalSet.objects.get(pk=world["evalset"])
    before = target.latest_version
    response = client.post(f"/runs/{run.pk}/promote/", {"eval_ids": ["ghost\x00case"], "target": target.pk})
    assert response.status_code == 302, response.status_code
    target.refresh_from_db()
    assert target.latest_version == before  # no such case: nothing promoted, nothing written
    taken = EvalCase.objects.in_version(before).values_list("eval_id", flat=True).first()
    assert taken is not None
    promoted = client.post(f"/runs/{run.pk}/promote/", {"eval_ids": [taken], "target": target.pk})
    assert promoted.status_code == 302
    target.refresh_from_db()
    assert target.latest_version != before  # a real eval id still promotes
