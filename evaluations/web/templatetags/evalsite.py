"""Presentation helpers for evalsite templates. Nothing here queries the database."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from django import template
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.templatetags.static import static
from django.utils.html import format_html

from evaluations.units import fmt_duration

register = template.Library()

# A value longer than this is collapsed behind "show all" (never cut off).
COLLAPSE_LINES = 14
COLLAPSE_CHARS = 900
PREVIEW_LINES = 4
PREVIEW_CHARS = 240


@register.inclusion_tag("evaluations/_value.html")
def value(text: str | None, mono: bool = False) -> dict[str, Any]:
    """Show `text` whole, or a short preview plus a <details> with all of it when long."""
    text = text or ""
    lines = text.splitlines()
    long = len(lines) > COLLAPSE_LINES or len(text) > COLLAPSE_CHARS
    preview = ""
    if long:
        preview = "\n".join(lines[:PREVIEW_LINES])[:PREVIEW_CHARS].rstrip()
    return {
        "text": text,
        "mono": mono,
        "long": long,
        "preview": preview,
        "line_count": len(lines),
        "char_count": len(text),
    }


@lru_cache(maxsize=1)
def plotly_bundle() -> str:
    """The static path of the plotly.js build (assets/plotly: core + scatter, bar, heatmap),
    named by its content hash so it is cached for a year: exactly one is committed."""
    found = sorted(p.name for p in (Path(settings.BASE_DIR) / "static" / "vendor").glob("plotly-evalsite-*.min.js"))
    if len(found) != 1:
        raise ImproperlyConfigured(
            f"static/vendor holds {len(found)} plotly-evalsite-*.min.js; "
            "rebuild it with `npm ci && npm run build` in assets/plotly"
        )
    return f"vendor/{found[0]}"


@register.simple_tag
def plotly_script() -> str:
    """<script> for the plotly.js bundle (before the figures' data blocks are drawn)."""
    return format_html('<script src="{}"></script>', static(plotly_bundle()))


@register.filter
def duration(seconds: float | None) -> str:
    """`1.4 s`, `52 ms`, `790 µs`: a latency with its unit, as the charts and verdicts say it."""
    return fmt_duration(seconds)


@register.filter
def lookup(mapping: Any, key: Any) -> Any:
    """`{{ formats|lookup:v.number }}`: a dict's value for a key, or None."""
    return mapping.get(key) if isinstance(mapping, dict) else None
