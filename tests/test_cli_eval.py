"""`manage.py eval` in local mode: run, summary, report file, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import Run
from evaluations.schemas.report import EvalReport
from tests.engine_helpers import DEMO, perfect_outputs, regressed_outputs


def _eval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        call_command("eval", *args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.django_db(transaction=True)  # --workers 2: threads with their own connections
def test_perfect_outputs_exit_0_with_a_summary_and_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(perfect_outputs()))
    report = tmp_path / "report.json"
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", str(outputs), "--output-file", str(report), "--workers", "2")
    assert code == 0, out
    assert "trajectory_match" in out and "100.0%" in out
    assert "completed: 8 results, 8 passed, 0 failed" in out
    parsed = EvalReport.model_validate_json(report.read_text())
    assert parsed.summary.passed_cases == 8 and len(parsed.results) == 8


@pytest.mark.django_db
def test_regressions_exit_1_and_jsonl_outputs_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("\n".join(json.dumps(o) for o in regressed_outputs()))
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", str(outputs), "--model", "m2", "--branch", "feature")
    assert code == 1
    assert "2 failed" in out
    run = Run.objects.get()
    assert (run.model, run.branch) == ("m2", "feature")


@pytest.mark.django_db
def test_an_adk_style_config_file_sets_the_thresholds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(regressed_outputs()))
    config = tmp_path / "test_config.json"
    config.write_text(json.dumps({"criteria": {"trajectory_match": 0.0}}))
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", str(outputs), "--config", str(config))
    assert code == 0, out  # a threshold of 0 passes every case
    assert list(Run.objects.get().config["criteria"]) == ["trajectory_match"]


@pytest.mark.django_db
def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps([{"eval_id": "not_in_the_set", "turns": []}]))
    code, _, err = _eval(capsys, str(DEMO), "--outputs", str(outputs))
    assert code == 2 and "not_in_the_set" in err
    code, _, err = _eval(capsys, "no_such_eval_set", "--outputs", str(outputs))
    assert code == 2 and "no file and no eval set" in err
    code, _, err = _eval(capsys, str(DEMO), "--target", "not-a-target")
    assert code == 2 and "--target" in err
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_demo_agent_passes_its_own_eval_set_through_the_python_target(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _eval(capsys, str(DEMO), "--target", "demo", "--iterations", "2")
    assert code == 0, out
    run = Run.objects.get()
    assert run.target_kind == "python" and run.cases_total == 16
    assert run.summary["latency"]["count"] == 16
