"""Experiments: an eval set and 2-8 variants of a model target started together through the
API and the page, executed against a scripted model on 127.0.0.1, landing on the N-way
comparison; bad variants refused with where, creating nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluations.models import AuditEvent, Experiment, ExperimentVariant, Project, Run
from evaluations.prompts.services import prompt_create, prompt_version_save
from evaluations.runs import services as runs
from evaluations.runs.experiments import experiment_start
from evaluations.schemas.model_target import ExperimentSpec
from tests.llm_server import FakeLLM
from tests.model_helpers import ScriptedAgent, demo_with_results, import_with_results

pytestmark = pytest.mark.django_db


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        server.responder = ScriptedAgent(demo_with_results(), sloppy={"sloppy-model": {"weather_tokyo",
                                                                                       "order_status"}})
        yield server


def post(client: Client, body: dict[str, Any]) -> Any:
    return client.post("/api/v1/experiments/", data=json.dumps(body), content_type="application/json")


def test_an_experiment_starts_one_run_per_variant_together_and_lands_on_the_comparison(
        alice_client: Client, acme: Project, alice: Any, llm: FakeLLM, django_capture_on_commit_callbacks: Any) -> None:
    version = import_with_results(acme)
    saved = prompt_create(project=acme, name="travel", system="Help with travel.", user="{{input}}", actor=alice)
    prompt_version_save(prompt=saved.prompt, system="Help with travel. Be brief.", user="{{input}}", actor=alice)
    body = {"evalset": version.evalset_id, "name": "models and prompts",
            "base": {"base_url": llm.url, "max_steps": 5, "prompt": {"system": "Plain.", "user": "{{input}}"}},
            "variants": [{"model": "good-model"},
                         {"model": "sloppy-model", "parameters": {"temperature": 0.7}},
                         {"model": "good-model", "prompt": {"prompt_id": saved.prompt.pk, "version": 2}}]}
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = post(alice_client, body)
    assert response.status_code == 201, response.content
    answer = response.json()
    assert len(callbacks) == 3  # every run queued once the one transaction commits
    ids = [r["id"] for r in answer["runs"]]
    assert answer["compare_url"] == "/compare/runs/?runs=" + "%2C".join(map(str, ids))
    assert [r["label"] for r in answer["runs"]] == ["good-model", "temperature 0.7", "travel v2"]
    assert answer["comparable"] is False and {r["status"] for r in answer["runs"]} == {"queued"}

    created = list(Run.objects.filter(pk__in=ids).order_by("pk"))
    assert len({(r.evalset_version_id, json.dumps(r.config, sort_keys=True), r.iterations) for r in created}) == 1
    assert all(f"experiment:{answer['id']}" in r.tags for r in created)
    assert len({json.dumps(r.target["tools"], sort_keys=True) for r in created}) == 1  # inferred once, shared
    assert created[2].target["prompt"]["system"] == "Help with travel. Be brief."
    assert created[1].target["temperature"] == 0.7
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.EXPERIMENT_STARTED).count() == 1

    for run_id in ids:
        runs.run_execute_here(run_id)
    detail = alice_client.get(f"/api/v1/experiments/{answer['id']}/").json()
    assert detail["comparable"] is True
    assert [r["cases_done"] for r in detail["runs"]] == [8, 8, 8]
    pass_rates = [Run.objects.get(pk=pk).summary["criteria"]["trajectory_match"]["pass_rate"] for pk in ids]
    assert pass_rates == [pytest.approx(1.0), pytest.approx(0.75), pytest.approx(1.0)]
    models = {r.body["model"] for r in llm.requests}
    assert models == {"good-model", "sloppy-model"}

    page = alice_client.get(answer["compare_url"])
    assert page.status_code == 200
    text = page.content.decode()
    assert all(f"#{pk}" in text for pk in ids)
    # the status block, polled by the experiment page, sends the browser on once all completed
    status = alice_client.get(f"/experiments/{answer['id']}/status/?land=1", HTTP_HX_REQUEST="true")
    assert status["HX-Redirect"] == answer["compare_url"]
    assert alice_client.get(f"/experiments/{answer['id']}/status/", HTTP_HX_REQUEST="true").get("HX-Redirect") is None


def test_bad_variants_are_refused_naming_them_and_nothing_is_created(alice_client: Client, acme: Project,
                                                                     llm: FakeLLM) -> None:
    version = import_with_results(acme)
    base = {"base_url": llm.url}
    cases = [
        ({"variants": [{"model": "a"}]}, "variants", "at least 2"),
        ({"variants": [{"model": "a"}, {"model": "b", "parameters": {"tools": []}}]}, "variants.1.parameters",
         "a variant cannot set tools"),
        ({"variants": [{"model": "a"}, {"model": "b", "prompt": {"prompt_id": 404}}]}, "variants[1]",
         "no prompt 404 in this project"),
        ({"variants": [{"model": "a"}, {}]}, "variants[1]", "target.model: Field required"),
        ({"variants": [{"model": "a"}, {"model": "b", "parameters": {"temperature": 9}}]}, "variants[1]",
         "target.temperature"),
        ({"variants": [{"model": "a"}] * 9}, "variants", "no more than 8"),
    ]
    for extra, path, message in cases:
        response = post(alice_client, {"evalset": version.evalset_id, "base": base, **extra})
        assert response.status_code == 400, (extra, response.content)
        problem = response.json()["problems"][0]
        assert problem["path"].startswith(path) and message in problem["message"], (extra, problem)
    refused = post(alice_client, {"evalset": version.evalset_id, "base": {"base_url": "http://169.254.169.254/v1"},
                                  "variants": [{"model": "a"}, {"model": "b"}]})
    assert refused.status_code == 400 and "base_url is refused" in refused.json()["message"]
    assert not Experiment.objects.exists() and not Run.objects.exists()


def test_the_experiment_page_starts_an_experiment_from_the_form(alice_client: Client, acme: Project, alice: Any,
                                                               llm: FakeLLM) -> None:
    version = import_with_results(acme)
    saved = prompt_create(project=acme, name="travel", system="Travel.", user="{{input}}", actor=alice)
    form = alice_client.get(f"/experiments/new/?prompt={saved.prompt.pk}")
    assert form.status_code == 200
    assert f'value="{saved.prompt.pk}:1" selected' in form.content.decode()
    fields = {"evalset": str(version.evalset_id), "name": "from the page", "base_url": llm.url, "api_key_env": "",
              "max_steps": "6", "system": "Plain.", "user": "{{input}}",
              "v0-model": "good-model", "v0-prompt": f"{saved.prompt.pk}:1",
              "v1-model": "sloppy-model", "v1-temperature": "0.5", "v1-max_tokens": "300"}
    bad = alice_client.post("/experiments/new/", {**fields, "v1-temperature": "warm"})
    assert bad.status_code == 400 and "variant 2 temperature: &#x27;warm&#x27; is not a number" in bad.content.decode()
    missing = alice_client.post("/experiments/new/", {**fields, "v2-label": "no model here"})
    assert missing.status_code == 400 and "variant 3: give its model" in missing.content.decode()
    for choice in ("³:1", f"{saved.prompt.pk}:①", f"{saved.prompt.pk}:0", "latest"):  # never dropped in silence
        unread = alice_client.post("/experiments/new/", {**fields, "v0-prompt": choice})
        assert unread.status_code == 400, choice
        assert "variant 1 prompt: choose one of the listed prompt versions" in unread.content.decode()
    assert not Experiment.objects.exists()
    started = alice_client.post("/experiments/new/", fields)
    experiment = Experiment.objects.get()
    assert started.status_code == 302 and started["Location"] == f"/experiments/{experiment.pk}/?land=1"
    variants = list(ExperimentVariant.objects.filter(experiment=experiment).select_related("run"))
    assert [(v.model, v.parameters) for v in variants] == [("good-model", {}),
                                                           ("sloppy-model", {"temperature": 0.5, "max_tokens": 300})]
    assert variants[0].run is not None and variants[0].run.target["prompt"]["prompt_id"] == saved.prompt.pk
    page = alice_client.get(started["Location"]).content.decode()
    assert 'hx-trigger="every 2s"' in page and "goes on to the comparison" in page


def test_the_experiment_pages_queries_do_not_grow_with_variants(alice_client: Client, acme: Project,
                                                               llm: FakeLLM) -> None:
    version = import_with_results(acme)

    def start(n: int) -> Experiment:
        spec = ExperimentSpec.model_validate({"base": {"base_url": llm.url},
                                              "variants": [{"model": f"m{i}"} for i in range(n)]})
        return experiment_start(project=acme, version=version, spec=spec).experiment

    small, large = start(2), start(8)

    def count(url: str) -> int:
        alice_client.get(url)
        with CaptureQueriesContext(connection) as queries:
            assert alice_client.get(url).status_code == 200
        return len(queries)

    assert count(f"/experiments/{small.pk}/") == count(f"/experiments/{large.pk}/")
    assert count(f"/api/v1/experiments/{small.pk}/") == count(f"/api/v1/experiments/{large.pk}/")
    assert "#" + str(large.pk) in alice_client.get("/experiments/").content.decode()


def test_another_projects_experiment_is_a_404(bob_client: Client, acme: Project, llm: FakeLLM) -> None:
    version = import_with_results(acme)
    spec = ExperimentSpec.model_validate({"base": {"base_url": llm.url}, "variants": [{"model": "a"}, {"model": "b"}]})
    experiment = experiment_start(project=acme, version=version, spec=spec).experiment
    assert bob_client.get(f"/experiments/{experiment.pk}/").status_code == 404
    assert bob_client.get(f"/api/v1/experiments/{experiment.pk}/").status_code == 404
    assert post(bob_client, {"evalset": version.evalset_id, "base": {"base_url": llm.url},
                             "variants": [{"model": "a"}, {"model": "b"}]}).status_code == 404
