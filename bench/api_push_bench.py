"""API push benchmark: 10,000 case outputs pushed through the REST API (`POST /api/v1/runs/`
with the outputs in the body, by `evaluations.client`), and the run waited for until it is
completed, against a real server process: `manage.py up` on a fresh data directory
(gunicorn + a qcluster with its default workers, SQLite unless DATABASE_URL is set).

    python bench/api_push_bench.py [--cases 10000]                       # SQLite (embedded)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_apibench python bench/api_push_bench.py

Target (issue 6): <= 20 s on SQLite. The clock starts when the client sends the outputs
(the eval set was uploaded before, also through the API) and stops when the client sees
the run `completed`, as a CI job would. Peak RSS is sampled every 50 ms over the server's
process tree (gunicorn and cluster workers) and the benchmark's own process.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import engine_bench  # noqa: E402

from evaluations.client import Client  # noqa: E402

PASSWORD = "bench-pass-123"  # a throwaway server on 127.0.0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RssSampler(threading.Thread):
    """Peak RSS of a process tree (summed) and of its largest process, sampled."""

    def __init__(self, roots: list[int]):
        super().__init__(daemon=True)
        self.roots = roots
        self.peak_total = 0
        self.peak_single = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            total = 0
            for root in self.roots:
                try:
                    process = psutil.Process(root)
                    for p in [process, *process.children(recursive=True)]:
                        try:
                            rss = p.memory_info().rss
                        except psutil.Error:
                            continue
                        total += rss
                        self.peak_single = max(self.peak_single, rss)
                except psutil.Error:
                    continue
            self.peak_total = max(self.peak_total, total)
            time.sleep(0.05)


def start_server(data_dir: Path, port: int) -> subprocess.Popen[str]:
    env = {**os.environ, "EVALSITE_DATA_DIR": str(data_dir), "EVALSITE_ADMIN_USERNAME": "bench",
           "EVALSITE_ADMIN_PASSWORD": PASSWORD, "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = ""
    deadline = time.monotonic() + 120
    assert proc.stdout is not None
    while "Press Ctrl+C" not in output:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise SystemExit(f"the server did not start:\n{output}")
        output += line
        if time.monotonic() > deadline:
            raise SystemExit(f"the server did not start in time:\n{output}")
    # Keep reading its output (gunicorn's access log) so its pipe never fills up.
    threading.Thread(target=lambda: [None for _ in proc.stdout or []], daemon=True).start()
    return proc


def make_token(data_dir: Path) -> str:
    code = ("from django.contrib.auth import get_user_model; from evaluations.accounts.tokens import token_create; "
            "print(token_create(user=get_user_model().objects.get(username='bench'), name='bench').secret)")
    env = {**os.environ, "EVALSITE_DATA_DIR": str(data_dir)}
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def stop(proc: subprocess.Popen[Any]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="evalsite-apibench-"))
    port = free_port()
    evalset, outputs = engine_bench.generate(args.cases)
    evalset["eval_set_id"] = "bench_api_push"
    body_mb = len(json.dumps(outputs).encode()) / 1e6
    server = start_server(data_dir, port)
    sampler = RssSampler([server.pid, os.getpid()])
    sampler.start()
    try:
        client = Client(f"http://127.0.0.1:{port}", make_token(data_dir), timeout=300)
        t = time.perf_counter()
        uploaded = client.upload_evalset({"bench.evalset.json": json.dumps(evalset).encode()})
        evalset_seconds = time.perf_counter() - t

        started = time.perf_counter()
        run = client.push_outputs(uploaded, outputs, config={"criteria": engine_bench.CRITERIA},
                                  name="api push bench")
        pushed = time.perf_counter()
        result = client.wait(run, timeout=600, poll=0.1, max_failures=1)
        finished = time.perf_counter()
    finally:
        sampler.stopping.set()
        stop(server)
    sampler.join()
    final = result.run
    total = finished - started
    database = "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    print(f"{database}: {args.cases} case outputs ({body_mb:.1f} MB of JSON) x {len(engine_bench.CRITERIA)} "
          f"evaluators through the API on a `manage.py up` server (default workers)")
    print(f"  eval set upload (before the clock) {evalset_seconds:.2f} s")
    print(f"  outputs upload (POST /api/v1/runs/ answered 201) {pushed - started:.2f} s")
    print(f"  upload to completed {finished - pushed:.2f} s")
    print(f"  total {total:.2f} s")
    print(f"  peak RSS: server tree + client {sampler.peak_total / 2**20:.0f} MB, "
          f"largest process {sampler.peak_single / 2**20:.0f} MB")
    print(f"  status {final.status}: {final.cases_done} results, {final.cases_failed} failed, "
          f"pass rate {(final.summary or {}).get('pass_rate') or 0:.3f}")
    if database == "sqlite":
        print(f"target <= 20 s on SQLite: {'OK' if total <= 20 and final.status == 'completed' else 'OVER TARGET'}")


if __name__ == "__main__":
    main()
