"""The default baseline is on the candidate's own branch (issue 41, 2): the previous comparable
run there, else, for a branch's first run, the default branch's latest with the difference
said; never another feature branch's run. The branch and eval-set version of both runs travel
into the notification and the comparison's CSV export."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import AuditEvent, Project, Run
from evaluations.notify import payloads
from evaluations.review import baselines
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs

pytestmark = pytest.mark.django_db


def _run(project: Project, branch: str, outputs: list[dict[str, Any]], model: str = "gpt-4o") -> Run:
    made = make_run(project, import_demo(project), outputs, labels={"branch": branch, "model": model})
    return Run.objects.select_related("project", "evalset_version__evalset").get(pk=made.pk)


def test_a_main_run_is_never_compared_with_a_feature_branch_run(acme: Project, alice_client: Client) -> None:
    feature = _run(acme, "feature-x", perfect_outputs())
    main = _run(acme, "main", regressed_outputs())
    assert baselines.baseline_choice(main) is None  # the issue's #11 on main against #10 of feature-x
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.RUN_FINISHED, object_id=str(main.pk))
    assert "nothing to compare with" in event.summary and event.data["baseline"] is None
    item = payloads.run_item(main, event.data, [])
    assert "finished on main (v1): nothing to compare with" in item["verdict"] and item["baseline"] is None
    body = alice_client.get("/api/v1/compare/", {"candidate": main.pk}).json()
    assert body["code"] == "no_baseline" and "no earlier completed run on main" in body["message"]
    assert feature.pk != main.pk


def test_the_previous_run_on_the_same_branch_wins_over_a_later_run_elsewhere(acme: Project) -> None:
    first = _run(acme, "main", perfect_outputs())
    _run(acme, "feature-x", perfect_outputs())
    other_model = _run(acme, "main", perfect_outputs(), model="claude")
    third = _run(acme, "main", regressed_outputs())
    choice = baselines.baseline_choice(third)
    assert choice is not None and (choice.run.pk, choice.reason) == (first.pk, baselines.LIKE_FOR_LIKE)
    # nothing like for like on the branch: its previous run, with what differs said
    fourth = _run(acme, "main", regressed_outputs(), model="mistral")
    choice = baselines.baseline_choice(fourth)
    assert choice is not None and (choice.run.pk, choice.reason) == (third.pk, baselines.SAME_BRANCH)
    words = baselines.baseline_words(baseline=choice.run, candidate=fourth, reason=choice.reason)
    assert words.text == f"vs #{third.pk} · previous on main" and "model gpt-4o → mistral" in words.warning
    assert other_model.pk < third.pk


def test_a_branchs_first_run_falls_back_to_the_default_branch_and_says_so(acme: Project,
                                                                          alice_client: Client) -> None:
    main = _run(acme, "main", perfect_outputs())
    _run(acme, "feature-y", perfect_outputs())  # another feature branch, later: never the fallback
    feature = _run(acme, "feature-x", regressed_outputs())
    choice = baselines.baseline_choice(feature)
    assert choice is not None and (choice.run.pk, choice.reason) == (main.pk, baselines.FALLBACK)
    said = f"vs #{main.pk} · latest on main (no earlier run on feature-x)"
    run_page = alice_client.get(reverse("run_detail", args=[feature.pk])).content.decode()
    assert said in run_page
    compare = alice_client.get(reverse("compare") + f"?candidate={feature.pk}").content.decode()
    assert said in compare.split('data-testid="baseline-named">', 1)[1].split("</p>", 1)[0]
    api = alice_client.get("/api/v1/compare/", {"candidate": feature.pk}).json()
    assert api["baseline_named"] == {"reason": "default_branch", "text": said, "warning": "",
                                     "branch_note": "feature-x compared with main"}
    assert (api["baseline"]["branch"], api["baseline"]["evalset_version"]) == ("main", 1)
    assert (api["candidate"]["branch"], api["candidate"]["evalset_version"]) == ("feature-x", 1)
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.RUN_FINISHED, object_id=str(feature.pk))
    item = payloads.run_item(feature, event.data, [], main)
    assert item["verdict"].startswith(f"run #{feature.pk} finished on feature-x (v1): 2 regressions {said}")
    assert item["baseline"] == {"id": main.pk, "url": item["baseline"]["url"], "label": said, "branch": "main",
                                "model": "gpt-4o", "evalset_version": 1}
    assert item["run"]["branch"] == "feature-x" and item["run"]["evalset_version"] == 1


def test_the_compare_csv_says_which_runs_branches_and_versions_it_compared(acme: Project,
                                                                          alice_client: Client) -> None:
    main = _run(acme, "main", perfect_outputs())
    feature = _run(acme, "feature-x", regressed_outputs())
    response = alice_client.get(reverse("compare_csv"), {"baseline": main.pk, "candidate": feature.pk})
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    header = rows[0]
    at = header.index("baseline_run")
    assert header[at:at + 6] == ["baseline_run", "baseline_branch", "baseline_evalset_version", "candidate_run",
                                 "candidate_branch", "candidate_evalset_version"]
    assert header[-1] == "causes"
    assert all(row[at:at + 6] == [str(main.pk), "main", "1", str(feature.pk), "feature-x", "1"] for row in rows[1:])
