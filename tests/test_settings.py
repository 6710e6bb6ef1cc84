"""Settings come from the environment; the embedded default needs none of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PROBE = """
import json, django
from django.conf import settings
django.setup()
db = settings.DATABASES["default"]
print(json.dumps({"engine": db["ENGINE"], "name": str(db["NAME"]), "options": db.get("OPTIONS", {}),
                  "conn_max_age": db["CONN_MAX_AGE"], "q": {k: v for k, v in settings.Q_CLUSTER.items()},
                  "secret": settings.SECRET_KEY, "debug": settings.DEBUG, "hosts": settings.ALLOWED_HOSTS,
                  "upload": settings.EVALSITE_MAX_UPLOAD_BYTES,
                  "cache": settings.CACHES["default"]["BACKEND"]}))
"""


def _settings(data_dir: Path, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items()
             if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "EVALSITE_MAX_UPLOAD_MB"}}
    clean.update({"DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DATA_DIR": str(data_dir), **env})
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=clean, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_default_is_sqlite_in_the_data_dir_with_wal_and_immediate_transactions(tmp_path: Path) -> None:
    s = _settings(tmp_path)
    assert s["engine"] == "django.db.backends.sqlite3"
    assert s["name"] == str(tmp_path / "evalsite.sqlite3")
    assert s["options"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in s["options"]["init_command"]
    assert s["conn_max_age"] > 0
    assert s["q"]["orm"] == "default" and "redis" not in s["q"]
    assert s["debug"] is False


def test_database_url_and_redis_url_switch_to_postgresql_and_the_redis_broker(tmp_path: Path) -> None:
    s = _settings(tmp_path, DATABASE_URL="postgres://evalsite@127.0.0.1:5432/evalsite", REDIS_URL="redis://127.0.0.1:6379/3")
    assert s["engine"] == "django.db.backends.postgresql"
    assert s["name"] == "evalsite"
    assert s["q"]["redis"] == "redis://127.0.0.1:6379/3" and "orm" not in s["q"]
    # PostgreSQL prepares the statements a connection repeats (server-side binding), unless
    # told not to (PgBouncer in transaction mode).
    assert s["options"] == {"server_side_binding": True, "prepare_threshold": 5}
    off = _settings(tmp_path, DATABASE_URL="postgres://evalsite@127.0.0.1:5432/evalsite", EVALSITE_PG_PREPARED="0")
    assert off["options"] == {}


def test_a_cache_redis_without_redis_url_keeps_the_queue_in_the_database(tmp_path: Path) -> None:
    s = _settings(tmp_path, DATABASE_URL="postgres://evalsite@127.0.0.1:5432/evalsite",
                  EVALSITE_CACHE_URL="redis://127.0.0.1:6379/4")
    assert s["q"]["orm"] == "default" and "redis" not in s["q"]
    assert s["cache"] == "evaluations.cache.TolerantRedisCache"


def test_the_queue_settings_are_chosen_not_left_at_their_dangerous_defaults(tmp_path: Path) -> None:
    q = _settings(tmp_path)["q"]
    assert q["max_attempts"] > 0 and q["ack_failures"] is True
    assert q["retry"] >= q["timeout"] * (q["queue_limit"] + 2)


def test_a_secret_key_is_generated_once_and_kept(tmp_path: Path) -> None:
    first = _settings(tmp_path)["secret"]
    assert len(first) >= 50
    assert (tmp_path / "secret_key").stat().st_mode & 0o777 == 0o600
    assert _settings(tmp_path)["secret"] == first
    assert _settings(tmp_path, SECRET_KEY="from-env")["secret"] == "from-env"


def test_debug_hosts_and_upload_limit_come_from_the_environment(tmp_path: Path) -> None:
    s = _settings(tmp_path, DEBUG="true", ALLOWED_HOSTS="evals.example.com, 10.0.0.5", EVALSITE_MAX_UPLOAD_MB="7")
    assert s["debug"] is True
    assert s["hosts"] == ["evals.example.com", "10.0.0.5"]
    assert s["upload"] == 7 * 1024 * 1024
