"""`manage.py up` on a fresh data directory: migrations, web server, queue, a login."""

from __future__ import annotations

import base64
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_up_starts_everything_on_a_fresh_machine_and_prints_a_working_login(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "EVALSITE_BASE_URL"}}
    home = tmp_path / "home"
    home.mkdir()
    # A home of its own: `up` must write nothing outside the project, its data dir and the
    # temp dir (gunicorn's control socket once landed in ~/.gunicorn/).
    env.update({"EVALSITE_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1", "HOME": str(home)})
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "up", "--port", str(port), "--demo"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    output = ""
    try:
        deadline = time.monotonic() + 90
        assert proc.stdout is not None
        while "Press Ctrl+C" not in output:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, output
            output += line
            assert time.monotonic() < deadline, output
        assert f"evalsite is running at http://127.0.0.1:{port}/" in output
        assert "demo: eval set 'demo_travel_agent'" in output
        assert "(demo baseline)" in output and "(demo candidate)" in output
        assert "ORM broker" in output
        match = re.search(r"log in as 'admin' with password '([^']+)'", output)
        assert match, output
        password = match.group(1)

        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        base = f"http://127.0.0.1:{port}"
        opener.open(f"{base}/accounts/login/").read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        body = urllib.parse.urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": csrf}).encode()
        request = urllib.request.Request(f"{base}/accounts/login/", data=body, headers={"Referer": f"{base}/accounts/login/"})
        page = opener.open(request).read().decode()
        assert "Demo travel agent" in page  # landed on the eval-set list, logged in
        assert (tmp_path / "data" / "evalsite.sqlite3").exists()
        # The cluster that `up` started executes the two demo runs.
        auth = "Basic " + base64.b64encode(f"admin:{password}".encode()).decode()
        deadline = time.monotonic() + 120
        while True:
            listing = json.loads(urllib.request.urlopen(urllib.request.Request(
                f"{base}/api/v1/runs/", headers={"Authorization": auth})).read())["results"]
            if len(listing) == 2 and all(r["status"] == "completed" for r in listing):
                break
            assert time.monotonic() < deadline, listing
            time.sleep(1)
        # Notifications link to where `up` serves (no EVALSITE_BASE_URL here), and it said so.
        assert f"links in notifications: http://127.0.0.1:{port} (EVALSITE_BASE_URL is not set" in output
        from tests.notify_helpers import webhook_receiver

        with webhook_receiver() as receiver:
            made = urllib.request.urlopen(urllib.request.Request(
                f"{base}/api/v1/projects/default/notify/channels/", method="POST",
                data=json.dumps({"name": "hook", "kind": "webhook", "url": receiver.url}).encode(),
                headers={"Authorization": auth, "Content-Type": "application/json"}))
            hook = json.loads(made.read())
            receiver.secret = hook["secret"]
            urllib.request.urlopen(urllib.request.Request(
                f"{base}/api/v1/projects/default/notify/channels/{hook['id']}/test/", method="POST", data=b"",
                headers={"Authorization": auth}))
            deadline = time.monotonic() + 60
            while not receiver.accepted():
                assert time.monotonic() < deadline, "the test message never came"
                time.sleep(0.3)
            [item] = receiver.accepted()[0].body["items"]
        assert item["url"] == f"http://127.0.0.1:{port}/"
        by_name = {r["name"]: r for r in listing}
        assert by_name["demo baseline"]["cases_failed"] == 0
        assert by_name["demo baseline"]["cases_done"] == 16
        assert by_name["demo candidate"]["cases_failed"] > 0
        children = psutil.Process(proc.pid).children(recursive=True)
        web = [c for c in children if "gunicorn" in " ".join(c.cmdline())]
        queue = [c for c in children if "qcluster" in " ".join(c.cmdline())]
        assert web and queue, [c.cmdline() for c in children]
        # The web server (master, workers and every thread) runs 5 steps below the queue's
        # CPU priority, and so does its session's autogroup where the kernel has them.
        assert "CPU priority 5 below the queue's (--web-nice)" in output
        assert {thread_nice for p in web for thread_nice in _thread_nices(p.pid)} == {5}
        assert {thread_nice for p in queue for thread_nice in _thread_nices(p.pid)} == {0}
        if Path("/proc/self/autogroup").exists():
            assert Path(f"/proc/{web[0].pid}/autogroup").read_text().split()[-2:] == ["nice", "5"]
            assert Path(f"/proc/{queue[0].pid}/autogroup").read_text().split()[-2:] == ["nice", "0"]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rest, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rest, _ = proc.communicate()
    assert proc.returncode == 0, output + (rest or "")
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []


def _thread_nices(pid: int) -> list[int]:
    """The nice value of each thread of a process (field 19 of /proc/PID/task/TID/stat)."""
    nices = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            nices.append(int(stat.read_text().rsplit(")", 1)[1].split()[16]))
        except (OSError, IndexError):  # a thread that ended meanwhile
            continue
    return nices


@pytest.mark.parametrize(("value", "message"), [
    ("-1", "must be 0-19, not -1"), ("20", "must be 0-19, not 20"), ("low", "must be a whole number 0-19, not 'low'")])
def test_up_refuses_a_web_priority_outside_0_to_19(tmp_path: Path, value: str, message: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}}
    result = subprocess.run([sys.executable, "manage.py", "up", "--port", str(_free_port())],
                            cwd=REPO, env={**env, "EVALSITE_DATA_DIR": str(tmp_path), "EVALSITE_WEB_NICE": value},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"--web-nice (EVALSITE_WEB_NICE) {message}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "evalsite.sqlite3").exists()  # refused before anything was written


def _up_team(tmp_path: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}}
    env.update({"EVALSITE_DATA_DIR": str(tmp_path), **env_vars})
    return subprocess.run([sys.executable, "manage.py", "up", "--team", "--port", str(_free_port()), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def test_up_team_refuses_sqlite_and_says_which_variable_to_set(tmp_path: Path) -> None:
    result = _up_team(tmp_path)
    assert result.returncode == 1
    assert "--team needs PostgreSQL: set DATABASE_URL=postgres://" in result.stderr
    assert not (tmp_path / "evalsite.sqlite3").exists()  # nothing was migrated


def test_up_team_needs_redis_or_the_orm_broker(tmp_path: Path) -> None:
    result = _up_team(tmp_path, DATABASE_URL=f"postgres://postgres@127.0.0.1:{_free_port()}/evalsite")
    assert result.returncode == 1
    assert "--team needs a task queue: set REDIS_URL=redis://" in result.stderr
    assert "--broker orm" in result.stderr


def test_up_team_says_clearly_when_postgresql_cannot_be_reached(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    result = _up_team(tmp_path, "--broker", "orm", DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/evalsite")
    assert result.returncode == 1
    assert f"cannot reach PostgreSQL at 127.0.0.1:{port}, database 'evalsite' (DATABASE_URL)" in result.stderr
    assert "Traceback" not in result.stderr


def test_links_name_the_address_up_serves_on_a_wildcard_by_this_machines_name() -> None:
    from evaluations.management.commands.up import served_at

    assert served_at("127.0.0.1", 8123) == "http://127.0.0.1:8123"
    assert served_at("0.0.0.0", 80) == f"http://{socket.gethostname()}:80"
    assert served_at("::1", 9000) == "http://[::1]:9000"
