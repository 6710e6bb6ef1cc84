"""Migrations as the old chain has them: `evaluations`' 0001-0025 are squashed into one
(0001_squashed_0025_run_chart_bins), which a fresh database uses; a database at a step of the
old chain upgrades through the replaced migrations, which stay on disk. A test of a data
migration walks that old chain."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

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
def walking_the_old_chain(connection: Any) -> Iterator[MigrationExecutor]:
    """An old-chain executor for a test that migrates the test database back and forth; the
    database is migrated to the latest state again afterwards, whatever the test did, so the
    next tests on this worker find the schema they expect."""
    executor = old_chain_executor(connection)
    try:
        yield executor
    finally:
        executor = old_chain_executor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
