"""How numbers read in text: shared by the verdicts (review), the pages' tables (runs'
selectors) and the charts, so a latency reads the same everywhere."""

from __future__ import annotations

import math


def fmt_seconds(value: float | None) -> str:
    """Seconds with two significant digits (0.053, 0.50, 1.4), and whole seconds from ten on
    (12, 123): never scientific notation, never a rounded-away integer part."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    if abs(value) >= 9.95:
        return f"{value:.0f}"
    rounded = float(f"{value:.2g}")
    decimals = max(0, 1 - math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{decimals}f}"


def fmt_duration(value: float | None) -> str:
    """A duration with its unit: `1.4 s`, `52 ms` under a second, `99 µs` under a millisecond
    (two significant digits, as `fmt_seconds`)."""
    if value is None:
        return "—"
    if value == 0 or abs(value) >= 0.9995:
        return f"{fmt_seconds(value)} s"
    if abs(value) >= 0.0009995:
        return f"{fmt_seconds(value * 1000)} ms"
    return f"{fmt_seconds(value * 1_000_000)} µs"
