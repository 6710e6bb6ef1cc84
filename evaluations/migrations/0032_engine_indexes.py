# The run and result keys of scores and tool usage, and the run key of results, lose their
# own single-column indexes: each table has other indexes that begin with the same column
# (scores: score_run_criterion and score_unique; tool usage: tool_usage_run_tool and
# tool_usage_unique; results: result_unique, result_run_status and result_run_order), which
# serve every lookup the single-column ones served. Each score, tool usage row and result the
# engine writes maintains one or two indexes fewer. Dropped by name rather than by AlterField,
# which on SQLite would copy each table whole.
#
# A run's errored scores get a partial index of their own (`score_run_errored`): the run's
# notices, counted as it completes, read them through it, where SQLite read every score of
# the run (0.13 s at 10,000 cases) to find the few, or none, that errored.

import django.db.models.deletion
from django.db import migrations, models

DROPPED = [  # (Django's name for the index, on every backend; table; column)
    ("evaluations_score_run_id_db0dd4f6", "evaluations_score", "run_id"),
    ("evaluations_score_result_id_3d507bef", "evaluations_score", "result_id"),
    ("evaluations_toolusage_run_id_431f54ed", "evaluations_toolusage", "run_id"),
    ("evaluations_toolusage_result_id_d51a10f1", "evaluations_toolusage", "result_id"),
    ("evaluations_caseresult_run_id_1a70c2f3", "evaluations_caseresult", "run_id"),
]


def _key(model_name: str, name: str, to: str, related_name: str) -> migrations.AlterField:
    return migrations.AlterField(
        model_name=model_name,
        name=name,
        field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                related_name=related_name, to=to),
    )


class Migration(migrations.Migration):

    dependencies = [
        ("evaluations", "0031_not_fully_scored"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                _key("score", "run", "evaluations.run", "scores"),
                _key("score", "result", "evaluations.caseresult", "scores"),
                _key("toolusage", "run", "evaluations.run", "tool_usage"),
                _key("toolusage", "result", "evaluations.caseresult", "tool_usage"),
                _key("caseresult", "run", "evaluations.run", "results"),
            ],
            database_operations=[
                migrations.RunSQL(f'DROP INDEX IF EXISTS "{index}"',
                                  reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")')
                for index, table, column in DROPPED
            ],
        ),
        migrations.AddIndex(
            model_name="score",
            index=models.Index(condition=models.Q(("passed", True), _negated=True)
                               & models.Q(("error", ""), _negated=True),
                               fields=["run", "criterion"], name="score_run_errored"),
        ),
    ]
