"""Presentation helpers for evalsite templates. Nothing here queries the database."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.templatetags.static import static
from django.utils.html import format_html

from evaluations.review.report import duration_text as report_duration
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
    """For the <head> of pages with charts: where the plotly.js bundle is, and its style sheet.
    static/js/figures.js fetches the bundle (async) when the first figure comes into the
    viewport, so it never blocks rendering and a page whose charts are out of view has not
    parsed it. plotly.js would inject its rules, and maplibre's, as inline <style> elements
    (which the Content-Security-Policy refuses) unless elements with these ids exist: its
    rules are served as static/css/plotly.css, and no chart here is a map."""
    return format_html(
        '<link rel="stylesheet" id="plotly.js-style-global" class="no-inline-styles" href="{}">\n'
        '<meta id="9f215cf04c5486422605d13261cb87401f4e7763b6296af81e98efbc0130da53" name="plotly-maplibre-css"'
        ' content="unused">\n<meta name="evalsite-plotly" content="{}">',
        static("css/plotly.css"), static(plotly_bundle()))


@register.filter
def duration(seconds: float | None) -> str:
    """`1.4 s`, `52 ms`, `790 µs`: a latency with its unit, as the charts and verdicts say it."""
    return fmt_duration(seconds)


@register.filter
def lookup(mapping: Any, key: Any) -> Any:
    """`{{ formats|lookup:v.number }}`: a dict's value for a key, or None."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def duration_text(value: Any) -> str:
    """`2 d 3 h`, `5 h 10 min`: how long a case took to fix (evaluations.review.report)."""
    return report_duration(value)


# An eval id longer than this is shown shortened (the whole id stays in its title and copy button).
EVAL_ID_CHARS = 36


@register.filter
def short_id(text: str, limit: int = EVAL_ID_CHARS) -> str:
    """An id people can read in a narrow column: whole when short; a path-like id (real ADK
    files name cases by absolute paths) by its last segments after a leading "…/"; anything
    else, or a last segment that is itself too long, with "…" in the middle."""
    text = str(text)
    if len(text) <= limit:
        return text
    separator = "/" if "/" in text else ("\\" if "\\" in text else "")
    if separator:
        parts = [part for part in text.split(separator) if part]
        tail = parts[-1] if parts else ""
        for part in reversed(parts[:-1]):
            if len(part) + len(tail) + 3 > limit:
                break
            tail = part + separator + tail
        if len(tail) + 2 <= limit:
            return "…" + separator + tail
        return "…" + separator + short_id(tail, limit - 2)  # the file name itself is long: cut its middle
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head):]


@register.simple_tag
def eval_id(text: str | None, href: str = "", **params: Any) -> str:
    """An eval id, shortened (`short_id`) with the whole id on hover (title) and a copy button
    when it was cut; linked to `href` (with `params` as its query string) if given. Escaped:
    ids come from uploaded files."""
    text = "" if text is None else str(text)
    if href and params:
        href += "?" + urlencode(params)
    shown = short_id(text)
    tag, attributes = ("a", format_html(' href="{}"', href)) if href else ("span", "")
    if shown == text:
        return format_html('<{}{} class="eid">{}</{}>', tag, attributes, shown, tag)
    return format_html('<{}{} class="eid eid-cut" title="{}">{}</{}><button type="button" class="eid-copy" '
                       'data-copy-text="{}" aria-label="Copy the whole eval id" '
                       'title="Copy the whole eval id">⧉</button>',
                       tag, attributes, text, shown, tag, text)
