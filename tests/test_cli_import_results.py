"""`manage.py import_results`: a results file as a completed run, by eval set id or number, and
`--rescore`; bad files exit 1 and write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import CaseResult, EvalSet, Project, Run, Score
from tests.engine_helpers import import_demo

RESULTS = Path(__file__).resolve().parent / "data" / "results"
ADK = RESULTS / "adk" / "travel_demo_travel_agent_1764000130.53.evalset_result.json"


@pytest.mark.django_db
def test_a_deepeval_test_run_is_imported_into_a_new_project(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("import_results", str(RESULTS / "deepeval" / "test_run.json"), "--project", "team-a")
    out = capsys.readouterr().out
    assert "created project 'team-a'" in out
    run = Run.objects.get()
    assert f"run {run.pk} (deepeval results: test_run.json): deepeval results for eval set 'test_support_bot' version 1, " \
           "completed; 3 cases scored (1 failed, 0 errors), 0 missing" in out
    assert run.project == Project.objects.get(slug="team-a")


@pytest.mark.django_db
def test_uipath_results_against_the_eval_set_named_by_its_number(capsys: pytest.CaptureFixture[str]) -> None:
    project = Project.objects.create(slug="default", name="Default")
    evalset = import_demo(project).evalset
    call_command("import_results", str(RESULTS / "uipath" / "results.json"), "--evalset", str(evalset.pk))
    run = Run.objects.get()
    assert run.evalset_version.evalset == evalset
    assert Score.objects.filter(run=run, evaluator="imported:uipath").count() == 4
    assert "6 missing" in capsys.readouterr().out


@pytest.mark.django_db
def test_rescore_queues_an_uploaded_outputs_run_on_the_same_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    project = Project.objects.create(slug="default", name="Default")
    import_demo(project)
    call_command("import_results", str(ADK), "--evalset", "demo_travel_agent", "--rescore")
    imported, rescored = Run.objects.order_by("pk")
    assert f"run {rescored.pk} queued" in capsys.readouterr().out
    assert rescored.target_kind == Run.TargetKind.UPLOADED and rescored.target == {"rescored_from": imported.pk}
    assert rescored.status in {Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.COMPLETED}
    outputs = dict(CaseResult.objects.filter(run=rescored).exclude(output=None)
                   .values_list("case__eval_id", "output").order_by("pk"))
    assert outputs == dict(CaseResult.objects.filter(run=imported).exclude(output=None)
                           .values_list("case__eval_id", "output").order_by("pk"))


@pytest.mark.django_db
def test_an_agentflow_report_cannot_be_rescored_it_has_no_outputs(capsys: pytest.CaptureFixture[str]) -> None:
    project = Project.objects.create(slug="default", name="Default")
    import_demo(project)
    with pytest.raises(SystemExit) as exit_:
        call_command("import_results", str(RESULTS / "agentflow" / "demo_travel_agent.report.json"), "--rescore")
    assert exit_.value.code == 1
    assert "holds no agent outputs to rescore" in capsys.readouterr().err
    assert Run.objects.count() == 0  # all or nothing


@pytest.mark.django_db
def test_a_bad_file_exits_1_with_the_place_and_writes_nothing(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    del doc["testCases"][2]["input"]
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps(doc, indent=2))
    with pytest.raises(SystemExit) as exit_:
        call_command("import_results", str(bad))
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert "nothing was imported" in err
    assert "run.json" in err and "case 'test_case_2'" in err and "testCases[2].input" in err
    assert (Run.objects.count(), EvalSet.objects.count()) == (0, 0)


@pytest.mark.django_db
def test_an_unknown_eval_set_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("import_results", str(ADK), "--evalset", "nope")
    assert "no eval set 'nope'" in capsys.readouterr().err
