"""`manage.py up --team`: the processes it starts, the static files gunicorn serves through
whitenoise, and a clear error when Redis is not there."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import httpx
import psutil
import pytest

from tests.conftest import REPO
from tests.team.conftest import CLUSTERS, TeamServer

pytestmark = [pytest.mark.team, pytest.mark.slow]


def test_up_team_runs_gunicorn_and_the_clusters_and_serves_compressed_hashed_static_files(
        redis_server: TeamServer) -> None:
    assert redis_server.proc is not None
    children = psutil.Process(redis_server.proc.pid).children()
    web = [p for p in children if "gunicorn" in " ".join(p.cmdline())]
    assert len(web) == 1 and len(web[0].children()) == 2  # a master and its two workers
    assert len(redis_server.clusters()) == CLUSTERS
    # When the web server and the clusters both want the CPU, the clusters come first.
    assert {p.nice() for p in [web[0], *web[0].children()]} == {5}
    assert {p.nice() for p in redis_server.clusters()} == {0}

    with httpx.Client(base_url=redis_server.url, trust_env=False) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        page = client.get("/accounts/login/").text
        css = re.search(r'href="(/static/css/evalsite\.[0-9a-f]{12}\.css)"', page)
        assert css, page[:1000]  # collectstatic ran with the manifest storage
        asset = client.get(css.group(1), headers={"Accept-Encoding": "gzip"})
        assert asset.status_code == 200
        assert asset.headers["Content-Encoding"] == "gzip"
        assert "immutable" in asset.headers["Cache-Control"]


def test_up_team_says_clearly_when_redis_cannot_be_reached(team_env: dict[str, str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there
    result = subprocess.run([sys.executable, "manage.py", "up", "--team", "--port", "0"], cwd=REPO,
                            env={**team_env, "REDIS_URL": f"redis://127.0.0.1:{port}/0"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"cannot reach Redis at 127.0.0.1:{port} (REDIS_URL)" in result.stderr
    assert "--broker orm" in result.stderr and "Traceback" not in result.stderr
