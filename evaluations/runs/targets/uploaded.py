"""Uploaded outputs: what an agent produced, read from files into `AgentOutput`s.

Accepted, one file or several (a zip is unpacked):

- the outputs format (README, "Targets"), one object per case and iteration: a JSON list, a JSON
  object `{"results": [...]}`, or JSONL (one object per line; a `.json` file that holds
  JSON lines is read as JSONL too);
- Google ADK's own result files (`*.evalset_result.json`, an `EvalSetResult`, snake_case
  or camelCase, also as ADK's older double-encoded JSON string): each case result's
  `eval_metric_result_per_invocation[].actual_invocation` becomes a turn (the final response
  text, `intermediate_data.tool_uses` or the function calls of newer
  `invocation_events` as tool calls, their responses as results, `duration` as latency,
  the events' `usage_metadata` as usage). A case result without per-invocation results is
  read from its `session_details.events`, grouped by invocation. ADK has no iteration
  number: a case that appears several times (`num_runs`) gets iterations 0, 1, 2, ... in
  file order. The turn's `invocation_id` is the expected invocation's, which is what ADK
  paired it with; ADK's own id stays in the turn's metadata.

An output with a `trace` (OTLP JSON) has the trace checked on ingest and applied
(`evaluations.runs.traces.apply_trace`), so tool calls and usage that only the trace holds are
there for the evaluators.

Bad input raises `EvalSetImportError` listing every problem found (capped, with the total)
with its file, eval_id, field path and line, like the eval-set importers: codes `empty` (a
blank file, or no file at all; an empty list is a valid upload of no outputs),
`encoding`, `invalid_json`, `schema`, and `duplicate_outputs` when the only problem is an
(eval_id, iteration) given twice.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from evaluations import safejson
from evaluations.evalsets.formats import expand
from evaluations.evalsets.formats.adk_convert import MISSING, AdkConverter, take
from evaluations.evalsets.formats.base import (
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
from evaluations.runs.traces import TraceError, apply_trace, parse_otlp
from evaluations.schemas.evalset import MessageContent
from evaluations.schemas.outputs import MAX_ITERATIONS, AgentOutput, OutputToolCall, TurnOutput, Usage
from evaluations.schemas.text import nul_free

Path = tuple[PathPart, ...]

_ADK_STATUS = {1: "PASSED", 2: "FAILED", 3: "NOT_EVALUATED"}
_ADK_MARKERS = ("eval_case_results", "evalCaseResults", "eval_set_result_id", "evalSetResultId")


@dataclass
class _Text:
    """Where a problem's path can be looked up: a JSON text, and the file line it starts on."""

    text: str | None
    first_line: int | None = 1  # None: no line means anything (a JSON string inside JSON)


@dataclass
class _Problems:
    """Problems as (file, text, path, message, case), located only when reported: each
    lookup scans the text again, and only the first few are shown."""

    items: list[tuple[SourceFile, _Text, Path, str, str | None, int | None]] = field(default_factory=list)

    def add(self, file: SourceFile, where: _Text, path: Path, message: str, case: str | None = None,
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


@dataclass
class _Read:
    output: AgentOutput
    file: SourceFile
    where: _Text
    path: Path


def read_outputs(files: list[SourceFile]) -> list[AgentOutput]:
    """Every output in `files`, in file order; raises `EvalSetImportError` on bad input."""
    with gc_paused():  # 10,000 outputs stay alive: each automatic collection walked them all again
        return _read_outputs(files)


def _read_outputs(files: list[SourceFile]) -> list[AgentOutput]:
    problems = _Problems()
    read: list[_Read] = []
    sources = expand(files)
    for file in sources:
        with nul_free([file.data]):  # one scan of the bytes instead of a walk per output
            read.extend(_read_file(file, problems))
    schema_count = len(problems.items)
    _check_duplicates(read, problems)
    if problems.items:
        code = "duplicate_outputs" if schema_count == 0 else "schema"
        found = problems.problems()
        raise EvalSetImportError(code, found, total=len(found))
    if not sources:
        raise EvalSetImportError("empty", [Problem("no outputs file in the upload (.json or .jsonl)")])
    return [apply_trace(r.output) if r.output.trace is not None else r.output for r in read]


def _read_file(file: SourceFile, problems: _Problems) -> list[_Read]:
    if file.suffix in ("jsonl", "ndjson"):
        return _read_lines(file, problems)
    if file.is_blank():
        raise EvalSetImportError("empty", [Problem("the file is empty", file=file.name)])
    try:
        doc = file.json
    except EvalSetImportError:
        if _is_json_lines(file):
            return _read_lines(file, problems)
        raise
    where = _Text(file.text)
    if isinstance(doc, str):
        # ADK's LocalEvalSetResultsManager once wrote `json.dump(result.model_dump_json())`: a
        # JSON string holding the JSON. Lines in the inner text mean nothing to the user.
        try:
            inner = safejson.loads(doc)
        except ValueError:
            inner = None
        if isinstance(inner, dict) and _is_adk_result(inner):
            return _read_adk(inner, file, _Text(None, None), problems)
    if isinstance(doc, dict) and _is_adk_result(doc):
        return _read_adk(doc, file, where, problems)
    if isinstance(doc, dict) and "eval_metric_result_per_invocation" in doc:
        return _read_adk({"eval_case_results": [doc]}, file, _Text(None, None), problems)
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


def _is_json_lines(file: SourceFile) -> bool:
    """A `.json` file whose first line is a whole JSON object: JSON lines, named .json."""
    try:
        first = file.text.lstrip().split("\n", 1)[0]
        return isinstance(safejson.loads(first), dict) and file.text.strip() != first.strip()
    except (ValueError, EvalSetImportError):
        return False


def _is_adk_result(doc: dict[str, Any]) -> bool:
    return any(key in doc for key in _ADK_MARKERS)


def _read_lines(file: SourceFile, problems: _Problems) -> list[_Read]:
    out: list[_Read] = []
    if file.is_blank():
        raise EvalSetImportError("empty", [Problem("the file is empty", file=file.name)])
    limit = max_cases()
    for lineno, line in enumerate(file.text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(out) >= limit:
            raise too_many_cases(file.name)
        where = _Text(line, lineno)
        try:
            row = safejson.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(file, _Text(None, lineno), (), f"not valid JSON: {exc.msg}", column=exc.colno)
            continue
        read = _native(row, file, where, (), problems)
        if read is not None:
            out.append(read)
    return out


def _native(row: Any, file: SourceFile, where: _Text, path: Path, problems: _Problems) -> _Read | None:
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
    return _Read(output, file, where, path)


def _check_duplicates(read: Sequence[_Read], problems: _Problems) -> None:
    first: dict[tuple[str, int], _Read] = {}
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


# --- ADK result files -------------------------------------------------------------------------


def _read_adk(doc: dict[str, Any], file: SourceFile, where: _Text, problems: _Problems) -> list[_Read]:
    converter = AdkConverter(file)  # ADK's own reader: contents, tool uses and events as ADK spells them
    set_id = _text(doc, "eval_set_id")
    result_id = _text(doc, "eval_set_result_id")
    key, cases = take(doc, "eval_case_results")
    if not isinstance(cases, list):
        problems.add(file, where, (key,), "required: the list of case results")
        return []
    runs: Counter[str] = Counter()
    out = []
    for index, raw in enumerate(cases):
        path: Path = (key, index)
        if not isinstance(raw, dict):
            problems.add(file, where, path, f"a case result must be an object, not {type_name(raw)}")
            continue
        id_key, eval_id = take(raw, "eval_id")
        if not isinstance(eval_id, str) or not eval_id:
            problems.add(file, where, (*path, id_key), "required: the case's eval_id", f"#{index + 1}")
            continue
        if runs[eval_id] >= MAX_ITERATIONS:  # each repeat of a case is its next iteration
            problems.add(file, where, (*path, id_key), f"more than {MAX_ITERATIONS} results for this case "
                         f"(a run has at most {MAX_ITERATIONS} iterations)", eval_id)
            continue
        before = len(converter.errors)
        turns = _adk_turns(converter, raw, path, eval_id, file, where, problems)
        if len(converter.errors) > before:
            continue
        status = take(raw, "final_eval_status")[1]
        metadata: dict[str, Any] = {"source_format": "adk-eval-result"}
        for name, value in (("eval_set_id", _text(raw, "eval_set_id") or set_id),
                            ("eval_set_result_id", result_id),
                            ("session_id", _text(raw, "session_id")),
                            ("final_eval_status", _ADK_STATUS.get(status, status) if status is not MISSING else None)):
            if value is not None:
                metadata[name] = value
        output = AgentOutput(
            eval_id=eval_id,
            iteration=runs[eval_id],
            turns=turns,
            error=None if turns else "the ADK result holds no actual invocations for this case",
            metadata=metadata,
        )
        runs[eval_id] += 1
        out.append(_Read(output, file, where, path))
    for message, error_path, case in converter.errors:
        problems.add(file, where, error_path, message, case)
    return out


def _text(obj: dict[str, Any], name: str) -> str | None:
    value = take(obj, name)[1]
    return value if isinstance(value, str) and value else None


def _adk_turns(converter: AdkConverter, raw: dict[str, Any], path: Path, eval_id: str, file: SourceFile,
               where: _Text, problems: _Problems) -> list[TurnOutput]:
    per_key, per_invocation = take(raw, "eval_metric_result_per_invocation")
    turns: list[TurnOutput] = []
    if isinstance(per_invocation, list) and per_invocation:
        for turn, item in enumerate(per_invocation):
            item_path: Path = (*path, per_key, turn)
            if not isinstance(item, dict):
                problems.add(file, where, item_path, f"must be an object, not {type_name(item)}", eval_id)
                continue
            actual_key, actual = take(item, "actual_invocation")
            if not isinstance(actual, dict):
                problems.add(file, where, (*item_path, actual_key), "required: the actual invocation", eval_id)
                continue
            invocation = converter.invocation(actual, (*item_path, actual_key), turn, eval_id)
            if invocation is None:
                continue
            expected = take(item, "expected_invocation")[1]
            expected_id = _text(expected, "invocation_id") if isinstance(expected, dict) else None
            turns.append(_turn(invocation, expected_id))
        return turns
    if per_invocation not in (MISSING, None) and not isinstance(per_invocation, list):
        problems.add(file, where, (*path, per_key), f"must be a list, not {type_name(per_invocation)}", eval_id)
        return []
    session = take(raw, "session_details")[1]
    events = take(session, "events")[1] if isinstance(session, dict) else None
    return _session_turns(events) if isinstance(events, list) else []


def _turn(invocation: dict[str, Any], expected_id: str | None) -> TurnOutput:
    """A turn from the native invocation dict that ADK's converter builds (it names the
    actual data `expected_*`, being written for eval sets)."""
    metadata = dict(invocation["metadata"])
    latency = metadata.pop("duration", None)
    final = invocation["expected_final_response"]
    response: Any = None
    if final is not None:
        content = final["content"]
        response = content if isinstance(content, str) else (MessageContent(**final).get_text() or content)
    if expected_id and expected_id != invocation["invocation_id"]:
        metadata["adk_invocation_id"] = invocation["invocation_id"]
    return TurnOutput(
        invocation_id=expected_id or invocation["invocation_id"],
        final_response=response,
        tool_calls=[
            OutputToolCall(name=c["name"], args=c["args"], call_id=c.get("call_id"), result=c.get("result"))
            for c in invocation["expected_tool_trajectory"]
        ],
        intermediate_responses=invocation["expected_intermediate_responses"],
        latency_seconds=float(latency) if isinstance(latency, (int, float)) and not isinstance(latency, bool) else None,
        usage=_adk_usage(metadata.get("invocation_events") or []),
        metadata=metadata,
    )


def _adk_usage(events: list[Any]) -> Usage | None:
    """Token totals over the events' genai `usage_metadata` (either spelling)."""
    found = False
    usage = Usage()
    for event in events:
        meta = take(event, "usage_metadata")[1] if isinstance(event, dict) else None
        if not isinstance(meta, dict):
            continue
        for field_name, adk_name in (("prompt_tokens", "prompt_token_count"),
                                     ("completion_tokens", "candidates_token_count"),
                                     ("total_tokens", "total_token_count")):
            value = take(meta, adk_name)[1]
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(usage, field_name, (getattr(usage, field_name) or 0) + value)
                found = True
    return usage if found else None


def _session_turns(events: list[Any]) -> list[TurnOutput]:
    """Turns from a session's events grouped by invocation id, in order: the agents' function
    calls and responses, their last text as the final response, earlier texts as
    intermediate responses. Written by ADK itself, so nothing is reported about them."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        invocation_id = take(event, "invocation_id")[1]
        groups.setdefault(invocation_id if isinstance(invocation_id, str) else "", []).append(event)
    turns = []
    for number, (invocation_id, group) in enumerate(groups.items(), start=1):
        agent_events = [e for e in group if e.get("author") != "user"]
        scratch = AdkConverter(SourceFile("session", b"{}"))
        metadata: dict[str, Any] = {}
        calls, intermediate = scratch.invocation_events(agent_events, (), "", metadata)
        final = intermediate.pop()["content"] if intermediate else None
        if isinstance(final, list):
            final = MessageContent(role="assistant", content=final).get_text() or final
        turns.append(TurnOutput(
            invocation_id=invocation_id or f"turn_{number}",
            final_response=final,
            tool_calls=[OutputToolCall(name=c["name"], args=c["args"], call_id=c.get("call_id"),
                                       result=c.get("result")) for c in calls],
            intermediate_responses=intermediate,
            usage=_adk_usage(agent_events),
        ))
    return turns
