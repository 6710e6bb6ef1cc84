"""`manage.py eval` in remote mode, end to end: a live evalsite (`manage.py up`: gunicorn and
a qcluster, on its own data directory) on 127.0.0.1, and the CLI run as a CI job runs it, in
a separate process that only talks HTTP to the server. Also the same command without Django:
`python -m evaluations.client eval ...` and a copy of the single file `client.py`, run by a
Python that cannot import Django at all (`-S`: no site-packages)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from tests.conftest import REPO
from tests.engine_helpers import DEMO, perfect_outputs, regressed_outputs

pytestmark = [pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    token: str
    data_dir: Path

    def api(self, path: str) -> dict:  # type: ignore[type-arg]
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", headers={"Authorization": f"Token {self.token}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]


def _server_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY",
                                                            "DJANGO_SETTINGS_MODULE", "EVALSITE_TOKEN"}}
    env.update({"EVALSITE_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"})
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedded_data_dir: Any) -> Iterator[Server]:
    """evalsite as a team runs it on one machine, with an API token for the CI job."""
    data_dir = embedded_data_dir(tmp_path_factory.mktemp("server"))
    port = _free_port()
    env = {**_server_env(data_dir), "EVALSITE_ADMIN_USERNAME": "ci-admin", "EVALSITE_ADMIN_PASSWORD": "ci-pass-123"}
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port), "--web-workers", "1"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output: list[str] = []
    assert proc.stdout is not None
    while not any("Press Ctrl+C" in line for line in output):
        line = proc.stdout.readline()
        assert line or proc.poll() is None, "".join(output)
        output.append(line)
    # Drain the access log so the server never blocks on a full pipe.
    threading.Thread(target=lambda: output.extend(proc.stdout or []), daemon=True).start()
    code = ("from django.contrib.auth import get_user_model; from evaluations.accounts.tokens import token_create; "
            "print(token_create(user=get_user_model().objects.get(username='ci-admin'), name='ci').secret)")
    made = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=REPO, env=_server_env(data_dir),
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    try:
        yield Server(f"http://127.0.0.1:{port}", made.stdout.strip().splitlines()[-1], data_dir)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def cli(tmp_path: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, with its own (empty) data directory: it only talks HTTP."""
    env = _server_env(tmp_path / "cli-data")
    if token is not None:
        env["EVALSITE_TOKEN"] = token
    return subprocess.run([sys.executable, "manage.py", "eval", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


def _run_id(stdout: str) -> int:
    match = re.search(r"^run (\d+): ", stdout, re.MULTILINE)
    assert match, stdout
    return int(match.group(1))


def test_a_regressed_candidate_fails_the_build_with_junit_and_a_compare_link(server: Server, tmp_path: Path) -> None:
    perfect = tmp_path / "perfect.json"
    perfect.write_text(json.dumps(perfect_outputs()))
    first = cli(tmp_path, str(DEMO), "--outputs", str(perfect), "--server", server.url, "--token", server.token,
                "--branch", "main", "--poll", "0.2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "eval set demo_travel_agent v1" in first.stdout
    assert "completed: 8 results, 8 passed, 0 failed" in first.stdout
    assert "8/8 done, 0 failed, 0 errored" in first.stderr  # progress, on stderr
    baseline = _run_id(first.stdout)
    assert f"run page:     {server.url}/runs/{baseline}/" in first.stdout

    regressed = tmp_path / "regressed.jsonl"
    regressed.write_text("\n".join(json.dumps(o) for o in regressed_outputs()))
    junit, report = tmp_path / "junit.xml", tmp_path / "report.json"
    # The eval set by its id this time; the token from the environment.
    second = cli(tmp_path, "demo_travel_agent", "--outputs", str(regressed), "--server", server.url,
                 "--baseline", str(baseline), "--fail-on-regression", "--junit", str(junit),
                 "--output-file", str(report), "--branch", "feature", "--poll", "0.2", token=server.token)
    assert second.returncode == 1, second.stdout + second.stderr
    candidate = _run_id(second.stdout)
    out = second.stdout
    assert "completed: 8 results, 6 passed, 2 failed" in out
    assert re.search(rf"vs #{baseline} · [^:\n]*: 2 regressions, 0 improvements", out)
    assert "regressed: weather_tokyo (trajectory_match 1.000 -> 0.000)" in out
    assert "regression gate: FAILED (2 cases regressed)" in out
    assert f"compare page: {server.url}/compare/?baseline={baseline}&candidate={candidate}" in out
    assert f"run page:     {server.url}/runs/{candidate}/" in out

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "demo_travel_agent"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("16", "2", "0")
    failures = {c.get("classname"): c.find("failure") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert set(failures) == {"demo_travel_agent/weather_tokyo", "demo_travel_agent/order_status"}
    tokyo = failures["demo_travel_agent/weather_tokyo"]
    assert tokyo is not None and tokyo.get("message") == "score 0.000 vs threshold >= 0.8"
    assert '"city": "Kyoto"' in (tokyo.text or "") and '"city": "Tokyo"' in (tokyo.text or "")  # the justification
    assert f"{server.url}/runs/{candidate}/cases/" in (tokyo.text or "")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["compare_url"] == f"{server.url}/compare/?baseline={baseline}&candidate={candidate}"

    assert json.loads(report.read_text())["summary"]["passed_cases"] == 6  # the EvalReport, downloaded
    compared = server.api(f"compare/?baseline={baseline}&candidate={candidate}")
    assert compared["counts"]["regressed"] == 2
    assert server.api(f"runs/{candidate}/")["branch"] == "feature"

    # A significance level the eight-case set cannot reach, and known failures allowed: passes.
    third = cli(tmp_path, "demo_travel_agent", "--outputs", str(regressed), "--server", server.url,
                "--baseline", str(baseline), "--fail-on-regression", "--significance", "0.05",
                "--regressions-only", "--poll", "0.2", token=server.token)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "regression gate: passed (no criterion significantly worse at alpha 0.05" in third.stdout


def test_the_server_can_run_the_target_itself(server: Server, tmp_path: Path) -> None:
    done = cli(tmp_path, str(DEMO), "--target", "demo", "--eval-ids", "weather_tokyo,order_status",
               "--server", server.url, "--token", server.token, "--poll", "0.2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "completed: 2 results, 2 passed" in done.stdout
    run = server.api(f"runs/{_run_id(done.stdout)}/")
    assert (run["target_kind"], run["eval_ids"]) == ("python", ["weather_tokyo", "order_status"])


def test_a_wrong_token_exits_2_with_a_clear_message_and_starts_nothing(server: Server, tmp_path: Path) -> None:
    before = server.api("runs/")["count"]
    done = cli(tmp_path, str(DEMO), "--outputs", str(DEMO), "--server", server.url, "--token", "es_wrong")
    assert done.returncode == 2
    assert "error: HTTP 401 authentication_failed: invalid or revoked token" in done.stderr
    assert "check --token or $EVALSITE_TOKEN" in done.stderr
    missing = cli(tmp_path, str(DEMO), "--outputs", str(DEMO), "--server", server.url)
    assert missing.returncode == 2 and "remote mode needs an API token" in missing.stderr
    assert server.api("runs/")["count"] == before


def test_server_side_errors_exit_2_and_start_nothing(server: Server, tmp_path: Path) -> None:
    before = server.api("runs/")["count"]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(perfect_outputs()))
    unknown_baseline = cli(tmp_path, str(DEMO), "--outputs", str(outputs), "--server", server.url,
                           "--baseline", "999999", token=server.token)
    assert unknown_baseline.returncode == 2 and "HTTP 404 not_found" in unknown_baseline.stderr
    strangers = tmp_path / "strangers.json"
    strangers.write_text(json.dumps([{"eval_id": "not_in_the_set", "turns": []}]))
    bad = cli(tmp_path, str(DEMO), "--outputs", str(strangers), "--server", server.url, token=server.token)
    assert bad.returncode == 2 and "HTTP 400" in bad.stderr and "not_in_the_set" in bad.stderr
    no_set = cli(tmp_path, "no_such_eval_set", "--outputs", str(outputs), "--server", server.url, token=server.token)
    assert no_set.returncode == 2 and "no file and no eval set 'no_such_eval_set'" in no_set.stderr
    assert server.api("runs/")["count"] == before


def test_an_unreachable_server_exits_2(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    done = cli(tmp_path, str(DEMO), "--outputs", str(DEMO), "--server", f"http://127.0.0.1:{port}", "--token", "es_x")
    assert done.returncode == 2
    assert f"error: cannot reach http://127.0.0.1:{port}" in done.stderr
    usage = cli(tmp_path, str(DEMO), "--outputs", str(DEMO), "--server", "ftp://example", "--token", "es_x")
    assert usage.returncode == 2 and "--server" in usage.stderr


# --- The stdlib entry point: `python -m evaluations.client eval` and a vendored client.py ---------

CLIENT = REPO / "evaluations" / "client.py"
NOT_STDLIB = ("django", "rest_framework", "pydantic", "django_q", "evalsite")
# `python -m evaluations.client`, reporting at exit which modules beyond the standard library
# (and the `evaluations` package's empty __init__) were imported.
RUN_MODULE = f"""
import runpy, sys
sys.argv = ["evaluations.client", *sys.argv[1:]]
code = 0
try:
    runpy.run_module("evaluations.client", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {NOT_STDLIB!r} or m.startswith("evaluations."))
print("non-stdlib modules:", loaded, file=sys.stderr)
sys.exit(code)
"""


def _stdlib_env(tmp_path: Path, token: str | None, pythonpath: str | None) -> dict[str, str]:
    env = _server_env(tmp_path / "cli-data")
    assert "DJANGO_SETTINGS_MODULE" not in env
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if token is not None:
        env["EVALSITE_TOKEN"] = token
    return env


def module_cli(tmp_path: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m evaluations.client eval ...` from elsewhere than the checkout, by a Python
    without site-packages (-S): Django and the project's requirements cannot be imported."""
    return subprocess.run([sys.executable, "-S", "-c", RUN_MODULE, "eval", *args], cwd=tmp_path,
                          env=_stdlib_env(tmp_path, token, str(REPO)), capture_output=True, text=True, timeout=300)


def file_cli(script: Path, cwd: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """`python path/to/client.py eval ...`, no site-packages and no PYTHONPATH."""
    return subprocess.run([sys.executable, "-S", str(script), "eval", *args], cwd=cwd,
                          env=_stdlib_env(cwd, token, None), capture_output=True, text=True, timeout=300)


def _assert_regressed(done: subprocess.CompletedProcess[str], server: Server, baseline: int, junit: Path) -> int:
    assert done.returncode == 1, done.stdout + done.stderr
    candidate = _run_id(done.stdout)
    out = done.stdout
    assert "completed: 8 results, 6 passed, 2 failed" in out
    assert "8/8 done" in done.stderr  # progress, on stderr
    assert re.search(rf"vs #{baseline} · [^:\n]*: 2 regressions, 0 improvements", out)
    assert "regression gate: FAILED (2 cases regressed)" in out
    compare_url = f"{server.url}/compare/?baseline={baseline}&candidate={candidate}"
    assert f"compare page: {compare_url}" in out
    assert f"run page:     {server.url}/runs/{candidate}/" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("name") == "demo_travel_agent"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("16", "2", "0")
    failed = {c.get("classname") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {"demo_travel_agent/weather_tokyo", "demo_travel_agent/order_status"}
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["compare_url"] == compare_url
    return candidate


def test_the_stdlib_client_gates_ci_without_django_as_a_module_and_as_a_copied_file(server: Server,
                                                                                   tmp_path: Path) -> None:
    vendored = tmp_path / "ci" / "client.py"  # what a team copies into its repository
    vendored.parent.mkdir()
    shutil.copyfile(CLIENT, vendored)
    perfect, regressed = tmp_path / "perfect.json", tmp_path / "regressed.jsonl"
    perfect.write_text(json.dumps(perfect_outputs()))
    regressed.write_text("\n".join(json.dumps(o) for o in regressed_outputs()))

    first = file_cli(vendored, tmp_path, str(DEMO), "--outputs", str(perfect), "--server", server.url,
                     "--token", server.token, "--branch", "main", "--poll", "0.2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "completed: 8 results, 8 passed, 0 failed" in first.stdout
    baseline = _run_id(first.stdout)

    junit = tmp_path / "module-junit.xml"
    second = module_cli(tmp_path, "demo_travel_agent", "--outputs", str(regressed), "--server", server.url,
                        "--baseline", str(baseline), "--fail-on-regression", "--junit", str(junit),
                        "--branch", "feature", "--poll", "0.2", token=server.token)
    assert "non-stdlib modules: []" in second.stderr, second.stderr
    candidate = _assert_regressed(second, server, baseline, junit)
    assert server.api(f"runs/{candidate}/")["branch"] == "feature"

    junit, report = tmp_path / "file-junit.xml", tmp_path / "report.json"
    third = file_cli(vendored, tmp_path, str(DEMO), "--outputs", str(regressed), "--server", server.url,
                     "--baseline", str(baseline), "--fail-on-regression", "--junit", str(junit),
                     "--output-file", str(report), "--poll", "0.2", token=server.token)
    _assert_regressed(third, server, baseline, junit)
    assert "eval set demo_travel_agent v1 (unchanged, 8 cases)" in third.stdout
    assert json.loads(report.read_text())["summary"]["passed_cases"] == 6

    # Known failures allowed and a significance level the eight cases cannot reach: exit 0.
    fourth = module_cli(tmp_path, "demo_travel_agent", "--outputs", str(regressed), "--server", server.url,
                        "--baseline", str(baseline), "--fail-on-regression", "--significance", "0.05",
                        "--regressions-only", "--poll", "0.2", token=server.token)
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert "regression gate: passed (no criterion significantly worse at alpha 0.05" in fourth.stdout


def test_the_client_file_runs_from_a_checkout_and_explains_its_errors(tmp_path: Path) -> None:
    """Run as a file from the checkout (its folder, which holds other modules, is not put first
    on sys.path); without a server or with a bad option it exits 2 before any request."""
    port = _free_port()  # nothing listens there
    helped = file_cli(CLIENT, tmp_path, "--help")
    assert helped.returncode == 0 and "--fail-on-regression" in helped.stdout, helped.stderr
    no_server = file_cli(CLIENT, tmp_path, str(DEMO), "--outputs", str(DEMO))
    assert no_server.returncode == 2 and "error: give --server URL" in no_server.stderr
    missing_source = file_cli(CLIENT, tmp_path, str(DEMO), "--server", f"http://127.0.0.1:{port}")
    assert missing_source.returncode == 2 and "one of the arguments --outputs --target is required" in (
        missing_source.stderr)
    bad_config = tmp_path / "config.json"
    bad_config.write_text("{not json")
    config = file_cli(CLIENT, tmp_path, str(DEMO), "--outputs", str(DEMO), "--server", f"http://127.0.0.1:{port}",
                      "--config", str(bad_config), token="es_x")
    assert config.returncode == 2 and f"error: --config {bad_config}:" in config.stderr
    unreachable = file_cli(CLIENT, tmp_path, str(DEMO), "--outputs", str(DEMO), "--server",
                           f"http://127.0.0.1:{port}", token="es_x")
    assert unreachable.returncode == 2 and f"error: cannot reach http://127.0.0.1:{port}" in unreachable.stderr
    no_token = module_cli(tmp_path, str(DEMO), "--outputs", str(DEMO), "--server", f"http://127.0.0.1:{port}")
    assert no_token.returncode == 2 and "remote mode needs an API token" in no_token.stderr
    assert "non-stdlib modules: []" in no_token.stderr


# --- The CI gate with the default baseline: a regression that landed keeps failing ---------------

GATE_CASES = 60
GATE_WRONG = set(range(2, 56, 2))  # 27 cases


def _gate_evalset(path: Path) -> Path:
    cases = [{"eval_id": f"case_{i:04d}", "conversation": [{
        "invocation_id": "turn_1", "user_content": {"role": "user", "content": f"Look up item {i}"},
        "expected_tool_trajectory": [{"name": "lookup", "args": {"id": i}}],
        "expected_final_response": {"role": "assistant", "content": f"Item {i} is in stock."}}]}
        for i in range(GATE_CASES)]
    path.write_text(json.dumps({"eval_set_id": "gate_sixty", "eval_cases": cases}))
    return path


def _gate_outputs(path: Path, wrong: set[int]) -> Path:
    path.write_text("\n".join(json.dumps({"eval_id": f"case_{i:04d}", "turns": [{
        "invocation_id": "turn_1", "final_response": f"Item {i} is in stock.",
        "tool_calls": [{"name": "lookup", "args": {"id": 0 if i in wrong else i}}]}]}) for i in range(GATE_CASES)))
    return path


def test_a_landed_regression_keeps_failing_the_default_baseline_gate_in_both_clis(server: Server,
                                                                                tmp_path: Path) -> None:
    vendored = tmp_path / "ci" / "client.py"
    vendored.parent.mkdir()
    shutil.copyfile(CLIENT, vendored)
    evalset = _gate_evalset(tmp_path / "gate.evalset.json")
    good = _gate_outputs(tmp_path / "good.jsonl", set())
    bad = _gate_outputs(tmp_path / "bad.jsonl", GATE_WRONG)
    gate = ("--baseline", "default", "--fail-on-regression", "--branch", "main", "--model", "agent",
            "--regressions-only", "--poll", "0.2")

    first = file_cli(vendored, tmp_path, str(evalset), "--outputs", str(good), "--server", server.url, *gate,
                     token=server.token)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "nothing to compare with yet" in first.stdout  # the first run on the set: no baseline
    good_run = _run_id(first.stdout)

    landed = file_cli(vendored, tmp_path, "gate_sixty", "--outputs", str(bad), "--server", server.url, *gate,
                      token=server.token)
    assert landed.returncode == 1, landed.stdout + landed.stderr
    assert re.search(rf"vs #{good_run} · [^:\n]*: 27 regressions", landed.stdout)
    assert "regression gate: FAILED (27 cases regressed)" in landed.stdout
    regressed_run = _run_id(landed.stdout)

    # The same outputs again: the baseline is now the regressed run, and the gate still fails.
    junit = tmp_path / "again.xml"
    again = file_cli(vendored, tmp_path, "gate_sixty", "--outputs", str(bad), "--server", server.url, *gate,
                     "--junit", str(junit), token=server.token)
    assert again.returncode == 1, again.stdout + again.stderr
    assert re.search(rf"vs #{regressed_run} · [^:\n]*: ", again.stdout)
    assert ("regression gate: FAILED (no case regressed, 27 regressions of earlier runs on main still open)"
            in again.stdout)
    assert f"still open: case_0002 (regressed in run {regressed_run} vs run {good_run}, fail here)" in again.stdout
    assert "... and 7 more open regressions" in again.stdout  # 20 listed
    assert ET.parse(junit).getroot().get("failures") == "27"

    # `manage.py eval --server` reads the same answer.
    managed = cli(tmp_path, "gate_sixty", "--outputs", str(bad), "--server", server.url, *gate, token=server.token)
    assert managed.returncode == 1, managed.stdout + managed.stderr
    assert "27 regressions of earlier runs on main still open" in managed.stdout

    # Fixed: the gate passes again; `--baseline pinned` without a pinned run is a note, not a crash.
    fixed = file_cli(vendored, tmp_path, "gate_sixty", "--outputs", str(good), "--server", server.url, *gate,
                     token=server.token)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "regression gate: passed (no case regressed)" in fixed.stdout
    pinned = file_cli(vendored, tmp_path, "gate_sixty", "--outputs", str(good), "--server", server.url,
                      "--baseline", "pinned", "--fail-on-regression", "--poll", "0.2", token=server.token)
    assert pinned.returncode == 0, pinned.stdout + pinned.stderr
    assert "has no pinned baseline run: nothing to compare with yet" in pinned.stdout
