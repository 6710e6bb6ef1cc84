"""Migrates the database the settings name and prints its schema as JSON (for
tests/test_migration_squash.py, which runs it in a subprocess on a throwaway database).

    python -m tests.schema_dump            # a fresh database, as `manage.py migrate` builds it
    python -m tests.schema_dump --old      # the old chain up to 0025 (a row written there),
                                           # then `manage.py migrate` as an upgrade would
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

SQUASHED = "0001_squashed_0025_run_chart_bins"
LAST_OF_THE_OLD_CHAIN = ("evaluations", "0025_run_chart_bins")


def _old_chain_then_upgrade() -> None:
    from django.core.management import call_command
    from django.db import connection

    from tests.migration_helpers import old_chain_executor

    executor = old_chain_executor(connection)
    targets = [LAST_OF_THE_OLD_CHAIN] + [node for node in executor.loader.graph.leaf_nodes()
                                          if node[0] != "evaluations"]
    executor.migrate(targets)
    apps = executor.loader.project_state(targets).apps
    apps.get_model("evaluations", "Project").objects.create(slug="before", name="Made at 0025")
    call_command("migrate", verbosity=0)


def schema() -> dict[str, Any]:
    from django.db import connection

    out: dict[str, Any] = {}
    with connection.cursor() as cursor:
        tables = sorted(t for t in connection.introspection.table_names(cursor) if t.startswith("evaluations_"))
        for table in tables:
            columns = sorted(
                [c.name, str(c.type_code), bool(c.null_ok), str(c.default)]
                for c in connection.introspection.get_table_description(cursor, table))
            constraints = {}
            for name, info in connection.introspection.get_constraints(cursor, table).items():
                info = {k: (list(v) if isinstance(v, tuple) else v) for k, v in info.items()}
                # SQLite names its unnamed primary key and inline foreign keys by position
                key = name if not name.startswith("__") and not re.match(r"^fk_\d+$|^\d+$", name) \
                    else json.dumps(info, sort_keys=True)
                constraints[key] = info
            out[table] = {"columns": columns, "constraints": constraints}
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                           "AND tbl_name LIKE 'evaluations_%'")
        else:
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                           "AND tablename LIKE 'evaluations_%'")
        out["indexes"] = {name: " ".join(sql.split()) for name, sql in cursor.fetchall()}
        cursor.execute("SELECT app, name FROM django_migrations WHERE app = 'evaluations' ORDER BY name")
        out["applied"] = [name for _, name in cursor.fetchall()]
        cursor.execute("SELECT name, func FROM django_q_schedule ORDER BY name")
        out["schedules"] = cursor.fetchall()
        cursor.execute("SELECT slug FROM evaluations_project ORDER BY slug")
        out["projects"] = [slug for (slug,) in cursor.fetchall()]
    return out


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    import django

    django.setup()
    if "--old" in sys.argv:
        _old_chain_then_upgrade()
    else:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
    print(json.dumps(schema(), sort_keys=True, default=str))
