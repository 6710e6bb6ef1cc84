"""What an upload may stand for beyond its own bytes, counted as it is read.

A file's size is checked before it is read (EVALSITE_MAX_UPLOAD_MB), but a small file can stand
for much more: a zip or an Inspect `.eval` log inflates its members, an Inspect sample puts its
attachments back wherever `attachment://<hash>` names them, a YAML alias repeats what its anchor
holds, and a promptfoo suite copies its defaultTest, its tests files and its vars into every
test. Each is counted as it happens against a budget of the whole upload (one `Expansion`,
opened by the entry points: `read_upload`, `read_outputs`, `read_results`; a context variable,
so the readers in between need not pass it along), so a 10 KB file can make the server do no
more than a file of the upload limit could.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from evaluations.interop.base import EvalSetImportError, Problem


def _setting_bytes(name: str) -> int:
    """An expansion limit in bytes: its setting, else the upload limit (tests change that one)."""
    from django.conf import settings

    value = getattr(settings, name, None)
    return int(value) if value else int(settings.EVALSITE_MAX_UPLOAD_BYTES)


def max_unpacked_bytes() -> int:
    """EVALSITE_MAX_UNPACKED_MB: what the members of an upload's zips and `.eval` logs may
    inflate to, all together."""
    return _setting_bytes("EVALSITE_MAX_UNPACKED_BYTES")


def max_expanded_bytes() -> int:
    """EVALSITE_MAX_EXPANDED_MB: what following references (attachments, YAML aliases, copies
    into every case) may add to an upload."""
    return _setting_bytes("EVALSITE_MAX_EXPANDED_BYTES")


# The structure evalsite's native form gives a case beyond the text of its fields (a one-line CSV
# row becomes ~350 characters of JSON columns); allowed per case on top of the upload's own bytes.
CASE_ALLOWANCE = 2048


@dataclass
class Expansion:
    """What one upload has unpacked and expanded so far, against its limits."""

    unpacked_limit: int
    expanded_limit: int
    unpacked: int = 0
    expanded: int = 0
    own: int = 0  # the bytes of the upload's files, as the readers see them (zips unpacked)
    stored: int = 0  # the characters of the cases made from them, as stored
    cases: int = 0
    _counted: set[int] = field(default_factory=set)

    @classmethod
    def from_settings(cls) -> Expansion:
        return cls(max_unpacked_bytes(), max_expanded_bytes())

    def unpack(self, size: int, *, file: str, what: str, key: Any = None) -> None:
        """Count `size` bytes about to be inflated (`what`: "the zip's 3 data files inflate", in
        `file`) before inflating them;
        with `key`, only once for that key (a log opened by a sniffer and then its reader)."""
        if key is not None:
            if id(key) in self._counted:
                return
            self._counted.add(id(key))
        self.unpacked += size
        if self.unpacked > self.unpacked_limit:
            total = f" ({self.unpacked:,} with the rest of the upload)" if self.unpacked != size else ""
            raise EvalSetImportError("too_expanded", [Problem(
                f"{what} to {size:,} bytes{total}: over the {self.unpacked_limit:,} bytes an upload may "
                "unpack to (EVALSITE_MAX_UNPACKED_MB)", file=file)], final=True)

    def expand(self, size: int, *, file: str | None, what: str, case: str | None = None, path: str | None = None,
               line: int | None = None, column: int | None = None) -> None:
        """Count `size` bytes that following a reference adds (`what`: the references)."""
        self.expanded += size
        if self.expanded > self.expanded_limit:
            raise EvalSetImportError("too_expanded", [Problem(
                f"{what} add more than the {self.expanded_limit:,} bytes an upload may expand by "
                "(EVALSITE_MAX_EXPANDED_MB)", file=file, case=case, path=path, line=line, column=column)], final=True)

    def store(self, characters: int, *, file: str | None, case: str | None) -> None:
        """Count a case as stored: the cases of an upload hold at most its own bytes, CASE_ALLOWANCE
        a case and the expansion limit (what defaults, tests files and vars copied into every
        case add, whichever reader made them)."""
        self.stored += characters
        self.cases += 1
        allowed = self.own + CASE_ALLOWANCE * self.cases + self.expanded_limit
        if self.stored > allowed:
            raise EvalSetImportError("too_expanded", [Problem(
                f"the cases made from this file hold {self.stored:,} characters, more than its "
                f"{self.own:,} bytes, {CASE_ALLOWANCE:,} a case and the {self.expanded_limit:,} bytes an upload may "
                "expand by (EVALSITE_MAX_EXPANDED_MB): defaults, files or vars repeated in every case",
                file=file, case=case)], final=True)


_EXPANSION: ContextVar[Expansion | None] = ContextVar("evalsite_upload_expansion", default=None)


@contextmanager
def expansion() -> Iterator[Expansion]:
    """The budget of the upload being read: a new one, or the one already open (a results
    import reading the eval set its file carries shares its budget)."""
    current = _EXPANSION.get()
    if current is not None:
        yield current
        return
    budget = Expansion.from_settings()
    token = _EXPANSION.set(budget)
    try:
        yield budget
    finally:
        _EXPANSION.reset(token)


def current_expansion() -> Expansion:
    """The open upload's budget, or a budget of its own for a file read outside an upload (an
    evaluator's YAML, an export read back)."""
    return _EXPANSION.get() or Expansion.from_settings()
