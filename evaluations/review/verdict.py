"""The two questions a comparison answers, each in one wording.

1. **Is each changed case's flip reproducible?** A regressed case failed in every repeat of
   the candidate after passing in every repeat of the baseline (the classification sees to
   that): with two or more repeats that is "reproducible: failed in every repeat"; with a
   single repeat, "one repeat: rerun with iterations ≥ 2 to tell". Cases whose repeats
   disagree are "flaky" (their own status).
2. **Is the overall change significant?** The case-level flips (b regressed, c improved) of
   the n cases both runs judged, under an exact McNemar test: p < 0.05 is "the overall change
   is likely real"; otherwise "too few cases to call the overall change; n≈N would be
   needed", N being the smallest multiple of n at which the same proportions of flips would
   be significant.
"""

from __future__ import annotations

from typing import Any

from evaluations.review.statistics import (
    FLAKY,
    IMPROVED,
    NEW,
    REGRESSED,
    REMOVED,
    SIGNIFICANCE,
    mcnemar_exact_p,
)

MAX_MULTIPLE = 1000


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


def overall(counts: dict[str, int], total: int) -> str:
    """The overall significance in words (question 2)."""
    b, c = counts.get(REGRESSED, 0), counts.get(IMPROVED, 0)
    n = total - counts.get(NEW, 0) - counts.get(REMOVED, 0)
    if b + c == 0:
        return "no case changed outcome"
    p = mcnemar_exact_p(b, c)
    if p < SIGNIFICANCE:
        return f"the overall change is likely real (McNemar p = {p:.2g}, n = {n:,} cases)"
    if b == c:
        return f"as many cases improved as regressed: no overall change (n = {n:,} cases)"
    needed = cases_needed(b, c, n)
    if needed is None:
        return f"too few cases to call the overall change (n = {n:,} cases)"
    return f"too few cases to call the overall change (n = {n:,} cases); n≈{_round(needed):,} cases would be needed"


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
        parts.append(f"{repeated} regression{'' if repeated == 1 else 's'} reproducible: failed in every repeat")
    single = summary["counts"].get(REGRESSED, 0) - repeated
    if single:
        parts.append(f"{single} regression{'' if single == 1 else 's'} seen in one repeat only "
                     "(run ≥ 2 iterations to tell if flaky)")
    flaky = summary["counts"].get(FLAKY, 0)
    if flaky:
        parts.append(f"{flaky} flaky (repeats disagree)")
    return " · ".join(parts)

