"""The role map's text: parsed, refused with the entry named, and the highest role wins."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from evaluations.accounts.roles_map import RoleMapError, RoleRule, groups_of, role_map_parse, wanted_roles


def test_entries_are_parsed_and_a_group_may_give_roles_in_several_projects() -> None:
    rules = role_map_parse(" a=acme:admin,\nb=acme:viewer , b=globex:member,")
    assert rules == [RoleRule("a", "acme", "admin"), RoleRule("b", "acme", "viewer"), RoleRule("b", "globex", "member")]
    assert wanted_roles(rules, ["b", "a"]) == {"acme": "admin", "globex": "member"}
    assert wanted_roles(rules, ["b"]) == {"acme": "viewer", "globex": "member"}
    assert wanted_roles(rules, []) == {"acme": None, "globex": None}
    assert role_map_parse("/acme/evals=acme:viewer") == [RoleRule("/acme/evals", "acme", "viewer")]  # Keycloak paths


@pytest.mark.parametrize(("text", "message"), [
    ("acme:admin", "write it as group=project:role"),
    ("g=acme", "write it as group=project:role"),
    ("g=acme:owner", "the role must be one of viewer, member, admin"),
    ("=acme:admin", "write it as group=project:role"),
])
def test_a_map_that_cannot_be_read_names_the_entry(text: str, message: str) -> None:
    with pytest.raises(RoleMapError, match=message) as caught:
        role_map_parse(text)
    assert repr(text.strip()) in str(caught.value)


def test_the_groups_claim_may_be_a_list_or_one_string() -> None:
    assert groups_of({"groups": ["a", "b", {"x": 1}]}, "groups") == ["a", "b"]
    assert groups_of({"roles": "admins"}, "roles") == ["admins"]
    assert groups_of({}, "groups") == []


def test_manage_py_check_refuses_a_bad_map(settings: object) -> None:
    settings.EVALSITE_OIDC_ROLE_MAP = "g=acme:owner"  # type: ignore[attr-defined]
    with pytest.raises(SystemCheckError, match=r"evalsite.E034.*EVALSITE_OIDC_ROLE_MAP"):
        call_command("check")
