"""evaluations' migrations 0001-0025 are one squashed migration: a fresh database builds the
same schema as the old chain did, in one step; a database built by the previous release, or
left at any step of the old chain, upgrades through the replaced migrations and keeps its
data."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import DATA, REPO

SQUASHED = "0001_squashed_0025_run_chart_bins"
OLD_CHAIN = sorted(p.stem for p in (REPO / "evaluations" / "migrations").glob("00[0-2][0-9]_*.py")
                   if p.stem != SQUASHED and int(p.stem[:4]) <= 25)
RELEASE_DB = DATA / "migrations" / "release-b23344d.sqlite3.gz"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "EVALSITE_DATA_DIR"}}
    return {**env, **extra}


def _dumps(*runs: tuple[dict[str, str], list[str]]) -> list[dict[str, Any]]:
    """Runs tests/schema_dump.py once per (environment, arguments), side by side: each builds
    a database of its own, so neither waits for the other."""
    started = [subprocess.Popen([sys.executable, "-m", "tests.schema_dump", *args], cwd=REPO, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for env, args in runs]
    dumps = []
    try:
        for process in started:
            out, err = process.communicate(timeout=300)
            assert process.returncode == 0, err[-3000:]
            dumps.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()
    return dumps


def test_the_old_chain_is_the_25_migrations_the_squash_replaces() -> None:
    from evaluations.migrations import _bulk  # noqa: F401  (the operation the squash uses imports)

    text = (REPO / "evaluations" / "migrations" / f"{SQUASHED}.py").read_text()
    assert len(OLD_CHAIN) == 25
    for name in OLD_CHAIN:
        assert f"('evaluations', '{name}')" in text


@pytest.mark.django_db
def test_a_fresh_database_is_built_by_the_squashed_migration() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM django_migrations WHERE app = 'evaluations'")
        applied = {name for (name,) in cursor.fetchall()}
    assert SQUASHED in applied
    assert set(OLD_CHAIN) <= applied  # Django records what a squash replaces as applied too


def _scratch_databases(tmp_path: Path) -> tuple[dict[str, str], dict[str, str], Any]:
    """Two empty databases of the kind the suite runs on, and how to drop them."""
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        (tmp_path / "old").mkdir()
        (tmp_path / "new").mkdir()
        return (_env(EVALSITE_DATA_DIR=str(tmp_path / "old")), _env(EVALSITE_DATA_DIR=str(tmp_path / "new")),
                lambda: None)
    import psycopg

    names = [f"evalsite_squash_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("old", "new")]
    params = {"host": database["HOST"] or "127.0.0.1", "port": database["PORT"] or 5432,
              "user": database["USER"], "password": database["PASSWORD"] or None, "dbname": "postgres"}
    with psycopg.connect(**params, autocommit=True) as admin:
        for name in names:
            admin.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(**params, autocommit=True) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    auth = f"{params['user']}:{params['password']}@" if params["password"] else f"{params['user']}@"
    urls = [f"postgres://{auth}{params['host']}:{params['port']}/{name}" for name in names]
    data = tmp_path / "data"
    data.mkdir()
    return (_env(DATABASE_URL=urls[0], EVALSITE_DATA_DIR=str(data)),
            _env(DATABASE_URL=urls[1], EVALSITE_DATA_DIR=str(data)), drop)


@pytest.mark.slow
@pytest.mark.django_db
def test_the_squashed_schema_is_the_old_chains_and_an_old_database_upgrades_keeping_its_rows(
        tmp_path: Path) -> None:
    old_env, new_env, drop = _scratch_databases(tmp_path)
    try:
        old, new = _dumps((old_env, ["--old"]), (new_env, []))
    finally:
        drop()
    # the same tables, columns, constraints and index definitions, whichever way they were built
    assert len([t for t in new if t.startswith("evaluations_")]) >= 40
    for table in sorted(k for k in set(old) | set(new) if k.startswith("evaluations_") or k == "indexes"):
        assert old.get(table) == new.get(table), table
    assert old["projects"] == ["before"] and new["projects"] == []
    assert set(old["applied"]) == set(new["applied"]) >= {SQUASHED, *OLD_CHAIN}
    assert [name for name, _ in new["schedules"]] == ["evalsite: notifications sweep",
                                                       "evalsite: resume stalled runs"]


def test_a_database_written_by_the_previous_release_upgrades_and_keeps_its_data(tmp_path: Path) -> None:
    """A SQLite file evalsite wrote at b23344d, before the squash (tests/data/migrations/
    build_release_db.py says how it was made), migrated by this code and read back."""
    data = tmp_path / "data"
    data.mkdir()
    database = data / "evalsite.sqlite3"
    with gzip.open(RELEASE_DB) as packed, database.open("wb") as out:
        shutil.copyfileobj(packed, out)
    with sqlite3.connect(database) as db:
        before = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                  for t in ("evaluations_run", "evaluations_caseresult", "evaluations_score", "evaluations_trace",
                            "evaluations_span", "evaluations_triage", "evaluations_comment", "evaluations_monitor")}
        assert SQUASHED not in {n for (n,) in db.execute("SELECT name FROM django_migrations")}
    env = _env(EVALSITE_DATA_DIR=str(data))
    done = subprocess.run([sys.executable, "manage.py", "migrate", "-v", "1"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    read = subprocess.run([sys.executable, "-c", READ_BACK], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert read.returncode == 0, read.stderr[-3000:]
    seen = json.loads(read.stdout.strip().splitlines()[-1])
    assert seen["counts"] == before
    assert before["evaluations_score"] > 100 and before["evaluations_trace"] == 2
    assert seen["squashed_applied"] is True
    assert seen["comment"] == "Kyoto is not Tokyo"
    assert seen["runs"] == [["completed", 8], ["completed", 8]]
    assert seen["regressions"] >= 1
    assert seen["monitor_criteria"] == ["fast", "json", "mentions_paris", "tools_ok"]


# Reads the upgraded database through today's models and the migration recorder.
READ_BACK = """
import json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django
django.setup()
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from evaluations import models as m
loader = MigrationLoader(connection)
counts = {t._meta.db_table: t.objects.count() for t in (m.Run, m.CaseResult, m.Score, m.Trace, m.Span, m.Triage,
                                                        m.Comment, m.Monitor)}
comparison = m.Comparison.objects.get()
print(json.dumps({
    "counts": counts,
    "squashed_applied": ("evaluations", "SQUASHED") in loader.applied_migrations,
    "comment": m.Comment.objects.get().body,
    "runs": sorted([r.status, r.results.count()] for r in m.Run.objects.all()),
    "regressions": comparison.case_rows.filter(status="regressed").count(),
    "monitor_criteria": sorted(m.Monitor.objects.get().versions.get().spec["criteria"]),
}))
""".replace("SQUASHED", SQUASHED)
