"""manage.py curate: edits from a file, the diff as JSON, promotion of a run's regressions."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import EvalCase, EvalSetVersion, Project
from tests.compare_helpers import generated_outputs, generated_version, make_run

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("curate", *args, stdout=out)
    return out.getvalue()


def test_edit_from_a_file_then_diff(acme: Project, tmp_path: Path) -> None:
    version = generated_version(acme, 5)
    edits = tmp_path / "edits.json"
    edits.write_text(
        json.dumps(
            {
                "changes": [
                    {"op": "delete", "eval_ids": ["case_0003"]},
                    {"op": "tag", "eval_ids": ["case_0001"], "tag": "hard"},
                ]
            }
        )
    )
    out = run("edit", "generated", "--project", "acme", "--file", str(edits), "--note", "from a script")
    assert "version 2: 0 added, 1 changed, 1 removed" in out
    v2 = EvalSetVersion.objects.get(evalset=version.evalset, number=2)
    assert (v2.how_created, v2.note) == ("api", "from a script")
    diff = json.loads(run("diff", "generated", "1", "2", "--project", "acme"))
    assert diff["counts"] == {"added": 0, "removed": 1, "changed": 1}


def test_a_bad_edit_exits_1_with_the_path_and_writes_nothing(
    acme: Project, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generated_version(acme, 3)
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps({"changes": [{"op": "put", "case": {"eval_id": "x", "conversation": [{}]}}]}))
    err = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("curate", "edit", "generated", "--project", "acme", "--file", str(edits), stderr=err)
    assert exited.value.code == 1
    assert "changes[0].case.conversation[0].invocation_id" in err.getvalue()
    assert EvalSetVersion.objects.count() == 1


def test_promote_a_comparisons_regressions(acme: Project) -> None:
    version = generated_version(acme, 6)
    baseline = make_run(acme, version, generated_outputs(6))
    candidate = make_run(acme, version, generated_outputs(6, wrong={4}))
    out = run("promote", str(candidate.pk), "--status", "regressed", "--baseline", str(baseline.pk))
    assert "version 2: 1 added" in out
    v2 = EvalSetVersion.objects.get(evalset=version.evalset, number=2)
    assert v2.how_created == "promotion"
    assert EvalCase.objects.in_version(v2).filter(eval_id=f"case_0004-run{candidate.pk}").exists()
