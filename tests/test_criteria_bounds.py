"""Issue 38, items 1 and 2: what a member's criterion can make a worker do.

- A `json_schema` criterion whose `$ref` names a URL or a file is refused wherever it is
  saved (a run through the API and the form, an evaluation config, an eval set's own config, a
  monitor created or edited), with the reference named; a real HTTP server on 127.0.0.1 that
  the reference points at records no request. A stored config from before is scored as an
  error that names the reference and holds nothing fetched.
- Patterns and schemas that would explode on an agent's answer finish: RE2 runs what it can
  say in linear time, backtracking stops at its bound and the score says so, and the other
  cases and traces of the batch are scored.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.accounts.tokens import token_create
from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalSet, EvaluationConfig, Monitor, MonitorScore, Project, Run, Score
from evaluations.monitors import scoring
from evaluations.monitors.services import monitor_create
from evaluations.monitors.spec import MonitorSpec
from evaluations.runs import services as runs
from evaluations.schemas.evalset import EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import DATA
from tests.engine_helpers import import_demo, perfect_outputs
from tests.monitor_helpers import agent_trace, spec
from tests.otlp_helpers import post

SECRET = "s3cr3t-value-that-must-never-show"


class _Secrets(BaseHTTPRequestHandler):
    server: SecretServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.hits.append(self.path)
        body = json.dumps({"secret": SECRET}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class SecretServer(ThreadingHTTPServer):
    daemon_threads = True
    hits: list[str]

    @property
    def ref(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/secret.json#/nope"


@pytest.fixture
def secrets() -> Iterator[SecretServer]:
    server = SecretServer(("127.0.0.1", 0), _Secrets)
    server.hits = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def api(alice: Any) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {token_create(user=alice, name='tests').secret}")


def schema_config(schema: Any) -> dict[str, Any]:
    return {"criteria": {"shape": {"evaluator": "json_schema", "threshold": 1.0, "options": {"schema": schema}}}}


def doubling(n: int) -> dict[str, Any]:
    """`$defs` that double through `allOf`: 2^n subschemas applied to one value."""
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for i in range(1, n + 1):
        defs[f"d{i}"] = {"allOf": [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/d{n}"}


def said(response: Any) -> str:
    return response.content.decode()


# --- Refused when saved ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["http", "file"])
def test_a_run_whose_schema_refers_to_a_url_or_file_is_refused_by_the_api(
        acme: Project, api: Client, secrets: SecretServer, kind: str) -> None:
    ref = secrets.ref if kind == "http" else "file:///etc/passwd"
    evalset = import_demo(acme).evalset
    response = api.post("/api/v1/runs/", {"evalset": evalset.pk, "outputs": perfect_outputs(),
                                          "config": schema_config({"$ref": ref})}, content_type="application/json")
    assert response.status_code == 400
    assert ref in said(response) and "is not inside the schema" in said(response)
    assert "criteria.shape.options.schema" in said(response)
    assert Run.objects.count() == 0 and secrets.hits == []


def test_the_new_run_form_refuses_it_with_the_reason(acme: Project, alice_client: Client,
                                                     secrets: SecretServer) -> None:
    version = import_demo(acme)
    response = alice_client.post(reverse("run_new"), {
        "version": version.pk, "config_source": "custom", "target_kind": "demo", "iterations": 1, "warmups": 0,
        "config_json": json.dumps(schema_config({"$ref": secrets.ref}))})
    assert response.status_code == 400
    assert secrets.ref in said(response) and "is not inside the schema" in said(response)
    assert Run.objects.count() == 0 and secrets.hits == []


def test_an_evaluation_config_with_it_is_refused(acme: Project, api: Client, secrets: SecretServer) -> None:
    response = api.post("/api/v1/configs/", {"project": "acme", "name": "strict",
                                             "config": schema_config({"$ref": secrets.ref})},
                        content_type="application/json")
    assert response.status_code == 400 and secrets.ref in said(response)
    assert EvaluationConfig.objects.count() == 0 and secrets.hits == []


def test_an_eval_set_whose_own_config_has_it_is_refused_naming_the_file(
        acme: Project, api: Client, secrets: SecretServer) -> None:
    test_config = {"criteria": {"json_schema": {"threshold": 1.0, "schema": {
        "type": "object", "properties": {"city": {"$ref": secrets.ref}}}}}}
    adk = DATA / "adk" / "with_config" / "checkout.evalset.json"
    response = api.post("/api/v1/evalsets/", {"project": "acme", "file": [
        SimpleUploadedFile(adk.name, adk.read_bytes()),
        SimpleUploadedFile("test_config.json", json.dumps(test_config).encode())]})
    assert response.status_code == 400, said(response)
    problem = response.json()["problems"][0]
    assert problem["file"] == "test_config.json" and secrets.ref in problem["message"]
    assert "criteria.json_schema.options.schema" in problem["message"]
    assert EvalSet.objects.count() == 0 and secrets.hits == []


@pytest.mark.parametrize("kind", ["http", "file"])
def test_a_monitor_is_refused_it_when_created_and_when_edited(
        acme: Project, alice: Any, api: Client, secrets: SecretServer, kind: str) -> None:
    ref = secrets.ref if kind == "http" else "file:///etc/passwd"
    bad = {"shape": {"evaluator": "json_schema", "options": {"schema": {"$ref": ref}}}}
    created = api.post("/api/v1/monitors/", spec(criteria=bad), content_type="application/json")
    assert created.status_code == 400 and ref in said(created) and "criteria.shape.options.schema" in said(created)
    assert not Monitor.objects.exists()
    monitor = monitor_create(project=acme, spec=MonitorSpec.model_validate(spec()), user=alice)
    edited = api.patch(f"/api/v1/monitors/{monitor.pk}/", {"criteria": bad}, content_type="application/json")
    assert edited.status_code == 400 and ref in said(edited)
    monitor.refresh_from_db()
    assert "shape" not in monitor.criteria and secrets.hits == []


def test_a_schema_that_doubles_through_all_of_is_refused_when_saved(api: Client, acme: Project) -> None:
    created = api.post("/api/v1/monitors/", spec(criteria={
        "shape": {"evaluator": "json_schema", "options": {"schema": doubling(19)}}}), content_type="application/json")
    assert created.status_code == 400 and "more than 20,000 subschemas" in said(created)
    loop = api.post("/api/v1/monitors/", spec(criteria={
        "shape": {"evaluator": "json_schema", "options": {"schema": {"allOf": [{"$ref": "#"}]}}}}),
        content_type="application/json")
    assert loop.status_code == 400 and "leads back to itself" in said(loop)
    ok = api.post("/api/v1/monitors/", spec(criteria={
        "shape": {"evaluator": "json_schema", "options": {"schema": doubling(8)}}}), content_type="application/json")
    assert ok.status_code == 201, said(ok)


# --- Stored before: an error when scored, never a fetch ----------------------------------------------


def _run_with(project: Project, config: dict[str, Any], outputs: list[dict[str, Any]]) -> Run:
    """A run created with a harmless config, whose stored config is then replaced by `config`,
    as a run stored before evalsite refused such configs; executed here."""
    version = import_demo(project)
    run = runs.run_create(project=project, version=version, target_kind="uploaded", enqueue=False,
                          config=EvalConfig.model_validate(schema_config({"type": "string"})),
                          outputs=[AgentOutput.model_validate(o) for o in outputs])
    Run.objects.filter(pk=run.pk).update(config=config, criteria_order=list(config["criteria"]))
    return runs.run_execute_here(run.pk)


def test_a_stored_run_config_with_a_remote_reference_scores_an_error_and_fetches_nothing(
        acme: Project, secrets: SecretServer) -> None:
    config = schema_config({"$ref": secrets.ref})
    config["criteria"]["contains_paris"] = {"evaluator": "contains", "options": {"substrings": ["Paris"]}}
    run = _run_with(acme, config, perfect_outputs())
    assert run.status == "completed"
    shape = list(Score.objects.filter(run=run, criterion="shape", applies_to="conversation"))
    assert len(shape) == run.cases_total and all(s.score is None for s in shape)
    assert all(secrets.ref in s.error and "is not inside the schema" in s.error for s in shape)
    assert not Score.objects.filter(run=run, error__contains=SECRET).exists()
    assert Score.objects.filter(run=run, criterion="contains_paris", error="").count() == run.cases_total
    assert secrets.hits == []


def test_a_stored_doubling_schema_is_an_error_when_scored(acme: Project) -> None:
    run = _run_with(acme, schema_config(doubling(19)), perfect_outputs())
    shape = Score.objects.filter(run=run, criterion="shape", applies_to="conversation")
    assert shape.count() == run.cases_total and all("more than 20,000 subschemas" in s.error for s in shape)


def test_an_answer_that_multiplies_a_recursive_schema_stops_at_the_budget_and_the_run_goes_on(acme: Project) -> None:
    """Saved fine (its recursion descends into the value), but each level of nesting of the
    answer doubles the work: 2^30 applications, stopped at 20,000."""
    outputs = perfect_outputs()
    outputs[0]["turns"][-1]["final_response"] = "[" * 30 + "]" * 30
    outputs[1]["turns"][-1]["final_response"] = "[[1]]"
    schema = {"$defs": {"a": {"allOf": [{"items": {"$ref": "#/$defs/a"}}, {"items": {"$ref": "#/$defs/a"}}]}},
              "$ref": "#/$defs/a"}
    config = schema_config(schema)
    config["criteria"]["answered"] = {"evaluator": "json_valid"}
    run = _run_with(acme, config, outputs)
    assert run.status == "completed"
    shape = {s.result.case.eval_id: s for s in Score.objects.filter(
        run=run, criterion="shape", applies_to="conversation").select_related("result__case")}
    stopped = shape[outputs[0]["eval_id"]].error  # at 20,000 keywords, or 1 s on a loaded machine
    assert stopped.startswith("the validation ") and "(evalsite's bound)" in stopped
    assert shape[outputs[1]["eval_id"]].passed is True and shape[outputs[1]["eval_id"]].error == ""
    assert Score.objects.filter(run=run, criterion="answered", error="").count() == run.cases_total


def test_a_stored_monitor_with_a_remote_reference_scores_an_error_and_fetches_nothing(
        acme: Project, alice: Any, secrets: SecretServer) -> None:
    monitor = monitor_create(project=acme, spec=MonitorSpec.model_validate(spec()), user=alice)
    criteria = dict(monitor.criteria, shape={"evaluator": "json_schema", "options": {"schema": {"$ref": secrets.ref}}})
    Monitor.objects.filter(pk=monitor.pk).update(criteria=criteria)
    token = token_create(user=alice, name="agent").secret
    assert post(Client(), agent_trace('{"city": "Paris"}'), token).status_code == 200
    assert scoring.score_traces(list(acme.traces.values_list("pk", flat=True))) == 1
    shape = MonitorScore.objects.get(criterion="shape")
    assert shape.passed is None and secrets.ref in shape.error and SECRET not in shape.error
    assert MonitorScore.objects.get(criterion="mentions_paris").passed is True
    assert secrets.hits == []


def test_a_promptfoo_is_json_schema_is_kept_unscored_and_never_fetched(acme: Project, secrets: SecretServer) -> None:
    config = {"prompts": ["{{q}}"], "providers": ["echo"], "tests": [
        {"vars": {"q": "hi"}, "assert": [{"type": "is-json", "value": {"$ref": secrets.ref}},
                                         {"type": "contains", "value": "city"}]}]}
    [outcome] = evalset_import(project=acme, files=[SourceFile("promptfooconfig.yaml", json.dumps(config).encode())])
    case = outcome.version.cases.get()
    run = runs.run_create(project=acme, version=outcome.version, target_kind="uploaded", enqueue=False, outputs=[
        AgentOutput.model_validate({"eval_id": case.eval_id, "turns": [{"final_response": '{"city": 1}'}]})])
    run = runs.run_execute_here(run.pk)
    scored = {s.criterion: s for s in Score.objects.filter(run=run, applies_to="conversation")}
    # kept unscored: a `not runnable` score the run's notices count, never a verdict from the schema
    assert scored["promptfoo_is_json"].score is None and scored["promptfoo_is_json"].passed is None
    assert "not runnable" in scored["promptfoo_is_json"].error
    assert scored["promptfoo_contains"].passed is True
    assert secrets.hits == []


# --- Patterns on hostile answers: bounded, recorded, and the batch goes on ---------------------------

BACKTRACKING = r"(?=(a|aa)+$)"  # a lookahead: only backtracking runs it, and on a's and a bang it explodes
EXPLODING_IN_RE = r"(a+)+$"  # 9.8 s on 25 characters with `re`; linear with RE2
HOSTILE = "a" * 60 + "!"


def test_catastrophic_patterns_in_a_run_finish_with_the_bound_recorded_and_the_other_cases_scored(
        acme: Project) -> None:
    outputs = perfect_outputs()
    outputs[0]["turns"][-1]["final_response"] = HOSTILE
    outputs[1]["turns"][-1]["final_response"] = "aaaa"
    version = import_demo(acme)
    config = EvalConfig.model_validate({"criteria": {
        "backtracking": {"evaluator": "regex_match", "threshold": 1.0, "options": {"pattern": BACKTRACKING}},
        "linear": {"evaluator": "regex_match", "threshold": 1.0, "options": {"pattern": EXPLODING_IN_RE}}}})
    run = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False, config=config,
                          outputs=[AgentOutput.model_validate(o) for o in outputs])
    run = runs.run_execute_here(run.pk)
    assert run.status == "completed"
    scores = {(s.result.case.eval_id, s.criterion): s
              for s in Score.objects.filter(run=run, applies_to="conversation").select_related("result__case")}
    hostile, matching = outputs[0]["eval_id"], outputs[1]["eval_id"]
    assert scores[hostile, "backtracking"].score is None
    assert "did not finish within 0.5 s" in scores[hostile, "backtracking"].error
    assert scores[hostile, "linear"].error == "" and scores[hostile, "linear"].passed is False
    assert scores[matching, "backtracking"].passed is True and scores[matching, "linear"].passed is True
    others = [o["eval_id"] for o in outputs[2:]]
    assert all(scores[e, c].error == "" and scores[e, c].score == 0.0 for e in others for c in ("backtracking", "linear"))


def test_catastrophic_patterns_in_a_monitor_finish_with_the_bound_recorded(acme: Project, alice: Any) -> None:
    monitor_create(project=acme, user=alice, spec=MonitorSpec.model_validate(spec(criteria={
        "backtracking": {"evaluator": "regex_match", "options": {"pattern": BACKTRACKING}},
        "linear": {"evaluator": "regex_match", "options": {"pattern": EXPLODING_IN_RE}},
        "schema": {"evaluator": "json_schema", "options": {"schema": {"type": "string", "pattern": BACKTRACKING}}},
    })))
    token = token_create(user=alice, name="agent").secret
    for answer in (json.dumps(HOSTILE), json.dumps(HOSTILE + "!"), "aaaa"):  # JSON strings for the schema
        assert post(Client(), agent_trace(answer), token).status_code == 200
    assert scoring.score_traces(list(acme.traces.order_by("pk").values_list("pk", flat=True))) == 3
    results = list(MonitorScore.objects.filter(criterion="backtracking").order_by("result__trace_id"))
    assert ["did not finish within 0.5 s" in s.error for s in results] == [True, True, False]
    assert results[2].passed is True
    schema = list(MonitorScore.objects.filter(criterion="schema").order_by("result__trace_id"))
    assert ["did not finish within 0.5 s" in s.error for s in schema] == [True, True, False]
    assert schema[2].passed is False  # "aaaa" is no JSON
    linear = list(MonitorScore.objects.filter(criterion="linear").order_by("result__trace_id"))
    assert [(s.error, s.passed) for s in linear] == [("", False), ("", False), ("", True)]
