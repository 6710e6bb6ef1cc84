"""The OpenAPI 3 schema (drf-spectacular) and its docs page.

- /api/schema/ is a valid OpenAPI 3 document that lists every /api/v1 endpoint, and every
  operation documents its errors (400/401/403/404, 413 for uploads) with the one error shape;
- the docs page (Swagger UI) is served from local static files only: in real Chromium it
  renders the operations without a single request leaving 127.0.0.1;
- `manage.py spectacular --validate --fail-on-warn` passes.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.validation import validate_schema

METHODS = {"get", "post", "put", "patch", "delete"}


@pytest.fixture(scope="module", autouse=True)
def _allow_async_unsafe() -> Any:
    """playwright's sync API runs an event loop in this thread, and the Chromium test's
    database fixtures run beside it. Only for this module: processes other tests start must
    not inherit it."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    yield
    if before is None:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    else:
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


def _api_paths() -> set[str]:
    """Every /api/v1 URL pattern, in OpenAPI form (`runs/<id:pk>/` -> `/api/v1/runs/{id}/`)."""
    def walk(patterns: list[Any], prefix: str) -> set[str]:
        paths: set[str] = set()
        for p in patterns:
            route = str(p.pattern)
            if isinstance(p, URLResolver):
                paths |= walk(p.url_patterns, prefix + route)
            elif isinstance(p, URLPattern) and (prefix + route).startswith("api/v1/"):
                paths.add("/" + prefix + route)
        return paths

    converted = set()
    for path in walk(get_resolver().url_patterns, ""):
        # drf-spectacular names a `pk` parameter `id`.
        converted.add(re.sub(r"<(?:\w+:)?(\w+)>", lambda m: "{" + ("id" if m[1] == "pk" else m[1]) + "}", path))
    return converted


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(Client().get("/api/schema/").content)
    return body


def test_the_schema_is_valid_openapi_3(schema: dict[str, Any]) -> None:
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # raises on an invalid document
    assert schema["info"]["title"] == "evalsite API"


def test_the_schema_is_public_and_served_as_json_too() -> None:
    response = Client().get("/api/schema/?format=json")
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")
    assert Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]


def test_the_schema_lists_every_api_endpoint(schema: dict[str, Any]) -> None:
    expected = _api_paths()
    assert len(expected) > 30
    assert set(schema["paths"]) == expected


def test_every_operation_documents_its_errors_with_the_error_shape(schema: dict[str, Any]) -> None:
    error_ref = "#/components/schemas/Error"
    error = schema["components"]["schemas"]["Error"]
    assert set(error["required"]) == {"code", "message", "problems", "problem_count"}
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            responses = operation["responses"]
            for status in ("400", "401", "403", "404"):
                assert status in responses, (method, path, status)
                assert responses[status]["content"]["application/json"]["schema"]["$ref"] == error_ref
            assert any(s.startswith("2") for s in responses), (method, path)
            if method in {"post", "patch", "put"} and "requestBody" in operation:
                assert "415" in responses or "compare" in path, (method, path)
    upload = schema["paths"]["/api/v1/evalsets/"]["post"]
    assert "413" in upload["responses"]
    assert "multipart/form-data" in upload["requestBody"]["content"]


def test_request_bodies_and_query_parameters_are_documented(schema: dict[str, Any]) -> None:
    start = schema["paths"]["/api/v1/runs/"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    body = schema["components"]["schemas"][start["$ref"].rsplit("/", 1)[1]]
    assert {"evalset"} <= set(body["required"]) and "outputs" in body["properties"]
    metrics = {p["name"]: p for p in schema["paths"]["/api/v1/runs/{id}/metrics/"]["get"]["parameters"]}
    assert {"level", "node", "name", "include_individual", "individual_limit", "limit", "offset"} <= set(metrics)
    assert metrics["level"]["schema"]["items"]["enum"] == ["conversation", "interaction", "node"]
    assert schema["components"]["securitySchemes"]["tokenAuth"]["in"] == "header"


def test_the_spectacular_command_validates_with_no_warnings(tmp_path: Path) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert yaml.safe_load(out.read_text())["paths"]


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in {"src", "href"} and value:
                self.urls.append(value)


def test_the_docs_page_references_only_local_static_files() -> None:
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    parser = _Assets()
    parser.feed(html)
    assert parser.urls, "the page loads Swagger UI's assets"
    # Its own set-up script comes from the page's URL (?script), not inline: the
    # Content-Security-Policy allows no inline script.
    scripts = [url for url in parser.urls if url.startswith("/api/docs/?")]
    assert len(scripts) == 1 and "<script>" not in html.replace(f'<script src="{scripts[0]}">', "")
    for url in parser.urls:
        assert url.startswith("/static/") or url in scripts, url
        assert Client().get(url).status_code == 200, url
    script = Client().get(scripts[0].replace("&amp;", "&")).content.decode()
    for text in (html, script):
        assert not re.search(r"""["'(]\s*(https?:)?//""", text), "no absolute URL anywhere in the page"
    assert '"validatorUrl": null' in script


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_docs_page_renders_the_api_in_chromium_without_leaving_the_server(live_server: Any,
                                                                              chromium: Any) -> None:
    context = chromium.new_context()
    page = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{live_server.url}/api/docs/")
        page.wait_for_selector("text=/api/v1/runs/{id}/metrics/", timeout=15_000)
        assert page.locator(".opblock").count() > 30
    finally:
        context.close()
    outside = [u for u in requests if not u.startswith(live_server.url) and not u.startswith("data:")]
    assert outside == []
    assert f"{live_server.url}/api/schema/" in requests
    assert errors == []
