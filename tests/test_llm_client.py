"""The chat-completions client against a real HTTP server on 127.0.0.1 (tests/llm_server.py):
the request it sends, settings from the environment, structured output, retries, timeouts and
the errors it raises."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from evaluations.evaluators import llm as llm_module
from evaluations.evaluators.llm import ChatClient, LLMError, extract_json, parse_json_reply
from tests.llm_server import FakeLLM, hang, reply, reply_json, status


class Verdict(BaseModel):
    score: float
    reason: str


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


class TestRequests:
    def test_it_posts_the_model_messages_and_bearer_key_to_chat_completions(self, llm: FakeLLM) -> None:
        llm.script(reply("hello"))
        result = llm.client().complete([{"role": "user", "content": "hi"}], temperature=0.3, max_tokens=50)
        assert result.text == "hello"
        assert result.usage == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        [request] = llm.requests
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == "Bearer test-key"
        assert request.body == {"model": "judge-model", "messages": [{"role": "user", "content": "hi"}],
                                "temperature": 0.3, "max_tokens": 50}

    def test_a_call_can_name_another_model(self, llm: FakeLLM) -> None:
        llm.client().complete([{"role": "user", "content": "hi"}], model="other-model")
        assert llm.requests[0].body["model"] == "other-model"

    def test_without_a_key_it_sends_no_authorization_header(self, llm: FakeLLM,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("EVALSITE_LLM_API_KEY", raising=False)
        ChatClient(base_url=llm.url).complete([{"role": "user", "content": "hi"}])
        assert "authorization" not in llm.requests[0].headers

    def test_settings_come_from_the_environment_when_the_call_is_made(self, llm: FakeLLM,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
        client = ChatClient(max_retries=0)  # built before the environment says where to go
        monkeypatch.setenv("EVALSITE_LLM_BASE_URL", llm.url + "/")
        monkeypatch.setenv("EVALSITE_LLM_MODEL", "env-model")
        monkeypatch.setenv("EVALSITE_LLM_API_KEY", "env-key")
        client.complete([{"role": "user", "content": "hi"}])
        [request] = llm.requests
        assert request.path == "/v1/chat/completions"
        assert request.body["model"] == "env-model"
        assert request.headers["authorization"] == "Bearer env-key"

    def test_the_defaults_point_at_openai(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name in ("EVALSITE_LLM_BASE_URL", "EVALSITE_LLM_MODEL", "EVALSITE_LLM_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        client = ChatClient()
        assert (client.base_url, client.model, client.api_key) == ("https://api.openai.com/v1", "gpt-4o-mini", "")


class TestStructuredOutput:
    def test_it_asks_for_a_json_schema_and_parses_the_reply(self, llm: FakeLLM) -> None:
        llm.script(reply_json({"score": 7, "reason": "fine"}))
        result = llm.client().structured([{"role": "user", "content": "judge"}], Verdict)
        assert result.value == Verdict(score=7, reason="fine")
        response_format = llm.requests[0].body["response_format"]
        assert response_format["type"] == "json_schema"
        assert response_format["json_schema"]["name"] == "Verdict"
        assert set(response_format["json_schema"]["schema"]["properties"]) == {"score", "reason"}

    def test_a_reply_in_a_json_fence_is_accepted(self, llm: FakeLLM) -> None:
        llm.script(reply('Here you go:\n```json\n{"score": 3, "reason": "meh"}\n```\nThanks.'))
        assert llm.client().structured([], Verdict).value.score == 3

    def test_json_with_prose_around_it_is_accepted(self, llm: FakeLLM) -> None:
        llm.script(reply('My verdict is {"score": 4.5, "reason": "ok"} as requested.'))
        assert llm.client().structured([], Verdict).value.score == 4.5

    def test_a_reply_that_is_not_json_raises_an_llm_error(self, llm: FakeLLM) -> None:
        llm.script(reply("I think it is pretty good."))
        with pytest.raises(LLMError, match="not JSON"):
            llm.client().structured([], Verdict)

    def test_json_of_the_wrong_shape_raises_an_llm_error_naming_the_field(self, llm: FakeLLM) -> None:
        llm.script(reply_json({"score": "high"}))
        with pytest.raises(LLMError, match=r"does not match Verdict: score: .*; reason: Field required"):
            llm.client().structured([], Verdict)

    def test_a_server_that_refuses_response_format_gets_the_schema_in_the_prompt(self, llm: FakeLLM) -> None:
        llm.script(status(400, "Unrecognized request argument supplied: response_format"),
                   reply_json({"score": 9, "reason": "good"}))
        client = llm.client()
        assert client.structured([{"role": "user", "content": "judge"}], Verdict).value.score == 9
        first, second = llm.requests
        assert "response_format" in first.body
        assert "response_format" not in second.body
        assert second.body["messages"][-1]["role"] == "system"
        assert '"reason"' in second.body["messages"][-1]["content"]
        # Remembered: the next call does not ask again.
        client.structured([], Verdict)
        assert "response_format" not in llm.requests[2].body

    def test_a_client_told_the_server_has_no_json_schema_never_asks_for_it(self, llm: FakeLLM) -> None:
        llm.script(reply_json({"score": 1, "reason": "bad"}))
        llm.client(json_schema=False).structured([], Verdict)
        assert "response_format" not in llm.requests[0].body

    def test_extract_json_prefers_the_whole_text_then_a_fence_then_the_braces(self) -> None:
        assert extract_json('[1, 2]') == [1, 2]
        assert extract_json('```\n{"a": 1}\n```') == {"a": 1}
        assert extract_json('x {"a": {"b": 2}} y') == {"a": {"b": 2}}
        with pytest.raises(LLMError):
            extract_json("{not json}")

    def test_fenced_blocks_are_read_as_before_and_an_unclosed_fence_costs_one_pass(self) -> None:
        before = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)  # the pattern until issue 38
        for text in ['x ```json\n{"a": 1}\n``` y', "```JSON   {}```", "``` json\n[1]```", "```\n\n```",
                     "```jsonx```a```b```", "no fence", "```unclosed"]:
            assert [m.group(1).strip() for m in llm_module._FENCE.finditer(text)] == \
                [m.group(1).strip() for m in before.finditer(text)], text
        with pytest.raises(LLMError, match="not JSON"):
            extract_json("```" + " " * 200_000 + "x")

    def test_parse_json_reply_validates_against_the_schema(self) -> None:
        assert parse_json_reply('{"score": 2, "reason": "r"}', Verdict) == Verdict(score=2, reason="r")
        with pytest.raises(LLMError, match="reason"):
            parse_json_reply('{"score": 2}', Verdict)


class TestRetries:
    def test_a_500_then_a_success_is_retried(self, llm: FakeLLM) -> None:
        llm.script(status(500), reply("second time lucky"))
        result = llm.client().complete([])
        assert result.text == "second time lucky"
        assert result.attempts == 2
        assert len(llm.requests) == 2

    def test_a_429_waits_at_least_retry_after(self, llm: FakeLLM) -> None:
        llm.script(status(429, "slow down", headers={"Retry-After": "0.3"}), reply("ok"))
        started = time.monotonic()
        assert llm.client(backoff=0.01).complete([]).text == "ok"
        assert time.monotonic() - started >= 0.3

    def test_it_gives_up_after_max_retries_and_says_so(self, llm: FakeLLM) -> None:
        llm.script(status(503, "overloaded"))
        with pytest.raises(LLMError, match=r"HTTP 503: overloaded \(gave up after 3 attempts\)") as caught:
            llm.client(max_retries=2).complete([])
        assert caught.value.status == 503
        assert len(llm.requests) == 3

    def test_a_400_is_not_retried(self, llm: FakeLLM) -> None:
        llm.script(status(400, "bad request"), reply("never sent"))
        with pytest.raises(LLMError, match="HTTP 400: bad request"):
            llm.client().complete([])
        assert len(llm.requests) == 1

    def test_a_401_says_what_the_server_said(self, llm: FakeLLM) -> None:
        llm.script(status(401, "Incorrect API key provided"))
        with pytest.raises(LLMError, match="HTTP 401: Incorrect API key provided"):
            llm.client().complete([])

    def test_a_hanging_server_times_out_each_attempt(self, llm: FakeLLM) -> None:
        llm.script(hang(5))
        started = time.monotonic()
        with pytest.raises(LLMError, match=r"did not answer within 0.2 s .*gave up after 2 attempts"):
            llm.client(timeout=0.2, max_retries=1).complete([])
        assert time.monotonic() - started < 3
        assert len(llm.requests) == 2

    def test_a_timeout_then_a_success_is_retried(self, llm: FakeLLM) -> None:
        llm.script(hang(5), reply("awake"))
        assert llm.client(timeout=0.2, max_retries=1).complete([]).text == "awake"

    def test_an_unreachable_server_raises_an_llm_error(self) -> None:
        with socket.socket() as sock:  # a port that was free a moment ago and has no listener
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        client = ChatClient(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.01)
        with pytest.raises(LLMError, match="could not reach"):
            client.complete([])


class TestReplies:
    def test_an_empty_message_is_an_error(self, llm: FakeLLM) -> None:
        llm.script(reply(""))
        with pytest.raises(LLMError, match="empty message"):
            llm.client().complete([])

    def test_a_refusal_is_an_error_that_quotes_it(self, llm: FakeLLM) -> None:
        from tests.llm_server import Behaviour

        llm.script(Behaviour(body={"choices": [{"message": {"role": "assistant", "content": None,
                                                            "refusal": "I cannot help with that"}}]}))
        with pytest.raises(LLMError, match="refused: I cannot help with that"):
            llm.client().complete([])

    def test_a_completion_without_choices_is_an_error(self, llm: FakeLLM) -> None:
        from tests.llm_server import Behaviour

        llm.script(Behaviour(body={"object": "chat.completion", "choices": []}))
        with pytest.raises(LLMError, match="no choices"):
            llm.client().complete([])

    def test_content_parts_are_joined(self, llm: FakeLLM) -> None:
        from tests.llm_server import Behaviour

        llm.script(Behaviour(body={"choices": [{"message": {"content": [{"type": "text", "text": "a"},
                                                                        {"type": "text", "text": "b"}]}}]}))
        assert llm.client().complete([]).text == "ab"
