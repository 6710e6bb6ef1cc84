"""What every eval-set writer shares: the header it writes, the losses it reports, its JSON.

A writer turns a version's header and its cases (native dicts, as stored) into the tool's own
files, appending a `Loss` for each thing the tool's format cannot hold. It lives beside the
reader it must invert (`interop/<tool>/export.py`) and is reached through that reader's
`writer` (`interop.writers()`); `evalsets/exports.py` reads each export back and refuses it
unless it comes back as the stored content.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evaluations.interop.base import SourceFile


@dataclass(frozen=True)
class Loss:
    """One thing the tool's format cannot hold: in a case (`case`) or the eval set's header."""

    case: str | None
    path: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "path": self.path, "message": self.message}

    def __str__(self) -> str:
        where = f"case {self.case!r}, {self.path}" if self.case is not None else self.path
        return f"{where}: {self.message}"


@dataclass
class Header:
    eval_set_id: str
    name: str
    description: str
    metadata: dict[str, Any]
    default_config: dict[str, Any] | None
    evaluator_config: dict[str, Any] | None


Write = Callable[[Header, list[dict[str, Any]], str, list[Loss]], list[SourceFile]]


@dataclass(frozen=True)
class EvalSetWriter:
    """A tool's eval-set writer: `write(header, cases, variant, losses)` gives the files."""

    name: str
    label: str
    write: Write


PRETTY_CASES = 2_000  # larger exports are written compact: json's indenting encoder is pure Python


def dump(value: Any, cases: int = 0) -> bytes:
    indent = 2 if cases <= PRETTY_CASES else None
    return (json.dumps(value, ensure_ascii=False, indent=indent) + "\n").encode()


def safe_name(value: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in value).strip("._")
    return keep[:100] or "evalset"
