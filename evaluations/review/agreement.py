"""Agreement statistics for judge calibration: no queries, counts in, numbers out.

The database counts (`evaluations.review.calibration`); this module turns the counts into:

- a 2 x 2 confusion matrix of the judge's pass / fail against people's (`Confusion`), its
  accuracy and Cohen's kappa (κ = (p_o - p_e) / (1 - p_e), p_e from the two sides'
  marginals; Cohen 1960);
- Fleiss' kappa over the items several people graded (`fleiss_kappa`), from a histogram of
  items by how many graders said pass and fail. Items may have different numbers of graders:
  each item's agreement P_i = (Σ_j n_ij² - n_i) / (n_i (n_i - 1)) is averaged over the items,
  and p_j = Σ_i n_ij / Σ_i n_i (the generalisation in Fleiss, Levin & Paik, *Statistical
  Methods for Rates and Proportions*, 3rd ed., 18.1); with the same number of graders on
  every item this is Fleiss (1971) exactly.

Kappa is None where it is undefined (no items, or p_e = 1: everyone said the same thing
every time, so agreement beyond chance cannot be measured).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Confusion:
    """Counts of (judge, people) verdicts: `pass_pass` = the judge passed and people passed."""

    pass_pass: int = 0
    pass_fail: int = 0
    fail_pass: int = 0
    fail_fail: int = 0

    @property
    def total(self) -> int:
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail

    @property
    def agreed(self) -> int:
        return self.pass_pass + self.fail_fail

    @property
    def disagreed(self) -> int:
        return self.pass_fail + self.fail_pass

    @property
    def accuracy(self) -> float | None:
        """The share of items where the judge said what people said."""
        return self.agreed / self.total if self.total else None

    @property
    def kappa(self) -> float | None:
        return cohen_kappa(self)


def cohen_kappa(table: Confusion) -> float | None:
    """Cohen's kappa of a 2 x 2 table; None when undefined."""
    n = table.total
    if not n:
        return None
    observed = table.agreed / n
    judge_pass = (table.pass_pass + table.pass_fail) / n
    people_pass = (table.pass_pass + table.fail_pass) / n
    expected = judge_pass * people_pass + (1 - judge_pass) * (1 - people_pass)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class GraderAgreement:
    items: int  # items graded by two people or more
    ratings: int
    observed: float | None  # mean P_i: the share of agreeing grader pairs per item
    kappa: float | None  # Fleiss' kappa


def fleiss_kappa(histogram: Iterable[tuple[int, int, int]]) -> GraderAgreement:
    """Fleiss' kappa for pass / fail from `(passes, fails, items)` rows: `items` items had
    that many graders say pass and fail. Items with fewer than two grades are left out."""
    items = 0
    ratings = 0
    sum_p = 0.0
    passes_total = 0
    for passes, fails, count in histogram:
        n = passes + fails
        if n < 2 or count <= 0:
            continue
        items += count
        ratings += n * count
        passes_total += passes * count
        sum_p += count * (passes * passes + fails * fails - n) / (n * (n - 1))
    if not items:
        return GraderAgreement(0, 0, None, None)
    observed = sum_p / items
    p_pass = passes_total / ratings
    expected = p_pass * p_pass + (1 - p_pass) * (1 - p_pass)
    kappa = None if expected >= 1.0 else (observed - expected) / (1 - expected)
    return GraderAgreement(items, ratings, observed, kappa)


def majority(passes: int, fails: int) -> bool | None:
    """People's verdict on an item: the majority of its grades; None on a tie."""
    if passes == fails:
        return None
    return passes > fails


@dataclass(frozen=True)
class Calibration:
    """A judge against people on one criterion: the confusion of the judge's verdict with
    people's majority (items with a tied vote are left out and counted in `ties`), and how
    far the people agree with each other where several graded."""

    confusion: Confusion
    ties: int
    items: int  # graded items, ties included
    graders: GraderAgreement


def calibrate(rows: Iterable[tuple[bool, int, int, int]]) -> Calibration:
    """From `(judge passed, people's passes, people's grades, items)` rows: what the database
    counts per judge verdict and tally of grades."""
    counts = {"pass_pass": 0, "pass_fail": 0, "fail_pass": 0, "fail_fail": 0}
    ties = items = 0
    histogram: dict[tuple[int, int], int] = {}
    for judge, passes, graded, count in rows:
        items += count
        fails = graded - passes
        histogram[(passes, fails)] = histogram.get((passes, fails), 0) + count
        people = majority(passes, fails)
        if people is None:
            ties += count
            continue
        counts[f"{'pass' if judge else 'fail'}_{'pass' if people else 'fail'}"] += count
    graders = fleiss_kappa((p, f, c) for (p, f), c in sorted(histogram.items()))
    return Calibration(Confusion(**counts), ties, items, graders)
