"""One error shape for every API error: unknown URLs, methods, content types, parse errors,
oversize bodies, authentication, CSRF, throttling and unhandled exceptions."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, RequestFactory

from evaluations.api import errors
from evaluations.models import EvalSet, Project, Run, Score
from tests.api_helpers import assert_error, demo_runs
from tests.engine_helpers import import_demo, perfect_outputs


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v2/runs/", "/api/v1/nothing-here/", "/api/v1/runs",
                                  "/api/v1/runs/99999999999999999999/", "/api/v1/runs/12/results/x/", "/api/"])
def test_unknown_api_urls_are_json_404s_not_the_html_page(alice_client: Client, path: str) -> None:
    body = assert_error(alice_client.get(path), 404, "not_found")
    assert path in body["message"]
    if not path.endswith("/"):
        assert body["problems"][0]["message"] == "API paths end with a slash"


@pytest.mark.django_db
def test_an_unknown_page_outside_the_api_is_still_the_html_404(alice_client: Client) -> None:
    response = alice_client.get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_a_method_an_endpoint_does_not_have_is_405(alice_client: Client) -> None:
    assert_error(alice_client.delete("/api/v1/runs/"), 405, "method_not_allowed")
    assert_error(alice_client.put("/api/v1/projects/", data="{}", content_type="application/json"), 405)


@pytest.mark.django_db
def test_a_body_of_an_unsupported_content_type_is_415(alice_client: Client, acme: Project) -> None:
    body = assert_error(alice_client.post("/api/v1/runs/", data="evalset=1", content_type="text/plain"), 415,
                        "unsupported_media_type")
    assert "text/plain" in body["message"]
    assert_error(alice_client.post("/api/v1/evalsets/", data="{}", content_type="application/json"), 415)
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_malformed_json_is_a_400_that_says_where(alice_client: Client, acme: Project) -> None:
    body = assert_error(alice_client.post("/api/v1/runs/", data='{"evalset": 1,\n "outputs": [}',
                                          content_type="application/json"), 400, "parse_error")
    [problem] = body["problems"]
    assert (problem["line"], problem["column"]) == (2, 14)
    for text in ("", "[1, 2", '{"a": NaN}', "\xff\xfe{}", "[" * 100_000):
        assert_error(alice_client.post("/api/v1/runs/", data=text, content_type="application/json"), 400,
                     "parse_error" if text else "invalid")
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_a_json_body_over_the_upload_limit_is_413_and_writes_nothing(alice_client: Client, acme: Project,
                                                                     settings: Any) -> None:
    version = import_demo(acme)
    settings.EVALSITE_MAX_UPLOAD_BYTES = 2000
    payload = json.dumps({"evalset": version.evalset_id, "outputs": perfect_outputs()})
    assert len(payload) > 2000
    body = assert_error(alice_client.post("/api/v1/runs/", data=payload, content_type="application/json"), 413,
                        "too_large")
    assert "2,000 bytes" in body["message"]
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_an_uploaded_file_over_the_limit_is_413_naming_the_file(alice_client: Client, acme: Project,
                                                               settings: Any) -> None:
    settings.EVALSITE_MAX_UPLOAD_BYTES = 100
    big = SimpleUploadedFile("big.evalset.json", b'{"eval_set_id": "x", "eval_cases": []}' + b" " * 200)
    body = assert_error(alice_client.post("/api/v1/evalsets/", {"file": [big], "project": "acme"}), 413, "too_large")
    assert body["problems"][0]["file"] == "big.evalset.json"
    assert EvalSet.objects.count() == 0


@pytest.mark.django_db
def test_authentication_errors_are_401_in_the_shape(acme: Project) -> None:
    response = Client().get("/api/v1/runs/")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Token")
    assert_error(Client(HTTP_AUTHORIZATION="Token es_not-a-token").get("/api/v1/runs/"), 401,
                 "authentication_failed")
    assert_error(Client(HTTP_AUTHORIZATION="Token a b").get("/api/v1/runs/"), 401, "authentication_failed")


@pytest.mark.django_db
def test_a_session_post_without_its_csrf_token_is_403_in_the_shape(alice: Any, acme: Project) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    body = assert_error(client.post("/api/v1/tokens/", data=json.dumps({"name": "x"}),
                                    content_type="application/json"), 403, "permission_denied")
    assert "CSRF" in body["message"]


@pytest.mark.django_db
def test_throttled_requests_are_429_with_retry_after(alice_client: Client, acme: Project, settings: Any) -> None:
    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"api": "2/minute"}}
    try:
        assert alice_client.get("/api/v1/runs/").status_code == 200
        assert alice_client.get("/api/v1/projects/").status_code == 200
        response = alice_client.get("/api/v1/runs/")
        body = assert_error(response, 429, "throttled")
        assert int(response["Retry-After"]) > 0 and "throttled" in body["message"].lower()
    finally:
        cache.clear()


@pytest.mark.django_db
def test_without_a_rate_nothing_is_throttled(alice_client: Client, acme: Project) -> None:
    assert all(alice_client.get("/api/v1/projects/").status_code == 200 for _ in range(30))


@pytest.mark.django_db
def test_an_unhandled_error_is_a_logged_json_500(alice_client: Client, acme: Project,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    _, run = demo_runs(acme)
    # A threshold no evaluator writes: the metric record cannot be rendered.
    Score.objects.filter(run=run).update(threshold={"lower_limit": "high"})
    with caplog.at_level(logging.ERROR, logger="evalsite.api"):
        body = assert_error(alice_client.get(f"/api/v1/runs/{run.pk}/metrics/results/"), 500, "server_error")
    assert "logged" in body["message"] and "high" not in json.dumps(body)
    assert any(r.name == "evalsite.api" and r.exc_info for r in caplog.records)


def test_errors_outside_the_api_views_answer_json_under_api_and_pages_elsewhere() -> None:
    factory = RequestFactory()
    api, page = factory.get("/api/v1/runs/"), factory.get("/runs/")
    response = errors.handler500(api)
    assert response.status_code == 500 and json.loads(response.content)["code"] == "server_error"
    assert errors.handler500(page)["Content-Type"].startswith("text/html")
    from django.core.exceptions import RequestDataTooBig, SuspiciousOperation

    assert errors.handler400(api, RequestDataTooBig("too big")).status_code == 413
    assert json.loads(errors.handler400(api, SuspiciousOperation("odd")).content)["code"] == "bad_request"
    assert errors.handler403(api).status_code == 403
    assert errors.handler404(api).status_code == 404
    assert errors.handler404(page)["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_an_answer_that_accepts_no_json_is_406_in_the_shape(alice_client: Client, acme: Project) -> None:
    assert_error(alice_client.get("/api/v1/runs/", HTTP_ACCEPT="text/html"), 406, "not_acceptable")
    # Downloads also answer what they are: a CSV can be asked for by its type.
    _, run = demo_runs(acme)
    csv = alice_client.get(f"/api/v1/runs/{run.pk}/results.csv", HTTP_ACCEPT="text/csv")
    assert csv.status_code == 200 and csv["Content-Type"].startswith("text/csv")
    assert_error(alice_client.get("/api/v1/runs/999/results.csv"), 404)
