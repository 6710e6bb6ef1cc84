"""Memory of the processes a big upload and a big run go through (issue 40), beside the floor of
the same process idle: a gunicorn worker taking a ~50 MB eval set upload (`POST /api/v1/evalsets/`),
the same worker taking a 100k-case outputs upload (`POST /api/v1/runs/` with `outputs_file`), and
the qcluster evaluating that run (its largest process).

    python bench/memory_bench.py [--evalset-cases 14000] [--cases 100000] [--json]

On SQLite in a scratch data directory (DATABASE_URL and REDIS_URL are ignored); a real gunicorn
(one worker, four threads) and a real qcluster (two workers) on 127.0.0.1; RSS sampled every
50 ms with psutil. Target: every process under 400 MB.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


class Peak:
    """The largest RSS (MB) of the processes `procs()` names, sampled until stopped."""

    def __init__(self, procs: Callable[[], list[Any]]) -> None:
        self.procs, self.mb, self.done = procs, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        while not self.done.is_set():
            with contextlib.suppress(psutil.Error):
                for proc in self.procs():
                    with contextlib.suppress(psutil.Error):
                        self.mb = max(self.mb, proc.memory_info().rss / 1e6)
            time.sleep(0.05)

    def stop(self) -> float:
        self.done.set()
        self.thread.join(5)
        return self.mb


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(evalset_cases: int, cases: int) -> dict[str, Any]:
    import httpx
    import psutil

    data = tempfile.mkdtemp(prefix="evalsite-memory-")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(EVALSITE_DATA_DIR=data, EVALSITE_WORKERS="2", EVALSITE_MAX_UPLOAD_MB="200")
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import scratch

    scratch.migrate()
    import import_bench
    from django.contrib.auth import get_user_model
    from django.db import connections

    from evaluations.accounts.tokens import token_create
    from evaluations.models import Membership, Project, Run
    from tests.team.helpers import CRITERIA, generate, import_evalset

    user = get_user_model().objects.create_user("mem", "mem@example.com", "memory-pass-123")
    project = Project.objects.create(slug="mem", name="Memory")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    token = token_create(user=user, name="bench").secret
    evalset_path = Path(data) / "big.test.json"
    evalset_path.write_text(json.dumps(import_bench.generate(evalset_cases, style="verbose")))
    evalset, outputs, _ = generate(cases)
    version = import_evalset(project, evalset)
    outputs_path = Path(data) / "outputs.json"
    outputs_path.write_text(json.dumps(outputs))
    del evalset, outputs
    connections.close_all()

    port = _free_port()
    web = subprocess.Popen([sys.executable, "-m", "gunicorn", "evalsite.wsgi:application", "--bind",
                            f"127.0.0.1:{port}", "--workers", "1", "--threads", "4", "--timeout", "900",
                            "--no-control-socket"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    found: dict[str, Any] = {}
    headers = {"Authorization": f"Token {token}"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=900, trust_env=False, headers=headers) as client:
            for _ in range(300):
                try:
                    client.get("/healthz")
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            worker = psutil.Process(web.pid).children()[0]
            client.get("/api/v1/runs/")  # the worker's imports, before its floor
            found["web_floor_mb"] = worker.memory_info().rss / 1e6
            peak = Peak(lambda: [worker])
            with open(evalset_path, "rb") as f:
                answer = client.post("/api/v1/evalsets/", files={"file": (evalset_path.name, f)},
                                     data={"project": "mem"})
            assert answer.status_code == 201, answer.text[:500]
            found.update(evalset_mb=evalset_path.stat().st_size / 1e6, evalset_peak_mb=peak.stop())
            peak = Peak(lambda: [worker])
            with open(outputs_path, "rb") as f:
                answer = client.post("/api/v1/runs/", files={"outputs_file": (outputs_path.name, f)},
                                     data={"evalset": str(version.evalset_id), "target_kind": "uploaded",
                                           "config": json.dumps({"criteria": CRITERIA})})
            assert answer.status_code == 201, answer.text[:500]
            found.update(outputs_mb=outputs_path.stat().st_size / 1e6, outputs_peak_mb=peak.stop())
            run_id = answer.json()["id"]
    finally:
        web.terminate()
        web.wait(30)
    cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        clusters = Path(data) / "clusters" / str(cluster.pid)
        deadline = time.monotonic() + 120
        while len(list(clusters.glob("worker-*"))) < 2:  # both workers ready (their imports done)
            assert time.monotonic() < deadline, "the qcluster did not start"
            time.sleep(0.2)
        found["cluster_floor_mb"] = max(p.memory_info().rss for p in psutil.Process(cluster.pid).children(True)) / 1e6
        peak = Peak(lambda: psutil.Process(cluster.pid).children(recursive=True))
        started = time.perf_counter()
        while Run.objects.get(pk=run_id).status not in {"completed", "failed", "cancelled"}:
            time.sleep(1)
        found.update(run_seconds=time.perf_counter() - started, run_peak_mb=peak.stop(), cases=cases,
                     run_status=Run.objects.get(pk=run_id).status)
    finally:
        cluster.terminate()
        try:
            cluster.wait(30)
        except subprocess.TimeoutExpired:
            cluster.kill()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evalset-cases", type=int, default=14_000)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = measure(args.evalset_cases, args.cases)
    print(f"gunicorn worker, idle after its imports (floor): {found['web_floor_mb']:.0f} MB")
    print(f"  a {found['evalset_mb']:.0f} MB eval set upload: peak {found['evalset_peak_mb']:.0f} MB (target < 400)")
    print(f"  a {found['outputs_mb']:.0f} MB outputs upload ({found['cases']:,} cases): peak "
          f"{found['outputs_peak_mb']:.0f} MB (target < 400)")
    print(f"qcluster, largest process idle (floor): {found['cluster_floor_mb']:.0f} MB; evaluating the "
          f"{found['cases']:,}-case run ({found['run_status']} in {found['run_seconds']:.0f} s): peak "
          f"{found['run_peak_mb']:.0f} MB (target < 400)")
    if args.json:
        print(json.dumps(found))


if __name__ == "__main__":
    main()
