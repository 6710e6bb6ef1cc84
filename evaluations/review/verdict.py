"""The two questions a comparison answers, each in one wording.

1. **Is each changed case's flip reproducible?** A regressed case failed in every repeat of
   the candidate after passing in every repeat of the baseline (the classification sees to
   that): with two or more repeats that is "reproducible: failed in every repeat"; with a
   single repeat, "one repeat: rerun with iterations ≥ 2 to tell". Cases whose repeats
   disagree are "flaky" (their own status).
2. **Is the overall change significant?** The case-level flips (b regressed, c improved) of
   the n cases both runs judged, under an exact McNemar test: p < 0.05 is "the overall change
   is likely real"; below `MIN_CASES` judged cases "too few cases to call (n = 5; 6 or more
   needed)", word for word what a criterion row with as few cases says; otherwise "not
   distinguishable from chance across n cases; the same share of flips would need n≈N cases
   to call", N being the smallest multiple of n at which the same proportions of flips would
   be significant.

Each criterion's row answers the second question for that criterion alone and is worded here
too, so it can never claim more than the header: below `MIN_CASES` paired cases (where no
McNemar test can reach p < 0.05, and a bootstrap interval of one or two deltas is a point)
its mean change is "too few cases", never "likely real"; with fewer than two judged pairs no
p-value is shown. A mean change that is not significant reads "not distinguishable from
chance across the n cases": a statement about the eval set as a whole, which sits beside
"reproducible: failed in every repeat" (a statement about one case's repeats) without
contradicting it, and the per-case line says which question each answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluations.review.statistics import (
    FLAKY,
    IMPROVED,
    NEW,
    PENDING,
    REGRESSED,
    REMOVED,
    SIGNIFICANCE,
    UNSCORED,
    mcnemar_exact_p,
)

MAX_MULTIPLE = 1000

LIKELY_REAL = "likely real"
NO_CHANGE = "no change"
NOT_ENOUGH_DATA = "not enough data"
NO_FLIPS = "no flips"


def _min_cases() -> int:
    """The fewest paired cases at which any result can be significant: all n flips one way,
    p = 2 / 2^n < 0.05, so n = 6."""
    n = 1
    while mcnemar_exact_p(n, 0) >= SIGNIFICANCE:
        n += 1
    return n


MIN_CASES = _min_cases()


def too_few(n: int) -> str:
    return f"too few cases to call (n = {n:,}; {MIN_CASES} or more needed)"


def not_called(n: int) -> str:
    return f"not distinguishable from chance across {n:,} cases"


def mean_change(low: float | None, high: float | None, deltas: Sequence[float], b: int = 0, c: int = 0) -> str:
    """A criterion's mean change in words: "likely real" only when its interval excludes 0
    over at least `MIN_CASES` paired cases and, where its cases flipped (b pass -> fail, c
    fail -> pass), their McNemar test agrees: a percentile bootstrap over a few large deltas
    among many zeros excludes 0 long before the flips are significant."""
    if low is None or high is None:
        return NOT_ENOUGH_DATA
    if all(d == 0 for d in deltas):
        return NO_CHANGE
    if len(deltas) < MIN_CASES:
        return too_few(len(deltas))
    if b + c and mcnemar_exact_p(b, c) >= SIGNIFICANCE:
        return not_called(len(deltas))
    return LIKELY_REAL if low > 0 or high < 0 else not_called(len(deltas))


def within_header(criteria: list[dict[str, Any]], counts: dict[str, int]) -> None:
    """Cap each criterion's verdicts (in place) at the header's: while cases flipped and the
    overall change is not called, no row says "likely real"."""
    b, c = counts.get(REGRESSED, 0), counts.get(IMPROVED, 0)
    if b + c == 0 or mcnemar_exact_p(b, c) < SIGNIFICANCE:
        return
    for criterion in criteria:
        for key, n in (("verdict", criterion["n"]), ("flips_verdict", criterion["judged"])):
            if criterion[key] == LIKELY_REAL:
                criterion[key] = not_called(n)


def flips(b: int, c: int, p_value: float, judged: int | None = None) -> str:
    """A criterion's pass/fail flips in words (exact McNemar)."""
    if b + c == 0:
        return NO_FLIPS
    if judged is not None and judged < MIN_CASES:
        return too_few(judged)
    return LIKELY_REAL if p_value < SIGNIFICANCE else not_called(judged if judged is not None else b + c)


def p_shown(judged: int, b: int, c: int) -> bool:
    """Whether a flips p-value is evidence worth showing: some flip, over two or more judged
    pairs (a single pair's p = 1.000 tests nothing)."""
    return judged >= 2 and b + c > 0


def pair_significant(n: int, p_value: float | None, low: float | None, high: float | None) -> bool:
    """The N-way page's "significant" for one run against the reference: the (Holm-adjusted)
    flips test and the mean's interval agree, over at least `MIN_CASES` paired cases."""
    return (n >= MIN_CASES and p_value is not None and p_value < SIGNIFICANCE and low is not None
            and high is not None and (low > 0 or high < 0))


def cases_needed(b: int, c: int, n: int) -> int | None:
    """The smallest number of cases (a multiple of n) at which b regressions and c
    improvements in the same proportions would be significant; None when they never would
    (as many improved as regressed)."""
    if b == c or n <= 0:
        return None
    for multiple in range(2, MAX_MULTIPLE + 1):
        if mcnemar_exact_p(b * multiple, c * multiple) < SIGNIFICANCE:
            return n * multiple
    return None


def _round(n: int) -> int:
    """Two significant figures: 37 -> 37, 1234 -> 1200."""
    digits = len(str(n))
    return n if digits <= 2 else round(n, 2 - digits)


def judged_pairs(counts: dict[str, int], total: int) -> int:
    """The cases both runs judged: neither only in one run, nor pending, nor without a verdict
    (a comparison's summary counts, in `judged`, those judged on the criteria both runs scored)."""
    return total - sum(counts.get(key, 0) for key in (NEW, REMOVED, PENDING, UNSCORED))


def overall(counts: dict[str, int], total: int, judged: int | None = None) -> str:
    """The overall significance in words (question 2), in the criterion rows' wording: below
    `MIN_CASES` judged cases "too few cases to call (n = 5; 6 or more needed)", as a row with
    as few says it; otherwise "not distinguishable from chance across n cases", with how many
    cases the same share of flips would need."""
    b, c = counts.get(REGRESSED, 0), counts.get(IMPROVED, 0)
    n = judged if judged is not None else judged_pairs(counts, total)
    if b + c == 0:
        return "no case changed outcome"
    p = mcnemar_exact_p(b, c)
    if p < SIGNIFICANCE:
        return f"the overall change is likely real (McNemar p = {p:.2g}, n = {n:,} cases)"
    if n < MIN_CASES:
        return too_few(n)
    cases = f"n = {n:,} case{'' if n == 1 else 's'}"
    if b == c:
        return f"as many cases improved as regressed: no overall change ({cases})"
    needed = cases_needed(b, c, n)
    if needed is None:
        return not_called(n)
    return f"{not_called(n)}; the same share of flips would need n≈{_round(needed):,} cases to call"


def reproducibility(repeats: int) -> str:
    """A regressed case's reproducibility in words (question 1)."""
    if repeats >= 2:
        return "reproducible: failed in every repeat"
    return "one repeat: run ≥ 2 iterations to tell"


def reproducibility_line(summary: dict[str, Any]) -> str:
    """Question 1 for all the regressions at once: "2 reproducible (failed in every repeat)
    · 1 flaky"."""
    if "regressed_repeated" in summary:  # a stored comparison's head (comparison.head_of)
        repeated = summary["regressed_repeated"]
    else:
        repeated = sum(1 for case in summary["cases"] if case["s"] == REGRESSED and case["cn"] >= 2)
    parts = []
    if repeated:
        parts.append(f"{repeated} regression{'' if repeated == 1 else 's'} reproducible: failed in every repeat "
                     f"of {'that case' if repeated == 1 else 'those cases'}")
    single = summary["counts"].get(REGRESSED, 0) - repeated
    if single:
        parts.append(f"{single} regression{'' if single == 1 else 's'} seen in one repeat only "
                     "(run ≥ 2 iterations to tell if flaky)")
    flaky = summary["counts"].get(FLAKY, 0)
    if flaky:
        parts.append(f"{flaky} flaky (repeats disagree)")
    return " · ".join(parts)

