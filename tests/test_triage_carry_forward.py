"""Triage that carries forward: a decision belongs to the case on its eval set and branch,
shows on every later comparison of that branch until the case passes again there, and the
untriaged queue is built per branch. Bulk triage, tab counts, and an activity feed that
links runs to their comparisons and triage events to their cases."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import AuditEvent, Project, Run, Triage
from evaluations.review import comparison
from evaluations.review.triage import triage_update
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs

pytestmark = pytest.mark.django_db


def run_on(project: Project, version: Any, outputs: list[dict[str, Any]], branch: str = "main", **kw: Any) -> Run:
    return make_run(project, version, outputs, labels={"branch": branch, "model": "m"}, **kw)


def decide(baseline: Run, candidate: Run, eval_id: str, status: str, actor: Any) -> Triage:
    return triage_update(project=candidate.project, evalset=candidate.evalset_version.evalset, eval_id=eval_id,
                         baseline=baseline, candidate=candidate, status=status, actor=actor)


def queue(client: Client) -> str:
    return client.get(reverse("review_queue") + "?tab=untriaged").content.decode()


def test_a_decision_carries_to_the_next_comparison_until_the_case_passes_again(acme: Project, alice: Any,
                                                                               alice_client: Client) -> None:
    version = import_demo(acme)
    first = run_on(acme, version, perfect_outputs())
    second = run_on(acme, version, regressed_outputs())  # weather_tokyo and order_status regress
    decide(first, second, "weather_tokyo", Triage.Status.EXPECTED, alice)
    assert "weather_tokyo" not in queue(alice_client) and "order_status" in queue(alice_client)

    evalset = version.evalset
    evalset.baseline_run = first  # the next run is compared with the same baseline
    evalset.save()
    third = run_on(acme, version, regressed_outputs())  # still regressed: the decision stands
    page = alice_client.get(reverse("compare") + f"?baseline={first.pk}&candidate={third.pk}").content.decode()
    tokyo = page.split('data-testid="cases-table"', 1)[1].split("weather_tokyo", 1)[1].split("</tr>", 1)[0]
    assert "Expected change" in tokyo
    assert "weather_tokyo" not in queue(alice_client)

    fourth = run_on(acme, version, perfect_outputs())  # passes again: the decision ends
    triage = Triage.objects.get(eval_id="weather_tokyo")
    assert triage.status == Triage.Status.FIXED
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.TRIAGE_CHANGED,
                                     summary__contains=f"passed again in run #{fourth.pk}").exists()
    fifth = run_on(acme, version, regressed_outputs())  # and a new regression is untriaged again
    comparison.comparison_get(baseline=first, candidate=fifth)
    assert "weather_tokyo" in queue(alice_client)


def test_the_queue_keeps_each_branchs_regressions(acme: Project, alice: Any, alice_client: Client) -> None:
    version = import_demo(acme)
    base = run_on(acme, version, perfect_outputs())
    main = run_on(acme, version, regressed_outputs())
    canary = run_on(acme, version, perfect_outputs(), branch="feat/planner")  # later, on another branch, passes
    comparison.comparison_get(baseline=base, candidate=canary)
    page = queue(alice_client)
    assert f"/runs/{main.pk}/cases/" in page  # main's regressions are still there
    assert '<span class="label-key">branch</span> main</span>' in page  # and say which branch they are on
    assert page.count(">weather_tokyo<") == 1
    # a decision on the canary's branch does not speak for main
    decide(base, canary, "weather_tokyo", Triage.Status.EXPECTED, alice)
    assert ">weather_tokyo<" in queue(alice_client)


def test_bulk_triage_and_counts_on_the_tabs(acme: Project, alice: Any, alice_client: Client) -> None:
    version = import_demo(acme)
    base = run_on(acme, version, perfect_outputs())
    cand = run_on(acme, version, regressed_outputs())
    page = queue(alice_client)
    assert 'data-testid="tab-untriaged">Untriaged regressions <span class="tab-count num">2</span>' in page
    assert 'data-testid="tab-assigned">Assigned to me <span class="tab-count num">0</span>' in page
    response = alice_client.post(reverse("triage_bulk"), {
        "status": Triage.Status.FLAKY,
        "case": [f"{cand.pk}:{base.pk}:weather_tokyo", f"{cand.pk}:{base.pk}:order_status"]})
    assert response.status_code == 302
    assert set(Triage.objects.values_list("eval_id", "status")) == {("weather_tokyo", "flaky"),
                                                                    ("order_status", "flaky")}
    page = queue(alice_client)
    assert '<span class="tab-count num">0</span>' in page.split('data-testid="tab-untriaged"', 1)[1][:120]
    # a case the run does not have is refused with what is wrong, and nothing is written
    response = alice_client.post(reverse("triage_bulk"), {
        "status": Triage.Status.CONFIRMED, "case": [f"{cand.pk}:{base.pk}:weather_tokyo",
                                                    f"{cand.pk}:{base.pk}:no_such_case"]}, follow=True)
    assert f"No case &#x27;no_such_case&#x27; in run #{cand.pk} of Acme." in response.content.decode()
    assert Triage.objects.get(eval_id="weather_tokyo").status == "flaky"


def test_viewers_cannot_bulk_triage(acme: Project, alice: Any) -> None:
    from django.contrib.auth import get_user_model

    from evaluations.models import Membership

    version = import_demo(acme)
    base = run_on(acme, version, perfect_outputs())
    cand = run_on(acme, version, regressed_outputs())
    viewer = get_user_model().objects.create_user("vera", "v@example.com", "vera-pass-123")
    Membership.objects.create(project=acme, user=viewer, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(viewer)
    response = client.post(reverse("triage_bulk"), {"status": "flaky",
                                                    "case": [f"{cand.pk}:{base.pk}:weather_tokyo"]})
    assert response.status_code == 403
    assert not Triage.objects.exists()


def test_activity_links_finished_runs_and_triage_to_their_pages(acme: Project, alice: Any,
                                                                alice_client: Client) -> None:
    version = import_demo(acme)
    base = run_on(acme, version, perfect_outputs())
    cand = run_on(acme, version, regressed_outputs())
    decide(base, cand, "order_status", Triage.Status.CONFIRMED, alice)
    page = alice_client.get(reverse("project_activity", args=[acme.slug])).content.decode()
    assert f"run #{cand.pk} finished: 2 regressions vs #{base.pk}" in page
    assert f'href="/compare/?baseline={base.pk}&amp;candidate={cand.pk}"' in page
    link = f"/runs/{cand.pk}/case/?eval_id=order_status&amp;baseline={base.pk}"
    assert f'href="{link}"' in page
    response = alice_client.get(link.replace("&amp;", "&"))
    assert response.status_code == 302
    assert response["Location"].startswith(f"/runs/{cand.pk}/cases/")
    assert alice_client.get(response["Location"]).status_code == 200
