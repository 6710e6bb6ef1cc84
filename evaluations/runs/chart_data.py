"""The numbers behind a run's charts: score bins, pass rates by tag, latency bin widths and the
home page's sparkline points. The runs' selectors compute them in the database (bin counts,
never one row per case); `evaluations.web.charts.run` draws them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

SCORE_BINS = 10  # [0, .1), [.1, .2), ... [.9, 1.0]: the last bin holds the perfect scores


@dataclass(frozen=True)
class ScoreBins:
    """Counts of one criterion's conversation-level scores per bin, split by outcome."""

    passed: Sequence[int]
    failed: Sequence[int]
    unjudged: Sequence[int]  # scored, but no pass/fail (no threshold)

    @property
    def total(self) -> int:
        return sum(self.passed) + sum(self.failed) + sum(self.unjudged)


@dataclass(frozen=True)
class TagRate:
    tag: str
    passed: int
    judged: int  # passed + failed: errors and missing outputs are not judged

    @property
    def rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None


def nice_step(span: float, target_bins: int = 20) -> float:
    """A bin width of 1, 2 or 5 times a power of ten giving about `target_bins` bins."""
    if span <= 0:
        return 0.1
    raw = span / target_bins
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power  # pragma: no cover - the loop always returns


def sparkline_points(values: Sequence[float | None], *, width: float = 96, height: float = 22,
                     pad: float = 2) -> str:
    """SVG polyline points for pass rates (0-1) oldest first; gaps (None) are skipped. The
    y axis is fixed at 0-1 so two sparklines can be compared by eye."""
    known = [(i, v) for i, v in enumerate(values) if v is not None]
    if not known:
        return ""
    step = (width - 2 * pad) / max(1, len(values) - 1)
    points = []
    for i, v in known:
        x = pad + i * step if len(values) > 1 else width / 2
        y = pad + (1 - max(0.0, min(1.0, v))) * (height - 2 * pad)
        points.append(f"{x:.1f},{y:.1f}")
    return " ".join(points)
