"""Projects, members, activity, API tokens and pinning a baseline through the API, with the
members page's rules: everyone in a project sees who is in it, only admins change it, a
project keeps an admin, and another project is 404."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from evaluations.models import ApiToken, AuditEvent, EvalSet, Membership, Project
from tests.api_helpers import assert_error, demo_runs, member, token_client


def _post(client: Client, url: str, data: dict[str, Any] | None = None) -> Any:
    return client.post(url, data=json.dumps(data or {}), content_type="application/json")


@pytest.fixture
def dave(acme: Project) -> Any:
    return member("dave", acme, Membership.Role.ADMIN)


@pytest.mark.django_db
def test_projects_list_yours_with_your_role(alice_client: Client, acme: Project, globex: Project) -> None:
    body = alice_client.get("/api/v1/projects/").json()
    assert [(p["slug"], p["role"]) for p in body["results"]] == [("acme", "member")]
    assert alice_client.get("/api/v1/projects/acme/").json()["name"] == "Acme"
    assert_error(alice_client.get("/api/v1/projects/globex/"), 404, "not_found")
    assert_error(alice_client.get("/api/v1/projects/globex/members/"), 404)


@pytest.mark.django_db
def test_a_superuser_is_admin_of_every_project(acme: Project, globex: Project) -> None:
    from django.contrib.auth import get_user_model

    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    body = token_client(root).get("/api/v1/projects/").json()
    assert {(p["slug"], p["role"]) for p in body["results"]} == {("acme", "admin"), ("globex", "admin")}


@pytest.mark.django_db
def test_an_admin_adds_changes_and_removes_members(dave: Any, alice: Any, acme: Project) -> None:
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("erin", "erin@example.com", "erin-pass-123")
    admin = token_client(dave)
    added = _post(admin, "/api/v1/projects/acme/members/", {"user": "erin@example.com", "role": "viewer"})
    assert added.status_code == 201, added.content
    erin = added.json()
    assert (erin["username"], erin["role"]) == ("erin", "viewer")
    changed = admin.patch(f"/api/v1/projects/acme/members/{erin['id']}/", data=json.dumps({"role": "member"}),
                          content_type="application/json")
    assert changed.json()["role"] == "member"
    assert admin.delete(f"/api/v1/projects/acme/members/{erin['id']}/").status_code == 204
    assert not Membership.objects.filter(user__username="erin").exists()
    verbs = list(AuditEvent.objects.filter(project=acme).values_list("verb", flat=True).order_by("pk"))
    assert verbs == ["member.added", "member.changed", "member.removed"]
    activity = admin.get("/api/v1/projects/acme/activity/").json()
    assert [e["verb"] for e in activity["results"]] == ["member.removed", "member.changed", "member.added"]
    assert activity["results"][0]["actor"] == "dave"


@pytest.mark.django_db
def test_members_read_the_list_but_only_admins_change_it(alice_client: Client, dave: Any, acme: Project) -> None:
    listed = alice_client.get("/api/v1/projects/acme/members/").json()
    assert [m["username"] for m in listed["results"]] == ["alice", "dave"]
    dave_id = Membership.objects.get(user=dave).pk
    assert alice_client.get(f"/api/v1/projects/acme/members/{dave_id}/").json()["role"] == "admin"
    assert_error(_post(alice_client, "/api/v1/projects/acme/members/", {"user": "dave", "role": "viewer"}), 403,
                 "permission_denied")
    assert_error(alice_client.patch(f"/api/v1/projects/acme/members/{dave_id}/", data=json.dumps({"role": "viewer"}),
                                    content_type="application/json"), 403)
    assert_error(alice_client.delete(f"/api/v1/projects/acme/members/{dave_id}/"), 403)
    assert Membership.objects.get(pk=dave_id).role == "admin"


@pytest.mark.django_db
def test_the_last_admin_cannot_leave_or_be_demoted(dave: Any, acme: Project) -> None:
    admin = token_client(dave)
    dave_id = Membership.objects.get(user=dave).pk
    body = assert_error(admin.patch(f"/api/v1/projects/acme/members/{dave_id}/", data=json.dumps({"role": "member"}),
                                    content_type="application/json"), 400, "invalid")
    assert "at least one admin" in body["message"]
    assert_error(admin.delete(f"/api/v1/projects/acme/members/{dave_id}/"), 400)
    assert Membership.objects.get(pk=dave_id).role == "admin"


@pytest.mark.django_db
def test_bad_member_requests_are_400_and_write_nothing(dave: Any, alice: Any, bob: Any, acme: Project) -> None:
    admin = token_client(dave)
    for payload, fragment in (({"user": "nobody", "role": "viewer"}, "nobody"),
                              ({"user": "alice", "role": "viewer"}, "already"),
                              ({"user": "bob", "role": "owner"}, "role"),
                              ({"role": "viewer"}, "user")):
        body = assert_error(_post(admin, "/api/v1/projects/acme/members/", payload), 400)
        assert fragment in json.dumps(body), (payload, body)
    bob_membership = Membership.objects.get(user=bob)
    assert_error(admin.delete(f"/api/v1/projects/acme/members/{bob_membership.pk}/"), 404)  # a globex membership
    assert Membership.objects.count() == 3
    assert not AuditEvent.objects.filter(project=acme).exists()


@pytest.mark.django_db
def test_tokens_are_created_shown_once_listed_and_revoked(alice: Any, alice_client: Client, bob_client: Client) -> None:
    created = _post(alice_client, "/api/v1/tokens/", {"name": "CI on main"})
    assert created.status_code == 201 and created["Cache-Control"] == "no-store"
    body = created.json()
    assert body["token"].startswith("es_") and body["token"].startswith(body["prefix"])
    works = Client(HTTP_AUTHORIZATION=f"Bearer {body['token']}")
    assert works.get("/api/v1/projects/").status_code == 200
    listed = alice_client.get("/api/v1/tokens/").json()["results"]
    assert [t["name"] for t in listed] == ["CI on main"] and "token" not in listed[0]
    assert_error(_post(bob_client, f"/api/v1/tokens/{body['id']}/revoke/"), 404)
    revoked = _post(alice_client, f"/api/v1/tokens/{body['id']}/revoke/").json()
    assert revoked["revoked"] is True and revoked["token"]["revoked_at"]
    assert _post(alice_client, f"/api/v1/tokens/{body['id']}/revoke/").json()["revoked"] is False
    assert_error(works.get("/api/v1/projects/"), 401, "authentication_failed")
    assert_error(_post(alice_client, "/api/v1/tokens/", {"name": "  "}), 400)
    assert ApiToken.objects.count() == 1


@pytest.mark.django_db
def test_an_admin_pins_a_completed_run_as_the_baseline(dave: Any, alice_client: Client, acme: Project) -> None:
    base, run = demo_runs(acme)
    assert_error(_post(alice_client, f"/api/v1/runs/{base.pk}/pin/"), 403, "permission_denied")
    admin = token_client(dave)
    pinned = _post(admin, f"/api/v1/runs/{base.pk}/pin/").json()
    assert pinned == {"changed": True, "evalset": base.evalset_version.evalset_id, "baseline_run": base.pk}
    assert _post(admin, f"/api/v1/runs/{base.pk}/pin/").json()["changed"] is False
    assert EvalSet.objects.get().baseline_run_id == base.pk
    assert admin.get(f"/api/v1/evalsets/{pinned['evalset']}/").json()["baseline_run"] == base.pk
    run.status = "cancelled"
    run.save(update_fields=["status"])
    assert_error(_post(admin, f"/api/v1/runs/{run.pk}/pin/"), 400, "invalid")
    assert EvalSet.objects.get().baseline_run_id == base.pk
    assert AuditEvent.objects.filter(verb="baseline.pinned").count() == 1


@pytest.mark.django_db
def test_project_lists_cost_the_same_queries_for_more_rows(dave: Any, acme: Project,
                                                           django_assert_max_num_queries: Any) -> None:
    admin = token_client(dave)
    for name in ("erin", "frank", "grace", "heidi"):
        member(name, acme, "viewer")
        Project.objects.create(slug=f"p-{name}", name=name).memberships.create(user=dave, role="viewer")
    with django_assert_max_num_queries(6):
        assert admin.get("/api/v1/projects/").json()["count"] == 5
    with django_assert_max_num_queries(7):
        assert admin.get("/api/v1/projects/acme/members/").json()["count"] == 5
    with django_assert_max_num_queries(7):
        admin.get("/api/v1/projects/acme/activity/")
