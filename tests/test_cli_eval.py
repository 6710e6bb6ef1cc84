"""`manage.py eval` in local mode: run, summary, report file, exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from django.core.management import call_command

from evaluations.models import Run
from evaluations.schemas.report import EvalReport
from tests.compare_helpers import generated_outputs, generated_version, make_run
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
def test_a_config_that_is_not_an_eval_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = _write(tmp_path, "outputs.json", perfect_outputs())
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"criteria": {"trajectory_match": {"threshold": "high"}}}))
    code, _, err = _eval(capsys, str(DEMO), "--outputs", outputs, "--config", str(config))
    assert code == 2 and f"--config {config} is not an evaluation config" in err
    config.write_text("[1, 2]")
    code, _, err = _eval(capsys, str(DEMO), "--outputs", outputs, "--config", str(config))
    assert code == 2 and "give a JSON object with `criteria`" in err
    assert Run.objects.count() == 0


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


def _write(tmp_path: Path, name: str, outputs: list[dict]) -> str:  # type: ignore[type-arg]
    path = tmp_path / name
    path.write_text(json.dumps(outputs))
    return str(path)


@pytest.mark.django_db
def test_a_regression_against_a_baseline_fails_with_junit_and_the_compare_link(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", _write(tmp_path, "perfect.json", perfect_outputs()))
    assert code == 0, out
    baseline = Run.objects.get()
    junit = tmp_path / "junit.xml"
    code, out, err = _eval(capsys, str(DEMO), "--outputs", _write(tmp_path, "regressed.json", regressed_outputs()),
                           "--baseline", str(baseline.pk), "--fail-on-regression", "--junit", str(junit))
    assert code == 1, out + err
    candidate = Run.objects.exclude(pk=baseline.pk).get()
    assert re.search(rf"vs #{baseline.pk} · [^:\n]*: 2 regressions, 0 improvements", out)
    assert "regressed: weather_tokyo (trajectory_match 1.000 -> 0.000)" in out
    assert "regression gate: FAILED (2 cases regressed)" in out
    assert f"compare page: /compare/?baseline={baseline.pk}&candidate={candidate.pk}" in out
    assert f"run page:     /runs/{candidate.pk}/" in out and "paths on the site that serves this database" in out
    assert "trajectory_match 0.000 vs threshold >= 0.8" in out  # the failed cases, with their scores
    assert "8/8 done, 2 failed, 0 errored" in err  # progress goes to stderr

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("16", "2", "0")
    failed = {(c.get("classname"), c.get("name")) for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {("demo_travel_agent/weather_tokyo", "trajectory_match"),
                      ("demo_travel_agent/order_status", "trajectory_match")}
    order = next(c for c in suite.iter("testcase") if c.get("classname") == "demo_travel_agent/order_status"
                 and c.get("name") == "trajectory_match").find("failure")
    assert order is not None and '"missing": 1' in (order.text or "") and "get_order" in (order.text or "")


@pytest.mark.django_db
def test_known_failures_pass_with_regressions_only_and_a_significance_level(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    failing = _write(tmp_path, "regressed.json", regressed_outputs())
    assert _eval(capsys, str(DEMO), "--outputs", failing)[0] == 1
    baseline = Run.objects.get()
    # The same two cases fail again: thresholds fail, nothing regressed.
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", failing, "--baseline", str(baseline.pk),
                         "--fail-on-regression", "--regressions-only")
    assert code == 0, out
    assert "regression gate: passed (no case regressed)" in out
    # Two regressions of eight could be chance at 0.05.
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", _write(tmp_path, "p.json", perfect_outputs()))
    good = Run.objects.order_by("-pk").first()
    assert code == 0 and good is not None
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", failing, "--baseline", str(good.pk),
                         "--fail-on-regression", "--significance", "0.05", "--regressions-only")
    assert code == 0, out
    assert "regression gate: passed (no criterion significantly worse at alpha 0.05 (2 cases regressed))" in out


@pytest.mark.django_db
def test_fail_on_regression_compares_with_the_pinned_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    perfect = _write(tmp_path, "perfect.json", perfect_outputs())
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", perfect, "--fail-on-regression")
    assert code == 0, out  # the first run: nothing pinned yet, said so, not an error
    assert "note: eval set 'demo_travel_agent' has no pinned baseline run" in out
    pinned = Run.objects.get()
    pinned.evalset_version.evalset.baseline_run = pinned
    pinned.evalset_version.evalset.save()
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", _write(tmp_path, "r.json", regressed_outputs()),
                         "--fail-on-regression")
    assert code == 1
    assert re.search(rf"vs #{pinned.pk} · [^:\n]*: 2 regressions", out)


@pytest.mark.django_db
def test_bad_gate_options_exit_2_and_create_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   acme: Any) -> None:
    perfect = _write(tmp_path, "perfect.json", perfect_outputs())
    cases = [
        (["--baseline", "latest"], "give a run id, `pinned` or `default`"),
        (["--baseline", "999"], "no run 999 in project 'default'"),
        (["--significance", "2", "--fail-on-regression"], "--significance 2"),
        (["--regressions-only"], "--regressions-only goes with --fail-on-regression"),
        (["--token", "es_x"], "--token is for remote mode"),
        (["--workers", "0"], "--workers must be at least 1"),
    ]
    for extra, message in cases:
        code, _, err = _eval(capsys, str(DEMO), "--outputs", perfect, *extra)
        assert code == 2 and message in err, (extra, err)
    assert Run.objects.count() == 0
    # A run of another eval set is no baseline for this one.
    other = make_run(acme, generated_version(acme, 2), generated_outputs(2))
    code, _, err = _eval(capsys, str(DEMO), "--outputs", perfect, "--project", "acme", "--baseline", str(other.pk))
    assert code == 2 and "is of eval set 'generated', not 'demo_travel_agent'" in err
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_junit_records_missing_outputs_as_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = [o for o in perfect_outputs() if o["eval_id"] != "order_cancel"]
    # Fails response_match. (No NUL: PostgreSQL's jsonb cannot hold \u0000.)
    outputs[0]["turns"][0]["final_response"] = "\x1b\x07 <nope> & \ud83d\ude00"
    junit = tmp_path / "junit.xml"
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", _write(tmp_path, "o.json", outputs), "--junit", str(junit))
    assert code == 1 and "1 missing" in out
    suite = ET.parse(junit).getroot().find("testsuite")  # parses despite the control characters
    assert suite is not None and suite.get("errors") == "2"  # one per criterion of the run
    failure = next(c for c in suite.iter("testcase") if c.get("name") == "response_match"
                   and c.find("failure") is not None).find("failure")
    assert failure is not None and "<nope> & \U0001f600" in (failure.text or "")
    errors = [c for c in suite.iter("testcase") if c.find("error") is not None]
    assert {c.get("classname") for c in errors} == {"demo_travel_agent/order_cancel"}
    assert {c.get("name") for c in errors} == {"trajectory_match", "response_match"}
    error = errors[0].find("error")
    assert error is not None and error.get("message") == "missing: no output was uploaded for this case"


@pytest.mark.django_db
def test_baseline_default_is_the_pages_like_for_like_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    perfect = _write(tmp_path, "perfect.json", perfect_outputs())
    assert _eval(capsys, str(DEMO), "--outputs", perfect, "--branch", "main", "--model", "m1")[0] == 0
    main = Run.objects.get()
    # a later run on another branch and model is not a fair baseline for main
    assert _eval(capsys, str(DEMO), "--outputs", perfect, "--branch", "feat/x", "--model", "m2")[0] == 0
    code, out, _ = _eval(capsys, str(DEMO), "--outputs", _write(tmp_path, "regressed.json", regressed_outputs()),
                         "--branch", "main", "--model", "m1", "--baseline", "default", "--fail-on-regression")
    assert code == 1, out
    assert re.search(rf"vs #{main.pk} · [^:\n]*: 2 regressions", out)
