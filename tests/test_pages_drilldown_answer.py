"""The drill-down starts with its answer: a summary of what differs per turn with a jump link
to each difference, matched calls folded, and the baseline's calls shown only where they differ
from the expected ones. (Its height in Chromium: tests/test_browser_drilldown_answer.py.)"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project
from tests.compare_helpers import make_run
from tests.drilldown_helpers import four_turn_runs, outputs

pytestmark = pytest.mark.django_db


def drill(client: Client, run_pk: int, baseline_pk: int | None = None) -> str:
    result = CaseResult.objects.get(run_id=run_pk)
    url = reverse("run_case", args=[run_pk, result.pk]) + (f"?baseline={baseline_pk}" if baseline_pk else "")
    return client.get(url).content.decode()


def test_the_summary_names_each_difference_and_links_to_it(acme: Project, alice_client: Client) -> None:
    baseline, candidate = four_turn_runs(acme)
    page = drill(alice_client, candidate.pk, baseline.pk)
    summary = page.split('data-testid="drill-summary"', 1)[1].split("</section>", 1)[0]
    items = re.findall(r'<li><a href="#([^"]+)">(.*?)</a></li>', summary)
    assert [(anchor, re.sub("<[^>]+>", "`", text)) for anchor, text in items] == [
        ("turn-2-call-2", "turn 2: 1 missing call: fetch"),
        ("turn-3-call-3", "turn 3: `value` differs in store"),
    ]
    # each link lands on its row
    assert 'id="turn-2-call-2"' in page and 'id="turn-3-call-3"' in page
    # before the conversation
    assert page.index('data-testid="drill-summary"') < page.index('id="turns-heading"')


def test_matched_calls_are_folded_to_one_closed_line(acme: Project, alice_client: Client) -> None:
    baseline, candidate = four_turn_runs(acme)
    page = drill(alice_client, candidate.pk, baseline.pk)
    folded = re.findall(r'<details class="call-folded"( open)?', page)
    assert len(folded) == 10 and not any(folded)  # 12 expected calls: one missing, one differs


def test_the_baseline_table_only_where_the_baseline_strayed_from_the_expected(acme: Project,
                                                                             alice_client: Client) -> None:
    baseline, candidate = four_turn_runs(acme)
    page = drill(alice_client, candidate.pk, baseline.pk)
    # the baseline made every expected call: no second table anywhere
    assert 'data-testid="baseline-calldiff"' not in page
    assert page.count('data-testid="baseline-as-expected"') == 4
    # a baseline that itself missed calls (the candidate's twin) keeps its table in turn 2
    twin = make_run(acme, candidate.evalset_version, outputs(regressed=True), name="twin")
    page = drill(alice_client, twin.pk, candidate.pk)
    assert page.count('data-testid="baseline-calldiff"') == 2  # turns 2 and 3
    assert page.count('data-testid="baseline-as-expected"') == 2


def test_a_case_that_matches_says_nothing_differs(acme: Project, alice_client: Client) -> None:
    baseline, _ = four_turn_runs(acme)
    page = drill(alice_client, baseline.pk)
    summary = page.split('data-testid="drill-summary"', 1)[1].split("</section>", 1)[0]
    assert "Nothing: every turn made the expected calls" in summary and "<li>" not in summary
