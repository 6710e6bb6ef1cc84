"""Model target benchmark (issue 43): the chat loop's own overhead per model call, beyond the
model's latency, against a scripted OpenAI-compatible model that answers at once.

Each case is one turn in which the model asks for two tools at once, then a third, then
answers: three model calls and three simulated tool results (the eval set's expected
responses) per case. The loop (`ModelTarget.run_many`, one case at a time so the clock
measures one call at a time) is timed over every case, and every request body it sent is
kept. The **floor**, measured in the same run, sends exactly those bodies again, one after
another, through an httpx client, reading and parsing each answer as the loop does: the HTTP
and the model's own time, with none of the loop. Overhead per call = (loop - floor) / calls;
the target is under 2 ms. Loop and floor take turns and the best of each counts (the machine
is shared).

Twice: in process (httpx's MockTransport answers at once: little noise, the figure), and over
a socket to a scripted server on 127.0.0.1 (the real path; sub-millisecond differences drown
in the scheduling noise of a shared machine there). The same cases eight at a time (the
target's default concurrency) over the socket give the throughput, for information.

    python bench/model_loop_bench.py [--cases 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

USAGE = {"prompt_tokens": 200, "completion_tokens": 20, "total_tokens": 220}


def _completion(message: dict[str, Any]) -> bytes:
    return json.dumps({"id": "c", "object": "chat.completion", "model": "bench",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                       "usage": USAGE}).encode()


def _calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)]}


class Server:
    """Answers by how many tool messages the conversation holds: 0 -> two calls, 2 -> one
    more, 3 -> the final answer. Answers are prepared once; request bodies are kept."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with server.lock:
                    server.bodies.append(body)
                data = _answer(body)
                # one write: a head and a body sent apart wait on delayed ACKs (40 ms a call)
                self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(data)).encode() + b"\r\n\r\n" + data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _cases(n: int) -> list[Any]:
    from evaluations.schemas.evalset import EvalCase, Invocation, MessageContent, ToolCall

    return [EvalCase(eval_id=f"case_{i}", conversation=[Invocation(
        invocation_id="turn_1", user_content=MessageContent.user(f"Weather in Oslo? (#{i})"),
        expected_tool_trajectory=[
            ToolCall(name="get_weather", args={"city": "Oslo"}, result={"temp_c": 21, "sky": "sun"}),
            ToolCall(name="get_forecast", args={"city": "Oslo", "days": 2}, result={"tomorrow": "rain"}),
            ToolCall(name="get_time", args={"city": "Oslo"}, result="14:05"),
        ])]) for i in range(n)]


def _answer(body: bytes) -> bytes:
    tools = body.count(b'"role":"tool"') + body.count(b'"role": "tool"')
    return ANSWERS[min(tools, 3) if tools != 1 else 0]


def _answers() -> dict[int, bytes]:
    city = "Oslo"
    return {0: _completion(_calls(("get_weather", {"city": city}), ("get_forecast", {"city": city, "days": 2}))),
            2: _completion(_calls(("get_time", {"city": city}))),
            3: _completion({"role": "assistant", "content": "Sunny in Oslo, 21°C; rain tomorrow."})}


ANSWERS = _answers()


def _timed(rounds: int, loop: Any, floor: Any) -> tuple[float, float]:
    """Best of `rounds` of each, taking turns (the machine is shared)."""
    loops, floors = [], []
    for _ in range(rounds):
        loops.append(loop())
        floors.append(floor())
    return min(loops), min(floors)


def measure(cases: int, rounds: int = 5) -> dict[str, Any]:
    import httpx
    import orjson

    from evaluations.runs.targets.model import ModelTarget, inferred_tools
    from evaluations.schemas.model_target import ModelTargetSpec

    work = _cases(cases)
    tools = inferred_tools(work)
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = request.read()
        bodies.append(body)
        return httpx.Response(200, content=_answer(body), headers={"Content-Type": "application/json"})

    def answer_only(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=_answer(request.read()), headers={"Content-Type": "application/json"})

    def check(outputs: list[Any]) -> None:
        assert all(o.error is None and o.turns[0].final_response for o in outputs), outputs[0]
        assert all(c.simulated == "expected" for o in outputs for c in o.turns[0].tool_calls)

    def run_loop(target: Any) -> float:
        bodies.clear()
        start = time.perf_counter()
        outputs = [target.run_many([(case, 0)])[0] for case in work]
        seconds = time.perf_counter() - start
        check(outputs)
        return seconds

    def replay(client: Any, url: str) -> float:
        sent = list(bodies)
        headers = {"Content-Type": "application/json"}
        start = time.perf_counter()
        for body in sent:  # the same requests, read the way the loop reads them
            with client.stream("POST", url, content=body, headers=headers) as response:
                orjson.loads(b"".join(response.iter_bytes()))
        return time.perf_counter() - start

    prompt = {"system": "You are a weather assistant.", "user": "{{input}}"}
    # 1. In process: httpx's MockTransport answers at once, so nothing but the loop and the
    # httpx calls is timed, and the floor is those same httpx calls.
    base = "http://127.0.0.1:9/v1"
    target = ModelTarget(ModelTargetSpec(base_url=base, model="bench", tools=tools, concurrency=1, prompt=prompt),
                         transport=httpx.MockTransport(handler))
    target.run_many([(work[0], 0)])
    with httpx.Client(transport=httpx.MockTransport(answer_only)) as client:
        loop, floor = _timed(rounds, lambda: run_loop(target), lambda: replay(client, base + "/chat/completions"))
    target.close()
    calls = len(bodies)
    assert calls == 3 * cases

    # 2. Over a socket: a scripted server on 127.0.0.1, for the real HTTP path.
    server = Server()
    try:
        spec = ModelTargetSpec(base_url=server.url, model="bench", tools=tools, concurrency=1, prompt=prompt)
        over = ModelTarget(spec)
        over.run_many([(work[0], 0)])

        def socket_loop() -> float:
            server.bodies.clear()
            seconds = run_loop(over)
            bodies[:] = server.bodies
            return seconds

        with httpx.Client(timeout=30) as client:
            http_loop, http_floor = _timed(3, socket_loop, lambda: replay(client, server.url + "/chat/completions"))
        over.close()
        concurrent = ModelTarget(spec.model_copy(update={"concurrency": 8}))
        concurrent.run_many([(case, 0) for case in work[:8]])
        start = time.perf_counter()
        concurrent.run_many([(case, 0) for case in work])
        parallel = time.perf_counter() - start
        concurrent.close()
    finally:
        server.close()
    return {"cases": cases, "calls": calls, "loop_ms_per_call": 1000 * loop / calls,
            "floor_ms_per_call": 1000 * floor / calls, "overhead_ms_per_call": 1000 * (loop - floor) / calls,
            "ratio": loop / floor, "http_loop_ms_per_call": 1000 * http_loop / calls,
            "http_floor_ms_per_call": 1000 * http_floor / calls,
            "http_overhead_ms_per_call": 1000 * (http_loop - http_floor) / calls,
            "calls_per_s_8_at_once": calls / parallel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import django

    sys.path.insert(0, str(REPO / "bench"))
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    django.setup()
    figures = measure(args.cases)
    if args.json:
        print(json.dumps(figures))
        return
    print(f"{figures['calls']} model calls over {figures['cases']} cases (3 a case, 3 simulated tool results)")
    print(f"  in process  loop {figures['loop_ms_per_call']:.3f} ms a call, "
          f"floor {figures['floor_ms_per_call']:.3f} ms "
          f"(the same requests through httpx alone): overhead {figures['overhead_ms_per_call']:.3f} ms "
          f"(target < 2 ms), {figures['ratio']:.2f}x the floor")
    print(f"  127.0.0.1   loop {figures['http_loop_ms_per_call']:.3f} ms a call, floor "
          f"{figures['http_floor_ms_per_call']:.3f} ms: overhead {figures['http_overhead_ms_per_call']:.3f} ms")
    print(f"  8 cases at once over 127.0.0.1: {figures['calls_per_s_8_at_once']:.0f} model calls/s")


if __name__ == "__main__":
    main()
