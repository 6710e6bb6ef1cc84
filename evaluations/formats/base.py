"""What every eval-set format reader shares: source files, errors that say where, the reader
protocol, and helpers to turn pydantic errors into located problems.

A reader is a module in this package exposing one object with `name`, `label`, `sniff()`,
`is_companion()` and `parse()` (see `FormatReader`). Readers never touch the database; the
import service (`evaluations.services.evalset_import`) does, in one transaction.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from json.decoder import scanstring
from typing import Any, Protocol

from pydantic import ValidationError

from evaluations.schemas.evalset import EvalConfig, EvalSet

MAX_REPORTED_PROBLEMS = 20

PathPart = str | int


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an upload, and where it is."""

    message: str
    file: str | None = None
    case: str | None = None
    path: str | None = None
    line: int | None = None
    column: int | None = None

    def location(self) -> str:
        where = self.file or ""
        if self.line is not None:
            where += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        bits = [where] if where else []
        if self.case is not None:
            bits.append(f"case {self.case!r}")
        if self.path:
            bits.append(self.path)
        return ", ".join(bits)

    def __str__(self) -> str:
        location = self.location()
        return f"{location}: {self.message}" if location else self.message

    def as_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "file": self.file,
            "case": self.case,
            "path": self.path,
            "line": self.line,
            "column": self.column,
        }


class EvalSetImportError(Exception):
    """An upload that cannot be imported. `code` is stable for API clients and tests."""

    def __init__(self, code: str, problems: Sequence[Problem] | str, *, total: int | None = None):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        self.code = code
        self.total = total if total is not None else len(problems)
        self.problems = list(problems)[:MAX_REPORTED_PROBLEMS]
        super().__init__(self.summary())

    def summary(self) -> str:
        lines = [str(p) for p in self.problems]
        if self.total > len(self.problems):
            lines.append(f"... and {self.total - len(self.problems)} more problems")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.problems[0].message if len(self.problems) == 1 else self.summary(),
            "problems": [p.as_dict() for p in self.problems],
            "problem_count": self.total,
        }


@dataclass
class SourceFile:
    """One uploaded file (or one member of an uploaded zip or folder)."""

    name: str  # path relative to the upload's root, "/"-separated
    data: bytes

    @property
    def basename(self) -> str:
        return self.name.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        base = self.basename.lower()
        return base.rsplit(".", 1)[-1] if "." in base else ""

    @cached_property
    def text(self) -> str:
        data = self.data
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):
            try:
                return data.decode("utf-16")
            except UnicodeDecodeError as exc:
                raise self._encoding_error(exc) from None
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise self._encoding_error(exc) from None

    def _encoding_error(self, exc: UnicodeDecodeError) -> EvalSetImportError:
        line = self.data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (self.data.rfind(b"\n", 0, exc.start) + 1) + 1
        return EvalSetImportError(
            "encoding",
            [
                Problem(
                    f"not UTF-8 text: byte 0x{self.data[exc.start]:02x} at offset {exc.start} "
                    "cannot be decoded (save the file as UTF-8)",
                    file=self.name,
                    line=line,
                    column=column,
                )
            ],
        )

    @cached_property
    def json(self) -> Any:
        """The parsed JSON document; raises a located `invalid_json` error."""
        text = self.text
        if not text.strip():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalSetImportError(
                "invalid_json",
                [Problem(f"not valid JSON: {exc.msg}", file=self.name, line=exc.lineno, column=exc.colno)],
            ) from None

    def try_json(self) -> tuple[Any, str | None]:
        """(document, None) or (None, why it is not JSON): for sniffing without raising."""
        try:
            return self.json, None
        except EvalSetImportError as exc:
            return None, exc.problems[0].message

    @cached_property
    def jsonl(self) -> list[tuple[int, Any]]:
        """(line number, object) for each non-blank line; raises a located error."""
        rows: list[tuple[int, Any]] = []
        text = self.text
        if not text.strip():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((lineno, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise EvalSetImportError(
                    "invalid_json",
                    [Problem(f"not valid JSON: {exc.msg}", file=self.name, line=lineno, column=exc.colno)],
                ) from None
        return rows

    @cached_property
    def csv_rows(self) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
        """(header, [(line number, row)]); raises a located error on malformed CSV."""
        text = self.text
        if not text.strip():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        reader = csv.reader(io.StringIO(text, newline=""))
        try:
            header = [h.strip() for h in next(reader)]
            rows: list[tuple[int, dict[str, str]]] = []
            line = reader.line_num + 1
            for values in reader:
                if any(v.strip() for v in values):
                    if len(values) > len(header):
                        raise EvalSetImportError(
                            "schema",
                            [Problem(f"row has {len(values)} fields but the header has {len(header)}",
                                     file=self.name, line=line)],
                        )
                    rows.append((line, dict(zip(header, values, strict=False))))
                line = reader.line_num + 1
        except csv.Error as exc:
            raise EvalSetImportError(
                "invalid_csv", [Problem(f"not valid CSV: {exc}", file=self.name, line=reader.line_num)]
            ) from None
        return header, rows


@dataclass
class ParsedEvalSet:
    """A reader's result: the native eval set plus what came with it."""

    evalset: EvalSet
    format: str
    variant: str
    source: SourceFile
    companions_used: list[SourceFile] = field(default_factory=list)
    default_config: EvalConfig | None = None
    evaluator_config: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


class FormatReader(Protocol):
    name: str
    label: str

    def sniff(self, file: SourceFile) -> str | None:
        """None when this reader takes `file` as an eval set; otherwise why it refuses."""

    def is_companion(self, file: SourceFile) -> bool:
        """True for a file that belongs beside an eval set of this format (a config, an
        evaluator definition) rather than being one."""

    def parse(self, file: SourceFile, companions: Sequence[SourceFile]) -> ParsedEvalSet:
        """The native eval set; raises EvalSetImportError listing every problem found."""


# --- Locating problems ------------------------------------------------------------------------


def format_path(parts: Iterable[PathPart]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


def locate(text: str, path: Sequence[PathPart]) -> tuple[int, int] | None:
    """(line, column) of the JSON value at `path` in `text`, or of its deepest existing parent.

    Only runs on errors, so it favours simplicity: it walks down the path and skips sibling
    values with the C-speed `raw_decode`, never building the whole document again.
    """
    pos = 0
    n = len(text)

    def skip_ws(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    pos = skip_ws(pos)
    if pos < n and text[pos] == "\ufeff":
        pos = skip_ws(pos + 1)
    found = pos
    for part in path:
        if pos >= n:
            break
        char = text[pos]
        if isinstance(part, str) and char == "{":
            i = skip_ws(pos + 1)
            hit = None
            while i < n and text[i] == '"':
                key, i = scanstring(text, i + 1)
                i = skip_ws(i)
                i = skip_ws(i + 1)  # the colon
                if key == part:
                    hit = i
                    break
                _, i = _DECODER.raw_decode(text, i)
                i = skip_ws(i)
                if i < n and text[i] == ",":
                    i = skip_ws(i + 1)
            if hit is None:
                break
            pos = found = hit
        elif isinstance(part, int) and char == "[":
            i = skip_ws(pos + 1)
            index = 0
            hit = None
            while i < n and text[i] != "]":
                if index == part:
                    hit = i
                    break
                _, i = _DECODER.raw_decode(text, i)
                i = skip_ws(i)
                if i < n and text[i] == ",":
                    i = skip_ws(i + 1)
                index += 1
            if hit is None:
                break
            pos = found = hit
        else:
            break
    line = text.count("\n", 0, found) + 1
    column = found - (text.rfind("\n", 0, found) + 1) + 1
    return line, column


def problems_from_validation_error(
    exc: ValidationError,
    *,
    file: SourceFile,
    prefix: Sequence[PathPart] = (),
    case: str | None = None,
    case_of: Any = None,
    locate_in_text: bool = True,
) -> list[Problem]:
    """Turn a pydantic error into located problems, one per error.

    `prefix` is where the validated object sits in the source document; `case_of(loc)` may
    return the eval_id for an error location (for whole-set validation).
    """
    problems: list[Problem] = []
    for error in exc.errors(include_url=False):
        loc = [*prefix, *[p for p in error["loc"] if isinstance(p, (str, int))]]
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field (not part of the format)"
        elif error["type"] == "missing":
            message = "required field is missing"
        line = column = None
        if locate_in_text and file.suffix not in {"csv"}:
            try:
                located = locate(file.text, loc)
            except (ValueError, EvalSetImportError):  # pragma: no cover - defensive
                located = None
            if located:
                line, column = located
        problems.append(
            Problem(
                message,
                file=file.name,
                case=case if case is not None else (case_of(loc) if case_of else None),
                path=format_path(loc),
                line=line,
                column=column,
            )
        )
    return problems


def schema_error(problems: list[Problem]) -> EvalSetImportError:
    return EvalSetImportError("schema", problems, total=len(problems))


def stem(name: str) -> str:
    """An eval-set id from a file name: `trip_inquiry.test.json` -> `trip_inquiry`."""
    base = name.rsplit("/", 1)[-1]
    for suffix in (".evalset.json", ".test.json", ".jsonl", ".json", ".csv"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base.rsplit(".", 1)[0] if "." in base else base
