"""A run in progress looks live: its counters move per result (not per batch), the run page
says how long it has run and how long is left, the results fill in as they finish, and the
compare page marks the candidate's unfinished cases "pending" and holds the verdict."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Run
from evaluations.review import comparison
from evaluations.runs import services as runs
from tests.compare_helpers import import_demo, make_run, perfect_outputs

pytestmark = pytest.mark.django_db

SEEN: list[int] = []  # the run's settled-result counter as each agent call began


def slow_recording_agent(request: dict[str, Any]) -> dict[str, Any]:
    """The demo agent, 0.6 s a turn, noting how many results the run had settled when called."""
    from evaluations.demo.agent import respond

    run = Run.objects.order_by("-pk").first()
    assert run is not None
    SEEN.append(run.cases_done)
    time.sleep(0.6)
    return respond(request)


@pytest.mark.django_db(transaction=True)  # the callable runs in a thread of its own: it reads committed rows
def test_counters_move_per_result_for_a_slow_agent(acme: Project) -> None:
    """Every case of the demo set fits one 250-result batch: before, its counters stayed at 0
    until the whole batch was written. Now each slow result is written as it settles."""
    SEEN.clear()
    version = import_demo(acme)
    run = runs.run_create(project=acme, version=version, target_kind=Run.TargetKind.PYTHON,
                          target={"callable": f"{__name__}:slow_recording_agent"}, eval_ids=["weather_tokyo",
                                                                                          "order_status",
                                                                                          "flight_search_lis"],
                          enqueue=False)
    runs.run_execute_here(run.pk)
    assert Run.objects.get(pk=run.pk).cases_done == 3
    # one agent call per turn; the counter seen at the start of each case's first call went 0, 1, 2
    firsts = sorted(set(SEEN))
    assert firsts == [0, 1, 2], SEEN


def _half_run(project: Project) -> tuple[Run, Run]:
    """A finished baseline and a candidate with only its first half of results settled."""
    version = import_demo(project)
    baseline = make_run(project, version, perfect_outputs(), name="baseline")
    from evaluations.schemas.outputs import AgentOutput

    candidate = runs.run_create(project=project, version=version, target_kind="uploaded", name="candidate",
                                outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()], enqueue=False)
    Run.objects.filter(pk=candidate.pk).update(status=Run.Status.RUNNING, started_at=candidate.created_at)
    pks = list(CaseResult.objects.filter(run=candidate).order_by("pk").values_list("pk", flat=True))
    runs.run_batch(candidate.pk, pks[0], pks[len(pks) // 2 - 1])
    candidate.refresh_from_db()
    assert candidate.status == Run.Status.RUNNING
    return baseline, candidate


def test_the_compare_page_marks_unfinished_cases_pending_and_holds_the_verdict(acme: Project,
                                                                               alice_client: Client) -> None:
    baseline, candidate = _half_run(acme)
    summary = comparison.comparison_get(baseline=baseline, candidate=candidate)
    assert summary["counts"][comparison.PENDING] == 4
    assert summary["counts"][comparison.REMOVED] == 0
    page = alice_client.get(reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}"
                            "&status=all").content.decode()
    headline = page.split('data-testid="headline">', 1)[1].split("</p>", 1)[0]
    assert headline.startswith("The candidate is still running: 4 of 8 cases pending; the verdict waits")
    assert "too few cases" not in headline and "likely real" not in headline
    assert "removed" not in page.split('id="cases"', 1)[1]
    assert page.count("cmp-status cmp-pending") >= 4
    # the page keeps itself current: the cases poll, and the run's progress reloads it when done
    assert f'hx-get="/runs/{candidate.pk}/progress/?reload=1" hx-trigger="every 3s"' in page
    done = alice_client.get(reverse("run_progress", args=[candidate.pk]) + "?reload=1", HTTP_HX_REQUEST="true")
    assert "HX-Refresh" not in done  # still running: no reload yet


def test_the_progress_panel_shows_elapsed_eta_and_the_results_that_finished(acme: Project,
                                                                            alice_client: Client) -> None:
    _, candidate = _half_run(acme)
    panel = alice_client.get(reverse("run_progress", args=[candidate.pk])).content.decode()
    assert "<strong>4</strong> of 8 results settled" in panel
    assert 'data-testid="elapsed"' in panel
    assert 'data-testid="eta">≈ ' in panel
    recent = panel.split('data-testid="recent-results"', 1)[1].split("</table>", 1)[0]
    assert recent.count("<tr>") == 1 + 4  # the head and the four settled results
    assert f"/runs/{candidate.pk}/cases/" in recent
