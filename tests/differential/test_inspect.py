"""Differential tests for Inspect AI: logs written by `inspect-ai` itself (0.3.285, pinned in
requirements-differential-inspect.txt, in its own venv .differential/inspect made by
.ci/differential.sh) from a local task with `mockllm/model` (tests/differential/inspect_logs.py; no
network), read back by evalsite with every score equal to what inspect's `read_eval_log` reads;
and the eval set evalsite makes of a log, exported as an Inspect dataset, read by inspect's
`json_dataset()` as the samples the log holds.

EVALSITE_DIFFERENTIAL_INSPECT_PYTHON is the venv's interpreter; without it these tests are
skipped with that reason, unless EVALSITE_REQUIRE_DIFFERENTIAL=1 (CI), where that is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from evaluations.evalsets.exports import tool_export
from evaluations.evalsets.services import evalset_import
from evaluations.interop.base import SourceFile
from evaluations.interop.inspect.samples import value_to_float, verdict
from evaluations.interop.results import read_results
from evaluations.models import Project, Score
from evaluations.runs.imports import results_import
from tests.differential.test_differential import REPO, _interpreter, pins

SCRIPT = Path(__file__).with_name("inspect_logs.py")


def _env() -> dict[str, str]:
    # A dead proxy: nothing inspect tries may reach a network.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
            "PYTHONIOENCODING": "utf-8", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
            "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "", "INSPECT_DISPLAY": "none",
            "INSPECT_LOG_LEVEL": "error"}


@pytest.fixture(scope="module")
def inspect_python() -> str:
    return _interpreter("EVALSITE_DIFFERENTIAL_INSPECT_PYTHON", REPO / ".differential/inspect/bin/python",
                        "inspect-ai (.differential/inspect)")


def _run(python: str, *args: str, cwd: Path) -> dict[str, Any]:
    done = subprocess.run([python, str(SCRIPT), *args], capture_output=True, text=True, encoding="utf-8",
                          env=_env(), cwd=cwd, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    reply: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return reply


@pytest.fixture(scope="module")
def written(inspect_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("inspect-logs")
    return out, _run(inspect_python, str(out), "--epochs", "3", cwd=out)


def _compare(imported: Any, theirs: dict[str, Any]) -> int:
    mine = {s.criterion: s for s in imported.scores}
    assert set(mine) >= set(theirs["scores"])
    compared = 0
    for name, score in theirs["scores"].items():
        kept = mine[name]
        assert kept.justification["value"] == score["value"], (imported.key, name)
        for field in ("answer", "explanation", "metadata"):
            assert kept.justification.get(field) == score[field], (imported.key, name, field)
        if isinstance(score["value"], dict):
            for key, sub in score["value"].items():
                assert mine[f"{name}/{key}"].raw_value == value_to_float(sub)
        else:
            assert kept.raw_value == value_to_float(score["value"]) is not None
            assert kept.passed is verdict(score["value"])
        compared += 1
    return compared


def test_logs_written_by_inspect_read_back_with_every_score(written: tuple[Path, dict[str, Any]]) -> None:
    out, reply = written
    assert {log["format"] for log in reply["logs"]} == {"eval", "json"}
    for log in reply["logs"]:
        assert log["status"] == "success" and log["model"] == "mockllm/model"
        path = out / log["file"]
        parsed = read_results(SourceFile(path.name, path.read_bytes()))
        by_key = {(c.key, c.iteration + 1): c for c in parsed.cases}
        assert set(by_key) == {(str(s["id"]), s["epoch"]) for s in log["samples"]}
        compared = 0
        for sample in log["samples"]:
            case = by_key[(str(sample["id"]), sample["epoch"])]
            compared += _compare(case, sample)
            assert case.output is not None and case.output.turns[-1].final_response == sample["completion"]
            calls = case.output.all_tool_calls()
            assert [(c.name, c.args, c.call_id, c.result) for c in calls] == [
                (c["function"], c["arguments"], c["id"], result)
                for c, result in zip(sample["tool_calls"], sample["tool_results"], strict=True)]
            assert case.output.usage().total_tokens == sum(u["total_tokens"] for u in sample["usage"].values())
        assert compared == 4 * 4 * 3  # four scorers, four samples, three epochs


def test_the_imported_run_stores_every_score_inspect_recorded(written: tuple[Path, dict[str, Any]],
                                                               acme: Project) -> None:
    out, reply = written
    log = next(log for log in reply["logs"] if log["format"] == "eval")
    path = out / log["file"]
    run = results_import(project=acme, file=SourceFile(path.name, path.read_bytes()))
    stored = {(s.result.case.eval_id, s.result.iteration + 1, s.criterion): s
              for s in Score.objects.filter(run=run).select_related("result__case")}
    for sample in log["samples"]:
        for name, score in sample["scores"].items():
            row = stored[(str(sample["id"]), sample["epoch"], name)]
            assert row.justification["value"] == score["value"]
            assert row.justification.get("explanation") == score["explanation"]
            if not isinstance(score["value"], dict):
                assert row.raw_value == value_to_float(score["value"])
    assert run.model == "mockllm/model"


def test_the_eval_set_exported_as_a_dataset_reads_in_inspect_as_the_samples(
        inspect_python: str, written: tuple[Path, dict[str, Any]], acme: Project, tmp_path: Path) -> None:
    out, reply = written
    log = next(log for log in reply["logs"] if log["format"] == "json")
    path = out / log["file"]
    [outcome] = evalset_import(project=acme, files=[SourceFile(path.name, path.read_bytes())])
    export = tool_export(outcome.version, "inspect")
    dataset = tmp_path / export.filename
    dataset.write_bytes(export.data)
    theirs = _run(inspect_python, "--read-dataset", str(dataset), cwd=tmp_path)["samples"]
    first_epoch = [s for s in log["samples"] if s["epoch"] == 1]
    assert [(s["id"], s["target"]) for s in theirs] == [(s["id"], s["target"]) for s in first_epoch]
    capital = next(s for s in theirs if s["id"] == "capital")
    assert [(m["role"], m["content"]) for m in capital["input"]] == [
        ("system", "Answer briefly."), ("user", "What is the capital of France?")]
    assert capital["metadata"] == {"topic": "geography", "level": 1}


def test_the_inspect_venv_holds_the_pinned_version(inspect_python: str) -> None:
    wanted = pins("requirements-differential-inspect.txt")
    done = subprocess.run([inspect_python, "-c", "import importlib.metadata as m; print(m.version('inspect-ai'))"],
                          capture_output=True, text=True, env=_env(), timeout=60, check=True)
    assert wanted == {"inspect-ai": done.stdout.strip()} == {"inspect-ai": "0.3.285"}
