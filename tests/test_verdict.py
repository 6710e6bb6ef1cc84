"""One verdict per question (`evaluations.review.verdict`): the compare header, each criterion's
row and the N-way cells are worded in one place, so a row never claims more than the header.

The summaries are computed by `comparison.compare` over results built here (no database); the
pages are checked at the end with real runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import Project
from evaluations.review import comparison, verdict
from evaluations.review.comparison import ResultRow, RunData, ScoreRow, mcnemar_exact_p
from tests.compare_helpers import generated_outputs, generated_version, make_run


def runs(before: list[list[float]], after: list[list[float]]) -> dict[str, Any]:
    """The comparison of two runs of len(before) cases; each case a list of per-repeat scores
    of one criterion (passing at 0.5)."""
    sides = []
    for offset, cases in ((0, before), (1000, after)):
        results, scores = [], []
        pk = offset
        for index, repeats in enumerate(cases):
            for iteration, score in enumerate(repeats):
                pk += 1
                results.append(ResultRow(pk, f"case_{index}", iteration, "passed" if score >= 0.5 else "failed", 1.0))
                scores.append(ScoreRow(pk, "trajectory_match", score, score >= 0.5))
        sides.append(RunData(results, scores))
    return comparison.compare(*sides, resamples=200)


def row(summary: dict[str, Any]) -> dict[str, Any]:
    [criterion] = summary["criteria"]
    return criterion


def test_six_cases_is_the_fewest_at_which_anything_can_be_called() -> None:
    assert verdict.MIN_CASES == 6
    assert mcnemar_exact_p(5, 0) >= 0.05 > mcnemar_exact_p(6, 0)


def test_one_case_is_never_likely_real_and_shows_no_p_value() -> None:
    summary = runs([[1.0]], [[0.222]])
    criterion = row(summary)
    # The bootstrap interval of one delta is a point that excludes 0: that alone said "likely real".
    assert (criterion["ci_low"], criterion["ci_high"]) == pytest.approx((-0.778, -0.778))
    assert criterion["verdict"] == "too few cases to call (n = 1; 6 or more needed)"
    assert criterion["flips_verdict"] == "too few cases to call (n = 1; 6 or more needed)"
    assert not verdict.p_shown(criterion["judged"], criterion["pass_to_fail"], criterion["fail_to_pass"])
    assert "too few cases to call (n = 1; 6 or more needed)" in comparison.headline(summary)


def test_two_cases_are_too_few_but_their_p_value_is_shown() -> None:
    summary = runs([[1.0], [1.0]], [[0.0], [0.0]])
    criterion = row(summary)
    assert criterion["verdict"].startswith("too few cases to call (n = 2")
    assert verdict.p_shown(criterion["judged"], criterion["pass_to_fail"], criterion["fail_to_pass"])
    assert "too few cases to call (n = 2; 6 or more needed)" in comparison.headline(summary)


@pytest.mark.parametrize(("flipped", "called"), [(5, False), (6, True), (9, True)])
def test_all_flips_one_way_are_called_by_the_header_and_the_row_together(flipped: int, called: bool) -> None:
    summary = runs([[1.0]] * flipped, [[0.0]] * flipped)
    criterion = row(summary)
    header = comparison.headline(summary)
    assert ("the overall change is likely real" in header) is called
    assert (criterion["verdict"] == verdict.LIKELY_REAL) is called
    assert (criterion["flips_verdict"] == verdict.LIKELY_REAL) is called


def test_a_row_never_claims_more_than_the_header_below_the_minimum() -> None:
    # Every mix of regressions, improvements and unchanged cases under six cases, scores moving
    # by a different amount in each case so the intervals are not points at 0.
    for n in range(1, verdict.MIN_CASES):
        for down in range(n + 1):
            for up in range(n - down + 1):
                before = [[1.0]] * down + [[0.2]] * up + [[0.9]] * (n - down - up)
                after = [[0.1 * i] for i in range(down)] + [[0.8]] * up + [[0.9 - 0.01 * i] for i in range(n - down - up)]
                summary = runs(before, after)
                criterion = row(summary)
                assert "likely real" not in comparison.headline(summary)
                assert criterion["verdict"] != verdict.LIKELY_REAL, (n, down, up)
                assert criterion["flips_verdict"] != verdict.LIKELY_REAL, (n, down, up)


def test_reproducible_flips_with_few_cases_are_worded_apart_from_the_mean() -> None:
    # 2/2 -> 0/2 on three of eight cases: each flip reproduces, the set-level change is not called.
    summary = runs([[1.0, 1.0]] * 8, [[0.0, 0.0]] * 3 + [[1.0, 1.0]] * 5)
    criterion = row(summary)
    per_case = verdict.reproducibility_line(summary)
    assert per_case == "3 regressions reproducible: failed in every repeat of those cases"
    assert criterion["verdict"] == "not distinguishable from chance across 8 cases"
    # A bootstrap over three -1s among five 0s excludes 0 (p of an all-zero resample 2.3%), but
    # the flips (3 / 0, p = 0.25) are not called: neither is the mean.
    assert (criterion["ci_high"] < 0, criterion["flips_verdict"]) == (True, "not distinguishable from chance across 8 cases")
    # The old wording set "could be noise" beside "reproducible": read as a contradiction.
    assert "noise" not in criterion["verdict"] + criterion["flips_verdict"] + comparison.headline(summary)


def test_ties_are_no_overall_change_and_the_row_does_not_call_them() -> None:
    summary = runs([[1.0]] * 3 + [[0.0]] * 3 + [[1.0]] * 2, [[0.0]] * 3 + [[1.0]] * 3 + [[1.0]] * 2)
    criterion = row(summary)
    assert (criterion["pass_to_fail"], criterion["fail_to_pass"]) == (3, 3)
    assert "as many cases improved as regressed: no overall change (n = 8 cases)" in comparison.headline(summary)
    assert criterion["verdict"] == "not distinguishable from chance across 8 cases"
    assert criterion["flips_verdict"] == "not distinguishable from chance across 8 cases"


def test_a_row_is_capped_at_the_header_when_the_cases_flipped() -> None:
    criteria = [{"n": 40, "judged": 40, "verdict": verdict.LIKELY_REAL, "flips_verdict": verdict.LIKELY_REAL}]
    verdict.within_header(criteria, {"regressed": 3, "improved": 0})
    assert criteria[0]["verdict"] == criteria[0]["flips_verdict"] == "not distinguishable from chance across 40 cases"
    # no case flipped: the header says nothing of the means, which stand on their own
    criteria = [{"n": 40, "judged": 40, "verdict": verdict.LIKELY_REAL, "flips_verdict": verdict.NO_FLIPS}]
    verdict.within_header(criteria, {})
    assert criteria[0]["verdict"] == verdict.LIKELY_REAL


def test_no_difference_is_no_change_and_no_flips() -> None:
    criterion = row(runs([[1.0]] * 3, [[1.0]] * 3))
    assert (criterion["verdict"], criterion["flips_verdict"]) == ("no change", "no flips")


def test_n_way_does_not_call_a_pair_below_the_minimum() -> None:
    assert not verdict.pair_significant(1, 0.001, -0.3, -0.3)
    assert verdict.pair_significant(6, 0.03, -1.0, -1.0)
    assert not verdict.pair_significant(6, 0.03, -1.0, 0.1)


@pytest.mark.django_db
def test_the_compare_page_with_one_case_says_too_few_in_the_header_and_the_row(acme: Project,
                                                                             alice_client: Client) -> None:
    version = generated_version(acme, 1)
    baseline = make_run(acme, version, generated_outputs(1))
    wrong = generated_outputs(1)
    wrong[0]["turns"][0]["tool_calls"][0]["args"]["id"] = 99
    candidate = make_run(acme, version, wrong)
    page = alice_client.get(reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}").content.decode()
    criteria = page.split('class="table cmp-criteria"', 1)[1].split("</table>", 1)[0]
    # the header and the row say it in one wording (issue 41)
    assert "too few cases to call (n = 1; 6 or more needed)" in page.split('data-testid="headline"', 1)[1].split("</p>")[0]
    trajectory = next(tr for tr in criteria.split("<tr>") if ">trajectory_match<" in tr).split("</tr>")[0]
    assert "likely real" not in trajectory and "too few cases to call (n = 1" in trajectory
    # the last cell, p: a dash, not the 1.000 of a test over one pair
    assert trajectory.rstrip().endswith('<td class="num"><span class="muted" title="one pair: nothing to test">—</span></td>')
