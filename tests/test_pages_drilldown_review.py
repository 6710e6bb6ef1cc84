"""The drill-down reads like a review: unrelated responses side by side (a word diff only when
they are close), justifications as rows, a switcher between repeats, the baseline's calls
folded away when they all match, and triage in a side panel beside the case."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Run
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs

X = "\u00d7"  # the multiplication sign the pages print

pytestmark = pytest.mark.django_db


def url(run: Run, eval_id: str, iteration: int = 0, **params: Any) -> str:
    result = CaseResult.objects.get(run=run, case__eval_id=eval_id, iteration=iteration)
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse("run_case", args=[run.pk, result.pk]) + (f"?{query}" if query else "")


def with_response(outputs: list[dict[str, Any]], eval_id: str, text: str) -> list[dict[str, Any]]:
    outputs = copy.deepcopy(outputs)
    next(o for o in outputs if o["eval_id"] == eval_id)["turns"][0]["final_response"] = text
    return outputs


def test_unrelated_responses_are_side_by_side_and_close_ones_diffed(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    outputs = with_response(perfect_outputs(), "weather_tokyo", "Sorry, I could not look that up.")
    expected = next(o for o in perfect_outputs() if o["eval_id"] == "order_status")["turns"][0]["final_response"]
    outputs = with_response(outputs, "order_status", expected.rstrip(".") + " today.")
    run = make_run(acme, version, outputs)
    far = alice_client.get(url(run, "weather_tokyo")).content.decode()
    assert 'data-testid="side-by-side"' in far and 'data-testid="worddiff"' not in far
    close = alice_client.get(url(run, "order_status")).content.decode()
    assert 'data-testid="worddiff"' in close and 'data-testid="side-by-side"' not in close
    assert "<ins>" in close.split('data-testid="worddiff"', 1)[1].split("</pre>", 1)[0]


def test_justifications_are_rows_and_repeats_can_be_switched(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    outputs = [dict(o, iteration=i) for i in (0, 1) for o in copy.deepcopy(regressed_outputs())]
    run = make_run(acme, version, outputs, iterations=2)
    page = alice_client.get(url(run, "weather_tokyo", 0, baseline=run.pk)).content.decode()
    rows = "".join(part.split("</dl>", 1)[0] for part in page.split('data-testid="justification"')[1:])
    assert '<dt class="mono">counts.args_differ</dt><dd>1</dd>' in rows
    repeats = page.split('data-testid="repeats"', 1)[1].split("</nav>", 1)[0]
    second = CaseResult.objects.get(run=run, case__eval_id="weather_tokyo", iteration=1)
    assert 'aria-current="page"' in repeats and "#1" in repeats
    assert f'href="/runs/{run.pk}/cases/{second.pk}/?baseline={run.pk}"' in repeats  # the filters travel along


def test_matching_baseline_calls_are_folded_and_triage_sits_beside_the_case(acme: Project,
                                                                           alice_client: Client) -> None:
    version = import_demo(acme)
    base = make_run(acme, version, perfect_outputs())
    cand = make_run(acme, version, regressed_outputs())
    page = alice_client.get(url(cand, "weather_tokyo", baseline=base.pk, status="regressed")).content.decode()
    # the baseline made the expected calls: no second table (the first one says it all)
    assert 'data-testid="baseline-calls"' not in page and 'data-testid="baseline-as-expected"' in page
    # a baseline that strayed from the expected calls in the same way as the candidate: its
    # table is there, folded, saying they match
    again = make_run(acme, version, regressed_outputs())
    same = alice_client.get(url(again, "weather_tokyo", baseline=cand.pk, status="all")).content.decode()
    assert '<details class="baseline-calls" data-testid="baseline-calls">' in same
    assert ": all 1 match" in same
    side = page.split('<aside class="drill-side"', 1)[1].split("</aside>", 1)[0]
    assert 'data-testid="triage-panel"' in side


def test_the_run_pages_cases_table_flags_cases_whose_repeats_disagree(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    first = copy.deepcopy(perfect_outputs())
    second = [dict(o, iteration=1) for o in copy.deepcopy(regressed_outputs())]  # tokyo, order_status fail once
    run = make_run(acme, version, first + second, iterations=2)
    page = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    table = page.split('<table class="table results">', 1)[1].split("</table>", 1)[0]
    rows = table.split("<tbody>", 1)[1].split("</tr>")
    flagged = {re.search(r'<td class="mono"><a [^>]*>([^<]+)</a>', row).group(1)  # type: ignore[union-attr]
               for row in rows if 'data-testid="flaky"' in row}
    assert flagged == {"weather_tokyo", "order_status"}
    assert sum('data-testid="flaky"' in row for row in rows) == 4  # both repeats of each flaky case


def test_counts_of_a_run_with_repeats_say_cases_not_results(acme: Project, alice_client: Client) -> None:
    """8 cases, 2 repeats each, are 16 results: "Cases" and "n=" count the 8 cases everywhere."""
    version = import_demo(acme)
    first = copy.deepcopy(perfect_outputs())
    second = [dict(o, iteration=1) for o in copy.deepcopy(perfect_outputs())]
    run = make_run(acme, version, first + second, iterations=2)
    page = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    cards = page.split('aria-label="Summary"', 1)[1].split("</section>", 1)[0]
    assert "16 of 16 judged results" in cards and f"(8 cases {X} 2 repeats)" in cards
    assert "n=16" not in cards and f"(8 cases {X} 2)" in cards
    assert f"(8 cases {X} 2 repeats)" in page.split('class="table-summary"', 1)[1].split("</p>", 1)[0]
    listing = alice_client.get(reverse("run_list")).content.decode()
    row = listing.split(f'href="/runs/{run.pk}/"', 1)[1].split("</tr>", 1)[0]
    assert f'<td class="num">8 <span class="muted" title="2 repeats of each case">{X} 2</span></td>' in row
    assert f">8 cases {X} 2</span>" in row and "n=16" not in row and "muted nowrap" in row
    home = alice_client.get(reverse("home")).content.decode()
    assert f">8 cases {X} 2</span>" in home and "n=16" not in home
