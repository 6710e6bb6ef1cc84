"""Plain eval sets: JSONL (one object per line) or CSV, for teams with no eval tool of their own.

Columns (CSV) or keys (JSONL):

- `input` (required): the user's message; in JSONL an object or list is kept as structured
  content.
- `expected_output`: the expected final response.
- `expected_tools`: a JSON list of `{"name": ..., "args": {...}}` objects (`arguments`,
  `input_parameters` / `inputParameters` and `result` / `output` are read too), or of tool
  names.
- `id` or `eval_id`: the case id. Without one it is the `name` when that is unique in the
  file, else `case-<n>` with n the row's 1-based position among the data rows.
- `name`; `tags`, separated by `|` or `,` (in JSONL also a list).
- anything else goes into the case's metadata as it is.

A file with DeepEval's own columns (actual_output, context, retrieval_context, scenario, ...)
is DeepEval's, and this reader leaves it to `deepeval`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from evaluations.interop.base import (
    CaseSink,
    EvalSetImportError,
    ParsedEvalSet,
    PathPart,
    Problem,
    SourceFile,
    format_path,
    gc_paused,
    iter_json_lines,
    json_lines,
    schema_error,
    stem,
)
from evaluations.interop.deepeval.evalset import MARKER_KEYS, derive_eval_ids, parse_tool_list
from evaluations.schemas.evalset import EvalCase, EvalSet, Invocation, MessageContent, ToolCall

ID_KEYS = ("eval_id", "id")
OWN_KEYS = {"input", "expected_output", "expected_tools", "name", "tags", *ID_KEYS}
_TAG_SEPARATORS = re.compile(r"[|,]")
_ARGS_KEYS = ("args", "arguments", "input_parameters", "inputParameters")
_RESULT_KEYS = ("result", "output")


class PlainReader:
    name = "plain"
    label = "plain JSONL / CSV"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix == "jsonl":
            keys: set[str] = set()
            for _, row in json_lines(file, first=200):
                if isinstance(row, dict):
                    keys |= set(row)
            what = "key"
        elif file.suffix == "csv":
            try:
                header = file.csv_header
            except EvalSetImportError as exc:
                return exc.problems[0].message
            keys, what = set(header), "column"
        else:
            return "not a .jsonl or .csv file"
        deepeval_keys = sorted(MARKER_KEYS & keys)
        if deepeval_keys:
            return f"has DeepEval's {what}s ({', '.join(deepeval_keys)})"
        if "input" not in keys:
            return f"no `input` {what}"
        return None

    def is_companion(self, file: SourceFile) -> bool:
        return False

    def parse(
        self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None
    ) -> ParsedEvalSet:
        problems: list[Problem] = []
        if file.suffix == "csv":
            # Two passes over the text, neither holding the rows: the first reads the ids and
            # names (an id comes from the names of all rows), the second builds each case and
            # hands it to the sink. A wide CSV's memory stays one row's.
            def rows(columns: Iterable[str] | None = None) -> Iterator[tuple[int, Any]]:
                return ((line, {k: v for k, v in row.items() if k}) for line, row in file.iter_csv_rows(columns))
        else:
            # The same two passes over JSON lines, each line parsed again in the second: a line's
            # values are about five times its text.
            first_pass = True

            def rows(columns: Iterable[str] | None = None) -> Iterator[tuple[int, Any]]:
                nonlocal first_pass
                out = iter_json_lines(file, problems if first_pass else None)
                first_pass = False
                return out
        lines: list[int] = []
        explicit: list[str | None] = []
        names: list[str | None] = []
        for line, row in rows([*ID_KEYS, "name"]):
            if isinstance(row, dict):
                lines.append(line)
                explicit.append(_explicit_id(row))
                names.append(row["name"].strip() if isinstance(row.get("name"), str) else None)
            else:
                problems.append(Problem("each line must be a JSON object", file=file.name, line=line))
        if not lines and not problems:
            raise EvalSetImportError("empty", [Problem("the file holds no cases", file=file.name)])

        problems.extend(_duplicate_id_problems(file, lines, explicit))
        eval_ids = iter(derive_eval_ids([[i, n] for i, n in zip(explicit, names, strict=True)], "case"))

        cases = []
        with gc_paused():
            for line, row in rows():
                if not isinstance(row, dict):
                    continue
                case = _case(file, line, row, next(eval_ids), problems)
                if case is None or problems:
                    continue  # nothing will be imported; just keep collecting problems
                if sink is not None:
                    sink.add(case)
                else:
                    cases.append(case)
        if problems:
            raise schema_error(sorted(problems, key=lambda p: p.line or 0))
        variant = file.suffix
        evalset = EvalSet(
            eval_set_id=stem(file.name),
            description=f"plain {variant.upper()} eval set from {file.basename}",
            eval_cases=cases,
            metadata={"source_format": self.name, "variant": variant},
        )
        return ParsedEvalSet(evalset=evalset, format=self.name, variant=variant, source=file)


reader = PlainReader()


def _explicit_id(row: dict[str, Any]) -> str | None:
    for key in ID_KEYS:
        value = row.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None


def _duplicate_id_problems(file: SourceFile, lines: list[int], explicit: list[str | None]) -> list[Problem]:
    # An id the author wrote twice is a mistake to report, not one to paper over.
    counts = Counter(i for i in explicit if i)
    first_line: dict[str, int] = {}
    problems = []
    for line, ident in zip(lines, explicit, strict=True):
        if not ident or counts[ident] == 1:
            continue
        if ident in first_line:
            problems.append(
                Problem(f"duplicate id: line {first_line[ident]} has it too", file=file.name, case=ident, line=line)
            )
        else:
            first_line[ident] = line
    return problems


def _case(file: SourceFile, line: int, row: dict[str, Any], eval_id: str, problems: list[Problem]) -> EvalCase | None:
    def problem(message: str, *path: PathPart) -> None:
        problems.append(Problem(message, file=file.name, case=eval_id, path=format_path(path) or None, line=line))

    before = len(problems)
    user = _content(row.get("input"), "user")
    if user is None:
        missing = row.get("input") in (None, "")
        problem("required field is missing (every case needs an `input`)" if missing
                else "must be text or a JSON object", "input")
    expected = None
    if row.get("expected_output") not in (None, ""):
        expected = _content(row["expected_output"], "assistant")
        if expected is None:
            problem("must be text or a JSON object", "expected_output")
    tools = _tools(row.get("expected_tools"), problem)
    name = row.get("name")
    if name is not None and not isinstance(name, str):
        problem("must be text", "name")
    tags = _tags(row.get("tags"), problem)
    metadata = {k: v for k, v in row.items() if k not in OWN_KEYS and v not in (None, "")}
    if isinstance(metadata.get("metadata"), dict):
        metadata.update(metadata.pop("metadata"))
    if len(problems) > before or user is None:
        return None
    return EvalCase(
        eval_id=eval_id,
        name=name or "",
        tags=tags,
        metadata=metadata,
        conversation=[
            Invocation(
                invocation_id="turn_1",
                user_content=user,
                expected_final_response=expected,
                expected_tool_trajectory=tools,
            )
        ],
    )


def _content(value: Any, role: str) -> MessageContent | None:
    if isinstance(value, str) and value != "":
        return MessageContent(role=role, content=value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return MessageContent(role=role, content=str(value))
    if isinstance(value, (dict, list)) and value:
        return MessageContent.json_part(role, value)
    return None


def _tools(value: Any, problem: Any) -> list[ToolCall]:
    if value in (None, ""):
        return []
    items, why = parse_tool_list(value)
    if items is None:
        problem(why or "not a list of tool calls", "expected_tools")
        return []
    calls = []
    for index, item in enumerate(items):
        if isinstance(item, str) and item:
            calls.append(ToolCall(name=item))
            continue
        if not isinstance(item, dict):
            problem("a tool call must be an object with a `name`, or a tool name", "expected_tools", index)
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            problem("required field is missing (a tool call needs a `name`)", "expected_tools", index, "name")
            continue
        args_key = next((k for k in _ARGS_KEYS if k in item), "args")
        args = item.get(args_key)
        if args is not None and not isinstance(args, dict):
            problem("must be an object of arguments", "expected_tools", index, args_key)
            continue
        result = next((item[k] for k in _RESULT_KEYS if k in item), None)
        calls.append(ToolCall(name=name, args=args or {}, result=result))
    return calls


def _tags(value: Any, problem: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [t.strip() for t in _TAG_SEPARATORS.split(value) if t.strip()]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t.strip() for t in value if t.strip()]
    problem("must be text separated by | or , (or a list of text)", "tags")
    return []
