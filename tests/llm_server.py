"""A small, real chat-completions server on 127.0.0.1 for the LLM client, judge and simulator
tests: it speaks the OpenAI protocol, answers from a script, and records every request.

    with FakeLLM() as llm:
        llm.script(reply('{"score": 8}'), status(500), hang(5))
        client = llm.client()

Each request takes the next scripted behaviour; when the script runs out, the last one
repeats. `llm.responder` (request body -> behaviour) replaces the script when set.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evaluations.evaluators.llm import ChatClient


@dataclass
class Behaviour:
    status: int = 200
    content: str | None = None
    body: Any = None  # sent as JSON instead of a completion built from `content`
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 10, "completion_tokens": 5,
                                                           "total_tokens": 15})


def reply(content: str, **usage: int) -> Behaviour:
    return Behaviour(content=content, usage=usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})


def reply_json(value: Any) -> Behaviour:
    return Behaviour(content=json.dumps(value))


def completion(message: dict[str, Any], *, finish_reason: str = "stop", usage: dict[str, Any] | None = None,
               headers: dict[str, str] | None = None) -> Behaviour:
    """A whole chat completion with this message (tool calls, content parts, ...)."""
    return Behaviour(body={"id": "chatcmpl-test", "object": "chat.completion", "model": "scripted",
                           "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
                           "usage": usage if usage is not None else {"prompt_tokens": 10, "completion_tokens": 5,
                                                                     "total_tokens": 15}},
                     headers=headers or {})


def tool_calls(*calls: tuple[str, Any], content: str | None = None, **usage: Any) -> Behaviour:
    """The model asks for tools: (name, arguments) pairs, the arguments a dict (sent as JSON
    text, as OpenAI does) or a string sent as it is (malformed arguments)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": [
        {"id": f"call_{i + 1}", "type": "function",
         "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for i, (name, args) in enumerate(calls)]}
    return completion(message, finish_reason="tool_calls", usage=usage or None)


def status(code: int, message: str = "server error", headers: dict[str, str] | None = None) -> Behaviour:
    return Behaviour(status=code, body={"error": {"message": message}}, headers=headers or {})


def hang(seconds: float) -> Behaviour:
    return Behaviour(delay=seconds, content='{"late": true}')


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def prompt(self) -> str:
        return "\n".join(str(m.get("content")) for m in self.body.get("messages", []))


class FakeLLM:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.responder: Callable[[dict[str, Any]], Behaviour] | None = None
        self._script: list[Behaviour] = [reply('{"ok": true}')]
        self._lock = threading.Lock()
        self.in_flight = 0  # requests being answered now, and the most at once
        self.max_in_flight = 0
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._script = list(behaviours)

    def client(self, **kwargs: Any) -> ChatClient:
        settings: dict[str, Any] = {"base_url": self.url, "model": "judge-model", "api_key": "test-key",
                                    "timeout": 2.0, "max_retries": 2, "backoff": 0.01}
        settings.update(kwargs)
        return ChatClient(**settings)

    def __enter__(self) -> FakeLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _next(self, body: dict[str, Any]) -> Behaviour:
        with self._lock:
            if self.responder is not None:
                return self.responder(body)
            return self._script.pop(0) if len(self._script) > 1 else self._script[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # Headers and body go out in two writes: with Nagle's algorithm on, the second waits
            # for the client's delayed ACK of the first (~40 ms a call), as no real server does.
            disable_nagle_algorithm = True
            # Keep-alive, as real servers do: a connection (and its thread) per client connection,
            # not per request.
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                with fake._lock:
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    self._answer()
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                behaviour = fake._next(body)
                if behaviour.delay and fake._stopping.wait(behaviour.delay):
                    return
                if behaviour.body is not None:
                    payload = behaviour.body
                else:
                    payload = {
                        "id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model", ""),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": behaviour.content}}],
                        "usage": behaviour.usage,
                    }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(behaviour.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in behaviour.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
