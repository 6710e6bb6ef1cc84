"""Migrations as the old chain has them: `evaluations`' 0001-0025 are squashed into one
(0001_squashed_0025_run_chart_bins), which a fresh database uses; a database at a step of the
old chain upgrades through the replaced migrations, which stay on disk. A test of a data
migration walks that old chain."""

from __future__ import annotations

from typing import Any

from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader


def old_chain_executor(connection: Any) -> MigrationExecutor:
    """An executor that sees every migration of the old chain, not the squashed one."""
    executor = MigrationExecutor(connection)
    executor.loader = MigrationLoader(connection, replace_migrations=False)
    return executor
