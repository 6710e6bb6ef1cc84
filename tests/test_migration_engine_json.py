"""Migration 0033: a score's threshold and justification and a result's output lose SQLite's
`JSON_VALID` check, by an edit of the tables' definitions in place (no copy of the tables),
and get it back when the migration is reversed. The rows stay, and the database stays sound.
On PostgreSQL the columns are jsonb either way and the migration changes nothing there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from tests.migration_helpers import on_a_scratch_database

BEFORE = [("evaluations", "0032_engine_indexes")]
AFTER = [("evaluations", "0033_engine_json_unchecked")]
CHECKS = ('JSON_VALID("threshold")', 'JSON_VALID("justification")', 'JSON_VALID("output")')


def _definitions() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' "
                       "AND name IN ('evaluations_score', 'evaluations_caseresult') ORDER BY name")
        return "\n".join(sql for (sql,) in cursor.fetchall())


def _sound() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA integrity_check")
        return cursor.fetchall() == [("ok",)]


def _migrate(target: list[tuple[str, str]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor


def _bad_justification_refused(result_id: int, run_id: int) -> bool:
    """Whether the database refuses a score whose justification is not JSON."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("INSERT INTO evaluations_score (run_id, result_id, criterion, evaluator, applies_to, "
                           "turn_index, node_name, justification, error) VALUES (%s, %s, 'bad', 'bad', "
                           "'conversation', -1, '', '{not json', '')", [run_id, result_id])
            raise _RolledBack  # leave nothing behind either way
    except IntegrityError:
        return True
    except _RolledBack:
        return False


class _RolledBack(Exception):
    pass


@pytest.mark.django_db(transaction=True)
def test_the_checks_go_and_come_back_and_the_rows_stay(tmp_path: Path) -> None:
    with on_a_scratch_database(connection, tmp_path):
        executor = _migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        project = apps.get_model("evaluations", "Project").objects.create(slug="p", name="P")
        evalset = apps.get_model("evaluations", "EvalSet").objects.create(project=project, eval_set_id="s", name="S")
        version = apps.get_model("evaluations", "EvalSetVersion").objects.create(
            evalset=evalset, number=1, content_hash="h", source_format="native", source_filename="s.json", name="S")
        case = apps.get_model("evaluations", "EvalCase").objects.create(version=version, evalset=evalset,
                                                                        position=0, eval_id="c0", valid_from=1)
        run = apps.get_model("evaluations", "Run").objects.create(project=project, evalset_version=version)
        result = apps.get_model("evaluations", "CaseResult").objects.create(
            run=run, case=case, output={"eval_id": "c0", "turns": [{"final_response": "hi"}]})
        apps.get_model("evaluations", "Score").objects.create(
            run=run, result=result, criterion="exact", evaluator="exact", threshold={"lower_limit": 0.5},
            justification={"why": ["a", 1, None]})
        sqlite = connection.vendor == "sqlite"
        if sqlite:
            assert all(check in _definitions() for check in CHECKS)
            assert _bad_justification_refused(result.pk, run.pk)

        for target in (AFTER, BEFORE, AFTER):  # applied, reversed, applied again
            _migrate(target)
            if sqlite:
                assert all((check in _definitions()) is (target == BEFORE) for check in CHECKS), target
                assert _bad_justification_refused(result.pk, run.pk) is (target == BEFORE)
                assert 'CHECK ("iteration" >= 0)' in _definitions()  # the other checks stay
                assert _sound()
            else:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT data_type FROM information_schema.columns WHERE table_name IN "
                                   "('evaluations_score', 'evaluations_caseresult') AND column_name IN "
                                   "('threshold', 'justification', 'output')")
                    assert sorted(t for (t,) in cursor.fetchall()) == ["jsonb"] * 3

        from evaluations.models import CaseResult, Score

        score = Score.objects.get()
        assert score.threshold == {"lower_limit": 0.5} and score.justification == {"why": ["a", 1, None]}
        assert CaseResult.objects.get().output == {"eval_id": "c0", "turns": [{"final_response": "hi"}]}
        Score.objects.create(run_id=run.pk, result_id=result.pk, criterion="new", justification={"k": "v"})
        assert json.loads(json.dumps(Score.objects.get(criterion="new").justification)) == {"k": "v"}
