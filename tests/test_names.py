"""Names people can read: an eval set is renamed from its page or the API with its old name kept
in the activity feed, and long eval ids (absolute paths from real ADK files) are shown shortened
with the whole id in their title and copy button, on every page that lists them. (Their width at
390 px in Chromium: tests/test_browser_names.py.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import AuditEvent, CaseResult, EvalSet, Project
from evaluations.web.templatetags.evalsite import EVAL_ID_CHARS, eval_id, short_id
from tests.api_helpers import token_client
from tests.drilldown_helpers import four_turn_runs

LONG_ID = "/home/runner/work/agents/" + "customer_support/" * 9 + "evals/refund_after_two_failed_payments.test.json"


def test_a_path_like_id_keeps_its_last_segments_after_a_leading_ellipsis() -> None:
    assert len(LONG_ID) > 200
    shown = short_id(LONG_ID)
    # the file name alone is too long: it is cut in its middle, its start and extension kept
    assert shown == "…/refund_after_two…ayments.test.json"
    assert len(shown) <= EVAL_ID_CHARS
    assert short_id("/a/b/weather.json") == "/a/b/weather.json"  # short ids stay whole
    assert short_id("/srv/evals/" + "x" * 30 + "/tokyo.json") == "…/tokyo.json"


def test_an_id_without_a_path_is_cut_in_the_middle() -> None:
    shown = short_id("case_" + "a" * 50 + "_end")
    assert len(shown) == EVAL_ID_CHARS and shown.startswith("case_aaa") and shown.endswith("a_end")
    assert "…" in shown


def test_the_tag_escapes_the_id_and_keeps_it_whole_for_hover_and_copy() -> None:
    hostile = "/evals/" + "d" * 40 + '/<script>alert("x")</script>.json'
    html = str(eval_id(hostile, "/runs/1/cases/2/", baseline=1, status="regressed"))
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert html.count('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;.json"') == 2  # title and data-copy-text
    assert 'href="/runs/1/cases/2/?baseline=1&amp;status=regressed"' in html
    assert 'class="eid-copy"' in html
    assert 'class="eid-copy"' not in str(eval_id("short_id"))


@pytest.mark.django_db
def test_long_ids_are_shortened_on_compare_the_case_page_the_drilldown_and_tables(acme: Project,
                                                                                  alice_client: Client) -> None:
    baseline, candidate = four_turn_runs(acme, eval_id=LONG_ID)
    result = CaseResult.objects.get(run=candidate)
    pages = {
        "compare": reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}&status=all",
        "case": reverse("case_detail", args=[result.case_id]),
        "drilldown": reverse("run_case", args=[candidate.pk, result.pk]) + f"?baseline={baseline.pk}",
        "run": reverse("run_detail", args=[candidate.pk]),
        "evalset": reverse("evalset_detail", args=[candidate.evalset_version.evalset_id]),
    }
    short = short_id(LONG_ID)
    for name, url in pages.items():
        page = alice_client.get(url).content.decode()
        # the whole id only inside attributes (title, data-copy-text, hrefs) and the <title>; the text shows it short
        body = page.split("</title>", 1)[1]
        visible = [chunk.split(">", 1)[1] for chunk in body.split("<")[1:] if ">" in chunk]
        assert not any(LONG_ID in text for text in visible), name
        assert short in body and f'data-copy-text="{LONG_ID}"' in body, name


@pytest.mark.django_db
def test_a_member_renames_an_eval_set_and_its_history_keeps_the_old_name(acme: Project, alice: Any,
                                                                        alice_client: Client) -> None:
    baseline, _ = four_turn_runs(acme)
    evalset = baseline.evalset_version.evalset
    old = evalset.display_name
    response = alice_client.post(reverse("evalset_rename", args=[evalset.pk]), {"name": "  Refunds   (ADK) "})
    assert response.status_code == 302
    evalset.refresh_from_db()
    assert (evalset.name, evalset.eval_set_id) == ("Refunds (ADK)", "four")  # uploads still match on the id
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.EVALSET_RENAMED)
    assert event.data == {"from": old, "to": "Refunds (ADK)"} and event.actor == alice
    page = alice_client.get(reverse("evalset_detail", args=[evalset.pk])).content.decode()
    assert "<h1>Refunds (ADK)</h1>" in page and f"renamed eval set “{old}” to “Refunds (ADK)”" in page
    # the same name again changes nothing and records nothing
    alice_client.post(reverse("evalset_rename", args=[evalset.pk]), {"name": "Refunds (ADK)"})
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.EVALSET_RENAMED).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "error"), [("   ", "name: give a name"),
                                             ("x" * 256, "name: at most 255 characters (256 given)"),
                                             ("bad\x00name", "name: no control characters")])
def test_a_bad_name_is_refused_with_its_reason_and_writes_nothing(name: str, error: str, acme: Project,
                                                                  alice_client: Client) -> None:
    baseline, _ = four_turn_runs(acme)
    evalset = baseline.evalset_version.evalset
    response = alice_client.post(reverse("evalset_rename", args=[evalset.pk]), {"name": name})
    assert response.status_code == 400 and error in response.content.decode()
    assert EvalSet.objects.get(pk=evalset.pk).name == evalset.name
    assert not AuditEvent.objects.filter(verb=AuditEvent.Verb.EVALSET_RENAMED).exists()


@pytest.mark.django_db
def test_the_api_renames_with_patch_and_refuses_viewers_and_extra_fields(acme: Project, alice: Any,
                                                                         django_user_model: Any) -> None:
    baseline, _ = four_turn_runs(acme)
    evalset = baseline.evalset_version.evalset
    url = f"/api/v1/evalsets/{evalset.pk}/"
    client = token_client(alice)
    response = client.patch(url, data=json.dumps({"name": "Renamed by CI"}), content_type="application/json")
    assert response.status_code == 200 and response.json()["name"] == "Renamed by CI"
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.EVALSET_RENAMED)
    assert event.data["to"] == "Renamed by CI" and "through the API" in event.summary
    bad = client.patch(url, data=json.dumps({"name": "x", "eval_set_id": "other"}), content_type="application/json")
    assert bad.status_code == 400
    assert [p["path"] for p in bad.json()["problems"]] == ["eval_set_id"]
    blank = client.patch(url, data=json.dumps({"name": ""}), content_type="application/json")
    assert blank.status_code == 400 and blank.json()["problems"][0] == {
        "message": "give a name", "path": "name", "file": None, "case": None, "line": None, "column": None}
    viewer = django_user_model.objects.create_user("vera", password="vera-pass-123")
    acme.memberships.create(user=viewer, role="viewer")
    refused = token_client(viewer).patch(url, data=json.dumps({"name": "Mine"}), content_type="application/json")
    assert refused.status_code == 403
    assert EvalSet.objects.get(pk=evalset.pk).name == "Renamed by CI"
