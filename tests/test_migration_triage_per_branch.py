"""Migrations 0008 and 0009 move triage from (baseline, candidate) pairs to branches: each row takes its
candidate's branch; where one branch had several decisions on a case, the most recently
changed one is kept and the others' comments move to it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.db import connection

from tests.migration_helpers import old_chain_executor, on_a_scratch_database

BEFORE = [("evaluations", "0007_criteria_order")]
AFTER = [("evaluations", "0009_triage_unique_per_branch")]


@pytest.mark.django_db(transaction=True)
def test_existing_triage_rows_are_merged_per_branch(tmp_path: Path) -> None:
    with on_a_scratch_database(connection, tmp_path):
        executor = old_chain_executor(connection)
        executor.migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        Project = apps.get_model("evaluations", "Project")
        EvalSet = apps.get_model("evaluations", "EvalSet")
        Version = apps.get_model("evaluations", "EvalSetVersion")
        Run = apps.get_model("evaluations", "Run")
        Triage = apps.get_model("evaluations", "Triage")
        Comment = apps.get_model("evaluations", "Comment")
        project = Project.objects.create(slug="p", name="P")
        evalset = EvalSet.objects.create(project=project, eval_set_id="s")
        version = Version.objects.create(evalset=evalset, number=1, content_hash="h", source_format="native",
                                         source_filename="s.json")

        def run(branch: str) -> object:
            return Run.objects.create(project=project, evalset_version=version, target_kind="uploaded", branch=branch)

        base, main_1, main_2, canary = run("main"), run("main"), run("main"), run("feat")
        t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        old = Triage.objects.create(project=project, evalset=evalset, eval_id="a", baseline=base, candidate=main_1,
                                    status="confirmed", updated_at=t0)
        new = Triage.objects.create(project=project, evalset=evalset, eval_id="a", baseline=base, candidate=main_2,
                                    status="expected", updated_at=t0 + dt.timedelta(days=1))
        other = Triage.objects.create(project=project, evalset=evalset, eval_id="a", baseline=base, candidate=canary,
                                      status="flaky", updated_at=t0)
        Comment.objects.create(triage=old, body="said on the older comparison")
        Comment.objects.create(triage=new, body="said on the newer one")

        executor = old_chain_executor(connection)
        executor.migrate(AFTER)
        apps = executor.loader.project_state(AFTER).apps
        Triage = apps.get_model("evaluations", "Triage")
        Comment = apps.get_model("evaluations", "Comment")
        rows = {t.branch: t for t in Triage.objects.all()}
        assert set(rows) == {"main", "feat"}
        assert rows["main"].pk == new.pk and rows["main"].status == "expected"
        assert rows["feat"].pk == other.pk and rows["feat"].status == "flaky"
        assert sorted(Comment.objects.filter(triage_id=new.pk).values_list("body", flat=True)) == [
            "said on the newer one", "said on the older comparison"]
