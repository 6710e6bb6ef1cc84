"""Prompts: versions saved and content-hashed, templates checked, diffs of two versions, and
the pages and the API over the same services (access, bad input, query counts)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluations.models import AuditEvent, Membership, Project, Prompt, PromptVersion
from evaluations.prompts.selectors import line_diff, prompt_diff
from evaluations.prompts.services import PromptError, prompt_create, prompt_version_save
from evaluations.schemas.prompt_template import render, template_problems, template_variables

pytestmark = pytest.mark.django_db


def test_a_template_renders_variables_and_paths() -> None:
    context = {"input": {"city": "Oslo"}, "state": {"user": {"tier": "gold"}}, "metadata": {"tags": ["a", "b"]},
               "eval_id": "x1", "turn": 2}
    text = ("{{ input.city }} / {{state.user.tier}} / {{metadata.tags[1]}} / {{eval_id}}#{{turn}} / {{input}} / "
            "{{state.nope}}")
    assert render(text, context) == 'Oslo / gold / b / x1#2 / {"city":"Oslo"} / '
    assert template_variables("{{input}} and {{ state.city }} and {{input}}") == ["input", "state.city"]


def test_a_template_with_an_unknown_or_unclosed_placeholder_is_refused_with_its_line() -> None:
    assert template_problems("Hi\n{{inptu}}") == [
        "line 2: unknown variable 'inptu' (known: input, state, session, metadata, eval_id, case_name, turn)"]
    assert template_problems("{{ input + 1 }}")[0].startswith("line 1: {{input + 1}} is not a variable")
    assert template_problems("a\nb {{input") == ["line 2: a {{ without its }}"]
    assert template_problems("{{input}} and {{ state.city }}") == []


def test_saving_the_same_text_makes_no_version_and_a_change_makes_the_next(acme: Project, alice: Any) -> None:
    first = prompt_create(project=acme, name="support", system="Be kind.", user="{{input}}", actor=alice)
    again = prompt_version_save(prompt=first.prompt, system="Be kind.", user="{{input}}", actor=alice)
    assert (again.created, again.version.number) == (False, 1)
    second = prompt_version_save(prompt=first.prompt, system="Be kind and brief.", user="{{input}}", note="shorter",
                                 actor=alice, based_on=1)
    assert (second.created, second.version.number, second.version.note) == (True, 2, "shorter")
    assert Prompt.objects.get(pk=first.prompt.pk).latest_version_id == second.version.pk
    with pytest.raises(PromptError, match="version 2 was saved since version 1"):
        prompt_version_save(prompt=first.prompt, system="x", user="{{input}}", based_on=1)
    with pytest.raises(PromptError, match="unknown variable"):
        prompt_version_save(prompt=first.prompt, system="{{nope}}", user="{{input}}")
    with pytest.raises(PromptError, match="already has a prompt named 'support'"):
        prompt_create(project=acme, name="support")
    assert PromptVersion.objects.filter(prompt=first.prompt).count() == 2


def test_the_diff_of_two_versions_is_line_by_line(acme: Project) -> None:
    saved = prompt_create(project=acme, name="p", system="one\ntwo\nthree", user="{{input}}")
    prompt_version_save(prompt=saved.prompt, system="one\n2\nthree\nfour", user="{{input}}")
    diff = prompt_diff(prompt=saved.prompt, before=1, after=2)
    assert diff is not None and diff.changed
    assert [(line.kind, line.text) for line in diff.system] == [
        ("same", "one"), ("removed", "two"), ("added", "2"), ("same", "three"), ("added", "four")]
    assert [line.kind for line in diff.user] == ["same"]
    assert prompt_diff(prompt=saved.prompt, before=1, after=9) is None
    assert [(d.old, d.new) for d in line_diff("a\nb", "a\nc")] == [(1, 1), (2, None), (None, 2)]


def test_the_api_creates_versions_and_diffs_prompts(alice_client: Client, acme: Project) -> None:
    created = alice_client.post("/api/v1/prompts/", data={"name": "support", "system": "S", "user": "Q: {{input}}"},
                                content_type="application/json")
    assert created.status_code == 201, created.content
    pk = created.json()["prompt"]
    assert created.json()["version"]["variables"] == ["input"]
    saved = alice_client.post(f"/api/v1/prompts/{pk}/versions/", data={"system": "S2", "user": "Q: {{input}}",
                                                                        "based_on": 1},
                              content_type="application/json")
    assert (saved.status_code, saved.json()["version"]["number"]) == (201, 2)
    same = alice_client.post(f"/api/v1/prompts/{pk}/versions/", data={"system": "S2", "user": "Q: {{input}}"},
                             content_type="application/json")
    assert (same.status_code, same.json()["created"]) == (200, False)
    conflict = alice_client.post(f"/api/v1/prompts/{pk}/versions/", data={"system": "S3", "user": "x",
                                                                           "based_on": 1},
                                 content_type="application/json")
    assert conflict.status_code == 409
    bad = alice_client.post(f"/api/v1/prompts/{pk}/versions/", data={"user": "{{input"},
                            content_type="application/json")
    assert bad.status_code == 400 and bad.json()["problems"][0]["path"] == "user"
    detail = alice_client.get(f"/api/v1/prompts/{pk}/").json()
    assert [v["number"] for v in detail["history"]] == [2, 1] and detail["latest_version"] == 2
    assert alice_client.get(f"/api/v1/prompts/{pk}/versions/1/").json()["system"] == "S"
    diff = alice_client.get(f"/api/v1/prompts/{pk}/diff/?from=1&to=2").json()
    assert [(line["kind"], line["text"]) for line in diff["system"]] == [("removed", "S"), ("added", "S2")]
    assert alice_client.get(f"/api/v1/prompts/{pk}/diff/?from=1&to=7").status_code == 404
    assert [p["name"] for p in alice_client.get("/api/v1/prompts/").json()] == ["support"]
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.PROMPT_SAVED).count() == 2


def test_another_projects_prompt_is_a_404_and_viewers_cannot_write(bob_client: Client, alice_client: Client,
                                                                   acme: Project, bob: Any) -> None:
    saved = prompt_create(project=acme, name="secret", system="S", user="{{input}}")
    assert bob_client.get(f"/api/v1/prompts/{saved.prompt.pk}/").status_code == 404
    assert bob_client.get(f"/prompts/{saved.prompt.pk}/").status_code == 404
    Membership.objects.create(project=acme, user=bob, role=Membership.Role.VIEWER)
    assert bob_client.get(f"/prompts/{saved.prompt.pk}/").status_code == 200
    refused = bob_client.post(f"/api/v1/prompts/{saved.prompt.pk}/versions/", data={"user": "x {{input}}"},
                              content_type="application/json")
    assert refused.status_code == 403
    assert bob_client.post(f"/prompts/{saved.prompt.pk}/", {"system": "", "user": "x"}).status_code == 403


def test_the_prompt_pages_create_edit_and_diff(alice_client: Client, acme: Project) -> None:
    page = alice_client.get("/prompts/")
    assert page.status_code == 200 and "New prompt" in page.content.decode()
    bad = alice_client.post("/prompts/", {"name": "support", "system": "x", "user": "{{ nope }}"})
    assert bad.status_code == 400 and "Nothing was saved" in bad.content.decode()
    assert not Prompt.objects.exists()
    made = alice_client.post("/prompts/", {"name": "support", "system": "<b>Be kind</b>", "user": "{{input}}"})
    prompt = Prompt.objects.get()
    assert made.status_code == 302 and made["Location"] == f"/prompts/{prompt.pk}/"
    detail = alice_client.get(f"/prompts/{prompt.pk}/").content.decode()
    assert "&lt;b&gt;Be kind&lt;/b&gt;" in detail and "<b>Be kind</b>" not in detail  # escaped
    alice_client.post(f"/prompts/{prompt.pk}/", {"system": "Be kind.", "user": "{{input}}", "note": "plain",
                                                 "based_on": "1"})
    assert PromptVersion.objects.filter(prompt=prompt).count() == 2
    diff = alice_client.get(f"/prompts/{prompt.pk}/diff/?from=1&to=2").content.decode()
    assert "<del>&lt;b&gt;Be kind&lt;/b&gt;</del>" in diff and "<ins>Be kind.</ins>" in diff
    assert alice_client.get(f"/prompts/{prompt.pk}/diff/?from=1&to=5").status_code == 404


def test_the_prompt_pages_queries_do_not_grow_with_versions(alice_client: Client, acme: Project) -> None:
    saved = prompt_create(project=acme, name="p", system="0", user="{{input}}")

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert alice_client.get(url).status_code == 200
        return len(queries)

    count(f"/prompts/{saved.prompt.pk}/")  # the first visit stores the project in the session
    few = (count("/prompts/"), count(f"/prompts/{saved.prompt.pk}/"))
    for n in range(1, 12):
        prompt_version_save(prompt=saved.prompt, system=str(n), user="{{input}}")
        prompt_create(project=acme, name=f"other {n}")
    assert (count("/prompts/"), count(f"/prompts/{saved.prompt.pk}/")) == few
    body = json.loads(alice_client.get("/api/v1/prompts/").content)
    assert len(body) == 12
