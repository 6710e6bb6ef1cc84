"""Migrations as the old chain has them: `evaluations`' 0001-0025 are squashed into one
(0001_squashed_0025_run_chart_bins), which a fresh database uses; a database at a step of the
old chain upgrades through the replaced migrations, which stay on disk. A test of a data
migration walks that old chain, on a scratch database of its own (`on_a_scratch_database`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader


def old_chain_executor(connection: Any) -> MigrationExecutor:
    """An executor that sees every migration of the old chain, not the squashed one: the
    migrations after the squash hang from its last replaced migration (0025), as Django hangs
    them when a database is part-way along the old chain."""
    executor = MigrationExecutor(connection)
    loader = MigrationLoader(connection, replace_migrations=False)
    for key, migration in loader.replacements.items():
        if key in loader.graph.nodes:
            loader.graph.remove_replacement_node(key, migration.replaces)
    executor.loader = loader
    return executor


@contextmanager
def on_a_scratch_database(connection: Any, folder: Path) -> Iterator[None]:
    """Points `connection` (the test's `default`) at a new, empty database of the same kind
    (a SQLite file in `folder`, or a PostgreSQL database beside the test database) while the
    block runs, then back at the test database, and drops the scratch one.

    A data-migration test migrates the empty database forward along the old chain to the
    step it needs, which renders few and small model states (0.6 s to 0007). Walking the
    test database back there from the latest state, and forward to it again after, took
    15-20 s a test, nearly all of it Django re-rendering the migration states; the test
    database, which the worker's other tests use, now stays as it was. Needs a test marked
    `django_db(transaction=True)`: the switch happens outside any transaction."""
    assert connection.in_atomic_block is False, "on_a_scratch_database needs django_db(transaction=True)"
    dicts = [connection.settings_dict]
    if settings.DATABASES[connection.alias] is not connection.settings_dict:
        dicts.append(settings.DATABASES[connection.alias])
    original = connection.settings_dict["NAME"]
    postgres = connection.vendor == "postgresql"
    if postgres:
        scratch = f"{original[:40]}_scratch_{uuid.uuid4().hex[:8]}"
        with connection.cursor() as cursor:  # autocommit: CREATE DATABASE runs outside a transaction
            cursor.execute(f'CREATE DATABASE "{scratch}"')
    else:
        scratch = str(folder / f"scratch-{uuid.uuid4().hex[:8]}.sqlite3")
    connection.close()
    for settings_dict in dicts:
        settings_dict["NAME"] = scratch
    try:
        assert connection.introspection.table_names() == [], f"{scratch} is not a new database"
        yield
    finally:
        connection.close()
        for settings_dict in dicts:
            settings_dict["NAME"] = original
        _forget_content_types()
        if postgres:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')


def _forget_content_types() -> None:
    """ContentType's cache is per database alias, not per database: rows the scratch database
    gave it must not answer for the test database."""
    from django.contrib.contenttypes.models import ContentType

    ContentType.objects.clear_cache()
