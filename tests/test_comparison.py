"""Baseline-vs-candidate logic and its statistics, on constructed data: no database."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from evaluations.review import comparison
from evaluations.review.comparison import (
    ERRORED,
    FLAKY,
    IMPROVED,
    NEW,
    REGRESSED,
    REMOVED,
    UNCHANGED_FAIL,
    UNCHANGED_PASS,
    ResultRow,
    RunData,
    ScoreRow,
    bootstrap_mean_ci,
    case_outcome,
    classify,
    compare,
    mcnemar_exact_p,
)

P, F, E = "pass", "fail", "error"


# --- Classification -----------------------------------------------------------------------


@pytest.mark.parametrize(("baseline", "candidate", "expected"), [
    ([P], [F], REGRESSED),
    ([P], [E], REGRESSED),
    ([F], [P], IMPROVED),
    ([E], [P], IMPROVED),
    ([P], [P], UNCHANGED_PASS),
    ([F], [F], UNCHANGED_FAIL),
    ([E], [F], UNCHANGED_FAIL),
    ([F], [E], ERRORED),
    ([E], [E], ERRORED),
    (None, [P], NEW),
    (None, [F], NEW),
    ([P], None, REMOVED),
    ([P, P, P], [F, F, F], REGRESSED),
    ([P, P, P], [P, F, P], FLAKY),
    ([P, F, P], [F, F, F], FLAKY),
    ([F, E], [P, P], IMPROVED),
])
def test_each_case_gets_one_status(baseline: list[str] | None, candidate: list[str] | None, expected: str) -> None:
    assert classify(baseline, candidate) == expected


def test_mixed_repeats_are_flaky_and_not_a_new_regression() -> None:
    assert case_outcome([P, F, P]) == "mixed"
    assert classify([P, P], [P, F]) == FLAKY
    assert classify([P, P], [F, F]) == REGRESSED


def test_a_case_in_neither_run_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        classify(None, [])


def test_every_status_has_a_word_an_icon_and_a_colour() -> None:
    assert next(iter(comparison.STATUSES)) == REGRESSED  # the most urgent first
    for style in comparison.STATUSES.values():
        assert style.label and style.icon and style.colour.startswith("#")
    assert len({s.colour for s in comparison.STATUSES.values()}) == len(comparison.STATUSES)


# --- McNemar ------------------------------------------------------------------------------


def test_mcnemar_exact_p_matches_the_binomial_test() -> None:
    # b=10, c=2: 2 * P(X <= 2), X ~ Binomial(12, 1/2) = 2 * 79 / 4096.
    assert mcnemar_exact_p(10, 2) == pytest.approx(0.0386, abs=5e-5)
    assert mcnemar_exact_p(10, 2) == pytest.approx(2 * 79 / 4096)
    assert mcnemar_exact_p(2, 10) == mcnemar_exact_p(10, 2)


def test_mcnemar_edge_cases() -> None:
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(3, 3) == 1.0  # capped: the two tails overlap
    assert mcnemar_exact_p(0, 25) == pytest.approx(2 * 0.5 ** 25)
    assert mcnemar_exact_p(1, 0) == 1.0


def test_mcnemar_stays_exact_for_thousands_of_flips() -> None:
    p = mcnemar_exact_p(2600, 2400)
    assert 0 < p < 0.01  # a 52/48 split of 5,000 flips is unlikely by chance
    assert mcnemar_exact_p(2500, 2500) == 1.0


# --- Bootstrap ----------------------------------------------------------------------------


def test_the_bootstrap_interval_covers_the_true_delta() -> None:
    rng = random.Random(7)
    true_delta = -0.08
    deltas = [true_delta + rng.gauss(0, 0.2) for _ in range(400)]
    low, high = bootstrap_mean_ci(deltas)  # type: ignore[misc]
    assert low < true_delta < high
    assert high < 0  # and it is sure the change is real
    # Width close to the normal theory's 2 * 1.96 * sd / sqrt(n).
    assert (high - low) == pytest.approx(2 * 1.96 * 0.2 / math.sqrt(400), rel=0.2)


def test_the_bootstrap_is_reproducible_and_seeded() -> None:
    deltas = [0.0] * 90 + [-1.0] * 6 + [0.5] * 4
    assert bootstrap_mean_ci(deltas) == bootstrap_mean_ci(deltas)
    assert comparison.bootstrap_means(deltas, seed=1) != comparison.bootstrap_means(deltas, seed=2)


def test_the_bootstrap_of_no_change_is_a_point_and_of_nothing_is_none() -> None:
    assert bootstrap_mean_ci([0.0] * 50) == (0.0, 0.0)
    assert bootstrap_mean_ci([]) is None
    assert bootstrap_mean_ci([0.3]) == pytest.approx((0.3, 0.3))


# --- compare() ----------------------------------------------------------------------------


def run_data(cases: dict[str, list[tuple[str, float | None]]], *, offset: int = 0,
             latency: float = 1.0, tags: tuple[str, ...] = ("t",)) -> RunData:
    """`cases`: eval_id -> per repeat (status, trajectory score)."""
    results, scores = [], []
    pk = offset
    for eval_id, repeats in cases.items():
        for iteration, (status, score) in enumerate(repeats):
            pk += 1
            results.append(ResultRow(pk, eval_id, iteration, status, latency, tags))
            if score is not None:
                scores.append(ScoreRow(pk, "trajectory_match", score, score >= 0.8))
    return RunData(results, scores)


def statuses(summary: dict[str, Any]) -> dict[str, str]:
    return {case["id"]: case["s"] for case in summary["cases"]}


def test_compare_classifies_matches_by_eval_id_and_counts() -> None:
    baseline = run_data({"a": [("passed", 1.0)], "b": [("passed", 1.0)], "c": [("failed", 0.0)],
                         "gone": [("passed", 1.0)]})
    candidate = run_data({"a": [("passed", 1.0)], "b": [("failed", 0.5)], "c": [("passed", 1.0)],
                          "fresh": [("error", None)]}, offset=100)
    summary = compare(baseline, candidate, resamples=200)
    assert statuses(summary) == {"a": UNCHANGED_PASS, "b": REGRESSED, "c": IMPROVED, "gone": REMOVED, "fresh": NEW}
    assert summary["counts"][REGRESSED] == 1 and summary["counts"][NEW] == 1
    assert summary["cases"][0]["id"] == "b"  # regressions first
    b = next(c for c in summary["cases"] if c["id"] == "b")
    assert (b["br"], b["cr"]) == (2, 102)  # the results a link opens
    gone = next(c for c in summary["cases"] if c["id"] == "gone")
    assert gone["cr"] is None and gone["br"] == 4


def test_flaky_candidates_are_kept_apart_from_regressions() -> None:
    baseline = run_data({"steady": [("passed", 1.0)] * 3, "wobbly": [("passed", 1.0)] * 3})
    candidate = run_data({"steady": [("failed", 0.0)] * 3,
                          "wobbly": [("passed", 1.0), ("failed", 0.0), ("passed", 1.0)]}, offset=100)
    summary = compare(baseline, candidate, resamples=200)
    assert statuses(summary) == {"steady": REGRESSED, "wobbly": FLAKY}
    wobbly = next(c for c in summary["cases"] if c["id"] == "wobbly")
    assert (wobbly["cp"], wobbly["cn"]) == (2, 3)  # pass rate across repeats
    assert wobbly["cr"] == 105  # its link opens the repeat that failed
    assert comparison.headline(summary).startswith("1 regression, 0 improvements, 1 flaky")


def test_criterion_statistics_pair_cases_and_average_repeats() -> None:
    baseline = run_data({f"c{i}": [("passed", 1.0)] for i in range(20)})
    worse = {f"c{i}": [("failed", 0.0)] if i < 10 else [("passed", 1.0)] for i in range(20)}
    worse["c19"] = [("passed", 0.9), ("passed", 0.7)]  # mean 0.8 over two repeats
    summary = compare(baseline, run_data(worse, offset=100), resamples=500)
    [stats] = summary["criteria"]
    assert stats["n"] == 20
    assert stats["delta"] == pytest.approx((-10 - 0.2) / 20)
    assert stats["ci_low"] < stats["delta"] < stats["ci_high"] < 0
    assert stats["verdict"] == "likely real"
    # c19 passed one of its two repeats: not more than half, so it counts as a flip too.
    assert (stats["pass_to_fail"], stats["fail_to_pass"]) == (11, 0)
    assert stats["p_value"] == pytest.approx(2 * 0.5 ** 11)
    assert stats["flips_verdict"] == "likely real"
    assert comparison.headline(summary).startswith("10 regressions, 0 improvements \u00b7 trajectory_match \u22120.51 [")


def test_latency_percentiles_and_their_deltas() -> None:
    baseline = run_data({f"c{i}": [("passed", 1.0)] for i in range(20)}, latency=1.0)
    candidate = run_data({f"c{i}": [("passed", 1.0)] for i in range(20)}, offset=100, latency=2.4)
    summary = compare(baseline, candidate, resamples=100)
    latency = summary["latency"]
    assert latency["baseline"]["p95"] == 1.0 and latency["candidate"]["p50"] == 2.4
    assert latency["delta_p95"] == pytest.approx(1.4)
    assert len(latency["candidate"]["quantiles"]) == comparison.LATENCY_QUANTILES + 1
    assert comparison.headline(summary).endswith("p95 latency +1.4 s")


def test_pass_rates_by_tag_count_judged_results_only() -> None:
    baseline = run_data({"a": [("passed", 1.0)], "b": [("error", None)]}, tags=("weather",))
    candidate = run_data({"a": [("failed", 0.0)], "b": [("passed", 1.0)]}, offset=10, tags=("weather",))
    [tag] = compare(baseline, candidate, resamples=100)["tags"]
    assert tag == {"tag": "weather", "baseline_passed": 1, "baseline_n": 1, "candidate_passed": 1, "candidate_n": 2}


def test_pending_results_do_not_count_yet() -> None:
    baseline = run_data({"a": [("passed", 1.0)]})
    candidate = run_data({"a": [("pending", None)], "b": [("passed", 1.0)]}, offset=10)
    summary = compare(baseline, candidate, resamples=100)
    # a case the running candidate has not settled is pending, never "removed"
    assert statuses(summary) == {"a": comparison.PENDING, "b": NEW}
    assert comparison.headline(summary).startswith("The candidate is still running: 1 of 2 cases pending")


def test_the_summary_is_plain_json() -> None:
    import json

    baseline = run_data({"a": [("passed", 1.0)]})
    summary = compare(baseline, run_data({"a": [("failed", 0.2)]}, offset=5), resamples=50)
    assert json.loads(json.dumps(summary)) == summary


def test_signed_numbers_use_a_real_minus_sign() -> None:
    assert comparison.signed(-0.0812) == "\u22120.08"
    assert comparison.signed(0.08) == "+0.08"
    assert comparison.signed(0.0001) == "\u00b10.00"
    assert comparison.signed(None) == "\u2014"
    assert comparison.signed_seconds(-0.052) == "\u221252 ms"  # milliseconds under a second
    assert comparison.signed_seconds(-0.000099) == "\u221299 \u00b5s"
    assert comparison.signed_seconds(1.4) == "+1.4 s"
