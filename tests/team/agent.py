"""A real agent endpoint on 127.0.0.1 for the HTTP-target fault tests. It answers each case
as the eval set expects, unless that case's behaviour says otherwise: hang, answer 500, or
answer garbage. It counts the requests it gets per Idempotency-Key (eval id, iteration,
turn), so a test can tell a retried turn from work done twice."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OK, HANG, ERROR_500, GARBAGE = "ok", "hang", "500", "garbage"


class Agent:
    def __init__(self, answers: dict[str, dict[str, Any]], *, delay: float = 0.0, hang_seconds: float = 30.0):
        self.answers = answers  # eval_id -> the TurnReply it should get
        self.behaviour: dict[str, str] = {}  # eval_id -> OK / HANG / ERROR_500 / GARBAGE
        self.delay = delay
        self.hang_seconds = hang_seconds
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                with agent._lock:
                    agent.requests[self.headers.get("Idempotency-Key", "")] += 1
                behaviour = agent.behaviour.get(body["eval_id"], OK)
                if behaviour == HANG:
                    agent._closing.wait(agent.hang_seconds)  # longer than the target's timeout
                    return self._send(200, json.dumps(agent.answers[body["eval_id"]]).encode())
                if agent.delay:
                    time.sleep(agent.delay)
                if behaviour == ERROR_500:
                    return self._send(500, b'{"detail": "the model provider is down"}')
                if behaviour == GARBAGE:
                    return self._send(200, b"<html><body>502 Bad Gateway\x00\xff</body></html>", "text/html")
                return self._send(200, json.dumps(agent.answers[body["eval_id"]]).encode())

            def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up waiting (a timeout): that is the point

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agent"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Agent:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._closing.set()
        self.server.shutdown()
        self.server.server_close()

    def asked(self, eval_id: str) -> int:
        """How many requests the agent got for the case's (only) turn."""
        with self._lock:
            return self.requests[f"{eval_id}:0:t1"]

    def asked_each(self, ids: list[str], expected: dict[str, int], timeout: float = 15.0) -> dict[str, int]:
        """How many requests the agent got per case, once they match `expected` or after
        `timeout` seconds. A request the client gave up on (its timeout is 1 s) can still be
        in the listen queue of this busy test process when the run is done: it is counted when
        its handler reads it, which may be a moment after the run finished."""
        deadline = time.monotonic() + timeout
        while True:
            asked = {eval_id: self.asked(eval_id) for eval_id in ids}
            if asked == expected or time.monotonic() > deadline:
                return asked
            time.sleep(0.1)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Up to 3 clusters x 8 concurrent turns connect at once; the default listen queue of 5
    # drops connections while the accepting thread waits for the GIL, and a dropped SYN is
    # a request the agent never sees although the client counted it as an attempt.
    request_queue_size = 128


def answers_for(evalset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The perfect reply to every case of a generated eval set."""
    answers = {}
    for case in evalset["eval_cases"]:
        turn = case["conversation"][0]
        answers[case["eval_id"]] = {"final_response": turn["expected_final_response"]["content"],
                                    "tool_calls": turn["expected_tool_trajectory"],
                                    "usage": {"prompt_tokens": 120, "completion_tokens": 30}}
    return answers
