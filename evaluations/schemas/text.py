"""NUL characters in untrusted text.

PostgreSQL stores no NUL (U+0000) in `text` or `jsonb`, and SQLite does; a NUL in an eval
set or in what an agent said is never meant to be read. So every eval case and every agent
output has its NULs replaced by U+FFFD (the replacement character) as it is validated: both
databases keep the same text, and no upload or run fails on the write.
"""

from __future__ import annotations

from typing import Any

NUL = "\x00"
REPLACEMENT = "\ufffd"


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    return False


def without_nul(value: Any) -> Any:
    """`value` (JSON-like data) with every NUL in its strings, keys included, replaced;
    the value itself when it has none (no copy on the common path)."""
    if not has_nul(value):
        return value
    return _replace(value)


def _replace(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, dict):
        return {_replace(k): _replace(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v) for v in value]
    return value
