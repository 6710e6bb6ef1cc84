"""Superusers set up projects and their members in the Django admin."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluations.models import Membership, Project


@pytest.mark.django_db
def test_a_superuser_creates_a_project_with_a_member_in_the_admin(alice) -> None:  # type: ignore[no-untyped-def]
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123")
    client = Client()
    client.force_login(root)
    response = client.post("/admin/evaluations/project/add/", {
        "name": "Initech", "slug": "initech", "description": "",
        "memberships-TOTAL_FORMS": "1", "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0", "memberships-MAX_NUM_FORMS": "1000",
        "memberships-0-user": str(alice.pk), "memberships-0-role": "admin",
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    project = Project.objects.get(slug="initech")
    assert Membership.objects.get(project=project, user=alice).role == "admin"


@pytest.mark.django_db
def test_a_project_member_who_is_not_staff_cannot_open_the_admin(alice_client: Client) -> None:
    response = alice_client.get("/admin/evaluations/project/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
