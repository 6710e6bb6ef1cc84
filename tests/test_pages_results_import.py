"""The results-import page (/runs/import/) and its "Rescore with evalsite" button."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.models import Membership, Project, Run
from tests.engine_helpers import import_demo

RESULTS = Path(__file__).resolve().parent / "data" / "results"
DEEPEVAL = RESULTS / "deepeval" / "test_run.json"


def _post(client: Client, name: str, data: bytes, **fields: object):  # type: ignore[no-untyped-def]
    return client.post(reverse("results_import"), {"file": SimpleUploadedFile(name, data), **fields})


@pytest.mark.django_db
def test_the_page_offers_the_projects_eval_sets(alice_client: Client, acme: Project) -> None:
    evalset = import_demo(acme).evalset
    page = alice_client.get(reverse("results_import"))
    assert page.status_code == 200
    assert f'<option value="{evalset.pk}">' in page.content.decode()
    assert reverse("results_import") in alice_client.get(reverse("evalset_upload")).content.decode()


@pytest.mark.django_db
def test_an_import_shows_the_run_and_the_rescore_button_which_queues_a_run(alice_client: Client) -> None:
    page = _post(alice_client, "test_run.json", DEEPEVAL.read_bytes())
    assert page.status_code == 200
    run = Run.objects.get()
    html = page.content.decode()
    assert reverse("run_detail", args=[run.pk]) in html and "Rescore with evalsite" in html
    response = alice_client.post(reverse("run_rescore", args=[run.pk]))
    rescored = Run.objects.exclude(pk=run.pk).get()
    assert response.status_code == 302 and response["Location"] == reverse("run_detail", args=[rescored.pk])
    assert rescored.target == {"rescored_from": run.pk}


@pytest.mark.django_db
def test_a_bad_file_is_a_400_with_the_problem_table_escaped(alice_client: Client) -> None:
    doc = json.loads(DEEPEVAL.read_text())
    doc["testCases"][0]["name"] = "<script>x</script>"
    doc["testCases"][0]["success"] = "no"
    page = _post(alice_client, "bad.json", json.dumps(doc, indent=2).encode())
    assert page.status_code == 400
    html = page.content.decode()
    assert "testCases[0].success" in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert "<script>x</script>" not in html
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_viewers_may_not_import_and_others_runs_are_not_found(acme: Project, alice_client: Client,
                                                               bob_client: Client) -> None:
    viewer = get_user_model().objects.create_user("vic", "vic@example.com", "vic-pass-12345")
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    assert client.get(reverse("results_import")).status_code == 403
    _post(alice_client, "test_run.json", DEEPEVAL.read_bytes())
    run = Run.objects.get()
    assert client.post(reverse("run_rescore", args=[run.pk])).status_code == 403
    assert bob_client.post(reverse("run_rescore", args=[run.pk])).status_code == 404
    assert Run.objects.count() == 1


@pytest.mark.django_db
def test_the_run_page_of_an_import_with_outputs_offers_the_rescore(alice_client: Client, acme: Project) -> None:
    import_demo(acme)
    _post(alice_client, "test_run.json", DEEPEVAL.read_bytes())
    report = RESULTS / "agentflow" / "demo_travel_agent.report.json"
    _post(alice_client, report.name, report.read_bytes())
    deepeval, agentflow = Run.objects.order_by("pk")
    page = alice_client.get(reverse("run_detail", args=[deepeval.pk])).content.decode()
    assert reverse("run_rescore", args=[deepeval.pk]) in page
    page = alice_client.get(reverse("run_detail", args=[agentflow.pk])).content.decode()
    assert "Rescore with evalsite" not in page and "trajectory_match" in page
