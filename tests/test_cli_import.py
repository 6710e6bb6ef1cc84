"""`manage.py import_evalset`: what it prints on success."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import EvalSet, Project
from tests.conftest import REPO

DEMO = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"


@pytest.mark.django_db
def test_it_prints_the_eval_set_version_format_and_case_count(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_evalset", str(DEMO), "--project", "team-a")
    out = capsys.readouterr().out
    assert "created project 'team-a'" in out
    assert "eval set 'demo_travel_agent' (Demo travel agent), version 1 (new version), format native [agentflow], 8 cases" in out
    assert EvalSet.objects.get().project == Project.objects.get(slug="team-a")


@pytest.mark.django_db
def test_a_second_identical_import_says_nothing_changed(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_evalset", str(DEMO))
    call_command("import_evalset", str(DEMO))
    out = capsys.readouterr().out
    assert "version 1 (unchanged: identical to the existing version)" in out


@pytest.mark.django_db
def test_an_explicit_format_skips_detection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = tmp_path / "cases.txt.json"
    shutil.copy(DEMO, odd)
    call_command("import_evalset", str(odd), "--format", "native")
    assert "format native" in capsys.readouterr().out


@pytest.mark.django_db
def test_a_wrong_explicit_format_fails_with_the_readers_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        call_command("import_evalset", str(DEMO), "--format", "deepeval")
    assert exit_.value.code == 1
    assert "nothing was imported" in capsys.readouterr().err
    assert EvalSet.objects.count() == 0
