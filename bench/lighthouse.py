"""Lighthouse on the demo: performance and accessibility of home, a run, compare, a
drill-down and the trend page, as a phone (Lighthouse's mobile default: Moto G Power, 4x
CPU slowdown, slow 4G, simulated) and a desktop (`--preset=desktop`) see them.

    (cd bench/lighthouse && npm ci)              # Lighthouse, pinned by its package-lock.json
    CHROME_PATH=/usr/bin/chromium python bench/lighthouse.py [--runs 3]
    python bench/lighthouse.py --url http://127.0.0.1:8000 --password PASS   # a server already up

It starts `manage.py up --demo` in a scratch data directory on a free port (the embedded
mode a user gets from the two commands), waits for the two demo runs to finish, logs in as
the admin it printed, and runs Lighthouse from bench/lighthouse/node_modules against each
page `--runs` times (the median is shown), through bench/lighthouse/run.mjs: the session's
cookies go into the browser's jar, so the page's own requests (htmx fragments) are made
logged in, as a user's browser makes them (a `Cookie` header given to Lighthouse reaches the
document only: the fragments were answered with the login page). Nothing leaves the
machine: Chromium runs with its background networking off and every page and asset is
served on 127.0.0.1.

The floor is the login page (no chart, no table, the smallest page the server renders),
measured in the same run. Targets (issue 28): performance >= 90 on mobile and accessibility
>= 95 on the five pages; CLS < 0.1. It prints; scores never fail it. Lighthouse is a
measuring tool, kept out of the test suite (tests/test_browser_axe.py checks accessibility
with axe-core in every test run). docs/performance.md holds the figures before and after.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIGHTHOUSE = REPO / "bench" / "lighthouse" / "node_modules" / ".bin" / "lighthouse"
RUNNER = REPO / "bench" / "lighthouse" / "run.mjs"
METRICS = {"first-contentful-paint": "FCP", "largest-contentful-paint": "LCP", "total-blocking-time": "TBT",
           "cumulative-layout-shift": "CLS", "speed-index": "SI"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_demo(data_dir: str) -> tuple[subprocess.Popen[str], str, str]:
    """`manage.py up --demo` on a free port; (process, base URL, admin password)."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "EVALSITE_CACHE_URL"}}
    env["EVALSITE_DATA_DIR"] = data_dir
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--demo", "--port", str(port)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert proc.stdout is not None
    password, said = "", []
    deadline = time.monotonic() + 300
    for line in proc.stdout:
        said.append(line)
        if found := re.search(r"log in as 'admin' with password '([^']+)'", line):
            password = found.group(1)
        if "Press Ctrl+C to stop." in line or time.monotonic() > deadline:
            break
    if not password:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        raise SystemExit("manage.py up --demo did not start:\n" + "".join(said[-30:]))
    # Keep reading its output (or the pipe fills and the server blocks).
    import threading

    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # type: ignore[union-attr]
    return proc, f"http://127.0.0.1:{port}", password


def demo_pages(data_dir: str) -> dict[str, str]:
    """The five pages, once the demo's two runs have finished."""
    script = (
        "import json, time\n"
        "from evaluations.models import Run, CaseResult\n"
        "for _ in range(240):\n"
        "    runs = list(Run.objects.order_by('pk'))\n"
        "    if len(runs) >= 2 and all(r.status == 'completed' for r in runs): break\n"
        "    time.sleep(0.5)\n"
        "base, cand = runs[0], runs[1]\n"
        "failed = CaseResult.objects.filter(run=cand, status='failed').order_by('pk').first()\n"
        "print(json.dumps({'baseline': base.pk, 'candidate': cand.pk, 'result': failed.pk,\n"
        "                  'evalset': cand.evalset_version.evalset_id}))\n"
    )
    env = {**os.environ, "EVALSITE_DATA_DIR": data_dir}
    for name in ("DATABASE_URL", "REDIS_URL", "EVALSITE_CACHE_URL"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=REPO, env=env,
                         capture_output=True, text=True, check=True).stdout
    ids = json.loads(out.strip().splitlines()[-1])
    return pages_for(ids)


def pages_for(ids: dict[str, int]) -> dict[str, str]:
    b, c = ids["baseline"], ids["candidate"]
    return {
        "login (floor)": "/accounts/login/",
        "home": "/",
        "run": f"/runs/{c}/",
        "compare": f"/compare/?baseline={b}&candidate={c}",
        "drill-down": f"/runs/{c}/cases/{ids['result']}/?baseline={b}",
        "trend": f"/evalsets/{ids['evalset']}/trend/",
    }


def session_cookie(base: str, user: str, password: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(f"{base}/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
    assert token, "no CSRF token on the login page"
    body = urllib.parse.urlencode({"username": user, "password": password,
                                   "csrfmiddlewaretoken": token.group(1)}).encode()
    opener.open(urllib.request.Request(f"{base}/accounts/login/", data=body, headers={"Referer": f"{base}/"}))
    cookies = {c.name: c.value for c in jar}
    assert "sessionid" in cookies, "the login failed"
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


def lighthouse(url: str, *, desktop: bool, cookie: str, out: Path) -> dict[str, float]:
    cookies = dict(pair.split("=", 1) for pair in cookie.split("; "))
    argv = ["node", str(RUNNER), url, json.dumps(cookies), str(out), "desktop" if desktop else "mobile"]
    env = {**os.environ, "CHROME_PATH": os.environ.get("CHROME_PATH", "/usr/bin/chromium")}
    for _ in range(3):  # headless Chromium now and then loses the navigation's start (NO_NAVSTART)
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode == 0:
            break
    else:
        raise SystemExit(f"lighthouse failed 3 times on {url}:\n{done.stderr[-2000:]}")
    report = json.loads(out.read_text())
    figures = {"performance": report["categories"]["performance"]["score"] * 100,
               "accessibility": report["categories"]["accessibility"]["score"] * 100}
    for audit, name in METRICS.items():
        figures[name] = report["audits"][audit]["numericValue"]
    return figures


def fmt(figures: dict[str, float]) -> str:
    return (f"{figures['performance']:>4.0f} {figures['accessibility']:>5.0f} {figures['FCP'] / 1000:>6.2f}s "
            f"{figures['LCP'] / 1000:>6.2f}s {figures['TBT']:>6.0f}ms {figures['CLS']:>6.3f} "
            f"{figures['SI'] / 1000:>6.2f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="Lighthouse runs per page and form factor (median)")
    parser.add_argument("--url", help="measure this server instead of starting the demo")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password")
    parser.add_argument("--ids", help='with --url: JSON {"baseline", "candidate", "result", "evalset"}')
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--pages", help="comma-separated page names to measure (default: all six)")
    parser.add_argument("--form", choices=("mobile", "desktop", "both"), default="both")
    parser.add_argument("--reports", help="keep every Lighthouse JSON report in this directory")
    args = parser.parse_args()
    if not LIGHTHOUSE.exists():
        raise SystemExit(f"{LIGHTHOUSE} is missing: run `npm ci` in bench/lighthouse first")

    proc = None
    with tempfile.TemporaryDirectory(prefix="evalsite-lighthouse-") as tmp:
        try:
            if args.url:
                base, password = args.url.rstrip("/"), args.password
                pages = pages_for(json.loads(args.ids or '{"baseline": 1, "candidate": 2, "result": 19, "evalset": 1}'))
            else:
                data = os.path.join(tmp, "data")
                os.mkdir(data)
                proc, base, password = start_demo(data)
                pages = demo_pages(data)
            cookie = session_cookie(base, args.user, password)
            results: dict[str, dict[str, dict[str, float]]] = {}
            version = subprocess.run([str(LIGHTHOUSE), "--version"], capture_output=True, text=True).stdout.strip()
            print(f"Lighthouse {version} on {base}, median of {args.runs}")
            print(f"{'page':<15} {'form':<8} {'perf':>4} {'a11y':>5} {'FCP':>7} {'LCP':>7} {'TBT':>8} {'CLS':>6} "
                  f"{'SI':>7}", flush=True)
            if args.pages:
                pages = {name: pages[name] for name in args.pages.split(",")}
            forms = [form == "desktop" for form in ("mobile", "desktop") if args.form in (form, "both")]
            keep = Path(args.reports) if args.reports else Path(tmp)
            keep.mkdir(parents=True, exist_ok=True)
            for name, path in pages.items():
                for desktop in forms:
                    form = "desktop" if desktop else "mobile"
                    slug = re.sub(r"\W+", "-", name).strip("-")
                    samples = [lighthouse(base + path, desktop=desktop, cookie=cookie,
                                          out=keep / f"{slug}-{form}-{i + 1}.json") for i in range(args.runs)]
                    median = {key: statistics.median(s[key] for s in samples) for key in samples[0]}
                    results.setdefault(name, {})[form] = median
                    print(f"{name:<15} {form:<8} {fmt(median)}", flush=True)
            if args.json:
                print(json.dumps(results, indent=1))
        finally:
            if proc is not None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)


if __name__ == "__main__":
    main()
