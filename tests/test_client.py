"""The Python client against a real server on 127.0.0.1 (pytest-django's threaded live
server) with a real `qcluster` process executing the runs, as a team's own pytest suite
would use it: upload, push outputs, wait, assert."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from evaluations.accounts.tokens import token_create
from evaluations.client import (
    Client,
    ClientError,
    Run,
    ServerUnreachable,
    WaitTimeout,
    junit_xml,
    justification_excerpt,
    main,
)
from evaluations.models import Project
from evaluations.models import Run as RunModel
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import REPO
from tests.engine_helpers import DEMO, import_demo, perfect_outputs, regressed_outputs
from tests.queue_helpers import qcluster

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, tmp_path_factory: Any) -> Iterator[None]:
    """A qcluster on the test database for the whole module: the live server queues the
    runs, the cluster executes them."""
    from django.conf import settings

    with qcluster(tmp_path_factory.mktemp("cluster"), EVALSITE_TASK_RETRY="300",
                  EVALSITE_BATCH_SIZE=str(settings.EVALSITE_BATCH_SIZE)):
        yield


@pytest.fixture
def client(live_server: Any, alice: Any) -> Client:
    return Client(live_server.url, token_create(user=alice, name="ci").secret)


def test_the_client_imports_nothing_from_django_or_the_rest_of_evalsite(tmp_path: Path) -> None:
    script = ("import sys; import evaluations.client as c; "
              "assert 'django' not in sys.modules, 'django'; "
              "assert not [m for m in sys.modules if m.startswith('evaluations.') and m != 'evaluations.client']; "
              "assert 'pydantic' not in sys.modules and 'httpx' not in sys.modules; print('ok')")
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_eval_command_checks_its_options_before_any_request(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    server = f"http://127.0.0.1:{port}"
    cases = [
        (["--baseline", "latest"], "--baseline 'latest': give a run id, `pinned` or `default`"),
        (["--regressions-only"], "--regressions-only goes with --fail-on-regression"),
        (["--significance", "0.9", "--fail-on-regression"], "--significance 0.9"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--input-overrides", "[1]"], "--input-overrides: give an object"),
        (["--config", str(tmp_path / "nowhere.json")], "--config"),
    ]
    for extra, message in cases:
        code = main(["eval", str(DEMO), "--outputs", str(DEMO), "--server", server, "--token", "es_x", *extra])
        err = capsys.readouterr().err
        assert code == 2 and message in err and "cannot reach" not in err, (extra, err)
    code = main(["eval", str(DEMO), "--target", "nonsense", "--server", server, "--token", "es_x"])
    assert code == 2 and "--target 'nonsense'" in capsys.readouterr().err
    code = main(["eval", str(DEMO), "--outputs", str(DEMO), "--server", server, "--token", "es_x"])
    assert code == 2 and f"cannot reach {server}" in capsys.readouterr().err  # the options were fine
    assert main(["eval"]) == 2 and "the following arguments are required: EVALSET" in capsys.readouterr().err


@pytest.mark.django_db(transaction=True)
def test_outputs_that_meet_every_threshold_pass(client: Client, cluster: None) -> None:
    evalset = client.upload_evalset(DEMO)
    assert (evalset.eval_set_id, evalset.version, evalset.case_count, evalset.created) == (
        "demo_travel_agent", 1, 8, True)
    assert client.upload_evalset(DEMO).created is False  # the same content is the same version

    seen: list[Run] = []
    run = client.push_outputs(evalset, perfect_outputs(), model="agent-v1", branch="main", tags=["ci"])
    assert run.status in {"queued", "running"} and run.cases_total == 8
    result = client.wait(run, timeout=90, poll=0.2, progress_callback=seen.append)
    assert result.passed
    result.assert_passed()
    assert result.run.status == "completed" and result.run.cases_passed == 8 and result.failures == []
    assert seen[-1].status == "completed" and seen[-1].settled == 8
    assert [r.settled for r in seen] == sorted(r.settled for r in seen)
    assert "PASSED" in result.summary() and f"{client.server}/runs/{run.id}/" in result.summary()
    stored = RunModel.objects.get(pk=run.id)
    assert (stored.model, stored.branch, stored.tags) == ("agent-v1", "main", ["ci"])


@pytest.mark.django_db(transaction=True)
def test_assert_passed_explains_failures_and_regressions_with_links(client: Client, cluster: None,
                                                                     tmp_path: Path) -> None:
    evalset = client.upload_evalset(DEMO)
    baseline = client.wait(client.push_outputs(evalset, perfect_outputs()), timeout=90, poll=0.2).run
    outputs = tmp_path / "outputs.jsonl"  # a JSON-lines file, read by the client
    outputs.write_text("\n".join(json.dumps(o) for o in regressed_outputs()))
    run = client.push_outputs(evalset.eval_set_id, outputs, baseline=baseline, name="candidate")
    result = client.wait(run, timeout=90, poll=0.2)

    assert not result.passed
    assert result.comparison is not None and result.comparison.regression_count == 2
    with pytest.raises(AssertionError) as raised:
        result.assert_passed()
    message = str(raised.value)
    assert f"evalsite run {run.id} (candidate): FAILED" in message
    assert "6 passed, 2 failed" in message
    assert "weather_tokyo: failed" in message and "order_status: failed" in message
    assert "trajectory_match 0.000 vs threshold >= 0.8" in message
    tokyo = next(line for line in message.splitlines() if "turn_1: expected" in line and "Kyoto" in line)
    assert '"city":"Tokyo"' in tokyo.split("actual")[0] and '"city":"Kyoto"' in tokyo.split("actual")[1]
    assert "regressed: weather_tokyo (trajectory_match 1.000 -> 0.000)" in message
    assert "regression gate: FAILED (2 cases regressed)" in message
    assert f"{client.server}/compare/?baseline={baseline.id}&candidate={run.id}" in message
    assert f"{client.server}/runs/{run.id}/cases/" in message

    comparison = client.compare(baseline, run, alpha=0.05)
    assert comparison.passed  # two flips of eight could be chance
    comparison.assert_passed()
    with pytest.raises(AssertionError, match="the candidate regressed"):
        client.compare(baseline.id, run.id).assert_passed()


@pytest.mark.django_db(transaction=True)
def test_a_pinned_baseline_that_is_not_there_yet_is_a_note(client: Client, cluster: None) -> None:
    evalset = client.upload_evalset(DEMO)
    result = client.wait(client.push_outputs(evalset, perfect_outputs(), baseline="pinned"), timeout=90, poll=0.2)
    assert result.passed and result.comparison is None
    assert result.notes == ["eval set 'demo_travel_agent' has no pinned baseline run"]
    assert "note: eval set 'demo_travel_agent' has no pinned baseline run" in result.summary()


@pytest.mark.django_db(transaction=True)
def test_server_errors_carry_the_error_shape_and_write_nothing(client: Client, live_server: Any) -> None:
    with pytest.raises(ClientError) as raised:
        Client(live_server.url, "es_not-a-token").upload_evalset(DEMO)
    assert (raised.value.status, raised.value.code) == (401, "authentication_failed")
    assert "invalid or revoked token" in str(raised.value)

    evalset = client.upload_evalset(DEMO)
    with pytest.raises(ClientError) as raised:
        client.push_outputs(evalset, [{"eval_id": "not_in_the_set", "turns": []}])
    assert raised.value.status == 400 and raised.value.problems
    assert "not_in_the_set" in str(raised.value)
    with pytest.raises(ClientError) as raised:
        client.push_outputs(evalset, [{"eval_id": "weather_tokyo", "turns": "not a list"}])
    assert raised.value.status == 400
    assert any(p.get("case") == "weather_tokyo" for p in raised.value.problems), raised.value.problems
    with pytest.raises(ClientError) as raised:
        client.evalset("no_such_eval_set")
    assert raised.value.code == "not_found"
    with pytest.raises(ClientError) as raised:
        client.run(999999)
    assert (raised.value.status, raised.value.code) == (404, "not_found")
    assert RunModel.objects.count() == 0


def test_an_unreachable_server_is_its_own_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connections are refused
        with pytest.raises(ServerUnreachable) as raised:
            Client(f"http://127.0.0.1:{port}", "es_x", timeout=5).run(1)
    assert raised.value.code == "unreachable" and f"cannot reach http://127.0.0.1:{port}" in str(raised.value)
    with pytest.raises(ValueError, match="http"):
        Client("127.0.0.1:8000", "es_x")


@pytest.mark.django_db(transaction=True)
def test_wait_gives_up_after_its_timeout(client: Client, acme: Project) -> None:
    version = import_demo(acme)
    # Created but never queued: it stays queued whatever the wait.
    stuck = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False,
                            outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()])
    with pytest.raises(WaitTimeout) as raised:
        client.wait(stuck.pk, timeout=0.5, poll=0.1)
    assert isinstance(raised.value, TimeoutError)
    assert f"run {stuck.pk} is still queued" in str(raised.value) and f"/runs/{stuck.pk}/" in str(raised.value)


@pytest.mark.django_db(transaction=True)
def test_results_and_the_report_can_be_read_back(client: Client, cluster: None, tmp_path: Path) -> None:
    evalset = client.upload_evalset(DEMO)
    run = client.wait(client.push_outputs(evalset, regressed_outputs()), timeout=90, poll=0.2).run
    results = list(client.iter_results(run, page_size=3))
    assert len(results) == 8 and len({r["id"] for r in results}) == 8
    assert {r["eval_id"] for r in results if r["status"] == "failed"} == {"weather_tokyo", "order_status"}
    report = json.loads(client.download_report(run, tmp_path / "report.json").read_text())
    assert report["summary"]["total_cases"] == 8 and report["summary"]["passed_cases"] == 6


# --- JUnit XML, no server -----------------------------------------------------------------------


def _result(eval_id: str, status: str, scores: list[dict[str, Any]], error: str = "", pk: int = 1) -> dict[str, Any]:
    return {"id": pk, "eval_id": eval_id, "iteration": 0, "status": status, "error": error, "scores": scores}


def _score(criterion: str, score: float | None, passed: bool | None, **extra: Any) -> dict[str, Any]:
    return {"criterion": criterion, "applies_to": "conversation", "turn_index": -1, "node_name": "", "score": score,
            "raw_value": None, "passed": passed, "threshold": {"lower_limit": 0.8}, "justification": {},
            "error": "", **extra}


def test_junit_has_a_test_case_per_case_and_criterion_with_justified_failures() -> None:
    nasty = "bad \x00\x1b\ud800 answer <script>&"
    results = [
        _result("ok", "passed", [_score("trajectory_match", 1.0, True), _score("response_match", 1.0, True)]),
        _result("wrong", "failed", [
            _score("trajectory_match", 0.0, False, justification={"counts": {"missing": 1}}),
            {**_score("trajectory_match", 0.0, False), "applies_to": "interaction", "turn_index": 0,
             "justification": {"invocation_id": "turn_1", "expected": [{"name": "get_order"}], "actual": []}},
            _score("response_match", 0.1, False, justification={"expected": "Tokyo", "actual": nasty}),
        ], pk=2),
        _result("boom", "error", [], error="agent raised TimeoutError", pk=3),
        _result("scenario", "not_runnable", [], error="needs a user simulator", pk=4),
        _result("judge", "passed", [_score("judge", None, None, error="judge answered no JSON\x07")], pk=5),
    ]
    xml = junit_xml(results, suite="demo", run_id=7, run_url="http://h/runs/7/", compare_url="http://h/compare/?a=1&b=2",
                    criteria=["trajectory_match", "response_match"])
    root = ET.fromstring(xml)  # parses: the control characters were escaped
    suite = root.find("testsuite")
    assert suite is not None
    # the judge that could not score is skipped with why (the run's notice), not the agent's error
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("9", "2", "2", "3")
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert ("demo/ok", "trajectory_match") in cases and ("demo/ok", "response_match") in cases
    failure = cases[("demo/wrong", "trajectory_match")].find("failure")
    assert failure is not None and failure.get("message") == "score 0.000 vs threshold >= 0.8"
    assert '"missing": 1' in (failure.text or "") and '"invocation_id": "turn_1"' in (failure.text or "")
    assert "http://h/runs/7/cases/2/" in (failure.text or "")
    response = cases[("demo/wrong", "response_match")].find("failure")
    # JSON escapes the control characters itself; a lone surrogate has no JSON or XML form.
    assert response is not None and "bad \\u0000\\u001b\\xd800 answer <script>&" in (response.text or "")
    assert b"<script>" not in xml  # escaped in the file
    boom = cases[("demo/boom", "trajectory_match")].find("error")
    assert boom is not None and boom.get("message") == "error: agent raised TimeoutError"
    assert cases[("demo/scenario", "response_match")].find("skipped") is not None
    judge = cases[("demo/judge", "judge")].find("skipped")
    assert judge is not None and judge.get("message") == "not scored: judge answered no JSON\\x07"
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties == {"run_id": "7", "run_url": "http://h/runs/7/", "compare_url": "http://h/compare/?a=1&b=2"}


def test_a_justification_excerpt_says_expected_and_actual_or_the_reason() -> None:
    assert justification_excerpt({"invocation_id": "t1", "expected": "Paris", "actual": "Rome"}) == \
        "t1: expected Paris, actual Rome"
    assert justification_excerpt({"reasoning": "The answer  ignores\nthe question.", "score": 2}) == \
        "The answer ignores the question."
    long = justification_excerpt({"detail": "x" * 1000}, limit=50)
    assert len(long) == 50 and long.endswith("…")
    assert justification_excerpt({}) == ""


@pytest.mark.django_db(transaction=True)
def test_an_adk_result_file_is_uploaded_as_a_file_with_its_labels(client: Client, cluster: None) -> None:
    evalset = client.upload_evalset(DEMO)
    adk = REPO / "tests" / "data" / "outputs" / "travel_demo_travel_agent_1764000130.53.evalset_result.json"
    run = client.push_outputs(evalset, adk, model="adk-agent", tags=["adk", "nightly"],
                              config={"criteria": {"trajectory_match": {"threshold": 0.5}}})
    result = client.wait(run, timeout=90, poll=0.2)
    stored = RunModel.objects.get(pk=run.id)
    assert (stored.model, stored.tags, list(stored.config["criteria"])) == ("adk-agent", ["adk", "nightly"],
                                                                           ["trajectory_match"])
    assert result.run.status == "completed" and result.run.cases_done > 0

