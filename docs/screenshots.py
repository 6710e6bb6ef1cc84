"""The README tour's screenshots, taken from the demo so they show what this commit draws.

    python docs/screenshots.py            # writes docs/img/home.png, compare.png, drilldown.png
    python docs/screenshots.py --out DIR  # somewhere else (e.g. to look before committing)

It starts `manage.py up --demo` on a throwaway data folder, on 127.0.0.1 at a free port,
waits until the demo's two runs (a baseline and a faulty candidate) are completed, logs in
and photographs home, the comparison of the two runs and the drill-down of its first
regression in Chromium (Debian's `/usr/bin/chromium`, or `--chromium PATH`), then stops the
server and removes the folder. Needs requirements-dev.txt (playwright, driving that
Chromium; no browser is downloaded).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
WIDTH, HEIGHT = 1280, 800  # wide enough for the pages' desktop layout, small enough for a README
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api(base: str, path: str, password: str) -> dict[str, Any]:
    request = urllib.request.Request(base + path, headers={  # noqa: S310 - http://127.0.0.1 only
        "Authorization": "Basic " + base64.b64encode(f"admin:{password}".encode()).decode(),
        "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - our own server on 127.0.0.1
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def wait_for(what: str, seconds: float, check: Callable[[], T | None]) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = check()
        except OSError:  # the server is not up yet
            value = None
        if value:
            return value
        time.sleep(1)
    raise SystemExit(f"gave up waiting for {what} after {seconds:.0f} s")


def demo_runs(base: str, password: str) -> tuple[int, int] | None:
    runs = api(base, "/api/v1/runs/?limit=10", password)["results"]
    by_name = {r["name"]: r for r in runs}
    baseline, candidate = by_name.get("demo baseline"), by_name.get("demo candidate")
    if baseline and candidate and baseline["status"] == candidate["status"] == "completed":
        return baseline["id"], candidate["id"]
    return None


def shoot(base: str, password: str, out: Path, chromium: str) -> None:
    from playwright.sync_api import sync_playwright

    baseline, candidate = wait_for("the demo's two runs", 600, lambda: demo_runs(base, password))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, color_scheme="light").new_page()
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", password)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")

        def photo(url: str, name: str) -> None:
            page.goto(base + url)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(500)  # charts finish drawing
            page.wait_for_selector("main", state="attached")
            bottom = page.evaluate("(document.querySelector('main') || document.body).getBoundingClientRect().bottom")
            height = max(240, min(HEIGHT, int(bottom) + 16))  # a short page without the blank below it
            page.screenshot(path=str(out / name), clip={"x": 0, "y": 0, "width": WIDTH, "height": height})
            print(f"{out / name}: {url}")

        photo("/", "home.png")
        compare = f"/compare/?baseline={baseline}&candidate={candidate}"
        photo(compare, "compare.png")
        link = page.locator(f"main a[href^='/runs/{candidate}/cases/']").first
        photo(str(link.get_attribute("href")), "drilldown.png")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(16)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="evalsite-screenshots-") as data:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "EVALSITE_CACHE_URL"}}
        env.update(EVALSITE_DATA_DIR=data, EVALSITE_ADMIN_USERNAME="admin", EVALSITE_ADMIN_PASSWORD=password)
        server = subprocess.Popen([sys.executable, "manage.py", "up", "--demo", "--host", "127.0.0.1",
                                   "--port", str(port)], cwd=REPO, env=env, start_new_session=True,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for("the server", 120,
                     lambda: urllib.request.urlopen(base + "/healthz", timeout=5).status == 200)  # noqa: S310
            shoot(base, password, args.out, args.chromium)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


if __name__ == "__main__":
    main()
