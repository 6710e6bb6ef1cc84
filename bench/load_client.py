"""Load client for bench/load.sh: the compare page and the runs API of a running team server
(`manage.py up --team`), driven by wrk on 32 concurrent keep-alive connections while a
10,000-case run is being evaluated by the clusters; and the same run's evaluation time on the
idle server.

    python bench/load_client.py --server http://127.0.0.1:8765 [--cases 10000] [--connections 32]
        [--api-connections 8] [--max-requests 100000] [--max-seconds 180] [--idle-load-seconds 15]

It needs the server's environment (DATABASE_URL, REDIS_URL, SECRET_KEY, EVALSITE_DATA_DIR) to
set up its user, token and eval set with Django; everything after that goes over HTTP.

Steps: import a generated eval set (bench/engine_bench.py's generator), start a baseline run
and a regressed candidate through the API and wait for both (two finished runs: their
comparison is stored when the candidate completes); for `--idle-load-seconds`, the load with
no run being evaluated (what the pages alone can do); evaluate a third run on the idle server
and time it; then start a fourth and, until it completes (or a bound is reached), keep the
connections busy: `--api-connections` of them on the runs API (the run list and the running
run, in turn, as CI jobs poll it), the rest on the compare page of the two finished runs.
wrk (C, a few percent of a core) sends the requests, so the client's own cost stays out of
the server's two cores. Prints requests/s, p50/p99 latency and errors per kind (any status
but 200 is an error), the two evaluation times and their ratio; the targets are judged on
the load during the evaluation.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

USERNAME, PASSWORD = "loadbench", "load-bench-pass-123"
TARGETS = {"compare_rps": 150.0, "p99_ms": 500.0, "ratio": 1.5}


def setup(cases: int) -> tuple[str, int, list[dict[str, Any]], list[dict[str, Any]]]:
    """A member with an API token, and the eval set; returns (token, eval set id, perfect
    outputs, regressed outputs)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    import engine_bench
    from django.contrib.auth import get_user_model

    from evaluations.accounts.tokens import token_create
    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.models import Membership

    project = project_get_or_create_default()
    user = get_user_model().objects.create_user(USERNAME, "load@example.com", PASSWORD)
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    token = token_create(user=user, name="load benchmark").secret
    evalset, regressed = engine_bench.generate(cases)
    [outcome] = evalset_import(project=project, files=[SourceFile("load.evalset.json", json.dumps(evalset).encode())])
    perfect = [{"eval_id": case["eval_id"], "turns": [{
        "invocation_id": "t1", "latency_seconds": 0.5,
        "final_response": case["conversation"][0]["expected_final_response"]["content"],
        "tool_calls": case["conversation"][0]["expected_tool_trajectory"]}]} for case in evalset["eval_cases"]]
    return token, outcome.version.evalset_id, perfect, regressed


class Api:
    def __init__(self, server: str, token: str) -> None:
        self.server = server.rstrip("/")
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data=data, method=method, headers=self.headers)
        with self.opener.open(request, timeout=300) as response:
            return json.loads(response.read())

    def start_run(self, evalset: int, outputs: list[dict[str, Any]], name: str) -> int:
        import engine_bench

        run = self.call("POST", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "name": name,
                                                  "config": {"criteria": engine_bench.CRITERIA}})
        return int(run["id"])

    def wait(self, run_id: int, timeout: float = 900) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run = self.call("GET", f"/api/v1/runs/{run_id}/")
            if run["status"] in {"completed", "failed", "cancelled"}:
                return dict(run)
            if time.monotonic() > deadline:
                raise SystemExit(f"run {run_id} did not finish in {timeout:g} s: {run['status']} "
                                 f"{run['cases_done']}/{run['cases_total']}")
            time.sleep(0.25)


def login(server: str) -> str:
    """A session cookie for the pages, by logging in as a browser does."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{server}/accounts/login/", timeout=30).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    body = urllib.parse.urlencode({"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": csrf}).encode()
    opener.open(urllib.request.Request(f"{server}/accounts/login/", data=body,
                                       headers={"Referer": f"{server}/accounts/login/"}), timeout=30).read()
    return "; ".join(f"{c.name}={c.value}" for c in jar)


@dataclass
class Load:
    """What one wrk process measured."""

    requests: int = 0
    seconds: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0
    mean_ms: float = 0.0
    not_200: int = 0
    first_bad_status: int = 0
    socket_errors: int = 0
    output: str = ""

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def errors(self) -> int:
        return self.not_200 + self.socket_errors


REPORT = re.compile(r"^REPORT (.*)$", re.MULTILINE)


def parse_report(output: str) -> Load:
    found = REPORT.search(output)
    if found is None:
        raise SystemExit(f"wrk printed no report:\n{output}")
    values = dict(item.split("=", 1) for item in found.group(1).split())
    return Load(requests=int(values["requests"]), seconds=int(values["duration_us"]) / 1e6,
                p50_ms=int(values["p50_us"]) / 1000, p99_ms=int(values["p99_us"]) / 1000,
                max_ms=int(values["max_us"]) / 1000, mean_ms=float(values["mean_us"]) / 1000,
                not_200=int(values["not_200"]), first_bad_status=int(values["first_bad_status"]),
                socket_errors=int(values["socket_errors"]), output=output)


def hammer(server: str, cookie: str, token: str, compare_path: str, run_id: int, args: argparse.Namespace,
           stop: threading.Event, seconds: float) -> dict[str, Load]:
    """Two wrk processes at once, each connection a keep-alive client that sends its next
    request when the last is answered: the compare page on `connections - api_connections`
    connections, the runs API (the list, and the running run as a CI job polls it) on the rest.
    Until `stop` is set, `seconds` pass, or a wrk thread reaches its share of
    `--max-requests`; then both are interrupted and report."""
    with tempfile.TemporaryDirectory() as tmp:
        flag = Path(tmp) / "bound-reached"
        compare_connections = args.connections - args.api_connections
        jobs = {
            "compare": (compare_connections, 2, f"Cookie: {cookie}", [compare_path]),
            "api": (args.api_connections, 1, f"Authorization: Token {token}",
                    ["/api/v1/runs/", f"/api/v1/runs/{run_id}/"]),
        }
        procs = {}
        for kind, (connections, threads, header, paths) in jobs.items():
            share = max(1, int(args.max_requests * connections / args.connections / threads))
            argv = [args.wrk, "--threads", str(threads), "--connections", str(connections),
                    "--duration", f"{math.ceil(seconds) + 5}s", "--timeout", "30s", "--header", header,
                    "--script", str(REPO / "bench" / "wrk_report.lua"), server + "/", "--",
                    f"max={share}", f"flag={flag}", *paths]
            procs[kind] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + seconds
        while (not stop.is_set() and time.monotonic() < deadline and not flag.exists()
               and all(proc.poll() is None for proc in procs.values())):
            time.sleep(0.05)
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # wrk stops and reports on the time really taken
        return {kind: parse_report(proc.communicate(timeout=60)[0]) for kind, proc in procs.items()}


def report(title: str, loads: dict[str, Load], compare_path: str) -> None:
    print(f"\n{title}", flush=True)
    for kind, label in (("compare", f"compare page {compare_path}"), ("api", "runs API (list and detail)")):
        load = loads[kind]
        print(f"  {label}: {load.requests:,} requests in {load.seconds:.1f} s, {load.rate:.1f} req/s, "
              f"p50 {load.p50_ms:.0f} ms, p99 {load.p99_ms:.0f} ms, max {load.max_ms:.0f} ms, "
              f"mean {load.mean_ms:.0f} ms, {load.errors} errors"
              + (f" (first non-200 status: {load.first_bad_status})" if load.not_200 else ""))
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=32, help="in all, both kinds of request")
    parser.add_argument("--api-connections", type=int, default=8, help="of those, the runs API's")
    parser.add_argument("--max-requests", type=int, default=100_000)
    parser.add_argument("--max-seconds", type=float, default=180)
    parser.add_argument("--idle-load-seconds", type=float, default=15,
                        help="first, the same load on the server with no run being evaluated (0: skip)")
    parser.add_argument("--wrk", default="wrk")
    args = parser.parse_args()
    if shutil.which(args.wrk) is None:
        raise SystemExit(f"{args.wrk} not found: apt-get install -y wrk")
    if not 0 < args.api_connections < args.connections:
        raise SystemExit("--api-connections must be more than 0 and fewer than --connections")
    server = args.server.rstrip("/")

    t = time.perf_counter()
    token, evalset, perfect, regressed = setup(args.cases)
    api = Api(server, token)
    print(f"set up: eval set of {args.cases:,} cases imported in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    baseline = api.start_run(evalset, perfect, "load baseline")
    api.wait(baseline)
    candidate = api.start_run(evalset, regressed, "load candidate")
    final = api.wait(candidate)
    print(f"set up: two finished runs ({baseline}, {candidate}; candidate {final['cases_failed']} failed) "
          f"in {time.perf_counter() - t:.1f} s", flush=True)
    compare_path = f"/compare/?baseline={baseline}&candidate={candidate}"
    cookie = login(server)
    # A few requests first, as the team's first views would be: each web worker builds the
    # page once and keeps it; the load then measures what every later view costs.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for attempt in range(8):
        t = time.perf_counter()
        request = urllib.request.Request(server + compare_path, headers={"Cookie": cookie})
        with opener.open(request, timeout=300) as response:
            size = len(response.read())
        if attempt in (0, 7):
            print(f"compare page, {'first' if attempt == 0 else 'eighth'} request: "
                  f"{(time.perf_counter() - t) * 1000:.0f} ms, {size / 1024:.0f} KB", flush=True)

    split = (f"{args.connections - args.api_connections} on the compare page, {args.api_connections} on the runs API "
             f"(list and a run's detail, in turn)")
    if args.idle_load_seconds > 0:  # what the pages alone can do: the server's CPU is all theirs
        loads = hammer(server, cookie, token, compare_path, candidate, args, threading.Event(),
                       args.idle_load_seconds)
        report(f"load with no run being evaluated: {args.connections} connections, {split}", loads, compare_path)

    # The evaluation time of the same kind of run, first on the idle server.
    idle_run = api.start_run(evalset, regressed, "load idle")
    t = time.perf_counter()
    api.wait(idle_run)
    idle = time.perf_counter() - t
    print(f"\nidle: a {args.cases:,}-case run evaluated in {idle:.1f} s (from queued to completed)", flush=True)

    loaded_run = api.start_run(evalset, regressed, "load under load")
    t = time.perf_counter()
    stop = threading.Event()
    result: dict[str, float] = {}

    def follow() -> None:
        api.wait(loaded_run)
        result["loaded"] = time.perf_counter() - t
        stop.set()

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    loads = hammer(server, cookie, token, compare_path, loaded_run, args, stop, args.max_seconds)
    bounded = "" if stop.is_set() else " (the load stopped at its bound before the run completed)"
    follower.join()
    loaded = result["loaded"]

    report(f"load while a {args.cases:,}-case run is evaluated: {args.connections} connections, {split}{bounded}",
           loads, compare_path)
    ratio = loaded / idle
    print(f"\nrun completion: {loaded:.1f} s under load vs {idle:.1f} s idle: {ratio:.2f}x")

    compare = loads["compare"]
    p99 = max(load.p99_ms for load in loads.values())
    errors = sum(load.errors for load in loads.values())
    print("\ntargets: "
          f"compare >= {TARGETS['compare_rps']:.0f} req/s: {ok(compare.rate >= TARGETS['compare_rps'])} "
          f"({compare.rate:.1f}); p99 <= {TARGETS['p99_ms']:.0f} ms, both kinds: {ok(p99 <= TARGETS['p99_ms'])} "
          f"({p99:.0f}); zero errors: {ok(errors == 0)} ({errors}); "
          f"completion <= {TARGETS['ratio']}x idle: {ok(ratio <= TARGETS['ratio'])} ({ratio:.2f}x)")


def ok(met: bool) -> str:
    return "OK" if met else "MISSED"


if __name__ == "__main__":
    main()
