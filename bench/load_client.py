"""Load client for bench/load.sh: the compare page and the runs API of a running team server
(`manage.py up --team`), with N concurrent keep-alive connections, while a 10,000-case run is
being evaluated by the clusters; and the same run's evaluation time on the idle server.

    python bench/load_client.py --server http://127.0.0.1:8765 [--cases 10000] [--connections 32]
                                [--max-requests 60000] [--max-seconds 180] [--compare-share 0.75]

It needs the server's environment (DATABASE_URL, REDIS_URL, SECRET_KEY, EVALSITE_DATA_DIR) to
set up its user, token and eval set with Django; everything after that goes over HTTP.

Steps: import a generated eval set (bench/engine_bench.py's generator), start a baseline run
and a regressed candidate through the API and wait for both (two finished runs: their
comparison is stored when the candidate completes); evaluate a third run on the idle server
and time it; then start a fourth and, until it completes (or the bounds are reached), keep
`--connections` connections busy: each request is the compare page with probability
`--compare-share`, else the runs API (the run list or the running run). Before that, the
same load for `--idle-load-seconds` with no run being evaluated (what the pages alone can
do). Prints requests/s, p50/p99 latency and errors per kind, and the two evaluation times
and their ratio; the targets are judged on the load during the evaluation.
"""

from __future__ import annotations

import argparse
import http.client
import http.cookiejar
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
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

    from evaluations.api.auth import token_create
    from evaluations.formats import SourceFile
    from evaluations.models import Membership
    from evaluations.services import evalset_import, project_get_or_create_default

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
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"compare": [], "api": []})
    errors: dict[str, int] = field(default_factory=lambda: {"compare": 0, "api": 0})
    error_samples: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, seconds: float, error: str | None) -> None:
        with self.lock:
            if error is None:
                self.latencies[kind].append(seconds)
            else:
                self.errors[kind] += 1
                if len(self.error_samples) < 5:
                    self.error_samples.append(f"{kind}: {error}")

    def total(self) -> int:
        return sum(len(v) for v in self.latencies.values()) + sum(self.errors.values())


def hammer(server: str, cookie: str, token: str, compare_path: str, run_id: int, args: argparse.Namespace,
           stop: threading.Event) -> tuple[Stats, float]:
    """`args.connections` threads, each with one keep-alive connection, until `stop` is set
    or a bound is reached. Returns the stats and the elapsed seconds."""
    parsed = urllib.parse.urlsplit(server)
    stats = Stats()
    api_paths = ["/api/v1/runs/", f"/api/v1/runs/{run_id}/"]
    deadline = time.monotonic() + args.max_seconds

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
        while not stop.is_set() and time.monotonic() < deadline and stats.total() < args.max_requests:
            if rng.random() < args.compare_share:
                kind, path, headers = "compare", compare_path, {"Cookie": cookie}
            else:
                kind, path, headers = "api", rng.choice(api_paths), {"Authorization": f"Token {token}"}
            started = time.perf_counter()
            error = None
            try:
                conn.request("GET", path, headers=headers)
                response = conn.getresponse()
                body = response.read()
                if response.status != 200:
                    error = f"HTTP {response.status} {path}: {body[:200]!r}"
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
            except (OSError, http.client.HTTPException) as exc:
                error = f"{type(exc).__name__}: {exc} ({path})"
                conn.close()
            stats.record(kind, time.perf_counter() - started, error)
        conn.close()

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(args.connections)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return stats, time.perf_counter() - started


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


def report(title: str, stats: Stats, elapsed: float, compare_path: str) -> None:
    print(f"\n{title}", flush=True)
    for kind, label in (("compare", f"compare page {compare_path}"), ("api", "runs API (list and detail)")):
        ok = stats.latencies[kind]
        if not ok:
            print(f"  {label}: no successful request, {stats.errors[kind]} errors")
            continue
        print(f"  {label}: {len(ok) / elapsed:.1f} req/s, p50 {percentile(ok, 0.5) * 1000:.0f} ms, "
              f"p99 {percentile(ok, 0.99) * 1000:.0f} ms, max {max(ok) * 1000:.0f} ms, "
              f"mean {statistics.fmean(ok) * 1000:.0f} ms, {stats.errors[kind]} errors")
    for sample in stats.error_samples:
        print(f"  error: {sample}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--max-requests", type=int, default=60_000)
    parser.add_argument("--max-seconds", type=float, default=180)
    parser.add_argument("--compare-share", type=float, default=0.75)
    parser.add_argument("--idle-load-seconds", type=float, default=15,
                        help="first, the same load on the server with no run being evaluated (0: skip)")
    args = parser.parse_args()
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
    # The candidate shows `completed` a moment before its worker has stored the comparison:
    # one request first, so the load measures the stored comparison, not 32 computing it.
    for attempt in ("first (may compute the comparison)", "second"):
        t = time.perf_counter()
        request = urllib.request.Request(server + compare_path, headers={"Cookie": cookie})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=300) as response:
            size = len(response.read())
        print(f"compare page, {attempt} request: {(time.perf_counter() - t) * 1000:.0f} ms, {size / 1024:.0f} KB",
              flush=True)

    if args.idle_load_seconds > 0:  # what the pages alone can do: the server's CPU is all theirs
        quiet = argparse.Namespace(**{**vars(args), "max_seconds": args.idle_load_seconds})
        stats, elapsed = hammer(server, cookie, token, compare_path, candidate, quiet, threading.Event())
        report(f"load with no run being evaluated: {args.connections} connections for {elapsed:.1f} s, "
               f"{stats.total():,} requests", stats, elapsed, compare_path)

    # The evaluation time of the same kind of run, first on the idle server.
    idle_run = api.start_run(evalset, regressed, "load idle")
    t = time.perf_counter()
    api.wait(idle_run)
    idle = time.perf_counter() - t
    print(f"idle: a {args.cases:,}-case run evaluated in {idle:.1f} s (from queued to completed)", flush=True)

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
    stats, elapsed = hammer(server, cookie, token, compare_path, loaded_run, args, stop)
    follower.join()
    loaded = result["loaded"]
    bounded = "" if stop.is_set() and loaded <= elapsed + 1 else " (the load stopped at its bound first)"

    report(f"load while a {args.cases:,}-case run is evaluated: {args.connections} connections for {elapsed:.1f} s, "
           f"{stats.total():,} requests ({args.compare_share:.0%} compare page, the rest the runs API){bounded}",
           stats, elapsed, compare_path)
    ratio = loaded / idle
    print(f"\nrun completion: {loaded:.1f} s under load vs {idle:.1f} s idle: {ratio:.2f}x")

    compare = stats.latencies["compare"]
    rps = len(compare) / elapsed
    p99 = percentile(compare, 0.99) * 1000 if compare else float("inf")
    errors = sum(stats.errors.values())
    print("\ntargets: "
          f"compare >= {TARGETS['compare_rps']:.0f} req/s: {'OK' if rps >= TARGETS['compare_rps'] else 'MISSED'} "
          f"({rps:.1f}); p99 <= {TARGETS['p99_ms']:.0f} ms: {'OK' if p99 <= TARGETS['p99_ms'] else 'MISSED'} "
          f"({p99:.0f}); zero errors: {'OK' if errors == 0 else 'MISSED'} ({errors}); "
          f"completion <= {TARGETS['ratio']}x idle: {'OK' if ratio <= TARGETS['ratio'] else 'MISSED'} ({ratio:.2f}x)")


if __name__ == "__main__":
    main()
