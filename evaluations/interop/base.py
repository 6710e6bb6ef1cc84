"""What every eval-set format reader shares: source files, errors that say where, the reader
protocol, and helpers to turn pydantic errors into located problems.

A reader is a module in this package exposing one object with `name`, `label`, `sniff()`,
`is_companion()` and `parse()` (see `EvalSetFormat`). Readers never touch the database; the
import service (`evaluations.evalsets.services.evalset_import`) does, in one transaction.
"""

from __future__ import annotations

import csv
import gc
import json
import re
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from itertools import islice
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, Protocol

import ijson
from ijson.common import ObjectBuilder
from pydantic import ValidationError

from evaluations import safejson
from evaluations.schemas.evalset import EvalCase, EvalConfig, EvalSet

MAX_REPORTED_PROBLEMS = 20
MAX_CSV_COLUMNS = 1000  # a real eval set has a dozen; a million-column header is an attack


def max_cases() -> int:
    """The most cases (or outputs, or rows) one file may hold: EVALSITE_MAX_CASES."""
    from django.conf import settings

    return int(getattr(settings, "EVALSITE_MAX_CASES", 100_000))


def too_many_cases(name: str | None) -> EvalSetImportError:
    limit = max_cases()
    return EvalSetImportError("too_many_cases", [Problem(
        f"the file holds more than {limit:,} cases, rows or outputs (EVALSITE_MAX_CASES)", file=name)])

PathPart = str | int

TOO_LARGE_A_NUMBER = "a number past the largest evalsite keeps (about 1.8e308)"


def as_float(value: int | float) -> float | None:
    """A JSON number as a float; None for an integer past the largest float, which Python
    refuses to convert (OverflowError) where JavaScript would make it Infinity."""
    try:
        return float(value)
    except OverflowError:
        return None

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
    """An upload that cannot be imported. `code` is stable for API clients and tests.

    `final`: what is wrong is wrong whoever reads the file (it expands past a limit, it holds
    an integer Python will not read), so detection reports it rather than letting the next
    reader try the file and the upload end in "no eval set found"."""

    def __init__(self, code: str, problems: Sequence[Problem] | str, *, total: int | None = None,
                 final: bool = False):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        self.code = code
        self.final = final
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


def json_error(exc: json.JSONDecodeError, name: str, *, line: int | None = None) -> EvalSetImportError:
    """The located `invalid_json` error of a file (`line`: of a JSON line, whose own line is 1).
    An integer too long to read is `final`: valid JSON, but no reader gets past it."""
    return EvalSetImportError("invalid_json", [Problem(
        safejson.describe(exc), file=name,
        line=exc.lineno if line is None else line, column=exc.colno)], final=isinstance(exc, safejson.TooLongNumber))


_BLANK = re.compile(rb"(?:\xef\xbb\xbf)?\s*")
_UTF8_BOM = b"\xef\xbb\xbf"
_CSV_BYTE_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_RARE_BREAK = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CSV_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _csv_lines(text: str) -> Iterator[str]:
    """The lines of `text` one at a time, split as `open(newline="")` splits them (on \\r\\n,
    \\r or \\n, kept), for csv.reader: no copy of the whole text (io.StringIO made one, four
    bytes a character)."""
    for match in _CSV_LINE.finditer(text):
        yield match.group()


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
        return self._decode()

    def _decode(self) -> str:
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

    def is_blank(self) -> bool:
        return not self.data or _BLANK.fullmatch(self.data) is not None  # no copy, unlike strip()

    def _utf8_lines(self) -> bool:
        """Whether the lines are best read from the bytes a line at a time (UTF-8, not yet
        decoded whole): each line decoded as it is read, no decoded copy of the file kept."""
        if "text" in self.__dict__ or self.data.startswith((b"\xff\xfe", b"\xfe\xff")):
            return False
        self.check_encoding()  # the located error, from one decode that is not kept
        return True

    def csv_lines(self) -> Iterator[str]:
        """The lines as `open(newline="")` splits them (on \\r\\n, \\r or \\n, kept), for csv.reader."""
        if not self._utf8_lines():
            yield from _csv_lines(self.text)
            return
        for match in _CSV_BYTE_LINE.finditer(self.data, 3 if self.data.startswith(_UTF8_BOM) else 0):
            yield match.group().decode("utf-8")

    def json_line_texts(self) -> Iterator[str]:
        """The lines as `str.splitlines()` splits them, for JSON lines: on \\n from the bytes, and
        a line holding one of the rarer breaks (\\r, \\x0b, \\x0c, \\x1c-\\x1e, U+0085, U+2028,
        U+2029) split again."""
        if not self._utf8_lines():
            yield from self.text.splitlines()
            return
        data, end = self.data, len(self.data)
        position = 3 if data.startswith(_UTF8_BOM) else 0
        while position < end:
            newline = data.find(b"\n", position)
            stop = end if newline < 0 else newline
            line = data[position:stop].decode("utf-8")
            if _RARE_BREAK.search(line):
                yield from line.splitlines() or [""]
            else:
                yield line
            position = stop + 1

    def check_encoding(self) -> None:
        """Raise the located `encoding` error for a file that is not UTF-8 (or UTF-16 with a
        BOM), without keeping the decoded text around."""
        if "text" not in self.__dict__ and not self.__dict__.get("_encoding_checked"):
            _ = self._decode()
            self.__dict__["_encoding_checked"] = True  # not again: 0.1 s for a 50 MB file

    def release(self) -> None:
        """Drop the decoded and parsed forms; a large upload should not stay in memory three
        times over once its eval set has been read."""
        for cached in ("text", "json", "json_outline", "jsonl", "csv_header", "csv_rows", "_item_spans"):
            self.__dict__.pop(cached, None)
        for cached in [key for key in self.__dict__ if key.startswith("_cache_")]:  # a reader's own
            self.__dict__.pop(cached)

    @cached_property
    def json(self) -> Any:
        """The parsed JSON document; raises a located `invalid_json` error."""
        if self.is_blank():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        self.check_encoding()
        try:
            # From the bytes: the decoded text is only needed again to locate an error, and
            # not keeping it saves a copy of the file for the whole import.
            return safejson.loads(self.data)
        except json.JSONDecodeError as exc:
            raise json_error(exc, self.name) from None

    @cached_property
    def json_outline(self) -> Any:
        """A cheap view of a JSON document, for sniffing and for an eval set's header.

        For an object: every top-level member, except that `eval_cases` holds only its first
        OUTLINE_ITEMS items. For an array: its first OUTLINE_ITEMS items. Built in one
        streaming pass that keeps nothing else, so a 50 MB eval set is not first turned into
        a 300 MB dict just to see what it is. Invalid JSON raises the located error.
        """
        if "json" in self.__dict__:
            return _outline_of(self.json)
        if self.is_blank():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        self.check_encoding()
        try:
            closes: list[int] = []  # where each container inside the top level ends
            items: list[int] = []  # where the containers inside those start and end
            # ijson would build any depth; what reads it next would not.
            safejson.check_depth(self.data, closes=closes, items=items)
            spans = self.__dict__.setdefault("_item_spans", {})
            try:
                return _stream_outline(self.data, closes, items, spans)
            except ijson.JSONError:
                # The C backend refuses an integer beyond 64 bits, which is valid JSON: the
                # pure-Python one reads the outline's few cases instead of a full parse.
                spans.clear()
                return _stream_outline(self.data, closes, items, spans, backend=_IJSON_PYTHON)
        except (ijson.JSONError, ValueError, UnicodeDecodeError):
            # Say where it breaks (json's errors have a line and column; ijson's do not), or
            # take what json accepts beyond strict JSON (NaN, say) from a full parse.
            return _outline_of(self.json)

    def try_outline(self) -> tuple[Any, str | None]:
        """(outline, None) or (None, why it is not JSON): for sniffing without raising (but a
        `final` error is raised: no reader can read past it)."""
        try:
            return self.json_outline, None
        except EvalSetImportError as exc:
            if exc.final:
                raise
            return None, exc.problems[0].message

    def iter_json_items(self, key: str) -> Iterator[Any]:
        """The items of the document's `key` array, streamed one at a time. Call it after
        `json_outline`, which has already read the whole document and reported any syntax
        error with its line."""
        for item, _exact in self.iter_json_items_exact(key):
            yield item

    def iter_json_items_exact(self, key: str) -> Iterator[tuple[Any, bool]]:
        """(item, exact) for each item of `iter_json_items`; exact when it was parsed by
        `safejson.loads_exact` with only finite floats (see `safejson.canonical_fast`)."""
        if "json" in self.__dict__:  # parsed whole already (small file, or not strict JSON)
            for item in self.json[key]:
                yield item, False
            return
        spans = self.__dict__.get("_item_spans", {}).get(key)
        if spans is not None:
            # Where each item starts and ends is known (see `_stream_outline`): one item at a
            # time, each by a C parser, is much faster than ijson's events.
            data = self.data
            for start, end in spans:
                try:
                    yield safejson.loads_exact(data[start:end + 1])
                except ValueError:  # the outline's checks passed, json refused
                    _ = self.json  # raises the located invalid_json error
                    raise  # pragma: no cover - json refused a part, yet took the whole
            return
        given = 0
        try:
            for item in ijson.items(self.data, f"{key}.item", use_float=True):
                given += 1
                yield item, False
        except (ijson.JSONError, ValueError):
            # The outline read only the first items; a syntax error further on is found here,
            # and json says where it is. What ijson refuses and json takes (an integer beyond
            # 64 bits, NaN) comes from json's parse of the whole document, from where ijson stopped.
            doc = self.json  # raises the located invalid_json error
            for item in doc[key][given:]:
                yield item, False

    def try_json(self) -> tuple[Any, str | None]:
        """(document, None) or (None, why it is not JSON): for sniffing without raising (but a
        `final` error is raised)."""
        try:
            return self.json, None
        except EvalSetImportError as exc:
            if exc.final:
                raise
            return None, exc.problems[0].message

    @cached_property
    def jsonl(self) -> list[tuple[int, Any]]:
        """(line number, object) for each non-blank line; raises a located error."""
        rows: list[tuple[int, Any]] = []
        text = self.text
        if not text.strip():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        limit = max_cases()
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            if len(rows) >= limit:
                raise too_many_cases(self.name)
            try:
                rows.append((lineno, safejson.loads(line)))
            except json.JSONDecodeError as exc:
                raise json_error(exc, self.name, line=lineno) from None
        return rows

    @cached_property
    def csv_header(self) -> list[str]:
        """The CSV's header (its first record) alone; raises a located error when there is none
        or it is too wide. Sniffing needs no more, so no reader holds every row to choose."""
        if self.is_blank():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=self.name)])
        reader = csv.reader(self.csv_lines())
        try:
            header = [h.strip() for h in next(reader)]
        except csv.Error as exc:
            raise EvalSetImportError(
                "invalid_csv", [Problem(f"not valid CSV: {exc}", file=self.name, line=reader.line_num)]
            ) from None
        if len(header) > MAX_CSV_COLUMNS:
            raise EvalSetImportError("invalid_csv", [Problem(
                f"the header has {len(header):,} columns (at most {MAX_CSV_COLUMNS:,})", file=self.name, line=1)])
        return header

    def iter_csv_rows(self, columns: Iterable[str] | None = None) -> Iterator[tuple[int, dict[str, str]]]:
        """(line number, row) for each non-blank data row, read as they are asked for: a wide
        CSV (1,000 columns by 20,000 rows) never sits in memory as dicts all at once. Raises a
        located error on malformed CSV, a row wider than the header, or too many rows. With
        `columns`, a row holds only those (a pass that needs a few columns builds no more)."""
        header = self.csv_header
        wanted = None if columns is None else [(i, h) for i, h in enumerate(header) if h in set(columns)]
        reader = csv.reader(self.csv_lines())
        limit = max_cases()
        count = 0
        try:
            next(reader)
            line = reader.line_num + 1
            for values in reader:
                if any(v.strip() for v in values):
                    if count >= limit:
                        raise too_many_cases(self.name)
                    if len(values) > len(header):
                        raise EvalSetImportError(
                            "schema",
                            [Problem(f"row has {len(values)} fields but the header has {len(header)}",
                                     file=self.name, line=line)],
                        )
                    count += 1
                    if wanted is None:
                        yield line, dict(zip(header, values, strict=False))
                    else:
                        yield line, {h: values[i] for i, h in wanted if i < len(values)}
                line = reader.line_num + 1
        except csv.Error as exc:
            raise EvalSetImportError(
                "invalid_csv", [Problem(f"not valid CSV: {exc}", file=self.name, line=reader.line_num)]
            ) from None

    @cached_property
    def csv_rows(self) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
        """(header, [(line number, row)]) all at once, for small files' readers; large ones
        use `iter_csv_rows`."""
        return self.csv_header, list(self.iter_csv_rows())


class CaseSink:
    """Where the native cases of an eval set go, one at a time, as they are read.

    The default keeps them (`cases`). The import service's sink turns each case into a
    database row at once, so a large eval set never sits in memory as pydantic models all
    together. Readers of large documents hand their cases over as they validate them; for
    the others, `read_upload` passes their finished list through. Either way the sink sees
    every case in order and notices duplicate eval_ids.
    """

    def __init__(self) -> None:
        self.cases: list[EvalCase] = []
        self.count = 0
        self.duplicates: list[tuple[str, int, int]] = []  # (eval_id, first position, this one)
        self._positions: dict[str, int] = {}
        self.source_name: str | None = None  # named in a too_many_cases error

    # Whether `add_dump` may be given a case that was never a model (see there).
    takes_dumps = False

    def add(self, case: EvalCase, dumped: dict[str, Any] | None = None) -> None:
        """Take the next case; `dumped`, when the reader has it, is exactly the case's
        `model_dump(mode="json")` (spares the sink a dump)."""
        self.keep(self._next_position(case.eval_id), case, dumped)

    def add_dump(self, dumped: dict[str, Any], *, exact: bool = False) -> None:
        """Take the next case as the `model_dump(mode="json")` of a model never built: for
        sinks with `takes_dumps`, from readers whose own checks make a dict the native model
        accepts unchanged (the ADK conversion, on text with no NUL: what validation would
        only repeat; tests/test_format_adk.py holds the conversion to it). `exact`: its
        values were parsed by `safejson.loads_exact` with exact=True (no NaN or infinity)."""
        self.keep_dump(self._next_position(dumped["eval_id"]), dumped, exact=exact)

    def _next_position(self, eval_id: str) -> int:
        if self.count >= max_cases():
            raise too_many_cases(self.source_name)
        position = self.count
        self.count += 1
        first = self._positions.setdefault(eval_id, position)
        if first != position:
            self.duplicates.append((eval_id, first, position))
        return position

    def keep(self, position: int, case: EvalCase, dumped: dict[str, Any] | None = None) -> None:
        self.cases.append(case)

    def keep_dump(self, position: int, dumped: dict[str, Any], *, exact: bool = False) -> None:
        self.cases.append(EvalCase.model_validate(dumped))


OUTLINE_KEY = "eval_cases"
OUTLINE_ITEMS = 50


def _outline_of(doc: Any) -> Any:
    if isinstance(doc, list):
        return doc[:OUTLINE_ITEMS]
    if isinstance(doc, dict) and isinstance(doc.get(OUTLINE_KEY), list):
        return {**doc, OUTLINE_KEY: doc[OUTLINE_KEY][:OUTLINE_ITEMS]}
    return doc


_IJSON_PYTHON = ijson.get_backend("python")


def _stream_outline(data: bytes, closes: list[int], items: list[int], spans: dict[str, list[tuple[int, int]]],
                    backend: Any = None) -> Any:
    """The outline (see `SourceFile.json_outline`) from one pass of ijson over the header and
    the first cases. The rest of the case list is not parsed here (the reader streams it
    next): `closes` (from the depth check) says where it ends, and the members after it are
    read from there. When every item of the case list is an object or an array, `spans`
    gets the (first, last) byte offsets of each (from `items`, the depth check's)."""
    events = (backend or ijson).basic_parse(data, use_float=True)
    first, value = next(events)
    if first == "start_array":
        return _first_items(events, OUTLINE_ITEMS)[0]  # enough to sniff; the rest is not read
    if first != "start_map":
        return _build(first, value, events)
    out: dict[str, Any] = {}
    containers = 0  # members before this one whose value is an array or an object
    for event, value in events:
        if event == "end_map":
            break
        key = value  # a map_key event
        event, value = next(events)
        if key == OUTLINE_KEY and event == "start_array":
            out[key], ended = _first_items(events, OUTLINE_ITEMS)
            if not ended:
                if containers < len(closes):
                    item_spans = _spans_between(data, items, closes[containers - 1] if containers else -1,
                                                closes[containers], out[key])
                    if item_spans is not None:
                        spans[key] = item_spans
                    # Skip to the array's closing bracket; what follows is `, "key": value
                    # ... }` (read as an object) or the closing brace.
                    tail = data[closes[containers] + 1:].lstrip()
                    if tail[:1] == b",":
                        rest = json.loads(b"{" + tail[1:])  # a syntax error: located by the caller
                        if not isinstance(rest, dict):  # pragma: no cover - `{` starts an object
                            raise ValueError("not an object")
                        out.update(rest)
                    elif tail[:1] != b"}" or tail[1:].strip():
                        raise ValueError("not valid JSON after the case list")
                    return out
                _skip_rest_of_array(events)
        else:
            out[key] = _build(event, value, events)
        if event in ("start_map", "start_array"):
            containers += 1
    for _ in events:  # trailing garbage is a syntax error too
        pass
    return out


def _spans_between(data: bytes, items: list[int], after: int, close: int,
                   read: list[Any]) -> list[tuple[int, int]] | None:
    """The (first, last) byte offsets of each item of the array that ends at `close`, from
    the depth check's `items` (the offsets that open depth 3 and close back to depth 2, in
    order; the array's own `[` follows `after`, the previous top-level container's end).

    `read`: the array's first items, parsed by the outline. None unless they and every item
    after them are containers with only a comma between each and the next (an array that
    also holds numbers or strings is streamed by ijson instead). The first item being a
    container, the first span is that item, and the text before it was valid to ijson."""
    if not read or not all(isinstance(item, dict | list) for item in read):
        return None
    lo = bisect_left(items, after + 1)
    hi = bisect_left(items, close)
    bounds = items[lo:hi]
    if len(bounds) % 2 or len(bounds) // 2 < len(read):
        return None
    spans = list(zip(bounds[::2], bounds[1::2], strict=True))
    previous = None
    for start, end in spans:
        if previous is not None and data[previous + 1:start].strip() != b",":
            return None
        previous = end
    if previous is None or data[previous + 1:close].strip():
        return None
    return spans


def _build(event: str, value: Any, events: Iterator[tuple[str, Any]]) -> Any:
    """The value that starts with (event, value)."""
    if event not in ("start_map", "start_array"):
        return value
    builder = ObjectBuilder()
    builder.event(event, value)
    depth = 1
    for event, value in events:
        builder.event(event, value)
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                break
    return builder.value


def _first_items(events: Iterator[tuple[str, Any]], limit: int) -> tuple[list[Any], bool]:
    """Up to `limit` items of the array whose start_array was just read, and whether the
    array ended; when it did not, the stream is left inside it (see `_skip_rest_of_array`)."""
    items: list[Any] = []
    while len(items) < limit:
        event, value = next(events)
        if event == "end_array":
            return items, True
        items.append(_build(event, value, events))
    return items, False


def _skip_rest_of_array(events: Iterator[tuple[str, Any]]) -> None:
    depth = 1
    for event, _ in events:
        if event in ("start_map", "start_array"):
            depth += 1
        elif event in ("end_map", "end_array"):
            depth -= 1
            if depth == 0:
                return


def json_lines(file: SourceFile, problems: list[Problem] | None = None, first: int | None = None
               ) -> list[tuple[int, Any]]:
    """(line number, value) for each non-blank line that is JSON (of the `first` ones: a sniffer
    needs no more); with `problems`, a located problem for each line that is not (for readers
    that report every problem, not the first)."""
    return list(islice(iter_json_lines(file, problems), first))


def iter_json_lines(file: SourceFile, problems: list[Problem] | None = None) -> Iterator[tuple[int, Any]]:
    """`json_lines` one line at a time: what a reader of a large JSONL file walks twice rather
    than hold every line's value (its ids first, then each case to the sink)."""
    for lineno, line in enumerate(file.json_line_texts(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, safejson.loads(line)
        except safejson.TooLongNumber as exc:
            raise json_error(exc, file.name, line=lineno) from None
        except json.JSONDecodeError as exc:
            if problems is not None:
                problems.append(Problem(safejson.describe(exc), file=file.name, line=lineno, column=exc.colno))


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
    sink: CaseSink | None = None  # set by read_upload: the sink that received the cases


class EvalSetFormat(Protocol):
    name: str
    label: str

    def sniff(self, file: SourceFile) -> str | None:
        """None when this reader takes `file` as an eval set; otherwise why it refuses."""

    def is_companion(self, file: SourceFile) -> bool:
        """True for a file that belongs beside an eval set of this format (a config, an
        evaluator definition) rather than being one."""

    def parse(
        self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None
    ) -> ParsedEvalSet:
        """The native eval set; raises EvalSetImportError listing every problem found.

        A reader may hand each case to `sink` as soon as it is valid instead of collecting
        them in `evalset.eval_cases` (worth it for formats whose files get large)."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector around bulk work.

    Reading a large eval set allocates millions of objects that stay alive until the end;
    every automatic collection walks all of them again (measured: a 10,000-case ADK import
    went from about 16 s to 6 s without it). Reference counting still frees as usual.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
