"""NUL characters in untrusted text.

PostgreSQL stores no NUL (U+0000) in `text` or `jsonb`, and SQLite does; a NUL in an eval
set or in what an agent said is never meant to be read. So every eval case and every agent
output has its NULs replaced by U+FFFD (the replacement character) as it is validated: both
databases keep the same text, and no upload or run fails on the write.

Walking every string of every case costs a quarter of a large import, and NULs are rare.
So the text a model is validated from is scanned once, as raw bytes (`may_hold_nul`), and
inside `nul_free()` the validators skip the walk; a file with a NUL, raw or escaped as
`\\u0000`, is walked as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from pydantic import BaseModel

NUL = "\x00"
REPLACEMENT = "\ufffd"

# Set while validating data known to hold no NUL (see `nul_free`).
_NUL_FREE: ContextVar[bool] = ContextVar("evalsite_nul_free", default=False)


def may_hold_nul(data: bytes | str) -> bool:
    """Whether JSON (or CSV) text could hold a NUL once parsed: a raw NUL or the escape
    `\\u0000` (its hex digits have no case). A false alarm only costs the walk."""
    if isinstance(data, str):
        return NUL in data or "\\u0000" in data
    return b"\x00" in data or b"\\u0000" in data


@contextmanager
def nul_free(texts: Iterable[bytes | str]) -> Iterator[bool]:
    """Within the block, `without_nul` trusts its input when none of `texts` (everything the
    validated data is parsed from) may hold a NUL. Yields whether it trusts it."""
    if any(may_hold_nul(text) for text in texts):
        yield False
        return
    token = _NUL_FREE.set(True)
    try:
        yield True
    finally:
        _NUL_FREE.reset(token)


def nul_trusted() -> bool:
    """Whether this is inside `nul_free()` with text that holds no NUL: validation then
    changes no string, and what a model was validated from equals its dump."""
    return _NUL_FREE.get()


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    if isinstance(value, BaseModel):  # readers that build a case from models (plain, DeepEval)
        return has_nul(value.__dict__)
    return False


def without_nul(value: Any) -> Any:
    """`value` (JSON-like data) with every NUL in its strings, keys included, replaced;
    the value itself when it has none (no copy on the common path)."""
    if _NUL_FREE.get() or not has_nul(value):
        return value
    return _replace(value)


def _replace(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, dict):
        return {_replace(k): _replace(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v) for v in value]
    if isinstance(value, BaseModel):  # validated again from its (replaced) fields
        return _replace(value.model_dump(exclude_unset=True))
    return value
