"""Production settings: `manage.py check --deploy` passes with the team environment docs/team-server.md
documents, and names what is missing without it. (No database or broker is contacted.)"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def _check_deploy(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    # Not this test process's own: the browser tests set DJANGO_ALLOW_ASYNC_UNSAFE, which
    # check --deploy rightly refuses.
    unset = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "EVALSITE_HTTPS",
             "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update({
        "EVALSITE_DATA_DIR": str(tmp_path),
        "DATABASE_URL": "postgres://evalsite@db.internal:5432/evalsite",
        "REDIS_URL": "redis://redis.internal:6379/0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "evals.example.com",
        "CSRF_TRUSTED_ORIGINS": "https://evals.example.com",
        **extra,
    })
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_the_team_environment_passes_check_deploy(tmp_path: Path) -> None:
    result = _check_deploy(tmp_path, EVALSITE_HTTPS="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_without_https_check_deploy_names_the_insecure_settings(tmp_path: Path) -> None:
    result = _check_deploy(tmp_path)
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr, result.stderr


def test_debug_on_fails_check_deploy(tmp_path: Path) -> None:
    result = _check_deploy(tmp_path, EVALSITE_HTTPS="1", DEBUG="1")
    assert result.returncode != 0
    assert "security.W018" in result.stderr
