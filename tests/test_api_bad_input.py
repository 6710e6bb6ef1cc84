"""Bad input through the API: wrong types, missing fields, oversize bodies, unknown ids,
other projects' ids, malformed JSON and wrong content types. Every one is a 4xx in the error
shape (never a 500), and nothing is written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evaluations.models import Membership, Project, Triage
from tests.api_helpers import assert_error, demo_runs, member, token_client
from tests.engine_helpers import perfect_outputs

HUGE = 10**20  # beyond any 64-bit id column


def _counts() -> dict[str, int]:
    """Rows of every evalsite model (and users): what 'nothing written' compares."""
    models = list(apps.get_app_config("evaluations").get_models())
    from django.contrib.auth import get_user_model

    return {m.__name__: m.objects.count() for m in [*models, get_user_model()]}


@pytest.fixture
def world(acme: Project, globex: Project, alice: Any, bob: Any) -> dict[str, Any]:
    base, run = demo_runs(acme)
    triage = Triage.objects.create(project=acme, evalset=run.evalset_version.evalset, eval_id="weather_tokyo",
                                   baseline=base, candidate=run)
    _, other_run = demo_runs(globex)
    admin = member("dave", acme, Membership.Role.ADMIN)
    return {"base": base, "run": run, "evalset": run.evalset_version.evalset_id, "triage": triage,
            "other_run": other_run, "other_evalset": other_run.evalset_version.evalset_id,
            "other_triage": Triage.objects.create(project=globex, evalset=other_run.evalset_version.evalset,
                                                  eval_id="weather_tokyo", baseline=other_run, candidate=other_run),
            "alice": token_client(alice), "admin": token_client(admin),
            "carol_membership": member("carol", acme, Membership.Role.VIEWER).memberships.get().pk}


def _json(client: Client, method: str, url: str, payload: Any) -> Any:
    return getattr(client, method)(url, data=payload if isinstance(payload, str) else json.dumps(payload),
                                   content_type="application/json")


# (method, url, payload, expected status, a fragment the error names)
def _cases(w: dict[str, Any]) -> list[tuple[str, str, Any, int, str]]:
    run, base, evalset = w["run"].pk, w["base"].pk, w["evalset"]
    triage = w["triage"].pk
    outputs = perfect_outputs()[:1]
    return [
        # Starting runs: types, missing fields, unknown and foreign ids, bad nested values.
        ("post", "/api/v1/runs/", {}, 400, "evalset"),
        ("post", "/api/v1/runs/", {"evalset": "seven", "outputs": outputs}, 400, "evalset"),
        ("post", "/api/v1/runs/", {"evalset": HUGE, "outputs": outputs}, 400, "evalset"),
        ("post", "/api/v1/runs/", {"evalset": -1, "outputs": outputs}, 400, "evalset"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": "all of them"}, 400, "outputs"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": [{"eval_id": "weather_tokyo", "iteration": HUGE}]}, 400,
         "iteration"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": [{"turns": []}]}, 400, "eval_id"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "tags": "nightly"}, 400, "tags"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "iterations": 1000}, 400, "iterations"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "target_kind": "ftp"}, 400,
         "target_kind"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "version": 99}, 400, "version"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "preset": 12345}, 404, "not_found"),
        ("post", "/api/v1/runs/", {"evalset": evalset, "outputs": outputs, "config": {"criteria": []}}, 400,
         "config"),
        ("post", "/api/v1/runs/", {"evalset": 123456, "outputs": outputs}, 404, "not_found"),
        ("post", "/api/v1/runs/", {"evalset": w["other_evalset"], "outputs": outputs}, 404, "not_found"),
        ("post", "/api/v1/runs/", [1, 2, 3], 400, "JSON object"),
        ("post", "/api/v1/runs/", '{"evalset": ', 400, "parse_error"),
        ("post", "/api/v1/runs/", "null", 400, "JSON object"),
        # Saved configs.
        ("post", "/api/v1/configs/", {"project": "acme", "name": "x", "config": "strict"}, 400, "config"),
        ("post", "/api/v1/configs/", {"project": "acme", "config": {}}, 400, "name"),
        ("post", "/api/v1/configs/", {"project": "globex", "name": "x", "config": {}}, 404, "not_found"),
        ("post", "/api/v1/configs/", {"project": "a b", "name": "x", "config": {}}, 400, "project"),
        # Triage and comments.
        ("post", "/api/v1/triage/", {"candidate": run, "baseline": base, "eval_id": ["weather_tokyo"]}, 400,
         "eval_id"),
        ("post", "/api/v1/triage/", {"candidate": w["other_run"].pk, "baseline": base, "eval_id": "weather_tokyo"},
         404, "not_found"),
        ("post", "/api/v1/triage/", {"candidate": run, "baseline": w["other_run"].pk, "eval_id": "weather_tokyo"},
         404, "not_found"),
        ("patch", f"/api/v1/triage/{triage}/", {"status": 3}, 400, "status"),
        ("patch", f"/api/v1/triage/{w['other_triage'].pk}/", {"status": "fixed"}, 404, "not_found"),
        ("post", f"/api/v1/triage/{triage}/comments/", {"body": ""}, 400, "body"),
        ("post", f"/api/v1/triage/{triage}/comments/", {"body": "   "}, 400, "body"),
        ("post", f"/api/v1/triage/{triage}/comments/", {"body": "x" * 10_001}, 400, "body"),
        ("post", f"/api/v1/triage/{triage}/comments/", {"body": "hi", "parent": 987654}, 400, "parent"),
        ("post", f"/api/v1/triage/{triage}/comments/", {"body": "hi", "parent": "first"}, 400, "parent"),
        ("post", f"/api/v1/triage/{w['other_triage'].pk}/comments/", {"body": "hi"}, 404, "not_found"),
        # Tokens: a token never creates one, whatever it sends (bad names: the session test below).
        ("post", "/api/v1/tokens/", {"name": "ok"}, 403, "session"),
        ("post", "/api/v1/tokens/", {"name": ""}, 403, "session"),
        ("post", f"/api/v1/tokens/{HUGE}/revoke/", {}, 404, "not_found"),
        # Unknown ids everywhere.
        ("post", "/api/v1/runs/424242/cancel/", {}, 404, "not_found"),
        ("post", f"/api/v1/runs/{w['other_run'].pk}/retry/", {}, 404, "not_found"),
        ("post", f"/api/v1/runs/{w['other_run'].pk}/pin/", {}, 404, "not_found"),
    ]


@pytest.mark.django_db
def test_bad_writes_are_4xx_in_the_error_shape_and_write_nothing(world: dict[str, Any]) -> None:
    before = _counts()
    for method, url, payload, status, fragment in _cases(world):
        response = _json(world["alice"], method, url, payload)
        body = assert_error(response, status)
        assert fragment in json.dumps(body), (method, url, payload, body)
    assert _counts() == before


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["", "x" * 101, {"a": 1}])
def test_a_bad_token_name_from_a_session_is_400_and_writes_nothing(alice: Any, alice_client: Client, name: Any) -> None:
    body = assert_error(_json(alice_client, "post", "/api/v1/tokens/", {"name": name}), 400)
    assert "name" in json.dumps(body)
    assert not apps.get_model("evaluations", "ApiToken").objects.exists()


@pytest.mark.django_db
def test_bad_admin_writes_are_4xx_and_write_nothing(world: dict[str, Any]) -> None:
    admin, carol = world["admin"], world["carol_membership"]
    before = _counts()
    for method, url, payload, status in [
        ("post", "/api/v1/projects/acme/members/", {"user": ["erin"], "role": "viewer"}, 400),
        ("post", "/api/v1/projects/acme/members/", {"user": "bob"}, 400),
        ("post", "/api/v1/projects/globex/members/", {"user": "bob", "role": "viewer"}, 404),
        ("patch", f"/api/v1/projects/acme/members/{carol}/", {"role": None}, 400),
        ("patch", f"/api/v1/projects/acme/members/{carol}/", {"role": "boss"}, 400),
        ("patch", f"/api/v1/projects/globex/members/{carol}/", {"role": "admin"}, 404),
        ("delete", f"/api/v1/projects/acme/members/{HUGE}/", None, 404),
        ("patch", "/api/v1/projects/acme/members/999999/", {"role": "admin"}, 404),
    ]:
        response = admin.delete(url) if method == "delete" else _json(admin, method, url, payload)
        assert_error(response, status)
    assert _counts() == before


@pytest.mark.django_db
def test_bad_uploads_are_4xx_and_write_nothing(world: dict[str, Any], settings: Any) -> None:
    client = world["alice"]
    before = _counts()

    def upload(name: str, data: bytes, **fields: Any) -> Any:
        return client.post("/api/v1/evalsets/", {"file": [SimpleUploadedFile(name, data)], **fields})

    assert_error(upload("x.json", b"{not json", project="acme"), 400, "invalid_json")
    assert_error(upload("x.json", b'{"eval_set_id": "x", "eval_cases": [{"eval_id": 5}]}', project="acme"), 400)
    assert_error(upload("x.json", b"[]", project="acme"), 400)
    assert_error(upload("x.evalset.json", b'{"eval_set_id": "x"}', project="globex"), 404, "not_found")
    assert_error(upload("x.evalset.json", b'{"eval_set_id": "x"}', project="acme", format="excel"), 400)
    assert_error(client.post("/api/v1/evalsets/", {"project": "acme"}), 400, "invalid")
    settings.EVALSITE_MAX_UPLOAD_BYTES = 50
    assert_error(upload("x.evalset.json", b" " * 51, project="acme"), 413, "too_large")
    outputs = SimpleUploadedFile("outputs.json", json.dumps(perfect_outputs()).encode())
    assert_error(client.post("/api/v1/runs/", {"evalset": world["evalset"], "outputs_file": outputs}), 413,
                 "too_large")
    assert _counts() == before


@pytest.mark.django_db
def test_bad_query_parameters_are_400_never_500(world: dict[str, Any]) -> None:
    client, run, evalset = world["alice"], world["run"].pk, world["evalset"]
    for url in [
        "/api/v1/runs/?evalset=-3", f"/api/v1/runs/?evalset={HUGE}", "/api/v1/runs/?created_before=31/12/2024",
        f"/api/v1/runs/{run}/results/?status=great", f"/api/v1/runs/{run}/results/?passed=maybe",
        f"/api/v1/runs/{run}/metrics/?level=galaxy", f"/api/v1/runs/{run}/metrics/?individual_limit=0",
        f"/api/v1/runs/{run}/metrics/?include_individual=perhaps", f"/api/v1/runs/{run}/wide/?status=x",
        f"/api/v1/evalsets/{evalset}/trend/?offset=-1", f"/api/v1/triage/?candidate={HUGE}",
        "/api/v1/triage/?status=closed", "/api/v1/review/?tab=everything", "/api/v1/review/?page=0",
        "/api/v1/evalsets/?project=a%20b",
    ]:
        assert_error(client.get(url), 400, "invalid")
    # Paging values out of range fall back rather than fail (DRF's limit/offset).
    assert client.get("/api/v1/runs/?limit=abc&offset=-5").status_code == 200
    assert client.get(f"/api/v1/runs/?offset={HUGE}").json()["results"] == []


@pytest.mark.django_db
def test_numbers_beyond_any_column_are_400_never_500(world: dict[str, Any]) -> None:
    """Found by schemathesis: `GET /api/v1/experiments/?evalset=18446744073709551615` answered 500
    (SQLite cannot bind it). Every id, page and count a request can carry is bounded where it is
    read; nothing is written."""
    from tests.monitor_helpers import spec

    client, admin = world["alice"], world["admin"]
    runs = f"{world['base'].pk},{world['run'].pk}"
    for big in (HUGE, 2**64 - 1, 2**63):
        for url in [f"/api/v1/experiments/?evalset={big}", f"/api/v1/compare/runs/?runs={runs}&page={big}"]:
            assert_error(client.get(url), 400, "invalid")
    from evaluations.models import Trace

    trace = Trace.objects.create(project=world["run"].project, trace_id="ab" * 16, received=True, name="agent",
                                 span_count=0)
    before = _counts()
    writes: list[tuple[Client, str, dict[str, Any], str]] = [
        (client, "/api/v1/experiments/", {"evalset": 2**64 - 1, "name": "x", "variants": []}, "evalset"),
        (client, "/api/v1/monitors/", spec(idle_seconds=2**64 - 1), "idle_seconds"),
        (admin, "/api/v1/projects/acme/notify/rules/", {"name": "r", "kind": "run_finished", "window_minutes": 2**64},
         "window_minutes"),
        (admin, "/api/v1/projects/acme/notify/rules/", {"name": "r", "kind": "run_finished", "min_count": 2**64},
         "min_count"),
        (admin, "/api/v1/projects/acme/notify/rules/", {"name": "r", "kind": "run_finished", "cooldown_minutes": 2**64},
         "cooldown_minutes"),
        (admin, "/api/v1/projects/acme/notify/rules/", {"name": "r", "kind": "run_finished", "evalset": 2**64},
         "evalset"),
        (admin, "/api/v1/projects/acme/notify/rules/", {"name": "r", "kind": "run_finished", "monitor_id": 2**64},
         "monitor_id"),
        (admin, "/api/v1/projects/acme/notify/rules/", {"name": "r", "kind": "run_finished", "channels": [2**64]},
         "channels"),
        (client, f"/api/v1/traces/{trace.pk}/promote/", {"evalset": 2**64, "base_version": 2**64}, "evalset"),
    ]
    for who, url, payload, field in writes:
        body = assert_error(_json(who, "post", url, payload), 400)
        assert field in json.dumps(body), (url, body)
    assert _counts() == before
