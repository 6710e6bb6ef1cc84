# A score's threshold and justification, and a result's output, lose SQLite's `JSON_VALID`
# check (models.runs.EngineJSONField): the engine writes them in bulk from JSON it serialised
# itself, and SQLite parsed every value again to check it (a fifth of the CPU of inserting a
# 10,000-case run's 110,000 scores).
#
# On SQLite the check is part of the table's definition, and Django's AlterField would copy
# each table whole (minutes at millions of scores). Removing a CHECK constraint changes nothing
# stored, so the definition is edited in place instead, as SQLite documents for this change
# ("Making Other Kinds Of Table Schema Changes": writable_schema, then a new schema_version).
# Where SQLite refuses that edit (a build in defensive mode), or the definition is not the one
# Django wrote, the table keeps its checks: slower to write, the same data. PostgreSQL's jsonb
# columns have no such check: nothing to do there.

from django.db import DatabaseError, migrations, transaction

import evaluations.models.runs

# (table, column definition with its check, without it): Django's SQLite definitions.
CHECKED = [
    ("evaluations_score", '"threshold" text NULL CHECK ((JSON_VALID("threshold") OR "threshold" IS NULL))',
     '"threshold" text NULL'),
    ("evaluations_score",
     '"justification" text NOT NULL CHECK ((JSON_VALID("justification") OR "justification" IS NULL))',
     '"justification" text NOT NULL'),
    ("evaluations_caseresult", '"output" text NULL CHECK ((JSON_VALID("output") OR "output" IS NULL))',
     '"output" text NULL'),
]


def _edit(schema_editor, forward: bool) -> None:
    connection = schema_editor.connection
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        for table in sorted({table for table, _, _ in CHECKED}):
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
            row = cursor.fetchone()
            if row is None:
                continue
            sql = edited = row[0]
            for name, checked, unchecked in CHECKED:
                if name == table:
                    old, new = (checked, unchecked) if forward else (unchecked, checked)
                    if edited.count(old) == 1 and new not in edited.replace(old, "", 1):
                        edited = edited.replace(old, new, 1)
            if edited == sql:
                continue
            cursor.execute("PRAGMA schema_version")
            (version,) = cursor.fetchone()
            try:
                with transaction.atomic(using=connection.alias):
                    cursor.execute("PRAGMA writable_schema = ON")
                    try:
                        cursor.execute("UPDATE sqlite_master SET sql = %s WHERE type = 'table' AND name = %s",
                                       [edited, table])
                        cursor.execute(f"PRAGMA schema_version = {int(version) + 1}")
                    finally:
                        cursor.execute("PRAGMA writable_schema = OFF")
            except DatabaseError:
                continue  # defensive mode: the checks stay


def drop_checks(apps, schema_editor) -> None:
    _edit(schema_editor, forward=True)


def restore_checks(apps, schema_editor) -> None:
    _edit(schema_editor, forward=False)


class Migration(migrations.Migration):

    dependencies = [
        ("evaluations", "0032_engine_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="caseresult",
                    name="output",
                    field=evaluations.models.runs.EngineJSONField(blank=True, null=True),
                ),
                migrations.AlterField(
                    model_name="score",
                    name="justification",
                    field=evaluations.models.runs.EngineJSONField(blank=True, default=dict),
                ),
                migrations.AlterField(
                    model_name="score",
                    name="threshold",
                    field=evaluations.models.runs.EngineJSONField(blank=True, null=True),
                ),
            ],
            database_operations=[migrations.RunPython(drop_checks, restore_checks)],
        ),
    ]
