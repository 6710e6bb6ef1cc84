"""The benchmarks' scratch databases, migrated once per `bench/all.py` run.

A fresh SQLite database takes its 90-odd migrations in 7 to 20 s, depending on the machine;
a dozen benchmarks each on a database of its own spent minutes migrating before measuring
anything. `bench/all.py` migrates one database (`migrated_template`) and names it in
EVALSITE_BENCH_MIGRATED; a benchmark whose new SQLite data directory holds no database yet
starts from a copy of it, and its own `migrate` then finds nothing left to apply. A benchmark
run on its own (no such variable) or on PostgreSQL (DATABASE_URL) migrates as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = "EVALSITE_BENCH_MIGRATED"
DATABASE = "evalsite.sqlite3"  # settings.SQLITE_PATH's name in its data directory


def seed(data_dir: str | Path | None) -> None:
    """Put a copy of the migrated database in `data_dir`, when there is one to copy, the
    benchmark is on SQLite, and the directory holds no database yet."""
    template = os.environ.get(TEMPLATE)
    if not template or not data_dir or os.environ.get("DATABASE_URL"):
        return
    target = Path(data_dir) / DATABASE
    if target.exists() and target.stat().st_size:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in (target, Path(f"{target}-wal"), Path(f"{target}-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(template, target)


def migrate() -> None:
    """`manage.py migrate` on this process's database (Django set up, no query made yet),
    from the migrated copy when there is one."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "sqlite" and connection.connection is None:
        seed(settings.DATA_DIR)
    call_command("migrate", verbosity=0)


@contextmanager
def migrated_template() -> Iterator[None]:
    """One migrated SQLite database for the benchmarks this process starts, named in the
    environment while the block runs, deleted after."""
    with tempfile.TemporaryDirectory(prefix="evalsite-bench-template-") as tmp:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", TEMPLATE}}
        env["EVALSITE_DATA_DIR"] = tmp
        subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--verbosity", "0"], check=True,
                       cwd=REPO, env=env)  # its connections are closed at exit: the WAL is folded in
        before = os.environ.get(TEMPLATE)
        os.environ[TEMPLATE] = str(Path(tmp) / DATABASE)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(TEMPLATE, None)
            else:
                os.environ[TEMPLATE] = before
