"""Uploaded outputs: what an agent produced, read from files into `AgentOutput`s.

Accepted, one file or several (a zip is unpacked):

- the outputs format (docs/runs.md), one object per case and iteration: a JSON list, a JSON
  object `{"results": [...]}`, or JSONL (one object per line; a `.json` file that holds
  JSON lines is read as JSONL too);
- other tools' own result files, each read by its `OutputsFormat` (`interop/<tool>/outputs.py`,
  listed in `OUTPUTS_MODULES`): today Google ADK's `*.evalset_result.json` and Inspect AI's eval
  logs (`.eval` or `.json`).

An output with a `trace` (OTLP JSON) has the trace checked on ingest and applied
(`evaluations.interop.otel.spans.apply_trace`), so tool calls and usage that only the trace holds are
there for the evaluators.

Bad input raises `EvalSetImportError` listing every problem found (capped, with the total)
with its file, eval_id, field path and line, like the eval-set importers: codes `empty` (a
blank file, or no file at all; an empty list is a valid upload of no outputs),
`encoding`, `invalid_json`, `schema`, and `duplicate_outputs` when the only problem is an
(eval_id, iteration) given twice.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import ValidationError

from evaluations import safejson
from evaluations.interop.base import (
    MAX_REPORTED_PROBLEMS,
    EvalSetImportError,
    PathPart,
    Problem,
    SourceFile,
    format_path,
    gc_paused,
    locate,
    max_cases,
    too_many_cases,
)
from evaluations.interop.limits import expansion
from evaluations.interop.otel.spans import TraceError, apply_trace, parse_otlp
from evaluations.interop.upload import expand
from evaluations.schemas.outputs import AgentOutput
from evaluations.schemas.text import nul_free

Path = tuple[PathPart, ...]

# Other tools' results files that carry what the agent produced, tried in this order after
# evalsite's own outputs format (an object with `results`, a list, or JSON lines).
OUTPUTS_MODULES = [
    "evaluations.interop.adk.outputs",
    "evaluations.interop.inspect.outputs",
]


@dataclass
class Text:
    """Where a problem's path can be looked up: a JSON text, and the file line it starts on."""

    text: str | None
    first_line: int | None = 1  # None: no line means anything (a JSON string inside JSON)


@dataclass
class Problems:
    """Problems as (file, text, path, message, case), located only when reported: each
    lookup scans the text again, and only the first few are shown."""

    items: list[tuple[SourceFile, Text, Path, str, str | None, int | None]] = field(default_factory=list)

    def add(self, file: SourceFile, where: Text, path: Path, message: str, case: str | None = None,
            column: int | None = None) -> None:
        self.items.append((file, where, path, message, case, column))

    def problems(self) -> list[Problem]:
        out = []
        for index, (file, where, path, message, case, known_column) in enumerate(self.items):
            line, column = None, known_column
            if where.text is None or where.first_line is None:
                line = where.first_line
            elif index < MAX_REPORTED_PROBLEMS:
                located = locate(where.text, path)
                if located:
                    line, column = where.first_line + located[0] - 1, located[1]
            out.append(Problem(message, file=file.name, case=case, path=format_path(path) or None,
                               line=line, column=column))
        return out


@dataclass(frozen=True, slots=True)
class OutputRow:
    """An output as a run stores it: its case, its iteration and its JSON (the model's
    `model_dump_json(exclude_defaults=True)`), the model itself let go: a validated output takes
    about five times its JSON, and a run's creation needs no more than this."""

    eval_id: str
    iteration: int
    json: str


@dataclass
class ReadOutput:
    output: AgentOutput | OutputRow
    file: SourceFile
    where: Text
    path: Path


def read_outputs(files: list[SourceFile]) -> list[AgentOutput]:
    """Every output in `files`, in file order; raises `EvalSetImportError` on bad input."""
    with gc_paused(), expansion():  # 10,000 outputs stay alive: each automatic collection walked them all again
        return cast(list[AgentOutput], _read_outputs(files, compact=False))


def read_output_rows(files: list[SourceFile]) -> list[OutputRow]:
    """`read_outputs` for a run's creation: each output checked as a model, then kept as the
    JSON the run stores (a list or JSON lines one output at a time: no model outlives its row)."""
    with gc_paused(), expansion():
        return cast(list[OutputRow], _read_outputs(files, compact=True))


def _compact(read: ReadOutput) -> ReadOutput:
    output = read.output
    if isinstance(output, AgentOutput):
        output = apply_trace(output) if output.trace is not None else output
        read.output = OutputRow(output.eval_id, output.iteration, output.model_dump_json(exclude_defaults=True))
    return read


def _read_outputs(files: list[SourceFile], *, compact: bool) -> list[AgentOutput | OutputRow]:
    problems = Problems()
    read: list[ReadOutput] = []
    sources = expand(files)
    for file in sources:
        with nul_free([file.data]):  # one scan of the bytes instead of a walk per output
            got = _read_file(file, problems, compact)
            read.extend(map(_compact, got) if compact else got)
        if not problems.items:
            # The parsed document is not needed past its outputs (its strings are theirs now);
            # its text only to locate problems, which a file with none does not have.
            file.__dict__.pop("json", None)
    schema_count = len(problems.items)
    _check_duplicates(read, problems)
    if problems.items:
        code = "duplicate_outputs" if schema_count == 0 else "schema"
        found = problems.problems()
        raise EvalSetImportError(code, found, total=len(found))
    if not sources:
        raise EvalSetImportError("empty", [Problem("no outputs file in the upload (.json or .jsonl)")])
    return [apply_trace(r.output) if isinstance(r.output, AgentOutput) and r.output.trace is not None else r.output
            for r in read]


def _read_file(file: SourceFile, problems: Problems, compact: bool = False) -> list[ReadOutput]:
    for own in outputs_formats():
        found = own.read_file(file) if own.read_file is not None else None
        if found is not None:
            return found
    if file.suffix in ("jsonl", "ndjson"):
        return _read_lines(file, problems, compact)
    if file.is_blank():
        raise EvalSetImportError("empty", [Problem("the file is empty", file=file.name)])
    streamed = _read_array(file, problems, compact)
    if streamed is not None:
        return streamed
    try:
        doc = file.json
    except EvalSetImportError:
        if _is_json_lines(file):
            return _read_lines(file, problems, compact)
        raise
    where = Text(file.text)
    if isinstance(doc, str):
        # A tool once wrote its results as a JSON string holding the JSON (ADK's
        # `json.dump(result.model_dump_json())`). Lines in the inner text mean nothing to the user.
        try:
            inner = safejson.loads(doc)
        except ValueError:
            inner = None
        if isinstance(inner, dict) and (fmt := _claimed(inner)) is not None:
            return fmt.read(inner, file, Text(None, None), problems)
    if isinstance(doc, dict) and (fmt := _claimed(doc)) is not None:
        return fmt.read(doc, file, where, problems)
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        rows: list[tuple[Path, Any]] = [(("results", i), row) for i, row in enumerate(doc["results"])]
    elif isinstance(doc, list):
        rows = [((i,), row) for i, row in enumerate(doc)]
    elif isinstance(doc, dict) and "eval_id" in doc:
        rows = [((), doc)]
    else:
        problems.add(file, where, (), 'expected a list of outputs, an object {"results": [...]}, JSON lines, '
                     "or an ADK EvalSetResult")
        return []
    if len(rows) > max_cases():
        raise too_many_cases(file.name)
    return [r for path, row in rows if (r := _native(row, file, where, path, problems)) is not None]


_SPACE = re.compile(r"[ \t\n\r]*")


def _skip_space(text: str, position: int) -> int:
    found = _SPACE.match(text, position)
    return found.end() if found else position


def _read_array(file: SourceFile, problems: Problems, compact: bool) -> list[ReadOutput] | None:
    """The outputs of a file that is one JSON list, each parsed and validated in turn: the
    whole list's values (five times its text) are never in memory together. None for any
    other file, or one the stream cannot read (the whole-document path says why, and where)."""
    text = file.text
    start = _skip_space(text, 0)
    if text[start:start + 1] != "[":
        return None
    try:
        safejson.check_depth(file.data)
    except safejson.TooDeep:
        return None
    where, decoder, out = Text(text), json.JSONDecoder(), []
    limit, before = max_cases(), len(problems.items)
    position = _skip_space(text, start + 1)
    index = 0
    try:
        while index or text[position] != "]":  # after a comma, raw_decode refuses "]"
            row, position = decoder.raw_decode(text, position)
            if index >= limit:
                raise too_many_cases(file.name)
            read = _native(row, file, where, (index,), problems)
            if read is not None:
                out.append(_compact(read) if compact else read)
            index += 1
            position = _skip_space(text, position)
            if text[position] == "]":
                break
            if text[position] != ",":
                raise ValueError("expected , or ]")
            position = _skip_space(text, position + 1)
        if _skip_space(text, position + 1) != len(text):
            raise ValueError("extra data")
    except (ValueError, IndexError):  # JSONDecodeError, an integer too long, the text ends
        del problems.items[before:]
        return None
    return out


def _is_json_lines(file: SourceFile) -> bool:
    """A `.json` file whose first line is a whole JSON object: JSON lines, named .json."""
    try:
        first = file.text.lstrip().split("\n", 1)[0]
        return isinstance(safejson.loads(first), dict) and file.text.strip() != first.strip()
    except (ValueError, EvalSetImportError):
        return False


@dataclass(frozen=True)
class OutputsFormat:
    """A tool's own results files read as outputs (what its agent produced): `claims` a parsed
    JSON object, `read` it into outputs, reporting problems by file, case, path and line."""

    name: str
    claims: Callable[[dict[str, Any]], bool]
    read: Callable[[dict[str, Any], SourceFile, Text, Problems], list[ReadOutput]]
    # For files that are not one JSON document (a zip) or too large to parse whole: reads the
    # file itself, or returns None when it is not this tool's.
    read_file: Callable[[SourceFile], list[ReadOutput] | None] | None = None


def outputs_formats() -> list[OutputsFormat]:
    return [importlib.import_module(path).outputs_format for path in OUTPUTS_MODULES]


def _claimed(doc: dict[str, Any]) -> OutputsFormat | None:
    return next((fmt for fmt in outputs_formats() if fmt.claims(doc)), None)


def _read_lines(file: SourceFile, problems: Problems, compact: bool = False) -> list[ReadOutput]:
    out: list[ReadOutput] = []
    if file.is_blank():
        raise EvalSetImportError("empty", [Problem("the file is empty", file=file.name)])
    limit = max_cases()
    for lineno, line in enumerate(file.json_line_texts(), start=1):
        if not line.strip():
            continue
        if len(out) >= limit:
            raise too_many_cases(file.name)
        where = Text(line, lineno)
        try:
            row = safejson.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(file, Text(None, lineno), (), safejson.describe(exc), column=exc.colno)
            continue
        read = _native(row, file, where, (), problems)
        if read is not None:
            out.append(_compact(read) if compact else read)
    return out


def _native(row: Any, file: SourceFile, where: Text, path: Path, problems: Problems) -> ReadOutput | None:
    if not isinstance(row, dict):
        problems.add(file, where, path, f"an output must be an object, not {type_name(row)}")
        return None
    eval_id = row.get("eval_id") if isinstance(row.get("eval_id"), str) else None
    try:
        output = AgentOutput.model_validate(row)
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            loc = tuple(p for p in error["loc"] if isinstance(p, (str, int)))
            message = error["msg"]
            if error["type"] == "extra_forbidden":
                message = "unknown field (not part of the outputs format)"
            elif error["type"] == "missing":
                message = "required field is missing"
            problems.add(file, where, (*path, *loc), message, eval_id)
        return None
    if output.trace is not None:
        try:
            parse_otlp(output.trace)
        except TraceError as exc:
            for trace_path, message in exc.problems:
                problems.add(file, where, (*path, "trace", *trace_path), f"trace: {message}", eval_id)
            return None
    return ReadOutput(output, file, where, path)


def _check_duplicates(read: Sequence[ReadOutput], problems: Problems) -> None:
    first: dict[tuple[str, int], ReadOutput] = {}
    for item in read:
        key = (item.output.eval_id, item.output.iteration)
        seen = first.setdefault(key, item)
        if seen is item:
            continue
        where = seen.file.name
        if seen.where.text is not None and seen.where.first_line is not None:
            located = locate(seen.where.text, seen.path)
            if located:
                where += f":{seen.where.first_line + located[0] - 1}"
        problems.add(item.file, item.where, (*item.path, "eval_id"),
                     f"duplicate output for iteration {key[1]} of this case: {where} has it too", key[0])


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
