"""POST /api/v1/runs/import/ and /api/v1/runs/<id>/rescore/: who may, what comes back, bad files,
and the journey the issue asks for: import DeepEval's results, rescore the same outputs with
evalsite, and compare the two runs on the compare page and in the exports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, EvalSet, Membership, Project, Run, Score
from evaluations.runs import services as runs
from tests.engine_helpers import import_demo

RESULTS = Path(__file__).resolve().parent / "data" / "results"
DEEPEVAL = RESULTS / "deepeval" / "test_run.json"
ADK = RESULTS / "adk" / "travel_demo_travel_agent_1764000130.53.evalset_result.json"


def _post(client: Client, path: Path, data: bytes | None = None, **fields: Any):  # type: ignore[no-untyped-def]
    upload = SimpleUploadedFile(path.name, data if data is not None else path.read_bytes())
    return client.post("/api/v1/runs/import/", {"file": upload, **fields})


@pytest.mark.django_db
def test_a_deepeval_test_run_is_a_201_with_the_completed_run(alice_client: Client) -> None:
    response = _post(alice_client, DEEPEVAL, project="acme")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["run"]["status"] == "completed"
    assert body["run"]["tags"] == ["imported:deepeval"]
    assert body["run"]["target"]["imported"] == "deepeval"
    assert body["rescored"] is None
    run = Run.objects.get(pk=body["run"]["id"])
    assert run.created_by.username == "alice"
    assert Score.objects.filter(run=run, evaluator="imported:deepeval").count() == 5


@pytest.mark.django_db
def test_the_eval_set_is_chosen_by_its_number(alice_client: Client, acme: Project) -> None:
    evalset = import_demo(acme).evalset
    response = _post(alice_client, RESULTS / "uipath" / "results.json", project="acme", evalset=evalset.pk)
    assert response.status_code == 201, response.content
    assert response.json()["run"]["evalset"] == evalset.pk


@pytest.mark.django_db
def test_a_bad_file_is_a_400_naming_file_case_path_and_line_and_writes_nothing(alice_client: Client) -> None:
    doc = json.loads(DEEPEVAL.read_text())
    doc["testCases"][0]["metricsData"][1]["success"] = "yes"
    response = _post(alice_client, DEEPEVAL, json.dumps(doc, indent=2).encode(), project="acme")
    assert response.status_code == 400
    [problem] = response.json()["problems"]
    assert problem["file"] == "test_run.json" and problem["case"] == "test_case_0"
    assert problem["path"] == "testCases[0].metricsData[1].success" and problem["line"] > 1
    assert (Run.objects.count(), EvalSet.objects.count()) == (0, 0)


@pytest.mark.django_db
def test_another_projects_eval_set_or_project_is_a_404(alice_client: Client, globex: Project) -> None:
    evalset = import_demo(globex).evalset
    assert _post(alice_client, ADK, project="globex").status_code == 404
    assert _post(alice_client, ADK, project="acme", evalset=evalset.pk).status_code == 404
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_a_viewer_may_not_import_or_rescore(acme: Project, alice_client: Client) -> None:
    viewer = get_user_model().objects.create_user("vic", "vic@example.com", "vic-pass-12345")
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    assert _post(client, DEEPEVAL, project="acme").status_code == 403
    run_id = _post(alice_client, DEEPEVAL, project="acme").json()["run"]["id"]
    assert client.post(f"/api/v1/runs/{run_id}/rescore/").status_code == 403
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_another_projects_run_cannot_be_rescored(alice_client: Client, bob_client: Client) -> None:
    run_id = _post(alice_client, DEEPEVAL, project="acme").json()["run"]["id"]
    assert bob_client.post(f"/api/v1/runs/{run_id}/rescore/").status_code == 404


@pytest.mark.django_db
def test_a_rescore_of_a_file_without_outputs_is_a_400_and_nothing_is_imported(alice_client: Client,
                                                                               acme: Project) -> None:
    import_demo(acme)
    response = _post(alice_client, RESULTS / "agentflow" / "demo_travel_agent.report.json", project="acme",
                     rescore="true")
    assert response.status_code == 400
    assert "no agent outputs" in json.dumps(response.json())
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_import_then_rescore_then_compare(alice_client: Client, acme: Project) -> None:
    """DeepEval's verdicts and evalsite's, on the same outputs, side by side."""
    body = _post(alice_client, DEEPEVAL, project="acme", rescore="true").json()
    imported = Run.objects.get(pk=body["run"]["id"])
    rescored = Run.objects.get(pk=body["rescored"]["id"])
    assert rescored.target == {"rescored_from": imported.pk}
    rescored = runs.run_execute_here(rescored.pk)
    assert rescored.status == Run.Status.COMPLETED
    # evalsite scored the outputs DeepEval saw, with its own criteria.
    assert Score.objects.filter(run=rescored).exclude(evaluator__startswith="imported:").exists()
    assert not Score.objects.filter(run=rescored, evaluator__startswith="imported:").exists()
    assert (CaseResult.objects.get(run=rescored, case__eval_id="test_case_0").output
            == CaseResult.objects.get(run=imported, case__eval_id="test_case_0").output)
    # A rescore through its own endpoint too.
    again = alice_client.post(f"/api/v1/runs/{imported.pk}/rescore/")
    assert again.status_code == 201 and again.json()["target"] == {"rescored_from": imported.pk}

    page = alice_client.get(reverse("run_detail", args=[imported.pk]))
    assert page.status_code == 200
    assert "deepeval_answer_relevancy" in page.content.decode()
    compare = alice_client.get(f"{reverse('compare')}?candidate={rescored.pk}&baseline={imported.pk}")
    assert compare.status_code == 200
    html = compare.content.decode()
    # DeepEval's criteria and evalsite's side by side; a case DeepEval passed and evalsite fails is a regression.
    assert "deepeval_answer_relevancy" in html and "trajectory_match" in html
    assert "test_case_2" in html
    csv = alice_client.get(f"/api/v1/runs/{imported.pk}/results.csv")
    assert csv.status_code == 200
    text = b"".join(csv.streaming_content).decode() if csv.streaming else csv.content.decode()
    assert "deepeval_tool_correctness" in text and "test_case_1" in text
    # DeepEval's tool correctness, which evalsite computes without a judge, was rescored under its
    # own criterion; its LLM-judged answer relevancy only when asked (it costs judge calls).
    assert Score.objects.filter(run=rescored, criterion="deepeval_tool_correctness",
                                evaluator="deepeval_tool_correctness").exists()
    assert not Score.objects.filter(run=rescored, criterion="deepeval_answer_relevancy").exists()


@pytest.mark.django_db
def test_an_imported_run_is_not_retried_its_scores_are_the_other_tools(alice_client: Client) -> None:
    run_id = _post(alice_client, DEEPEVAL, project="acme").json()["run"]["id"]
    response = alice_client.post(f"/api/v1/runs/{run_id}/retry/", {}, content_type="application/json")
    assert response.status_code == 400
    assert "rescore it with evalsite" in json.dumps(response.json())
    assert Score.objects.filter(run_id=run_id, evaluator="imported:deepeval").count() == 5
    assert Run.objects.get(pk=run_id).status == Run.Status.COMPLETED
