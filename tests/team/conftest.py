"""The team-server shape for the scale and fault tests: `manage.py up --team` on the test
database (PostgreSQL), with the Redis broker or the ORM broker, three `qcluster` processes
and gunicorn, one server per broker for the whole session.

The servers use a 3-second lease, so the watchdog in `up --team` resumes stalled work
within seconds, and batches of 100 cases.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import REPO

LEASE_SECONDS = 3
BATCH_SIZE = 100
CLUSTERS = 3
WORKERS_PER_CLUSTER = 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"postgres://{s.get('USER') or 'postgres'}{password}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


class TeamServer:
    """`manage.py up --team` in a process of its own; its log is a file in the data dir."""

    def __init__(self, broker: str, env: dict[str, str], data_dir: Path) -> None:
        self.broker = broker
        self.env = env
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir / f"up-{broker}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "manage.py", "up", "--team", "--port", str(self.port), "--clusters", str(CLUSTERS),
                "--cluster-workers", str(WORKERS_PER_CLUSTER), "--web-workers", "2", "--stop-timeout", "10"]
        if self.broker == "orm":
            argv += ["--broker", "orm"]  # REDIS_URL stays set: `up` must start itself again without it
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180  # a cold collectstatic on a loaded 2-core machine takes a while
        while "Press Ctrl+C" not in self.log():
            assert self.proc.poll() is None, f"up --team exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"up --team did not come up:\n{self.log()}"
            time.sleep(0.2)
        self.wait_clusters_ready()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def clusters(self) -> list[psutil.Process]:
        """The qcluster processes `up` started (each the head of its own process group)."""
        assert self.proc is not None
        return [p for p in psutil.Process(self.proc.pid).children()
                if "qcluster" in " ".join(p.cmdline())]

    def wait_clusters_ready(self, timeout: float = 60) -> None:
        """Every cluster has its sentinel, pusher, monitor and workers running."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                mains = self.clusters()
                if len(mains) == CLUSTERS and all(
                        len(p.children(recursive=True)) >= WORKERS_PER_CLUSTER + 3 for p in mains):
                    return
            except psutil.NoSuchProcess:
                pass
            assert time.monotonic() < deadline, f"the clusters did not start:\n{self.tail()}"
            time.sleep(0.2)

    def cluster_of(self, pid: int) -> int | None:
        """The pid of the cluster whose process tree holds `pid`."""
        for main in self.clusters():
            if pid == main.pid or pid in {p.pid for p in main.children(recursive=True)}:
                return main.pid
        return None

    def kill_cluster(self, main_pid: int) -> None:
        """SIGKILL a whole qcluster (its process group): as if its machine lost power."""
        os.killpg(main_pid, signal.SIGKILL)

    def stop(self) -> None:
        if self.proc is None:
            return
        groups: set[int] = set()
        with contextlib.suppress(psutil.NoSuchProcess):
            groups = {p.pid for p in psutil.Process(self.proc.pid).children()}
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for pgid in groups:  # nothing may outlive the session: the test database is dropped next
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


@pytest.fixture(scope="session")
def team_env(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from django.conf import settings
    from django.db import connection

    assert connection.vendor == "postgresql", (
        "the team tests run on PostgreSQL: set DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_team")
    redis_url = os.environ.get("REDIS_URL", "")
    assert redis_url.startswith("redis://"), "the team tests need REDIS_URL=redis://127.0.0.1:6379/<db>"
    data_dir = tmp_path_factory.mktemp("team")
    return {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "REDIS_URL": redis_url,
        # The same key as this process: tasks are signed with it.
        "SECRET_KEY": settings.SECRET_KEY,
        "EVALSITE_DATA_DIR": str(data_dir),
        "EVALSITE_LEASE_SECONDS": str(LEASE_SECONDS),
        "EVALSITE_BATCH_SIZE": str(BATCH_SIZE),
        "EVALSITE_TASK_TIMEOUT": "60",
        "EVALSITE_TASK_RETRY": "300",
        # Issue 40's bounds, shortened so the fault tests take seconds (the defaults: 30, 20, 10).
        "EVALSITE_MONITOR_SWEEP_GRACE_SECONDS": "3",
        "EVALSITE_CLUSTER_HUNG_SECONDS": "6",
        "EVALSITE_QCLUSTER_STOP_SECONDS": "5",
        "EVALSITE_ADMIN_PASSWORD": "team-admin-pass-123",
        "PYTHONUNBUFFERED": "1",
    }


@pytest.fixture(scope="session")
def team_servers(team_env: dict[str, str]) -> Iterator[dict[str, TeamServer]]:
    """Started on first use, one per broker, stopped when the session ends."""
    import redis

    client = redis.Redis.from_url(team_env["REDIS_URL"])
    client.delete("django_q:evalsite:q")  # tasks a killed earlier session left behind
    client.close()
    servers: dict[str, TeamServer] = {}
    yield servers
    for server in servers.values():
        server.stop()


class OwnRedis:
    """A `redis-server` of the tests' own on a free port, for the faults that restart it (the
    machine's shared Redis is never restarted)."""

    def __init__(self, data_dir: Path) -> None:
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", str(self.data_dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 20
        while True:
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                assert time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        """As a crash: what it held is gone (no persistence)."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture(scope="session")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.kill()


def team_server(team_servers: dict[str, TeamServer], team_env: dict[str, str], broker: str) -> TeamServer:
    # One server at a time: both would share the test database, and the watchdog of one
    # would resume the other's runs onto its own broker.
    for other in [b for b in team_servers if b != broker]:
        team_servers.pop(other).stop()
    if broker not in team_servers:
        data_dir = Path(team_env["EVALSITE_DATA_DIR"]) / broker
        data_dir.mkdir(exist_ok=True)
        env = {**team_env, "EVALSITE_DATA_DIR": str(data_dir)}
        if broker == "own-redis":  # the broker on OwnRedis: given in the environment by its fixture
            env["REDIS_URL"] = env.pop("EVALSITE_OWN_REDIS_URL")
        server = TeamServer("redis" if broker == "own-redis" else broker, env, data_dir)
        server.log_path = data_dir / f"up-{broker}.log"
        team_servers[broker] = server
        server.start()
    server = team_servers[broker]
    assert server.proc is not None and server.proc.poll() is None, f"up --team died:\n{server.tail()}"
    server.wait_clusters_ready()
    return server


def _broker(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "server" in callspec.params:
        return str(callspec.params["server"])
    names = getattr(item, "fixturenames", ())
    return "orm" if "orm_server" in names else "own-redis" if "own_redis_server" in names else "redis"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Redis-broker tests first, then the ORM-broker ones, so each server starts once; the
    scale test first for each."""
    team = [item for item in items if item.get_closest_marker("team") is not None]
    if not team:
        return
    order = {id(item): n for n, item in enumerate(items)}
    rank = {"redis": 0, "own-redis": 1, "orm": 2}
    team.sort(key=lambda item: (rank[_broker(item)], "test_scale" not in item.nodeid, order[id(item)]))
    slots = iter(team)
    items[:] = [next(slots) if item.get_closest_marker("team") is not None else item for item in items]


@pytest.fixture
def redis_server(team_servers: dict[str, TeamServer], team_env: dict[str, str]) -> TeamServer:
    return team_server(team_servers, team_env, "redis")


@pytest.fixture
def own_redis_server(team_servers: dict[str, TeamServer], team_env: dict[str, str], own_redis: OwnRedis) -> TeamServer:
    """The team server with its broker (and cache) on a Redis the tests own and may restart."""
    if own_redis.proc is None:
        own_redis.start()
    return team_server(team_servers, {**team_env, "EVALSITE_OWN_REDIS_URL": own_redis.url}, "own-redis")


@pytest.fixture
def orm_server(team_servers: dict[str, TeamServer], team_env: dict[str, str]) -> TeamServer:
    return team_server(team_servers, team_env, "orm")


@pytest.fixture(params=["redis", "orm"])
def server(request: pytest.FixtureRequest, team_servers: dict[str, TeamServer],
           team_env: dict[str, str]) -> TeamServer:
    return team_server(team_servers, team_env, request.param)
