"""The demo agent: it passes its own eval set, each fault breaks what it says it breaks, and
it answers over HTTP at /demo/agent/ to a logged-in user or an API token, never anonymously."""

from __future__ import annotations

import json
from pathlib import Path
from time import perf_counter
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.demo.agent import WRONG_TOOL, fault_applies, parse_faults, respond
from evaluations.schemas.evalset import EvalCase, EvalSet

DEMO = Path(__file__).resolve().parent.parent / "evaluations" / "demo" / "travel_agent.evalset.json"
EVALSET = EvalSet.model_validate_json(DEMO.read_text())
CASES = EVALSET.eval_cases


def converse(case: EvalCase, faults: Any = None, *, golden: bool = False) -> list[dict[str, Any]]:
    """Every turn's reply, each request carrying the conversation so far: the agent's own
    answers, or with `golden` the expected ones (so that one turn's fault does not change
    what the next turn is asked)."""
    history: list[dict[str, Any]] = []
    replies = []
    for index, invocation in enumerate(case.conversation):
        request = {"eval_id": case.eval_id, "invocation_id": invocation.invocation_id, "turn_index": index,
                   "user_content": invocation.user_content.content, "history": list(history),
                   "metadata": {"faults": faults} if faults is not None else {}}
        reply = respond(request)
        replies.append(reply)
        expected = invocation.expected_final_response
        said = expected.get_text() if golden and expected is not None else reply["final_response"]
        history += [{"role": "user", "content": invocation.user_content.content},
                    {"role": "assistant", "content": said}]
    return replies


def calls(reply: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for c in reply["tool_calls"]]


def expected_calls(case: EvalCase, turn: int) -> list[tuple[str, dict[str, Any]]]:
    return [(c.name, c.args) for c in case.conversation[turn].expected_tool_trajectory]


class TestWithoutFaults:
    @pytest.mark.parametrize("case", CASES, ids=[c.eval_id for c in CASES])
    def test_it_calls_the_expected_tools_with_the_expected_arguments_and_says_the_expected_text(
        self, case: EvalCase
    ) -> None:
        for turn, reply in enumerate(converse(case)):
            assert calls(reply) == expected_calls(case, turn)
            expected = case.conversation[turn].expected_final_response
            assert expected is not None
            assert reply["final_response"] == expected.get_text()

    def test_follow_ups_are_understood_from_the_history_alone(self) -> None:
        history = [{"role": "user", "content": "What's the weather in Oslo?"},
                   {"role": "assistant", "content": "It is 3°C and snowy in Oslo."}]
        reply = respond({"eval_id": "x", "invocation_id": "t2", "turn_index": 1,
                         "user_content": "And tomorrow?", "history": history})
        assert calls(reply) == [("get_forecast", {"city": "Oslo", "days": 1})]
        assert reply["final_response"] == "Tomorrow Oslo will be 1°C with snow."

    def test_a_follow_up_without_history_asks_instead_of_guessing(self) -> None:
        reply = respond({"eval_id": "x", "invocation_id": "t1", "turn_index": 0, "user_content": "Book it for Ana."})
        assert reply["tool_calls"] == []
        assert "Which flight" in reply["final_response"]

    def test_it_reports_tool_results_usage_and_its_route(self) -> None:
        (reply,) = converse(CASES[0])
        assert reply["tool_calls"][0]["result"] == {"city": "Tokyo", "temp_c": 22, "condition": "clear"}
        assert reply["usage"]["prompt_tokens"] > 0 and reply["usage"]["completion_tokens"] > 0
        assert [s["name"] for s in reply["trajectory"]] == ["router", "get_weather", "responder"]

    def test_the_same_request_gets_the_same_reply(self) -> None:
        assert converse(CASES[1]) == converse(CASES[1])


class TestFaults:
    def test_wrong_tool_sends_the_first_call_to_a_sibling_tool_with_the_same_arguments(self) -> None:
        for case in CASES:
            for turn, reply in enumerate(converse(case, {"wrong_tool": True}, golden=True)):
                expected = expected_calls(case, turn)
                if not expected:
                    assert reply["tool_calls"] == []
                    continue
                assert calls(reply)[0] == (WRONG_TOOL[expected[0][0]], expected[0][1])
                assert calls(reply)[1:] == expected[1:]

    def test_wrong_argument_changes_one_value_of_the_first_call(self) -> None:
        changed = 0
        for case in CASES:
            for turn, reply in enumerate(converse(case, "wrong_argument", golden=True)):
                expected = expected_calls(case, turn)
                assert [name for name, _ in calls(reply)] == [name for name, _ in expected]
                if expected:
                    got_args, want_args = calls(reply)[0][1], expected[0][1]
                    assert got_args.keys() == want_args.keys()
                    assert sum(got_args[k] != want_args[k] for k in want_args) == 1
                    changed += 1
        assert changed == 10

    def test_missing_call_skips_the_last_call_of_each_turn(self) -> None:
        for case in CASES:
            for turn, reply in enumerate(converse(case, ["missing_call"], golden=True)):
                assert calls(reply) == expected_calls(case, turn)[:-1]

    def test_a_fault_in_one_turn_carries_into_the_next(self) -> None:
        search, booking = converse(CASES[3], {"wrong_argument": True})
        assert calls(search)[0][1]["origin"] == "BCN"
        assert booking["tool_calls"] == []  # no flight was found, so there is nothing to book

    def test_a_wrong_call_shows_in_the_answer_too(self) -> None:
        (reply,) = converse(CASES[0], {"wrong_argument": True})
        assert reply["final_response"] != "It is 22°C and clear in Tokyo."
        assert reply["tool_calls"][0]["error"] == "no weather for 'Osaka'"

    def test_slow_answer_waits_before_replying(self) -> None:
        start = perf_counter()
        converse(CASES[0], {"slow_answer_seconds": 0.3})
        assert perf_counter() - start >= 0.3

    def test_rate_picks_the_same_share_of_cases_on_every_run(self) -> None:
        def faulty(case: EvalCase) -> bool:
            return any(calls(r) != expected_calls(case, t)
                       for t, r in enumerate(converse(case, {"missing_call": True, "rate": 0.5})))

        first = {c.eval_id for c in CASES if faulty(c)}
        assert first == {c.eval_id for c in CASES if faulty(c)}
        assert 0 < len(first) < len(CASES)
        assert first == {c.eval_id for c in CASES if fault_applies(c.eval_id, 0.5) and any(
            inv.expected_tool_trajectory for inv in c.conversation)}

    def test_rate_zero_and_one_are_none_and_all(self) -> None:
        assert not any(fault_applies(c.eval_id, 0.0) for c in CASES)
        assert all(fault_applies(c.eval_id, 1.0) for c in CASES)

    @pytest.mark.parametrize("value", [{"wrong_tol": True}, "wrong_tool,nope", {"rate": 2}, {"rate": "half"}, 42])
    def test_unknown_or_bad_faults_are_refused(self, value: Any) -> None:
        with pytest.raises(ValueError):
            parse_faults(value)


class TestEndpoint:
    """Requests carry an API token, as the HTTP target sends it in its headers."""

    token = ""

    @pytest.fixture(autouse=True)
    def api_token(self, db: None) -> None:
        harness = get_user_model().objects.create_user("harness", "harness@example.com", "harness-pass-123")
        self.token = token_create(user=harness, name="agent harness").secret

    def post(self, client: Client, body: Any, query: str = "", **extra: Any) -> Any:
        extra.setdefault("HTTP_AUTHORIZATION", f"Token {self.token}")
        return client.post(f"/demo/agent/{query}", data=json.dumps(body), content_type="application/json", **extra)

    def turn(self, text: str, eval_id: str = "weather_tokyo") -> dict[str, Any]:
        return {"eval_id": eval_id, "invocation_id": "turn_1", "turn_index": 0, "user_content": text}

    def test_it_answers_a_turn_request_with_a_token_and_no_csrf_token(self) -> None:
        client = Client(enforce_csrf_checks=True)
        response = self.post(client, self.turn("What's the weather in Tokyo?"))
        assert response.status_code == 200
        body = response.json()
        assert body["final_response"] == "It is 22°C and clear in Tokyo."
        assert calls(body) == [("get_weather", {"city": "Tokyo"})]

    def test_faults_come_from_the_query_string(self) -> None:
        body = self.post(Client(), self.turn("What's the weather in Tokyo?"), "?faults=wrong_argument&rate=1").json()
        assert calls(body) == [("get_weather", {"city": "Osaka"})]
        assert body["metadata"]["faulty"] is True

    def test_the_query_string_overrides_faults_in_the_request(self) -> None:
        request = {**self.turn("What's the weather in Tokyo?"), "metadata": {"faults": {"wrong_tool": True}}}
        body = self.post(Client(), request, "?faults=missing_call").json()
        assert body["tool_calls"] == []

    def test_a_rate_of_zero_in_the_query_string_leaves_every_case_alone(self) -> None:
        body = self.post(Client(), self.turn("What's the weather in Tokyo?"), "?faults=wrong_tool&rate=0").json()
        assert calls(body) == [("get_weather", {"city": "Tokyo"})]

    @pytest.mark.parametrize(
        ("body", "query", "needle"),
        [
            ("not json", "", "JSON TurnRequest"),
            ({"user_content": "hi"}, "", "not a TurnRequest"),
            ({"eval_id": "a", "invocation_id": "t", "turn_index": 0, "user_content": "hi"}, "?faults=explode",
             "unknown fault"),
            ({"eval_id": "a", "invocation_id": "t", "turn_index": 0, "user_content": "hi"}, "?faults=wrong_tool&rate=x",
             "must be numbers"),
        ],
    )
    def test_bad_requests_get_a_400_saying_why(self, body: Any, query: str, needle: str) -> None:
        client = Client()
        if isinstance(body, str):
            response = client.post(f"/demo/agent/{query}", data=body, content_type="application/json",
                                   HTTP_AUTHORIZATION=f"Bearer {self.token}")
        else:
            response = self.post(client, body, query)
        assert response.status_code == 400
        assert needle in json.dumps(response.json())

    def test_it_only_takes_posts(self) -> None:
        assert Client().get("/demo/agent/", HTTP_AUTHORIZATION=f"Token {self.token}").status_code == 405

    def test_an_anonymous_request_gets_a_401(self) -> None:
        response = self.post(Client(), self.turn("What's the weather in Tokyo?"), HTTP_AUTHORIZATION="")
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Token")

    def test_a_wrong_token_gets_a_401(self) -> None:
        response = self.post(Client(), self.turn("hi"), HTTP_AUTHORIZATION="Token es_not-a-real-token")
        assert response.status_code == 401

    def test_a_logged_in_session_is_enough(self) -> None:
        client = Client()
        client.force_login(get_user_model().objects.get(username="harness"))
        response = self.post(client, self.turn("What's the weather in Tokyo?"), HTTP_AUTHORIZATION="")
        assert response.status_code == 200
