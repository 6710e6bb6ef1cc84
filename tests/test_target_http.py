"""The HTTP target against real servers on 127.0.0.1: evalsite's own demo agent (served by
pytest-django's live_server at /demo/agent/) and a small http.server whose paths misbehave on
purpose (hang, fail then recover, answer garbage, answer in another shape)."""

from __future__ import annotations

import functools
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evaluations.runs.targets.http import NOT_RUNNABLE, HttpTarget, HttpTargetSpec, ResponseMapping, extract
from evaluations.schemas.evalset import ConversationScenario, EvalCase, EvalSet, Invocation, MessageContent
from evaluations.schemas.outputs import Usage

DEMO = Path(__file__).resolve().parent.parent / "evaluations" / "demo" / "travel_agent.evalset.json"
EVALSET = EvalSet.model_validate_json(DEMO.read_text())

Reply = tuple[int, Any, dict[str, str]]


def ok(payload: Any) -> Reply:
    return 200, payload, {}


def echo(body: dict[str, Any], n: int) -> Reply:
    return ok({"final_response": f"echo: {body['user_content']}", "usage": {"prompt_tokens": 3, "completion_tokens": 2}})


def hang(body: dict[str, Any], n: int) -> Reply:
    time.sleep(3)
    return echo(body, n)


def flaky(body: dict[str, Any], n: int) -> Reply:
    return (500, "<h1>upstream busy</h1>", {}) if n <= 2 else ok({"final_response": f"ok after {n}"})


def always_500(body: dict[str, Any], n: int) -> Reply:
    return 503, "maintenance", {}


def rate_limited(body: dict[str, Any], n: int) -> Reply:
    return (429, "slow down", {"Retry-After": "0"}) if n == 1 else ok({"final_response": "ok"})


def garbage(body: dict[str, Any], n: int) -> Reply:
    return 200, "<html>Internal dashboard</html>", {"Content-Type": "text/html"}


def unknown_shape(body: dict[str, Any], n: int) -> Reply:
    return ok({"answer": "42", "confidence": 0.9})


def missing(body: dict[str, Any], n: int) -> Reply:
    return 404, {"detail": "no such agent"}, {}


def redirect(body: dict[str, Any], n: int) -> Reply:
    return 302, "", {"Location": "/echo"}


def openai_shape(body: dict[str, Any], n: int) -> Reply:
    return ok({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "It is 22°C and clear in Tokyo.",
            "tool_calls": [{"id": "call_abc", "type": "function",
                            "function": {"name": "get_weather", "arguments": "{\"city\": \"Tokyo\"}"}}]}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 16, "total_tokens": 136},
    })


def custom_shape(body: dict[str, Any], n: int) -> Reply:
    return ok({"output": {"text": "Done."}, "meta": {"tokens": {"input_tokens": 5, "output_tokens": 3}},
               "steps": [{"tool": {"name": "get_order", "input": {"order_id": "1042"}}},
                         {"tool": {"name": "cancel_order", "input": {"order_id": "1042"}}}]})


def slow(body: dict[str, Any], n: int) -> Reply:
    time.sleep(0.15)
    return ok({"final_response": "slow answer"})


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, compresslevel=9)


@functools.cache
def gzip_bomb_body() -> bytes:
    """300 MB of spaces inside valid JSON, gzipped to about 300 KB: made when a test first asks
    (0.8 s and 300 MB for a moment), not when each xdist worker imports this module."""
    return _gzip(b'{"final_response": "' + b" " * 300_000_000 + b'"}')


SMALL_REPLY = json.dumps({"final_response": "ok, compressed"}).encode()


def gzip_bomb(body: dict[str, Any], n: int) -> Reply:
    return 200, gzip_bomb_body(), {"Content-Encoding": "gzip"}


def gzipped(body: dict[str, Any], n: int) -> Reply:
    return 200, _gzip(SMALL_REPLY), {"Content-Encoding": "gzip"}


def deflated(body: dict[str, Any], n: int) -> Reply:
    import zlib

    return 200, zlib.compress(SMALL_REPLY), {"Content-Encoding": "deflate"}


def raw_deflated(body: dict[str, Any], n: int) -> Reply:
    import zlib

    squeeze = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return 200, squeeze.compress(SMALL_REPLY) + squeeze.flush(), {"Content-Encoding": "deflate"}


def brotli_said(body: dict[str, Any], n: int) -> Reply:
    return 200, b"\x0b\x02\x80hello\x03", {"Content-Encoding": "br"}


ROUTES: dict[str, Callable[[dict[str, Any], int], Reply]] = {
    "/gzip-bomb": gzip_bomb, "/gzipped": gzipped, "/deflated": deflated, "/raw-deflated": raw_deflated,
    "/br": brotli_said,
    "/echo": echo, "/hang": hang, "/flaky": flaky, "/always-500": always_500, "/rate-limited": rate_limited,
    "/garbage": garbage, "/unknown-shape": unknown_shape, "/missing": missing, "/redirect": redirect,
    "/openai": openai_shape, "/custom": custom_shape, "/slow": slow,
}


@dataclass
class Seen:
    """What the fake agent received."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter[str] = field(default_factory=Counter)
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0


class FakeAgent(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        seen = self.server.seen
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        with seen.lock:
            seen.counts[self.path] += 1
            n = seen.counts[self.path]
            seen.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            seen.in_flight += 1
            seen.max_in_flight = max(seen.max_in_flight, seen.in_flight)
        try:
            status, payload, headers = ROUTES[self.path](body, n)
        finally:
            with seen.lock:
                seen.in_flight -= 1
        data = payload if isinstance(payload, bytes) else (
            payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
        try:
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:  # the client gave up (the hanging path): nothing to answer
            pass


class FakeServer(ThreadingHTTPServer):
    daemon_threads = True
    seen: Seen

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


@pytest.fixture
def agent() -> Iterator[tuple[str, Seen]]:
    server = FakeServer(("127.0.0.1", 0), FakeAgent)
    server.seen = Seen()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen
    finally:
        server.shutdown()
        server.server_close()


def case(eval_id: str, *texts: Any) -> EvalCase:
    return EvalCase(eval_id=eval_id, conversation=[
        Invocation(invocation_id=f"turn_{n + 1}", user_content=MessageContent(
            role="user", content=t if isinstance(t, str) else [{"type": "json", "json": t}]))
        for n, t in enumerate(texts)])


def run(url: str, work: list[tuple[EvalCase, int]], **spec: Any) -> list[Any]:
    spec = {"retries": 0, "backoff_seconds": 0.01, "timeout_seconds": 5, **spec}
    return HttpTarget(HttpTargetSpec(url=url, **spec)).run_many(work)


@pytest.fixture
def demo_token(transactional_db: None) -> dict[str, str]:
    """The demo agent needs a user: the HTTP target sends an API token in its headers."""
    from django.contrib.auth import get_user_model

    from evaluations.accounts.tokens import token_create

    harness = get_user_model().objects.create_user("harness", "harness@example.com", "harness-pass-123")
    return {"Authorization": f"Token {token_create(user=harness, name='http target').secret}"}


class TestDemoAgentOverHTTP:
    def test_the_demo_eval_set_passes_turn_by_turn(self, live_server: Any, demo_token: dict[str, str]) -> None:
        outputs = run(f"{live_server.url}/demo/agent/", [(c, 0) for c in EVALSET.eval_cases], concurrency=4,
                      headers=demo_token)
        assert [o.eval_id for o in outputs] == [c.eval_id for c in EVALSET.eval_cases]
        for c, output in zip(EVALSET.eval_cases, outputs, strict=True):
            assert output.error is None
            assert len(output.turns) == len(c.conversation)
            for invocation, turn in zip(c.conversation, output.turns, strict=True):
                assert [(t.name, t.args) for t in turn.tool_calls] == [
                    (t.name, t.args) for t in invocation.expected_tool_trajectory]
                assert invocation.expected_final_response is not None
                assert turn.final_response == invocation.expected_final_response.get_text()
                assert turn.latency_seconds is not None and turn.latency_seconds > 0
                assert turn.usage is not None and turn.usage.prompt_tokens

    def test_faults_in_the_url_reach_the_agent(self, live_server: Any, demo_token: dict[str, str]) -> None:
        tokyo = EVALSET.eval_cases[0]
        (output,) = run(f"{live_server.url}/demo/agent/?faults=wrong_tool&rate=1", [(tokyo, 0)], headers=demo_token)
        assert [t.name for t in output.turns[0].tool_calls] == ["get_forecast"]

    def test_the_trajectory_of_every_turn_is_kept_with_its_turn(self, live_server: Any,
                                                               demo_token: dict[str, str]) -> None:
        paris = EVALSET.eval_cases[1]
        (output,) = run(f"{live_server.url}/demo/agent/", [(paris, 0)], headers=demo_token)
        assert [(s.name, s.metadata["invocation_id"]) for s in output.trajectory if s.step_type.value == "TOOL"] == [
            ("get_weather", "turn_1"), ("get_forecast", "turn_2")]

    def test_without_a_token_the_demo_agent_refuses_every_case(self, live_server: Any) -> None:
        tokyo = EVALSET.eval_cases[0]
        (output,) = run(f"{live_server.url}/demo/agent/", [(tokyo, 0)])
        assert output.error is not None and "401" in output.error


class TestRequests:
    def test_each_turn_is_posted_with_the_history_so_far(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/echo", [(case("c1", "hello", "again"), 2)])
        assert [t.final_response for t in output.turns] == ["echo: hello", "echo: again"]
        first, second = (body for _, _, body in seen.requests)
        assert (second["eval_id"], second["iteration"], second["invocation_id"], second["turn_index"]) == (
            "c1", 2, "turn_2", 1)
        assert second["history"] == [{"role": "user", "content": "hello"},
                                     {"role": "assistant", "content": "echo: hello"}]
        assert first["history"] == []
        assert output.turns[0].usage == Usage(prompt_tokens=3, completion_tokens=2)
        assert output.latency_seconds == pytest.approx(sum(t.latency_seconds for t in output.turns))

    def test_configured_headers_and_an_idempotency_key_are_sent(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        run(f"{url}/echo", [(case("c1", "hello"), 0)], headers={"Authorization": "Bearer s3cret", "X-Team": "qa"})
        (_, headers, _), = seen.requests
        assert headers["authorization"] == "Bearer s3cret"
        assert headers["x-team"] == "qa"
        assert headers["idempotency-key"] == "c1:0:turn_1"
        assert headers["content-type"] == "application/json"

    def test_input_overrides_are_merged_and_sent_along(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        files = {"documents": [{"ID": "a", "MimeType": "application/pdf"}, {"ID": "b", "MimeType": "image/png"}]}
        target = HttpTarget(HttpTargetSpec(url=f"{url}/echo", retries=0))
        target.run_many([(case("eval-002", files), 0)],
                        input_overrides={"eval-002": {"documents": [{"ID": "x1"}, {"ID": "x2"}]}})
        (_, _, body), = seen.requests
        assert body["user_content"] == [{"type": "json", "json": {"documents": [
            {"ID": "x1", "MimeType": "application/pdf"}, {"ID": "x2", "MimeType": "image/png"}]}}]
        assert body["input_overrides"] == {"documents": [{"ID": "x1"}, {"ID": "x2"}]}

    def test_the_target_metadata_travels_in_every_request(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        run(f"{url}/echo", [(case("c", "a", "b"), 0)], metadata={"faults": ["missing_call"]})
        assert [body["metadata"] for _, _, body in seen.requests] == [{"faults": ["missing_call"]}] * 2


class TestConcurrency:
    def test_no_more_cases_than_the_concurrency_are_in_flight(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        work = [(case(f"c{n}", "hi"), 0) for n in range(10)]
        outputs = run(f"{url}/slow", work, concurrency=3)
        assert seen.max_in_flight == 3
        assert [o.eval_id for o in outputs] == [f"c{n}" for n in range(10)]
        assert all(o.error is None for o in outputs)

    def test_the_turns_of_one_case_never_overlap(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        run(f"{url}/slow", [(case("one", "a", "b", "c", "d"), 0)], concurrency=8)
        assert seen.max_in_flight == 1


class TestFailures:
    def test_a_gzip_bomb_is_refused_at_the_size_limit_without_inflating_it(self, agent: tuple[str, Seen]) -> None:
        import tracemalloc

        url, seen = agent
        assert len(gzip_bomb_body()) < 400_000
        tracemalloc.start()
        try:
            (output,) = run(f"{url}/gzip-bomb", [(case("c", "a"), 0)], max_response_bytes=5_000_000)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert output.turns[0].error == "the reply is larger than 5,000,000 bytes"
        # httpx's own decoder inflated a 64 KiB read whole (about 64 MB at once); bounded, the
        # peak is the limit and a little more
        assert peak < 20_000_000, peak
        assert seen.counts["/gzip-bomb"] == 1
        assert seen.requests[-1][1]["accept-encoding"] == "identity"

    @pytest.mark.parametrize("path", ["/gzipped", "/deflated", "/raw-deflated"])
    def test_a_compressed_reply_within_the_limit_is_read(self, agent: tuple[str, Seen], path: str) -> None:
        url, _ = agent
        (output,) = run(f"{url}{path}", [(case("c", "a"), 0)])
        assert output.error is None
        assert output.turns[0].final_response == "ok, compressed"

    def test_a_reply_in_an_encoding_evalsite_does_not_read_is_an_error(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        (output,) = run(f"{url}/br", [(case("c", "a"), 0)], retries=2)
        assert output.turns[0].error == "cannot read the reply: content encoding br"
        assert output.turns[0].metadata["attempts"] == 1  # asking again will not change it

    def test_an_agent_that_hangs_times_out_after_its_retries(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        start = time.perf_counter()
        (output,) = run(f"{url}/hang", [(case("c", "a", "b"), 0)], timeout_seconds=0.3, retries=1)
        assert time.perf_counter() - start < 2.5
        assert output.turns[0].error == "timed out after 0.3s (after 2 attempts)"
        assert output.error == "turn turn_1: timed out after 0.3s (after 2 attempts)"
        assert len(output.turns) == 1
        assert seen.counts["/hang"] == 2

    def test_server_errors_are_retried_until_the_agent_recovers(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/flaky", [(case("c", "a"), 0)], retries=2)
        assert output.error is None
        assert output.turns[0].final_response == "ok after 3"
        assert output.turns[0].metadata["attempts"] == 3
        assert seen.counts["/flaky"] == 3

    def test_server_errors_that_persist_are_recorded_with_the_body(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/always-500", [(case("c", "a"), 0)], retries=2)
        assert output.turns[0].error == "HTTP 503: 'maintenance' (after 3 attempts)"
        assert seen.counts["/always-500"] == 3

    def test_a_rate_limited_request_is_retried(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/rate-limited", [(case("c", "a"), 0)], retries=1)
        assert output.turns[0].final_response == "ok"
        assert seen.counts["/rate-limited"] == 2

    def test_a_client_error_is_not_retried(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/missing", [(case("c", "a"), 0)], retries=3)
        assert output.turns[0].error == "HTTP 404: '{\"detail\": \"no such agent\"}'"
        assert seen.counts["/missing"] == 1

    def test_redirects_are_not_followed(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/redirect", [(case("c", "a"), 0)])
        assert output.turns[0].error is not None and output.turns[0].error.startswith("HTTP 302")
        assert seen.counts["/echo"] == 0

    def test_garbage_is_recorded_not_raised(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        (output,) = run(f"{url}/garbage", [(case("c", "a"), 0)], retries=2)
        assert output.turns[0].error == "the reply is not JSON: '<html>Internal dashboard</html>'"
        assert seen.counts["/garbage"] == 1

    def test_json_of_an_unknown_shape_asks_for_a_mapping(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        (output,) = run(f"{url}/unknown-shape", [(case("c", "a"), 0)])
        assert output.error is not None
        assert "keys: answer, confidence" in output.error and "response_mapping" in output.error

    def test_an_agent_that_is_not_listening_is_an_error_after_retries(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        (output,) = run(f"http://127.0.0.1:{port}/agent", [(case("c", "a"), 0)], retries=1)
        assert output.error is not None
        assert "cannot reach the agent: ConnectError" in output.error and "(after 2 attempts)" in output.error

    def test_one_failing_case_does_not_stop_the_others(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        good = HttpTarget(HttpTargetSpec(url=f"{url}/echo", retries=0))
        outputs = good.run_many([(case("a", "x"), 0), (EvalCase(eval_id="empty"), 0), (case("b", "y"), 0)])
        assert [o.error for o in outputs] == [None, "the case has no turns to run", None]

    def test_a_scenario_case_without_a_simulator_is_not_runnable(self, agent: tuple[str, Seen]) -> None:
        url, seen = agent
        scenario = EvalCase(eval_id="sim", conversation_scenario=ConversationScenario(starting_prompt="Hi"))
        (output,) = run(f"{url}/echo", [(scenario, 0)])
        assert output.error == NOT_RUNNABLE
        assert seen.requests == []

    def test_a_simulated_user_drives_an_http_agent(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        scenario = EvalCase(eval_id="sim", conversation_scenario=ConversationScenario(starting_prompt="Hi"))

        def opening_line_only(c: EvalCase, history: list[Any]) -> str | None:
            assert c.conversation_scenario is not None
            return None if history else c.conversation_scenario.starting_prompt

        target = HttpTarget(HttpTargetSpec(url=f"{url}/echo", retries=0), simulate_user=opening_line_only)
        (output,) = target.run_many([(scenario, 0)])
        assert [t.final_response for t in output.turns] == ["echo: Hi"]


class TestResponseMapping:
    def test_an_openai_style_reply_is_read_with_paths(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        mapping = {"final_response": "choices[0].message.content", "tool_calls": "choices[0].message.tool_calls",
                   "usage": "$.usage"}
        (output,) = run(f"{url}/openai", [(case("c", "a"), 0)], response_mapping=mapping)
        (turn,) = output.turns
        assert turn.final_response == "It is 22°C and clear in Tokyo."
        assert [(c.name, c.args, c.call_id) for c in turn.tool_calls] == [("get_weather", {"city": "Tokyo"}, "call_abc")]
        assert turn.usage == Usage(prompt_tokens=120, completion_tokens=16, total_tokens=136)

    def test_wildcards_collect_items_and_usage_names_are_normalised(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        mapping = {"final_response": "$.output.text", "tool_calls": "$.steps[*].tool", "usage": "meta.tokens"}
        (output,) = run(f"{url}/custom", [(case("c", "a"), 0)], response_mapping=mapping)
        (turn,) = output.turns
        assert turn.final_response == "Done."
        assert [(c.name, c.args) for c in turn.tool_calls] == [
            ("get_order", {"order_id": "1042"}), ("cancel_order", {"order_id": "1042"})]
        assert turn.usage == Usage(prompt_tokens=5, completion_tokens=3)

    def test_a_mapped_path_that_is_not_in_the_reply_is_an_error(self, agent: tuple[str, Seen]) -> None:
        url, _ = agent
        (output,) = run(f"{url}/custom", [(case("c", "a"), 0)], response_mapping={"final_response": "$.result"})
        assert output.turns[0].error is not None
        assert output.turns[0].error.startswith("the reply has nothing at $.result (final_response)")

    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            ("$", {"a": [1, 2, {"b.c": "x"}]}),
            ("a[-1]['b.c']", "x"),
            ('$.a[2]["b.c"]', "x"),
            ("a[*]", [1, 2, {"b.c": "x"}]),
            ("a.*", [1, 2, {"b.c": "x"}]),
        ],
    )
    def test_paths_read_keys_indexes_quoted_keys_and_wildcards(self, path: str, expected: Any) -> None:
        assert extract({"a": [1, 2, {"b.c": "x"}]}, path) == expected

    @pytest.mark.parametrize("path", ["a[", "a..b", "a[x]", "$.a b"])
    def test_a_path_that_cannot_be_read_is_refused_by_the_spec(self, path: str) -> None:
        with pytest.raises(ValidationError, match="cannot read the path"):
            ResponseMapping(final_response=path)

    @pytest.mark.parametrize("url", ["ftp://agent/", "not a url", "/relative"])
    def test_only_http_urls_are_accepted(self, url: str) -> None:
        with pytest.raises(ValidationError):
            HttpTargetSpec(url=url)
