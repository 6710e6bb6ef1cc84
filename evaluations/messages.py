"""Error messages folded for grouping: a message's first line, and that line with its volatile
parts (ids, numbers, dates, quoted values) as placeholders, so "order 8812 not found (req
3f2a9c1e77)" and "order 91 not found (req 0b1c2d3e4f)" count as one. A run's causes
(`review/causes.py`) and its notices (`runs/summary.py`: criteria that could not be scored)
group by them."""

from __future__ import annotations

import functools
import re

MESSAGE_CHARS = 100

_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)
_HEX = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{8,}\b", re.I)
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b"
                   r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b")
_QUOTED = re.compile(r"'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"")
_NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:[.,]\d+)*")
_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=4096)
def normalise(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A message's first line with its volatile parts as placeholders: "order 8812 not found
    (req 3f2a9c1e77)" and "order 91 not found (req 0b1c2d3e4f)" both read
    "order <n> not found (req <id>)"."""
    line = next((ln for ln in (text or "").strip().splitlines() if ln.strip()), "")
    line = _UUID.sub("<id>", line)
    line = _DATE.sub("<date>", line)
    line = _QUOTED.sub("<value>", line)
    line = _HEX.sub("<id>", line)
    line = _NUMBER.sub("<n>", line)
    line = _SPACES.sub(" ", line).strip()
    return line if len(line) <= limit else line[:limit - 1] + "…"


def first_line(text: str | None, limit: int = 200) -> str:
    line = next((ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[:limit - 1] + "…"
