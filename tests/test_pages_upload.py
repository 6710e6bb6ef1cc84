"""The upload page: what a person sees when an import works, repeats itself, or fails."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.interop import reader_names
from evaluations.models import EvalCase, EvalSet, EvalSetSource, EvalSetVersion, Membership, Project
from tests.conftest import DATA

PAGES = DATA / "pages"
UPLOAD = reverse("evalset_upload")


def upload(name: str, data: bytes | None = None) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data if data is not None else (PAGES / name).read_bytes())


def post(client: Client, *files: SimpleUploadedFile, format: str = "") -> Any:
    return client.post(UPLOAD, {"files": list(files), "format": format})


def row_counts() -> tuple[int, int, int, int]:
    return (EvalSet.objects.count(), EvalSetVersion.objects.count(), EvalCase.objects.count(),
            EvalSetSource.objects.count())


def html(response: Any) -> str:
    return response.content.decode()


def test_upload_form_has_a_multiple_file_picker_and_format_choice(acme: Project, alice_client: Client) -> None:
    response = alice_client.get(UPLOAD)
    assert response.status_code == 200
    page = html(response)
    assert 'enctype="multipart/form-data"' in page
    assert 'type="file"' in page and " multiple " in page
    assert "data-dropzone" in page and "/static/js/upload.js" in page
    select = page.split('name="format"', 1)[1].split("</select>", 1)[0]
    assert '<option value="" selected>Auto-detect</option>' in select
    for name in reader_names():
        assert f'value="{name}"' in select


def test_a_native_upload_is_imported_and_summarised(acme: Project, alice: Any, alice_client: Client) -> None:
    response = post(alice_client, upload("weather.evalset.json"))
    assert response.status_code == 200
    page = html(response)
    panel = page.split('class="result-panel"', 1)[1].split("</section>", 1)[0]
    assert "native" in panel and "agentflow" in panel
    assert "Weather Agent Tests" in panel and "weather_agent_v1" in panel
    assert '<dd class="num">3</dd>' in panel
    assert "New version v1 stored" in panel
    evalset = EvalSet.objects.get()
    assert evalset.project == acme
    assert f'href="{reverse("evalset_detail", args=[evalset.pk])}?version=1"' in panel
    assert row_counts() == (1, 1, 3, 1)
    assert evalset.versions.get().created_by == alice


def test_uploading_the_same_content_again_reports_the_existing_version(
    acme: Project, alice_client: Client
) -> None:
    post(alice_client, upload("weather.evalset.json"))
    # Reformatted file, same content: still the same version.
    doc = json.loads((PAGES / "weather.evalset.json").read_bytes())
    response = post(alice_client, upload("renamed.evalset.json", json.dumps(doc, indent=4).encode()))
    assert response.status_code == 200
    page = html(response)
    assert "Identical to existing version 1 — nothing new stored" in page
    assert "New version" not in page
    assert row_counts() == (1, 1, 3, 1)


def test_changed_content_becomes_the_next_version(acme: Project, alice_client: Client) -> None:
    post(alice_client, upload("weather.evalset.json"))
    doc = json.loads((PAGES / "weather.evalset.json").read_bytes())
    doc["eval_cases"] = doc["eval_cases"][:2]
    page = html(post(alice_client, upload("weather.evalset.json", json.dumps(doc).encode())))
    assert "New version v2 stored" in page
    assert EvalSet.objects.get().latest_version.number == 2  # type: ignore[union-attr]


def test_several_files_in_one_upload_give_one_result_each(acme: Project, alice_client: Client) -> None:
    response = post(alice_client, upload("weather.evalset.json"), upload("xss.evalset.json"))
    assert response.status_code == 200
    page = html(response)
    assert "Imported 2 eval sets" in page
    assert page.count('<article class="outcome') == 2
    assert EvalSet.objects.count() == 2


def test_an_explicit_format_is_used(acme: Project, alice_client: Client) -> None:
    response = post(alice_client, upload("weather.evalset.json"), format="native")
    assert response.status_code == 200
    assert EvalSetVersion.objects.get().source_format == "native"


def test_broken_json_says_where_and_writes_nothing(acme: Project, alice_client: Client) -> None:
    response = post(alice_client, upload("broken.evalset.json"))
    assert response.status_code == 400
    page = html(response)
    panel = page.split('class="error-panel"', 1)[1].split("</section>", 1)[0]
    assert "The file is not valid JSON" in panel and "invalid_json" in panel
    assert "broken.evalset.json" in panel
    assert ">5:21<" in panel
    assert "Expecting &#x27;,&#x27; delimiter" in panel
    assert "Nothing was imported" in panel
    # The same problems as plain text, to paste into an issue or a CI log.
    assert "broken.evalset.json:5:21: not valid JSON: Expecting &#x27;,&#x27; delimiter" in panel
    assert row_counts() == (0, 0, 0, 0)


def test_a_file_in_no_known_format_is_refused(acme: Project, alice_client: Client) -> None:
    response = post(alice_client, upload("notes.json"))
    assert response.status_code == 400
    page = html(response)
    assert "No known eval-set format was recognised" in page
    assert "unknown_format" in page
    assert "no eval set found" in page
    assert row_counts() == (0, 0, 0, 0)


def test_schema_problems_name_the_case_and_path(acme: Project, alice_client: Client) -> None:
    doc = {"eval_set_id": "typo", "eval_cases": [{"eval_id": "c1", "conversation": [], "tagz": ["x"]}]}
    response = post(alice_client, upload("typo.evalset.json", json.dumps(doc, indent=1).encode()))
    assert response.status_code == 400
    row = html(response).split('class="table problems"', 1)[1].split("</tr>", 2)[1]
    assert "typo.evalset.json" in row and "c1" in row and "eval_cases[0].tagz" in row
    assert "unknown field" in row


def test_many_problems_end_with_and_n_more(acme: Project, alice_client: Client) -> None:
    doc = {"eval_set_id": "many", "eval_cases": [{"name": f"no id {i}"} for i in range(25)]}
    response = post(alice_client, upload("many.evalset.json", json.dumps(doc).encode()))
    assert response.status_code == 400
    page = html(response)
    rows = page.split('class="table problems"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0].count("<tr>")
    assert rows == 20
    assert "... and 5 more" in page
    assert row_counts() == (0, 0, 0, 0)


def test_an_oversize_file_gets_the_size_limit_message(acme: Project, alice_client: Client, settings: Any) -> None:
    settings.EVALSITE_MAX_UPLOAD_BYTES = 100
    response = post(alice_client, upload("weather.evalset.json"))
    assert response.status_code == 400
    page = html(response)
    assert "The upload is too large" in page
    size = len((PAGES / "weather.evalset.json").read_bytes())
    assert f"the file is {size:,} bytes, over the upload limit of 100 bytes" in page
    assert row_counts() == (0, 0, 0, 0)


def test_an_upload_without_files_is_refused(acme: Project, alice_client: Client) -> None:
    response = alice_client.post(UPLOAD, {"format": ""})
    assert response.status_code == 400
    assert "This field is required" in html(response)


def test_an_unknown_format_choice_is_refused(acme: Project, alice_client: Client) -> None:
    response = post(alice_client, upload("weather.evalset.json"), format="nonsense")
    assert response.status_code == 400
    assert "Select a valid choice" in html(response)
    assert row_counts() == (0, 0, 0, 0)


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_viewer_may_not_upload(acme: Project, method: str) -> None:
    viewer = get_user_model().objects.create_user("vera", password="vera-pass-123")
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    response = client.get(UPLOAD) if method == "get" else post(client, upload("weather.evalset.json"))
    assert response.status_code == 403
    assert row_counts() == (0, 0, 0, 0)


def test_a_project_admin_may_upload(acme: Project) -> None:
    admin = get_user_model().objects.create_user("ada", password="ada-pass-123")
    Membership.objects.create(project=acme, user=admin, role=Membership.Role.ADMIN)
    client = Client()
    client.force_login(admin)
    assert post(client, upload("weather.evalset.json")).status_code == 200
    assert EvalSet.objects.get().project == acme


def test_a_superuser_may_upload_to_any_project(acme: Project) -> None:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    client = Client()
    client.force_login(root)
    assert post(client, upload("weather.evalset.json")).status_code == 200
    assert EvalSet.objects.get().project == acme


def test_a_user_without_projects_may_not_upload(db: None) -> None:
    loner = get_user_model().objects.create_user("lone", password="lone-pass-123")
    client = Client()
    client.force_login(loner)
    assert client.get(UPLOAD).status_code == 403


def test_the_upload_goes_to_the_project_chosen_in_the_switcher(
    acme: Project, globex: Project, alice: Any, alice_client: Client
) -> None:
    Membership.objects.create(project=globex, user=alice, role=Membership.Role.MEMBER)
    alice_client.post(reverse("project_switch"), {"project": globex.pk})
    assert "to Globex" in html(alice_client.get(UPLOAD))
    post(alice_client, upload("weather.evalset.json"))
    assert EvalSet.objects.get().project == globex


def test_an_empty_file_is_named_in_the_answer(acme: Project, alice_client: Client) -> None:
    response = post(alice_client, upload("blank.evalset.json", b""))
    assert response.status_code == 400
    assert "blank.evalset.json: the file is empty" in html(response)
    assert row_counts() == (0, 0, 0, 0)
