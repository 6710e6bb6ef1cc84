"""A receiver's answer and the notification worker's memory (issue 38): a webhook delivered to
a local receiver that answers 400 MB, or ~300 KiB of gzip that inflates to 300 MB, next to
the floor measured in the same run, the same delivery answered with 2 bytes. The figure is
the growth of the process's resident memory (sampled every 2 ms from /proc/self/statm) while
`delivery.deliver` runs; each case in a process of its own, on a scratch SQLite database.
Target: each grows at most 32 MB more than the floor (before the fix: +1.2 GB for 400 MB).

    python bench/notify_answer_bench.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
MB = 1024 * 1024
TARGET_MB = 32.0
CASES = {"floor": "a 2-byte answer", "flood": "a 400 MB answer", "bomb": "300 MB of zeros as ~300 KiB of gzip"}


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(MB)
    return b"".join(packer.compress(zeros) for _ in range(300)) + packer.flush()


def _serve(case: str) -> ThreadingHTTPServer:
    body = _bomb() if case == "bomb" else b"ok"
    chunk = b"A" * (64 * 1024)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", str(400 * MB if case == "flood" else len(body)))
            if case == "bomb":
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            try:
                if case == "flood":
                    for _ in range(400 * MB // len(chunk)):
                        self.wfile.write(chunk)
                else:
                    self.wfile.write(body)
            except OSError:
                pass  # the worker read its prefix and closed

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def one(case: str) -> dict[str, Any]:
    """In this process: one delivery to a receiver answering as `case` says."""
    import django

    django.setup()
    import scratch

    from evaluations.models import NotifyAttempt, Project
    from evaluations.notify import delivery, services

    scratch.migrate()
    server = _serve(case)
    project = Project.objects.create(slug="acme", name="Acme")
    hook = services.channel_save(project=project, actor=None, values={
        "name": "hook", "kind": "webhook", "url": f"http://127.0.0.1:{server.server_address[1]}/hook"})
    sent = delivery.send_test(hook)
    before, peak, done = _rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    delivered = delivery.deliver([sent.pk])
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    server.shutdown()
    attempt = NotifyAttempt.objects.get(delivery=sent)
    return {"case": case, "delivered": delivered, "growth_mb": max(peak[0] - before, 0) / MB, "seconds": seconds,
            "logged": attempt.excerpt[:80]}


def measure() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="evalsite-bench-") as tmp:
            env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
            env.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
            env["EVALSITE_DATA_DIR"] = tmp
            done = subprocess.run([sys.executable, __file__, "--one", case], env=env, cwd=REPO,
                                  capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"notify_answer_bench {case} failed:\n{done.stderr[-3000:]}")
        out[case] = json.loads(done.stdout.strip().splitlines()[-1])
    floor = out["floor"]["growth_mb"]
    out["added_mb"] = max(out["flood"]["growth_mb"], out["bomb"]["growth_mb"]) - floor
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", choices=list(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(REPO / "bench"))
    if args.one:
        print(json.dumps(one(args.one)))
        return
    r = measure()
    if args.json:
        print(json.dumps(r))
        return
    for case, said in CASES.items():
        c = r[case]
        print(f"{said:40} RSS grew {c['growth_mb']:6.1f} MB in {c['seconds']:.2f} s; logged {c['logged'][:50]!r}")
    print(f"most added over the floor: {r['added_mb']:.1f} MB (target: at most {TARGET_MB:.0f} MB)")


if __name__ == "__main__":
    main()
