"""Presentation helpers for evalsite templates. Nothing here queries the database."""

from __future__ import annotations

from typing import Any

from django import template

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
