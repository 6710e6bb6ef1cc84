"""`manage.py eval` on what ADK and UiPath users hand it: a folder holding several eval sets
(`--evalset ID` picks one, else the ids are listed), a single ADK file with the
`test_config.json` beside it (picked up, as ADK does), and `--config` files in every shape
ADK's test_config.json takes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.models import EvalSet, Run
from tests.conftest import REALWORLD
from tests.engine_helpers import DEMO, perfect_outputs

pytestmark = pytest.mark.django_db(transaction=True)

ROLL_DIE = REALWORLD / "google-adk" / "hello_world_agent"


def _eval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        call_command("eval", *args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _outputs(tmp_path: Path) -> str:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(perfect_outputs()))
    return str(path)


def two_eval_sets(tmp_path: Path) -> Path:
    folder = tmp_path / "evals"
    folder.mkdir()
    shutil.copy(DEMO, folder / "travel.evalset.json")
    doc = json.loads(DEMO.read_text())
    doc["eval_set_id"] = "travel_agent_copy"
    (folder / "copy.evalset.json").write_text(json.dumps(doc))
    return folder


def test_a_folder_with_several_eval_sets_lists_them_and_runs_none(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    original = json.loads(DEMO.read_text())["eval_set_id"]
    code, _, err = _eval(capsys, str(two_eval_sets(tmp_path)), "--outputs", _outputs(tmp_path))
    assert code == 2
    assert "holds 2 eval sets (" in err and original in err and "travel_agent_copy" in err
    assert "choose one with --evalset ID" in err
    assert not Run.objects.exists()


def test_evalset_picks_one_eval_set_of_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = two_eval_sets(tmp_path)
    code, out, _ = _eval(capsys, str(folder), "--evalset", "travel_agent_copy", "--outputs", _outputs(tmp_path))
    assert code == 0, out
    assert Run.objects.get().evalset_version.evalset.eval_set_id == "travel_agent_copy"
    code, _, err = _eval(capsys, str(folder), "--evalset", "nope", "--outputs", _outputs(tmp_path))
    assert code == 2 and "--evalset nope: " in err and "holds no eval set 'nope'" in err


def test_a_single_adk_file_takes_the_test_config_beside_it(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("roll_die.test.json", "test_config.json"):
        shutil.copy(ROLL_DIE / name, tmp_path / name)
    empty = tmp_path / "outputs.json"
    empty.write_text("[]")
    _, _, err = _eval(capsys, str(tmp_path / "roll_die.test.json"), "--outputs", str(empty))
    run = Run.objects.get()
    assert {name: c["threshold"] for name, c in run.config["criteria"].items()} == {
        "tool_trajectory_avg_score": 1.0, "response_match_score": 0.5}, err
    assert EvalSet.objects.get().latest_version.default_config is not None
    (tmp_path / "test_config.json").unlink()
    _eval(capsys, str(tmp_path / "roll_die.test.json"), "--outputs", str(empty))
    assert "tool_trajectory_avg_score" not in Run.objects.order_by("-pk")[0].config["criteria"]


def test_config_takes_what_adks_test_config_takes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALSITE_LLM_BASE_URL", raising=False)  # the judge is not runnable: no network
    monkeypatch.delenv("EVALSITE_LLM_API_KEY", raising=False)
    config = tmp_path / "adk_config.json"
    config.write_text(json.dumps({"criteria": {
        "tool_trajectory_avg_score": {"threshold": 1.0, "match_type": "IN_ORDER", "ignore_args": True},
        "response_match_score": 0.5,
        "final_response_match_v2": {"threshold": 0.8, "judge_model_options": {"judge_model": "judge-x",
                                                                              "num_samples": 3}}}}))
    _, out, err = _eval(capsys, str(DEMO), "--outputs", _outputs(tmp_path), "--config", str(config))
    assert Run.objects.exists(), err
    criteria = Run.objects.get().config["criteria"]
    trajectory = criteria["tool_trajectory_avg_score"]
    assert (trajectory["threshold"], trajectory["match_type"], trajectory["options"]) == (
        1.0, "IN_ORDER", {"ignore_args": True}), (out, err)
    assert criteria["response_match_score"]["threshold"] == 0.5
    assert criteria["final_response_match_v2"]["judge_model"] == "judge-x"  # ADK's LLM-judged names run


def test_a_bad_adk_style_config_names_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "adk_config.json"
    config.write_text(json.dumps({"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "match_type": "SOME"}}}))
    code, _, err = _eval(capsys, str(DEMO), "--outputs", _outputs(tmp_path), "--config", str(config))
    assert code == 2
    assert "nor an ADK test_config.json" in err and "match_type must be one of EXACT, IN_ORDER, ANY_ORDER" in err
    assert not Run.objects.exists()
