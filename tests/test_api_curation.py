"""The curation API: edits as versions, the diff of two versions, results promoted into cases;
bad input is a 400 with the field path and writes nothing; other projects' ids are 404s."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evaluations.models import EvalCase, EvalSet, EvalSetVersion, Membership, Project
from tests.api_helpers import ERROR_KEYS, finished_run
from tests.engine_helpers import import_demo

pytestmark = pytest.mark.django_db


def _edit(client: Client, evalset: EvalSet, body: dict[str, Any]) -> Any:
    return client.post(f"/api/v1/evalsets/{evalset.pk}/edits/", body, content_type="application/json")


def _case(eval_id: str, text: str = "Book me a flight") -> dict[str, Any]:
    return {
        "eval_id": eval_id,
        "conversation": [{"invocation_id": "t1", "user_content": {"role": "user", "content": text}}],
    }


@pytest.fixture
def demo(acme: Project) -> EvalSetVersion:
    return import_demo(acme)


def test_an_edit_answers_201_with_the_new_version(alice_client: Client, demo: EvalSetVersion) -> None:
    first = EvalCase.objects.in_version(demo).order_by("position").first()
    assert first is not None
    response = _edit(
        alice_client,
        demo.evalset,
        {
            "base_version": 1,
            "note": "api edit",
            "changes": [
                {"op": "put", "case": _case("new_case")},
                {"op": "delete", "eval_ids": [first.eval_id]},
            ],
        },
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert (data["added"], data["changed"], data["removed"]) == (1, 0, 1)
    assert data["version"]["number"] == 2 and data["version"]["case_count"] == demo.case_count
    version = EvalSetVersion.objects.get(evalset=demo.evalset, number=2)
    assert (version.how_created, version.note, version.created_by.username) == ("api", "api edit", "alice")
    cases = alice_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/versions/2/cases/").json()
    listed = [c["eval_id"] for c in cases["results"]]
    assert "new_case" in listed and first.eval_id not in listed


def test_an_invalid_case_is_a_400_with_its_path_and_nothing_is_written(
    alice_client: Client, demo: EvalSetVersion
) -> None:
    before = (EvalSetVersion.objects.count(), EvalCase.objects.count())
    bad = _case("x")
    bad["conversation"][0]["expected_tool_trajectory"] = [{"name": "search", "args": []}]
    response = _edit(
        alice_client,
        demo.evalset,
        {"base_version": 1, "changes": [{"op": "put", "case": _case("fine")}, {"op": "put", "case": bad}]},
    )
    assert response.status_code == 400
    body = response.json()
    assert set(body) == ERROR_KEYS and body["code"] == "invalid"
    assert [p["path"] for p in body["problems"]] == ["changes[1].case.conversation[0].expected_tool_trajectory[0].args"]
    assert (EvalSetVersion.objects.count(), EvalCase.objects.count()) == before


@pytest.mark.parametrize(
    "body, path",
    [
        ({"changes": [{"op": "delete", "eval_ids": ["a"]}]}, "base_version"),
        ({"base_version": 1, "changes": []}, "changes"),
        ({"base_version": 1, "changes": [{"op": "explode"}]}, "changes[0]"),
        ({"base_version": 1, "changes": [{"op": "delete", "eval_ids": ["no_such_case"]}]}, "changes[0].eval_ids[0]"),
        ({"base_version": 1, "changes": [{"op": "tag", "eval_ids": ["x"], "tag": ""}]}, "changes[0].tag"),
        (
            {"base_version": 1, "changes": [{"op": "move", "eval_ids": ["x"], "target_evalset": 999999}]},
            "changes[0].eval_ids[0]",
        ),
        ({"base_version": 1, "extra": True, "changes": [{"op": "delete", "eval_ids": ["a"]}]}, "extra"),
    ],
)
def test_bad_edits_name_where(alice_client: Client, demo: EvalSetVersion, body: dict[str, Any], path: str) -> None:
    response = _edit(alice_client, demo.evalset, body)
    assert response.status_code == 400, response.json()
    assert path in [p["path"] for p in response.json()["problems"]]
    assert EvalSetVersion.objects.count() == 1


def test_a_move_to_another_projects_eval_set_is_refused(
    alice_client: Client, demo: EvalSetVersion, globex: Project
) -> None:
    other = import_demo(globex)
    first = EvalCase.objects.in_version(demo).order_by("position").first()
    assert first is not None
    response = _edit(
        alice_client,
        demo.evalset,
        {
            "base_version": 1,
            "changes": [{"op": "move", "eval_ids": [first.eval_id], "target_evalset": other.evalset.pk}],
        },
    )
    assert response.status_code == 400
    assert [p["path"] for p in response.json()["problems"]] == ["changes[0].target_evalset"]
    assert EvalSetVersion.objects.count() == 2  # the two uploads


def test_a_stale_base_is_a_409(alice_client: Client, demo: EvalSetVersion) -> None:
    assert (
        _edit(
            alice_client, demo.evalset, {"base_version": 1, "changes": [{"op": "put", "case": _case("a")}]}
        ).status_code
        == 201
    )
    response = _edit(alice_client, demo.evalset, {"base_version": 1, "changes": [{"op": "put", "case": _case("b")}]})
    assert response.status_code == 409 and response.json()["code"] == "conflict"


def test_a_viewer_cannot_edit_and_another_project_gets_404(
    demo: EvalSetVersion, acme: Project, bob_client: Client, django_user_model: Any
) -> None:
    carol = django_user_model.objects.create_user("carol", "c@example.com", "carol-pass-123")
    Membership.objects.create(project=acme, user=carol, role=Membership.Role.VIEWER)
    viewer = Client()
    viewer.force_login(carol)
    body = {"base_version": 1, "changes": [{"op": "put", "case": _case("a")}]}
    assert _edit(viewer, demo.evalset, body).status_code == 403
    assert _edit(bob_client, demo.evalset, body).status_code == 404
    assert bob_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/diff/?from=1&to=1").status_code == 404
    assert EvalSetVersion.objects.count() == 1


def test_the_diff_as_json(alice_client: Client, demo: EvalSetVersion) -> None:
    case = EvalCase.objects.in_version(demo).exclude(tool_call_count=0).order_by("position").first()
    assert case is not None
    changed = {"eval_id": case.eval_id, "conversation": [dict(case.conversation[0])]}
    calls = changed["conversation"][0]["expected_tool_trajectory"]
    calls[0] = {**calls[0], "args": {**calls[0]["args"], "extra": 1}}
    assert (
        _edit(
            alice_client,
            demo.evalset,
            {"base_version": 1, "changes": [{"op": "put", "eval_id": case.eval_id, "case": changed}]},
        ).status_code
        == 201
    )
    response = alice_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/diff/?from=1&to=2")
    assert response.status_code == 200
    data = response.json()
    assert data["counts"] == {"added": 0, "removed": 0, "changed": 1}
    (entry,) = data["cases"]
    assert entry["eval_id"] == case.eval_id and entry["kind"] == "changed"
    first_call = entry["turns"][0]["tool_calls"][0]
    assert first_call["kind"] == "changed"
    assert first_call["arg_diffs"] == [{"path": "extra", "kind": "added", "actual": 1}]
    assert alice_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/diff/?from=1&to=9").status_code == 404
    bad = alice_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/diff/?from=x&to=2")
    assert bad.status_code == 400 and bad.json()["problems"][0]["path"] == "from"


def test_promoting_regressions_adds_cases_from_the_agents_answers(
    alice_client: Client, acme: Project, demo: EvalSetVersion
) -> None:
    run = finished_run(acme, version=demo)
    failed = list(run.results.filter(status="failed").values_list("case__eval_id", flat=True))
    assert failed
    response = alice_client.post(
        f"/api/v1/runs/{run.pk}/promote/", {"eval_ids": failed, "note": "regressions"}, content_type="application/json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["added"] == len(failed)
    version = EvalSetVersion.objects.get(evalset=demo.evalset, number=2)
    assert version.how_created == "promotion" and version.note == "regressions"
    promoted = EvalCase.objects.in_version(version).get(eval_id=f"{failed[0]}-run{run.pk}")
    result = run.results.get(case__eval_id=failed[0])
    actual = [c["name"] for c in result.output["turns"][0]["tool_calls"]]
    assert [c["name"] for c in promoted.conversation[0]["expected_tool_trajectory"]] == actual
    assert "promoted" in promoted.tags


def test_promoting_new_expected_answers_replaces_the_cases(
    alice_client: Client, acme: Project, demo: EvalSetVersion
) -> None:
    run = finished_run(acme, version=demo)
    eval_id = run.results.filter(status="failed").values_list("case__eval_id", flat=True).first()
    response = alice_client.post(
        f"/api/v1/runs/{run.pk}/promote/", {"eval_ids": [eval_id], "mode": "expected"}, content_type="application/json"
    )
    assert response.status_code == 201 and response.json()["changed"] == 1


def test_bad_promotions(alice_client: Client, bob_client: Client, acme: Project, demo: EvalSetVersion) -> None:
    run = finished_run(acme, version=demo)
    unknown = alice_client.post(
        f"/api/v1/runs/{run.pk}/promote/", {"eval_ids": ["nope"]}, content_type="application/json"
    )
    assert unknown.status_code == 400 and unknown.json()["problems"][0]["path"] == "eval_ids.0"
    empty = alice_client.post(f"/api/v1/runs/{run.pk}/promote/", {"eval_ids": []}, content_type="application/json")
    assert empty.status_code == 400 and empty.json()["problems"][0]["path"] == "eval_ids"
    assert (
        bob_client.post(
            f"/api/v1/runs/{run.pk}/promote/", {"eval_ids": ["x"]}, content_type="application/json"
        ).status_code
        == 404
    )
    assert EvalSetVersion.objects.filter(evalset=demo.evalset).count() == 1


def test_a_case_read_from_the_api_goes_back_to_edits_as_it_is(alice_client: Client, demo: EvalSetVersion) -> None:
    listed = alice_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/versions/1/cases/").json()["results"]
    read = listed[1]
    assert {"id", "position", "turn_count", "tool_call_count"} <= set(read)  # what the read adds
    read["tags"] = [*read["tags"], "reviewed"]
    response = _edit(alice_client, demo.evalset, {"base_version": 1, "changes": [
        {"op": "put", "eval_id": read["eval_id"], "case": read}]})
    assert response.status_code == 201, response.json()
    assert (response.json()["changed"], response.json()["added"]) == (1, 0)
    saved = EvalCase.objects.in_version(EvalSetVersion.objects.get(evalset=demo.evalset, number=2)).get(
        eval_id=read["eval_id"])
    assert "reviewed" in saved.tags and saved.position == read["position"]
    # A case's detail (with its project, eval set and version) goes back too.
    detail = alice_client.get(f"/api/v1/cases/{saved.pk}/").json()
    assert {"project", "evalset", "version"} <= set(detail)
    again = _edit(alice_client, demo.evalset, {"base_version": 2, "changes": [
        {"op": "put", "eval_id": detail["eval_id"], "case": {**detail, "name": "renamed"}}]})
    assert again.status_code == 201, again.json()


def test_an_unknown_field_in_a_case_read_back_is_still_refused(alice_client: Client, demo: EvalSetVersion) -> None:
    read = alice_client.get(f"/api/v1/evalsets/{demo.evalset.pk}/versions/1/cases/").json()["results"][0]
    response = _edit(alice_client, demo.evalset, {"base_version": 1, "changes": [
        {"op": "put", "eval_id": read["eval_id"], "case": {**read, "colour": "blue"}}]})
    assert response.status_code == 400
    assert [p["path"] for p in response.json()["problems"]] == ["changes[0].case.colour"]
    assert EvalSetVersion.objects.filter(evalset=demo.evalset).count() == 1
