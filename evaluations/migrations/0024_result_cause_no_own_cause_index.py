# The cause's own index on ResultCause is dropped: both of the table's indexes begin with
# cause_id, so they serve every lookup it served, and each failing (result, criterion) a run
# stores maintains one index fewer. The index is dropped by name rather than by AlterField,
# which on SQLite would copy the whole table.

import django.db.models.deletion
from django.db import migrations, models

INDEX = "evaluations_resultcause_cause_id_8e01fd1e"  # Django's name for it, on every backend


class Migration(migrations.Migration):

    dependencies = [
        ("evaluations", "0023_trace_list_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="resultcause",
                    name="cause",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                            related_name="results", to="evaluations.runcause"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{INDEX}"',
                    reverse_sql=f'CREATE INDEX "{INDEX}" ON "evaluations_resultcause" ("cause_id")',
                ),
            ],
        ),
    ]
