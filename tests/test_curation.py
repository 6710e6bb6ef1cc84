"""Curation: versions from edits share unchanged cases, keep every older version and its
runs exact, say what is wrong and where before writing anything, and diff field by field."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.evalsets.curation import CurationError, evalset_edit, parse_edit
from evaluations.evalsets.services import ImportOutcome, evalset_import
from evaluations.interop import SourceFile
from evaluations.models import OPEN_VERSION, AuditEvent, EvalCase, EvalSet, EvalSetVersion, Membership, Project
from evaluations.review.versions import version_diff
from evaluations.runs.exports import version_native_text
from tests.test_pages_evalsets import generated_evalset, import_generated

pytestmark = pytest.mark.django_db


def edit(
    outcome_or_set: Any,
    changes: list[dict[str, Any]],
    *,
    base: int | None = None,
    note: str = "",
    user: Any = None,
    how: str = "edit",
) -> Any:
    evalset = outcome_or_set.evalset if isinstance(outcome_or_set, ImportOutcome) else outcome_or_set
    evalset.refresh_from_db()
    number = base if base is not None else evalset.latest_version.number
    return evalset_edit(
        evalset=evalset, edit=parse_edit({"base_version": number, "note": note, "changes": changes}), user=user, how=how
    )


def case_dict(eval_id: str, text: str = "hello", tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "eval_id": eval_id,
        "conversation": [
            {
                "invocation_id": "t1",
                "user_content": {"role": "user", "content": text},
                "expected_final_response": {"role": "model", "content": f"answer to {text}"},
                "expected_tool_trajectory": tools or [],
            }
        ],
    }


def ids(version: EvalSetVersion) -> list[str]:
    return list(EvalCase.objects.in_version(version).order_by("position").values_list("eval_id", flat=True))


# --- Service ---------------------------------------------------------------------------------


def test_an_edit_makes_a_new_version_sharing_the_unchanged_rows(acme: Project, alice: Any) -> None:
    first = import_generated(acme, 6)
    rows_before = EvalCase.objects.count()
    out = edit(
        first,
        [
            {"op": "put", "eval_id": "case_0001", "case": case_dict("case_0001", "changed")},
            {"op": "delete", "eval_ids": ["case_0002"]},
            {"op": "put", "case": case_dict("brand_new")},
            {"op": "duplicate", "eval_id": "case_0003"},
            {"op": "tag", "eval_ids": ["case_0004"], "tag": "hard"},
        ],
        note="fix case 1",
        user=alice,
    )
    v2 = out.version
    assert (v2.number, v2.how_created, v2.note, v2.created_by, v2.based_on_id) == (
        2,
        "edit",
        "fix case 1",
        alice,
        first.version.pk,
    )
    assert (out.added, out.changed, out.removed) == (2, 2, 1)
    assert ids(v2) == ["case_0000", "case_0001", "case_0003", "case_0004", "case_0005", "brand_new", "case_0003-copy"]
    assert ids(first.version) == [f"case_{i:04d}" for i in range(6)]  # the old version is exactly as it was
    assert v2.case_count == 7 and "hard" in v2.tags
    # only the added and changed cases were written: 4 rows, not 7
    assert EvalCase.objects.count() - rows_before == 4
    shared = EvalCase.objects.get(eval_id="case_0000")
    assert (shared.valid_from, shared.valid_to) == (1, OPEN_VERSION)


def test_the_native_export_of_an_edited_version_reimports_to_its_content_hash(acme: Project) -> None:
    first = import_generated(acme, 4)
    v2 = edit(first, [{"op": "put", "eval_id": "case_0002", "case": case_dict("case_0002", "new text")}]).version
    again = evalset_import(project=acme, files=[SourceFile("x.evalset.json", version_native_text(v2).encode())])[0]
    assert not again.created and again.version.pk == v2.pk
    assert again.version.content_hash == v2.content_hash


def test_a_revert_is_a_new_version_with_the_old_content_hash(acme: Project) -> None:
    first = import_generated(acme, 3)
    original = EvalCase.objects.get(eval_id="case_0001")
    v2 = edit(first, [{"op": "tag", "eval_ids": ["case_0001"], "tag": "x"}]).version
    v3 = edit(first, [{"op": "untag", "eval_ids": ["case_0001"], "tag": "x"}]).version
    assert v3.number == 3 and v3.content_hash == first.version.content_hash != v2.content_hash
    assert ids(v3) == ids(first.version)
    assert EvalCase.objects.in_version(v3).get(eval_id="case_0001").content_hash == original.content_hash


def test_an_invalid_case_is_reported_with_its_path_and_nothing_is_written(acme: Project) -> None:
    first = import_generated(acme, 3)
    counts = (EvalSetVersion.objects.count(), EvalCase.objects.count())
    bad = case_dict("case_0001")
    bad["conversation"][0]["expected_tool_trajectory"] = [{"name": "x", "args": "not an object"}]
    with pytest.raises(CurationError) as caught:
        edit(
            first,
            [
                {"op": "delete", "eval_ids": ["case_0000"]},
                {"op": "put", "eval_id": "case_0001", "case": bad},
                {"op": "delete", "eval_ids": ["nope"]},
            ],
        )
    paths = [p.path for p in caught.value.problems]
    assert "changes[1].case.conversation[0].expected_tool_trajectory[0].args" in paths
    assert "changes[2].eval_ids[0]" in paths
    assert (EvalSetVersion.objects.count(), EvalCase.objects.count()) == counts
    assert list(EvalCase.objects.filter(valid_to__lt=OPEN_VERSION)) == []


def test_an_edit_from_an_older_version_is_a_conflict(acme: Project) -> None:
    first = import_generated(acme, 3)
    edit(first, [{"op": "delete", "eval_ids": ["case_0000"]}])
    with pytest.raises(CurationError) as caught:
        edit(first, [{"op": "delete", "eval_ids": ["case_0001"]}], base=1)
    assert caught.value.conflict and caught.value.problems[0].path == "base_version"


def test_nothing_changed_is_an_error(acme: Project) -> None:
    first = import_generated(acme, 3)
    with pytest.raises(CurationError, match="nothing changed"):
        edit(first, [{"op": "untag", "eval_ids": ["case_0000"], "tag": "absent"}])


def test_move_makes_a_version_in_each_eval_set(acme: Project) -> None:
    source = import_generated(acme, 4, eval_set_id="from")
    target = import_generated(acme, 2, eval_set_id="to")
    clash = import_generated(acme, 2, eval_set_id="clash")
    out = edit(
        source, [{"op": "move", "eval_ids": ["case_0003"], "target_evalset": target.evalset.pk}], note="belongs there"
    )
    assert ids(out.version) == ["case_0000", "case_0001", "case_0002"]
    (moved,) = out.other_versions
    assert moved.evalset_id == target.evalset.pk and ids(moved) == ["case_0000", "case_0001", "case_0003"]
    assert "belongs there" in moved.note
    with pytest.raises(CurationError, match="already has a case"):
        edit(source, [{"op": "move", "eval_ids": ["case_0000"], "target_evalset": clash.evalset.pk}])
    assert EvalSetVersion.objects.filter(evalset=source.evalset).count() == 2  # the failed move wrote nothing


def test_a_run_keeps_pointing_at_the_cases_it_was_scored_against(acme: Project) -> None:
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 4)
    run = make_run(acme, version, generated_outputs(4))
    scored = set(run.results.values_list("case_id", flat=True))
    edit(version.evalset, [{"op": "put", "eval_id": "case_0001", "case": case_dict("case_0001", "changed")}])
    assert set(EvalCase.objects.in_version(version).values_list("pk", flat=True)) == scored
    first = import_generated(acme, 3)
    edit(first, [{"op": "put", "eval_id": "case_0001", "case": case_dict("case_0001", "changed")}])
    old_rows = list(EvalCase.objects.in_version(first.version).values_list("pk", flat=True))
    assert old_rows == list(EvalCase.objects.filter(version=first.version).values_list("pk", flat=True))


# --- Diff ------------------------------------------------------------------------------------


def test_the_diff_lists_added_removed_and_changed_with_field_level_changes(acme: Project) -> None:
    first = evalset_import(
        project=acme,
        files=[
            SourceFile(
                "d.evalset.json",
                json.dumps(
                    {
                        "eval_set_id": "d",
                        "eval_cases": [
                            case_dict("keep"),
                            case_dict(
                                "calls",
                                tools=[{"name": "search", "args": {"q": "a", "n": 1}}, {"name": "book", "args": {}}],
                            ),
                            case_dict("gone"),
                        ],
                    }
                ).encode(),
            )
        ],
    )[0]
    out = edit(
        first,
        [
            {
                "op": "put",
                "eval_id": "calls",
                "case": case_dict(
                    "calls",
                    "new question",
                    tools=[
                        {"name": "search", "args": {"q": "b", "n": 1}},
                        {"name": "pay", "args": {}},
                        {"name": "book", "args": {}},
                    ],
                ),
            },
            {"op": "delete", "eval_ids": ["gone"]},
            {"op": "put", "case": case_dict("fresh")},
        ],
    )
    diff = version_diff(old=first.version, new=out.version)
    assert (diff.added, diff.removed, diff.changed) == (1, 1, 1)
    by_id = {c.eval_id: c for c in diff.page.object_list}
    assert set(by_id) == {"calls", "gone", "fresh"}
    turn = by_id["calls"].turns[0]
    assert turn.kind == "changed"
    assert [f.field for f in turn.fields] == ["user message", "expected response"]
    kinds = [(c.name, c.kind) for c in turn.calls]
    assert kinds == [("search", "changed"), ("pay", "added"), ("book", "same")]
    assert turn.calls[0].arg_diffs == [{"path": "q", "kind": "changed", "expected": "a", "actual": "b"}]
    # the reverse direction reads the other way round
    back = version_diff(old=out.version, new=first.version)
    assert (back.added, back.removed, back.changed) == (1, 1, 1)
    assert {c.eval_id: c.kind for c in back.page.object_list} == {
        "calls": "changed",
        "gone": "added",
        "fresh": "removed",
    }


def test_two_uploads_with_a_shared_case_diff_only_what_changed(acme: Project) -> None:
    first = import_generated(acme, 5)
    doc = json.loads(generated_evalset(5).data)
    doc["eval_cases"][2]["name"] = "renamed"
    second = evalset_import(project=acme, files=[SourceFile("g.evalset.json", json.dumps(doc).encode())])[0]
    diff = version_diff(old=first.version, new=second.version)
    assert (diff.added, diff.removed, diff.changed) == (0, 0, 1)
    assert diff.page.object_list[0].fields[0].field == "name"


@pytest.mark.parametrize("count", [20, 10_000])
def test_the_diff_costs_the_same_queries_at_ten_thousand_cases(count: int, acme: Project) -> None:
    first = import_generated(acme, count)
    out = edit(
        first,
        [
            {"op": "put", "eval_id": f"case_{i:04d}", "case": case_dict(f"case_{i:04d}", "x")}
            for i in range(0, min(count, 60), 3)
        ]
        + [{"op": "delete", "eval_ids": ["case_0001"]}],
    )
    with CaptureQueriesContext(connection) as captured:
        diff = version_diff(old=first.version, new=out.version)
    # the rows only one side has (twice), the content of the changed cases on the page
    assert len(captured.captured_queries) == 3
    assert diff.changed == len(range(0, min(count, 60), 3)) and diff.removed == 1


# --- Pages -----------------------------------------------------------------------------------


@pytest.fixture
def carol(acme: Project) -> Any:
    user = get_user_model().objects.create_user("carol", "carol@example.com", "carol-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.VIEWER)
    return user


def test_a_member_edits_a_case_in_the_browser_form(acme: Project, alice_client: Client) -> None:
    first = import_generated(acme, 3)
    case = EvalCase.objects.get(eval_id="case_0001")
    page = alice_client.get(reverse("case_edit", args=[case.pk]))
    assert page.status_code == 200 and b"Save as v2" in page.content
    form = {
        "base_version": "1",
        "original": page.context["fields"].original,
        "turn_count": "2",
        "eval_id": "case_0001",
        "name": "Better name",
        "tags": "fast, reviewed",
        "metadata": "",
        "rubrics": "",
        "turn-0-user": "Question number 1 about item-0001",
        "turn-0-expected": "The answer <b>1</b>",
        "turn-0-tools": '[{"name": "lookup", "args": {"id": 1, "verbose": true}}]',
        "turn-1-user": "",
        "turn-1-expected": "",
        "turn-1-tools": "",
        "note": "expected answer added",
    }
    response = alice_client.post(reverse("case_edit", args=[case.pk]), form)
    assert response.status_code == 302 and "from=1&to=2" in response["Location"]
    v2 = EvalSetVersion.objects.get(evalset=first.evalset, number=2)
    new = EvalCase.objects.in_version(v2).get(eval_id="case_0001")
    assert new.name == "Better name" and new.tags == ["fast", "reviewed"]
    assert new.conversation[0]["expected_final_response"]["content"] == "The answer <b>1</b>"
    assert [(c["name"], c["args"]) for c in new.conversation[0]["expected_tool_trajectory"]] == [
        ("lookup", {"id": 1, "verbose": True})
    ]
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.EVALSET_EDITED).count() == 1
    diff_page = alice_client.get(response["Location"]).content.decode()
    assert "The answer &lt;b&gt;1&lt;/b&gt;" in diff_page and "<b>1</b>" not in diff_page  # escaped
    assert "verbose" in diff_page and "expected answer added" in diff_page
    history = alice_client.get(reverse("evalset_versions", args=[first.evalset.pk])).content.decode()
    assert "expected answer added" in history and "alice" in history and "edit" in history


def test_bad_json_in_the_form_says_where_and_saves_nothing(acme: Project, alice_client: Client) -> None:
    import_generated(acme, 2)
    case = EvalCase.objects.get(eval_id="case_0001")
    original = alice_client.get(reverse("case_edit", args=[case.pk])).context["fields"].original
    response = alice_client.post(
        reverse("case_edit", args=[case.pk]),
        {
            "base_version": "1",
            "original": original,
            "turn_count": "1",
            "eval_id": "case_0001",
            "turn-0-user": "q",
            "turn-0-tools": '[{"name": "lookup", "args": {"id": 1}',
            "metadata": "[1]",
        },
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "turn 1 · expected tool calls" in text and "not valid JSON" in text
    assert EvalSetVersion.objects.count() == 1
    response = alice_client.post(
        reverse("case_edit", args=[case.pk]),
        {
            "base_version": "1",
            "original": original,
            "turn_count": "1",
            "eval_id": "case_0001",
            "turn-0-user": "q",
            "turn-0-tools": '[{"args": {}}]',
            "metadata": "[1]",
        },
    )
    text = response.content.decode()
    assert response.status_code == 400 and "turn 1 · expected_tool_trajectory[0].name" in text
    assert "metadata" in text and EvalSetVersion.objects.count() == 1


def test_a_viewer_reads_versions_and_diffs_but_cannot_edit(acme: Project, alice: Any, carol: Any) -> None:
    first = import_generated(acme, 3)
    edit(first, [{"op": "delete", "eval_ids": ["case_0000"]}], user=alice)
    client = Client()
    client.force_login(carol)
    assert client.get(reverse("evalset_versions", args=[first.evalset.pk])).status_code == 200
    assert client.get(reverse("evalset_diff", args=[first.evalset.pk]), {"from": 1, "to": 2}).status_code == 200
    case = EvalCase.objects.get(eval_id="case_0001")
    detail = client.get(reverse("case_detail", args=[case.pk])).content.decode()
    assert 'data-testid="case-actions"' not in detail
    assert 'id="bulk-form"' not in client.get(reverse("evalset_detail", args=[first.evalset.pk])).content.decode()
    assert client.get(reverse("case_edit", args=[case.pk])).status_code == 403
    assert client.post(reverse("case_delete", args=[case.pk]), {"base_version": "2"}).status_code == 403
    assert (
        client.post(
            reverse("evalset_bulk", args=[first.evalset.pk]),
            {"base_version": "2", "action": "delete", "eval_ids": ["case_0001"]},
        ).status_code
        == 403
    )
    assert EvalSetVersion.objects.count() == 2


def test_another_projects_eval_set_is_not_found(acme: Project, globex: Project, bob_client: Client) -> None:
    first = import_generated(acme, 2)
    case = EvalCase.objects.get(eval_id="case_0001")
    assert bob_client.get(reverse("evalset_versions", args=[first.evalset.pk])).status_code == 404
    assert bob_client.get(reverse("case_edit", args=[case.pk])).status_code == 404
    assert bob_client.post(reverse("evalset_bulk", args=[first.evalset.pk]), {"action": "delete"}).status_code == 404


def test_bulk_tag_and_delete_from_the_eval_set_page(acme: Project, alice_client: Client) -> None:
    first = import_generated(acme, 5)
    url = reverse("evalset_bulk", args=[first.evalset.pk])
    response = alice_client.post(
        url,
        {
            "base_version": "1",
            "action": "tag",
            "tag": "flaky",
            "eval_ids": ["case_0001", "case_0002"],
            "note": "mark flaky",
        },
    )
    assert response.status_code == 302
    v2 = EvalSet.objects.get(pk=first.evalset.pk).latest_version
    assert v2.number == 2 and set(
        EvalCase.objects.in_version(v2).tagged("flaky").values_list("eval_id", flat=True)
    ) == {"case_0001", "case_0002"}
    alice_client.post(url, {"base_version": "2", "action": "delete", "eval_ids": ["case_0004"]})
    v3 = EvalSet.objects.get(pk=first.evalset.pk).latest_version
    assert v3.number == 3 and "case_0004" not in ids(v3)
    # a stale form is a conflict: nothing written, the reason shown
    response = alice_client.post(url, {"base_version": "1", "action": "delete", "eval_ids": ["case_0000"]}, follow=True)
    assert "was saved after version 1" in response.content.decode()
    assert EvalSetVersion.objects.filter(evalset=first.evalset).count() == 3


def test_old_cases_cannot_be_edited_from_their_page(acme: Project, alice_client: Client) -> None:
    first = import_generated(acme, 2)
    old = EvalCase.objects.get(eval_id="case_0001")
    edit(first, [{"op": "put", "eval_id": "case_0001", "case": case_dict("case_0001", "z")}])
    assert alice_client.get(reverse("case_edit", args=[old.pk])).status_code == 404


# --- Promotion and the trend ------------------------------------------------------------------


def test_regressions_from_a_comparison_are_added_in_one_action(acme: Project, alice_client: Client) -> None:
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 12)
    baseline = make_run(acme, version, generated_outputs(12))
    candidate = make_run(acme, version, generated_outputs(12, wrong={2, 5}))
    form = alice_client.get(reverse("run_promote_form", args=[candidate.pk]), {"baseline": baseline.pk})
    assert 'data-testid="promote-form"' in form.content.decode() and "2 regressed cases" in form.content.decode()
    response = alice_client.post(
        reverse("run_promote_selected", args=[candidate.pk]),
        {"baseline": baseline.pk, "status": "regressed", "note": "two regressions"},
    )
    assert response.status_code == 302
    v2 = EvalSet.objects.get(pk=version.evalset_id).latest_version
    assert (v2.number, v2.how_created, v2.note) == (2, "promotion", "two regressions")
    added = EvalCase.objects.in_version(v2).filter(valid_from=2)
    assert sorted(added.values_list("eval_id", flat=True)) == [
        f"case_0002-run{candidate.pk}",
        f"case_0005-run{candidate.pk}",
    ]
    # the agent's wrong call became the proposed expectation
    promoted = added.get(eval_id=f"case_0002-run{candidate.pk}")
    assert promoted.conversation[0]["expected_tool_trajectory"][0]["args"] == {"id": 0}


def test_a_viewer_gets_no_promotion_form(acme: Project, carol: Any) -> None:
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 4)
    baseline = make_run(acme, version, generated_outputs(4))
    candidate = make_run(acme, version, generated_outputs(4, wrong={1}))
    client = Client()
    client.force_login(carol)
    form = client.get(reverse("run_promote_form", args=[candidate.pk]), {"baseline": baseline.pk})
    assert form.status_code == 200 and form.content == b""


def test_the_drilldown_proposes_the_agents_answer_as_the_new_expectation(acme: Project, alice_client: Client) -> None:
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 4)
    run = make_run(acme, version, generated_outputs(4, wrong={1}))
    result = run.results.get(case__eval_id="case_0001")
    drill = alice_client.get(reverse("run_case", args=[run.pk, result.pk])).content.decode()
    assert 'data-testid="promote"' in drill
    url = reverse("result_promote", args=[run.pk, result.pk]) + "?mode=expected"
    page = alice_client.get(url)
    fields = page.context["fields"]
    assert fields.eval_id == "case_0001" and json.loads(fields.turns[0].tool_calls) == [
        {"name": "lookup", "args": {"id": 0}}
    ]
    post = {
        "base_version": "1",
        "original": fields.original,
        "turn_count": "1",
        "eval_id": "case_0001",
        "tags": fields.tags,
        "turn-0-user": fields.turns[0].user,
        "turn-0-expected": fields.turns[0].expected,
        "turn-0-tools": '[{"name": "lookup", "args": {"id": 1}}]',
        "note": "fixed by hand",
        "mode": "expected",
    }
    response = alice_client.post(url, post)
    assert response.status_code == 302
    v2 = EvalSet.objects.get(pk=version.evalset_id).latest_version
    assert v2.how_created == "promotion"
    assert EvalCase.objects.in_version(v2).get(eval_id="case_0001").conversation[0]["expected_tool_trajectory"][0][
        "args"
    ] == {"id": 1}


def test_the_trend_marks_where_the_version_changed(acme: Project, alice_client: Client) -> None:
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 4)
    make_run(acme, version, generated_outputs(4))
    v2 = edit(version.evalset, [{"op": "tag", "eval_ids": ["case_0001"], "tag": "reviewed"}]).version
    later = make_run(acme, v2, generated_outputs(4))
    page = alice_client.get(reverse("evalset_trend", args=[version.evalset_id])).content.decode()
    assert 'data-testid="version-changes"' in page and f"at #{later.pk}" in page
    assert "?from=1&amp;to=2" in page
    # the line drawn on the two server-drawn charts (each at two widths) and its label
    assert page.count('class="svg-marker"') == 4 and ">v2</text>" in page


def test_the_run_pages_filtered_cases_are_added_in_one_action(acme: Project, alice_client: Client) -> None:
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    version = generated_version(acme, 8)
    run = make_run(acme, version, generated_outputs(8, wrong={1, 4}))
    page = alice_client.get(reverse("run_detail", args=[run.pk]), {"status": "failed"}).content.decode()
    assert 'data-testid="promote-table"' in page
    url = reverse("run_promote_selected", args=[run.pk])
    # without a filter nothing is added: not the whole run by mistake
    response = alice_client.post(url, {"from_table": "1", "opened_status": "", "q": ""}, follow=True)
    assert "filter the cases first" in response.content.decode()
    assert version.evalset.versions.count() == 1
    # htmx posts the filters the page opened with and the filter form's current ones, which win
    response = alice_client.post(
        url,
        {"from_table": "1", "opened_status": "", "status": "failed", "note": "failures"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 204 and "/diff/?from=1&to=2" in response["HX-Redirect"]
    v2 = EvalSet.objects.get(pk=version.evalset_id).latest_version
    assert sorted(EvalCase.objects.in_version(v2).filter(valid_from=2).values_list("eval_id", flat=True)) == [
        f"case_0001-run{run.pk}",
        f"case_0004-run{run.pk}",
    ]


def test_add_duplicate_and_delete_from_the_pages(acme: Project, alice_client: Client) -> None:
    first = import_generated(acme, 3)
    new_url = reverse("case_new", args=[first.evalset.pk])
    assert alice_client.get(new_url).status_code == 200
    response = alice_client.post(
        new_url,
        {
            "base_version": "1",
            "original": "",
            "turn_count": "1",
            "eval_id": "added",
            "name": "Added <i>here</i>",
            "turn-0-user": "Where is my order?",
            "turn-0-expected": "",
            "turn-0-tools": '[{"name": "get_order"}]',
            "note": "a new case",
        },
    )
    assert response.status_code == 302
    v2 = EvalSet.objects.get(pk=first.evalset.pk).latest_version
    added = EvalCase.objects.in_version(v2).get(eval_id="added")
    assert added.name == "Added <i>here</i>"
    assert added.conversation[0]["expected_tool_trajectory"][0]["name"] == "get_order"
    page = alice_client.get(reverse("case_detail", args=[added.pk])).content.decode()
    assert "Added &lt;i&gt;here&lt;/i&gt;" in page and "<i>here</i>" not in page
    alice_client.post(reverse("case_duplicate", args=[added.pk]), {"base_version": "2"})
    v3 = EvalSet.objects.get(pk=first.evalset.pk).latest_version
    assert ids(v3)[-2:] == ["added", "added-copy"]
    alice_client.post(reverse("case_delete", args=[added.pk]), {"base_version": "3"})
    v4 = EvalSet.objects.get(pk=first.evalset.pk).latest_version
    assert "added" not in ids(v4) and "added-copy" in ids(v4)
    assert list(
        EvalSetVersion.objects.filter(evalset=first.evalset).order_by("number").values_list("how_created", flat=True)
    ) == ["upload", "edit", "edit", "edit"]
