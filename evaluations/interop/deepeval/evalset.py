"""DeepEval / Confident AI goldens (seed 002): what `EvaluationDataset.save_as()` writes.

DeepEval writes three shapes, and a dataset is single-turn or multi-turn, never both:

- JSON: a list of goldens. Single-turn keys: `input`, `actual_output`, `expected_output`,
  `context`, `retrieval_context` (lists), `name`, `comments`, `source_file`, `tools_called`,
  `expected_tools` (tool objects: `name`, `inputParameters` / `input_parameters`, `output`,
  `description`, `reasoning`), `additional_metadata`, `custom_column_key_values`. Multi-turn
  keys: `scenario`, `turns`, `expected_outcome`, `user_description`, `context`, `name`,
  `comments`, `additional_metadata`, `custom_column_key_values`. `turns` is a list of
  `{role, content, retrieval_context, tools_called, ...}`, or (older releases) that list
  encoded as a JSON string. Confident AI's API wraps goldens as `{"goldens": [...]}` or
  `{"conversationalGoldens": [...]}` with camelCase keys; both are read.
- JSONL: one golden per line; single-turn lines join `context` / `retrieval_context` with `|`.
- CSV: the same columns; list cells joined with `|`, tool, metadata and turns cells hold JSON.

Mapping into the native model:

- eval_id: goldens carry no id of their own, so it is derived, in this order: the golden's
  `id` (Confident AI exports) when unique in the file, else its `name` when unique, else
  `golden-<n>` with n its 1-based position in the file. The same goldens therefore get the
  same ids from the JSON and the CSV that DeepEval writes of them.
- Single-turn: one invocation `turn_1` (input -> user, expected_output -> expected final
  response, expected_tools -> expected tool trajectory). Everything else the golden holds
  (context, retrieval_context, comments, source_file, additional_metadata,
  custom_column_key_values, actual_output, tools_called, unknown keys under `extra`) is kept
  in the case's metadata.
- Multi-turn: `conversation_scenario` (scenario -> conversation_plan, user_description ->
  user_persona, expected_outcome) and, when turns exist, a conversation: each user turn starts
  an invocation; the assistant turns that follow it are its expected responses (the last one
  final, earlier ones intermediate), their tools_called its expected tool trajectory and
  their retrieval_context the invocation's metadata.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from evaluations import safejson
from evaluations.interop.base import (
    CaseSink,
    EvalSetImportError,
    ParsedEvalSet,
    PathPart,
    Problem,
    SourceFile,
    format_path,
    json_lines,
    locate,
    schema_error,
    stem,
)
from evaluations.schemas.evalset import (
    ConversationScenario,
    EvalCase,
    EvalSet,
    Invocation,
    MessageContent,
    ToolCall,
)

LIST_DELIMITER = "|"  # DeepEval's delimiter for list cells (context, retrieval_context)
TOOLS_DELIMITER = ";"  # older DeepEval CSVs held tool names split on ";" instead of JSON

# camelCase (Confident AI's API and `by_alias` dumps) -> the snake_case names save_as writes.
ALIASES = {
    "actualOutput": "actual_output",
    "expectedOutput": "expected_output",
    "retrievalContext": "retrieval_context",
    "additionalMetadata": "additional_metadata",
    "sourceFile": "source_file",
    "toolsCalled": "tools_called",
    "expectedTools": "expected_tools",
    "customColumnKeyValues": "custom_column_key_values",
    "expectedOutcome": "expected_outcome",
    "userDescription": "user_description",
}
SINGLE_TURN_FIELDS = {
    "input",
    "actual_output",
    "expected_output",
    "retrieval_context",
    "tools_called",
    "expected_tools",
    "source_file",
}
MULTI_TURN_FIELDS = {"scenario", "turns", "expected_outcome", "user_description", "persona"}
SHARED_FIELDS = {"id", "name", "context", "comments", "additional_metadata", "custom_column_key_values", "tags"}
KNOWN_FIELDS = SINGLE_TURN_FIELDS | MULTI_TURN_FIELDS | SHARED_FIELDS
# Bookkeeping DeepEval adds to some dumps; it says nothing about the case.
IGNORED_FIELDS = {"multimodal", "images_mapping", "imagesMapping"}

# Keys or columns that only DeepEval files have: a file with any of them is DeepEval's, not a
# plain input/expected_output file (the plain reader refuses these).
MARKER_KEYS = (
    {
        "actual_output",
        "retrieval_context",
        "context",
        "scenario",
        "expected_outcome",
        "user_description",
        "comments",
        "source_file",
        "tools_called",
        "additional_metadata",
        "custom_column_key_values",
        "turns",
        "persona",
    }
    | set(ALIASES)
)
_ENTRY_KEYS = {"input", "scenario"}  # every golden has one of these
_WRAPPER_KEYS = ("goldens", "conversationalGoldens", "conversational_goldens")
_TURN_ALIASES = {
    "retrievalContext": "retrieval_context",
    "toolsCalled": "tools_called",
    "userId": "user_id",
    "additionalMetadata": "additional_metadata",
    "metadata": "additional_metadata",
}


@dataclass
class _Golden:
    position: int  # 1-based, in file order
    line: int | None  # CSV / JSONL: the physical line the golden starts on
    prefix: tuple[PathPart, ...]  # JSON: where the golden sits in the document
    keys: dict[str, str] = field(default_factory=dict)  # canonical field -> key as written
    values: dict[str, Any] = field(default_factory=dict)  # canonical field -> value (no empties)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown keys, kept in metadata
    eval_id: str = ""
    start: int | None = None  # JSON walked item by item: where the golden starts in the text
    turn_kind: bool | None = None  # multi_turn, kept while the fields are let go (see `_walked_goldens`)
    ids: list[str | None] | None = None  # `_id_candidates`, kept likewise
    extra_keys: frozenset[str] = frozenset()  # the unknown keys, kept likewise

    @property
    def multi_turn(self) -> bool:
        if self.turn_kind is not None:
            return self.turn_kind
        if "scenario" in self.values:
            return True
        if "input" in self.values:
            return False
        return bool(MULTI_TURN_FIELDS & self.values.keys())

    def label(self) -> str:
        return f"line {self.line}" if self.line is not None else f"golden #{self.position}"


class _Parse:
    """One file's parse: the goldens read so far and every problem found in them."""

    def __init__(self, file: SourceFile):
        self.file = file
        self.problems: list[Problem] = []
        self.warnings: list[str] = []

    def problem(self, golden: _Golden, message: str, *path: PathPart) -> None:
        """Record a problem at `path` inside `golden` (its first part a canonical field name)."""
        inner: list[PathPart] = [golden.keys.get(str(path[0]), str(path[0])), *path[1:]] if path else []
        line, column = golden.line, None
        if golden.line is None:  # JSON: the path runs from the document's root
            inner = [*golden.prefix, *inner]
            located = locate(self.file.text, inner)
            if located:
                line, column = located
        self.problems.append(
            Problem(
                message,
                file=self.file.name,
                case=golden.eval_id or None,
                path=format_path(inner) or None,
                line=line,
                column=column,
            )
        )


class DeepEvalReader:
    name = "deepeval"
    label = "DeepEval / Confident AI goldens"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix == "json":
            doc, why = file.try_json()
            if why:
                return why
            items = _wrapped_items(doc)
            if items is None:
                return "not a list of goldens (nor {\"goldens\": [...]})"
            objects = [g for g in items[:200] if isinstance(g, dict)]
            if not any(_ENTRY_KEYS & {ALIASES.get(k, k) for k in g} for g in objects):
                return "no golden has an `input` or a `scenario`"
            return None
        if file.suffix == "jsonl":
            keys = set()
            for _, row in json_lines(file, first=200):
                if isinstance(row, dict):
                    keys |= set(row)
            return _refusal_for_keys(keys, "key")
        if file.suffix == "csv":
            try:
                header = file.csv_header
            except EvalSetImportError as exc:
                return exc.problems[0].message
            return _refusal_for_keys(set(header), "column")
        return "not a .json, .jsonl or .csv file"

    def is_companion(self, file: SourceFile) -> bool:
        return False

    def parse(
        self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None
    ) -> ParsedEvalSet:
        run = _Parse(file)
        goldens = self._load(run)
        if not goldens and not run.problems:
            raise EvalSetImportError("empty", [Problem("the file holds no goldens", file=file.name)])
        ids = [g.ids if g.ids is not None else _id_candidates(g) for g in goldens]
        for golden, eval_id in zip(goldens, derive_eval_ids(ids, "golden"), strict=True):
            golden.eval_id = eval_id
        self._check_not_mixed(run, goldens)
        multi_turn = any(g.multi_turn for g in goldens)
        # Each case goes to the sink as soon as it is made (not every model held until the last
        # is made), while no golden has been found wrong. What the sink refuses (too many cases,
        # too expanded) is said only once every golden has been checked, as when the sink had the
        # finished list: a golden found wrong is said first.
        cases: list[EvalCase | None] = []
        refused: EvalSetImportError | None = None
        for g in goldens:
            _reload(run.file, g)
            case = self._multi_turn_case(run, g) if multi_turn else self._single_turn_case(run, g)
            _let_go(g)
            if sink is None or run.problems or refused is not None:
                cases.append(case)
            elif case is not None:
                try:
                    sink.add(case)
                except EvalSetImportError as exc:
                    refused = exc
        if run.problems:
            raise schema_error(sorted(run.problems, key=_by_line))
        unknown = sorted({k for g in goldens for k in (g.extra_keys or g.extra)})
        if unknown:
            run.warnings.append(
                f"kept unknown DeepEval fields in each case's metadata.extra: {', '.join(unknown)}"
            )
        variant = "deepeval-multi-turn" if multi_turn else "deepeval-single-turn"
        evalset = EvalSet(
            eval_set_id=stem(file.name),
            description=f"DeepEval {'multi' if multi_turn else 'single'}-turn goldens from {file.basename}",
            eval_cases=[c for c in cases if c is not None],
            metadata={"source_format": self.name, "variant": variant, "file_type": file.suffix},
        )
        if refused is not None:
            raise refused
        return ParsedEvalSet(evalset=evalset, format=self.name, variant=variant, source=file, warnings=run.warnings)

    # --- Reading the file into goldens --------------------------------------------------------

    def _load(self, run: _Parse) -> list[_Golden]:
        file = run.file
        goldens: list[_Golden] = []
        if file.suffix == "csv":
            for line, row in file.iter_csv_rows():
                golden = _Golden(position=len(goldens) + 1, line=line, prefix=())
                _read_fields(golden, {k: v for k, v in row.items() if k})
                goldens.append(golden)
            return goldens
        if file.suffix == "jsonl":
            for line, row in json_lines(file, run.problems):
                golden = _Golden(position=len(goldens) + 1, line=line, prefix=())
                if not isinstance(row, dict):
                    run.problems.append(Problem("a golden must be a JSON object", file=file.name, line=line))
                    continue
                _read_fields(golden, row)
                goldens.append(golden)
            return goldens
        walked = _walked_goldens(file)
        if walked is not None:
            return walked
        doc = file.json
        located: list[tuple[tuple[PathPart, ...], Any]] = []
        if isinstance(doc, list):
            located = [((index,), item) for index, item in enumerate(doc)]
        elif isinstance(doc, dict) and any(isinstance(doc.get(k), list) for k in _WRAPPER_KEYS):
            # Confident AI's shape; both lists filled is a mixed dataset, reported as such below.
            for key in _WRAPPER_KEYS:
                if isinstance(doc.get(key), list):
                    located += [((key, index), item) for index, item in enumerate(doc[key])]
        else:
            raise EvalSetImportError("schema", [Problem("expected a JSON list of goldens", file=file.name)])
        for prefix, item in located:
            golden = _Golden(position=len(goldens) + 1, line=None, prefix=prefix)
            if not isinstance(item, dict):
                run.problem(golden, "a golden must be a JSON object")
                continue
            _read_fields(golden, item)
            goldens.append(golden)
        return goldens

    def _check_not_mixed(self, run: _Parse, goldens: list[_Golden]) -> None:
        multi = [g for g in goldens if g.multi_turn]
        single = [g for g in goldens if not g.multi_turn]
        if not multi or not single:
            return
        problems = [
            Problem(
                "a DeepEval dataset is single-turn or multi-turn, never both: "
                f"single-turn goldens (with `input`): {_labels(single)}; "
                f"multi-turn goldens (with `scenario` / `turns`): {_labels(multi)}",
                file=run.file.name,
            )
        ]
        # Point at each golden of the smaller group: those are most likely the strays.
        strays, kind = (multi, "multi-turn") if len(multi) <= len(single) else (single, "single-turn")
        for g in strays:
            before = len(run.problems)
            _reload(run.file, g)
            others = "single" if kind == "multi-turn" else "multi"
            own_fields = MULTI_TURN_FIELDS if g.multi_turn else SINGLE_TURN_FIELDS
            key = next((k for k in ("scenario", "input", *sorted(own_fields)) if k in g.values), None)
            run.problem(g, f"{kind} golden in a file of {others}-turn goldens", *([key] if key else []))
            problems.append(run.problems.pop(before))
        raise EvalSetImportError("mixed_turns", problems, total=len(problems))

    # --- Single-turn -----------------------------------------------------------------------

    def _single_turn_case(self, run: _Parse, g: _Golden) -> EvalCase | None:
        for key in sorted(MULTI_TURN_FIELDS & g.values.keys()):
            run.problem(g, f"`{key}` is a multi-turn field; this golden is single-turn (it has an `input`)", key)
        user_input = _text(run, g, "input")
        if "input" not in g.values:
            run.problem(g, "required field is missing (every single-turn golden has an `input`)", "input")
        expected_output = _text(run, g, "expected_output")
        trajectory, notes = _tools(run, g, "expected_tools")
        tools_called, called_notes = _tools(run, g, "tools_called")
        metadata = _shared_metadata(run, g)
        retrieval_context = _string_list(run, g, "retrieval_context")
        if retrieval_context is not None:
            metadata["retrieval_context"] = retrieval_context
        for key in ("actual_output", "source_file"):
            value = _text(run, g, key)
            if value is not None:
                metadata[key] = value
        if tools_called:
            metadata["tools_called"] = _tool_dicts(tools_called, called_notes)
        if user_input is None:
            return None
        invocation = Invocation(
            invocation_id="turn_1",
            user_content=MessageContent.user(user_input),
            expected_final_response=MessageContent.assistant(expected_output) if expected_output is not None else None,
            expected_tool_trajectory=trajectory,
            metadata={"expected_tools_notes": notes} if any(notes) else {},
        )
        return _case(run, g, conversation=[invocation], metadata=metadata)

    # --- Multi-turn ------------------------------------------------------------------------

    def _multi_turn_case(self, run: _Parse, g: _Golden) -> EvalCase | None:
        for key in sorted(SINGLE_TURN_FIELDS & g.values.keys()):
            run.problem(g, f"`{key}` is a single-turn field; this golden is multi-turn (it has a `scenario`)", key)
        scenario = _text(run, g, "scenario")
        if scenario is None:
            run.problem(g, "required field is missing (every multi-turn golden has a `scenario`)", "scenario")
        persona = _json_value(run, g, "persona")
        user_description = _text(run, g, "user_description")
        scenario_meta: dict[str, Any] = {}
        if isinstance(persona, dict):
            scenario_meta["persona"] = persona
            if user_description is None and isinstance(persona.get("characteristics"), str):
                user_description = persona["characteristics"]
        elif isinstance(persona, str) and user_description is None:
            user_description = persona
        elif persona is not None:
            run.problem(g, "must be an object with `characteristics` (or text)", "persona")
        metadata = _shared_metadata(run, g)
        conversation, opening = _conversation(run, g)
        if opening:
            # DeepEval lets the assistant speak first; an invocation always starts with the user.
            metadata["opening_assistant_turns"] = opening
        if scenario is None:
            return None
        return _case(
            run,
            g,
            conversation=conversation,
            metadata=metadata,
            conversation_scenario=ConversationScenario(
                conversation_plan=scenario,
                user_persona=user_description,
                expected_outcome=_text(run, g, "expected_outcome"),
                metadata=scenario_meta,
            ),
        )


reader = DeepEvalReader()


# --- A JSON list of goldens, read golden by golden ---------------------------------------------
#
# `file.json` of a large list of goldens holds every golden as dicts at once (several times the
# file), and each golden's fields besides until the last case is made. The checks made before any
# case (eval ids, single- or multi-turn) need only a little of each golden; so the list is walked
# with the decoder `json.loads` uses: each golden decoded once for what the checks need (then its
# fields let go), and again, from where it starts in the text, when its case is made. A document
# this walk does not take as it is (not a list at the top, too deep, an integer too long, invalid
# JSON) is left to `file.json`, whose errors are the ones to say.

_DECODER = json.JSONDecoder()  # what `json.loads` uses: NaN and Infinity accepted, last key wins
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace, as json skips it


def _walked_goldens(file: SourceFile) -> list[_Golden] | None:
    if "json" in file.__dict__:
        return None  # parsed whole already (to sniff it): read from that
    if file.is_blank() or file.data.lstrip(b"\xef\xbb\xbf \t\n\r")[:1] != b"[":
        return None
    try:
        safejson.check_depth(file.data)
        text = file.text
        goldens: list[_Golden] = []
        pos = _SPACE.match(text).end()  # type: ignore[union-attr]
        if not text.startswith("[", pos):
            return None
        pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        if text.startswith("]", pos):
            end = pos + 1
        else:
            while True:
                value, end = _DECODER.raw_decode(text, pos)
                if not isinstance(value, dict):
                    return None  # said by the whole parse, in the order it says things
                golden = _Golden(position=len(goldens) + 1, line=None, prefix=(len(goldens),), start=pos)
                _read_fields(golden, value)
                golden.turn_kind, golden.ids = golden.multi_turn, _id_candidates(golden)
                golden.extra_keys = frozenset(golden.extra)
                _let_go(golden)
                goldens.append(golden)
                del value
                pos = _SPACE.match(text, end).end()  # type: ignore[union-attr]
                if text.startswith(",", pos):
                    pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
                elif text.startswith("]", pos):
                    end = pos + 1
                    break
                else:
                    return None
        if _SPACE.match(text, end).end() != len(text):  # type: ignore[union-attr]
            return None
    except (ValueError, RecursionError, EvalSetImportError):
        return None
    return goldens


def _reload(file: SourceFile, golden: _Golden) -> None:
    """A walked golden's fields, decoded again from where it starts."""
    if golden.start is not None and not golden.values and not golden.extra:
        _read_fields(golden, _DECODER.raw_decode(file.text, golden.start)[0])


def _let_go(golden: _Golden) -> None:
    if golden.start is not None:
        golden.values, golden.keys, golden.extra = {}, {}, {}


# --- Shared helpers (the plain reader uses these too) ------------------------------------------


def derive_eval_ids(candidates: Sequence[Sequence[str | None]], prefix: str) -> list[str]:
    """A unique eval_id per row: its first candidate (e.g. id, then name) that no other row
    shares, else `<prefix>-<position>` (suffixed if even that is taken)."""
    chosen: list[str | None] = [None] * len(candidates)
    taken: set[str] = set()
    levels = max((len(c) for c in candidates), default=0)
    for level in range(levels):
        values = [c[level] if level < len(c) and c[level] else None for c in candidates]
        counts = Counter(v for v in values if v)
        for index, value in enumerate(values):
            if chosen[index] is None and value and counts[value] == 1 and value not in taken:
                chosen[index] = value
                taken.add(value)
    out = []
    for index, value in enumerate(chosen):
        if value is None:
            value = f"{prefix}-{index + 1}"
            suffix = 2
            while value in taken:
                value = f"{prefix}-{index + 1}-{suffix}"
                suffix += 1
            taken.add(value)
        out.append(value)
    return out


def split_list(value: str, delimiter: str = LIST_DELIMITER) -> list[str]:
    return value.split(delimiter)


def _refusal_for_keys(keys: set[str], what: str) -> str | None:
    markers = sorted(MARKER_KEYS & keys)
    if not markers:
        return f"no DeepEval-only {what} (such as actual_output, context, retrieval_context, scenario, turns)"
    if not _ENTRY_KEYS & {ALIASES.get(k, k) for k in keys}:
        return f"no `input` or `scenario` {what}"
    return None


def _wrapped_items(doc: Any) -> list[Any] | None:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in _WRAPPER_KEYS:
            if isinstance(doc.get(key), list):
                return doc[key]
    return None


def _read_fields(golden: _Golden, row: dict[str, Any]) -> None:
    for key, value in row.items():
        canonical = ALIASES.get(key, key)
        if value is None or value == "" or value == [] or value == {} or canonical in IGNORED_FIELDS:
            continue
        if canonical in KNOWN_FIELDS:
            if canonical not in golden.values:
                golden.values[canonical] = value
                golden.keys[canonical] = key
        else:
            golden.extra[key] = value


def _id_candidates(g: _Golden) -> list[str | None]:
    ident = g.values.get("id")
    name = g.values.get("name")
    return [
        str(ident).strip() if isinstance(ident, (str, int)) and not isinstance(ident, bool) else None,
        name.strip() if isinstance(name, str) else None,
    ]


def _by_line(problem: Problem) -> int:
    return problem.line or 0


def _labels(goldens: list[_Golden], limit: int = 10) -> str:
    labels = ", ".join(g.label() for g in goldens[:limit])
    return labels + (f" and {len(goldens) - limit} more" if len(goldens) > limit else "")


def _text(run: _Parse, g: _Golden, key: str) -> str | None:
    value = g.values.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    run.problem(g, f"must be text, not {_kind(value)}", key)
    return None


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", str: "text"}.get(type(value), "a number")


def _string_list(run: _Parse, g: _Golden, key: str) -> list[Any] | None:
    """A list of strings; text (CSV and JSONL cells) is split on `|` as DeepEval joins it."""
    value = g.values.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return split_list(value)
    if not isinstance(value, list):
        run.problem(g, f"must be a list of text, not {_kind(value)}", key)
        return None
    for index, item in enumerate(value):
        # retrieval_context may hold RetrievedContextData objects ({context, source}).
        if not isinstance(item, str) and not (key == "retrieval_context" and isinstance(item, dict)):
            run.problem(g, f"must be text, not {_kind(item)}", key, index)
    return value


def _json_value(run: _Parse, g: _Golden, key: str) -> Any:
    """A value that CSV cells (and older JSON dumps) hold as JSON text: parse it."""
    value = g.values.get(key)
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text.startswith(("{", "[")):
        return value
    try:
        return safejson.loads(text)
    except json.JSONDecodeError as exc:
        if text.startswith("{"):
            try:
                # Older DeepEval wrote metadata as a Python dict repr and read it with literal_eval.
                return ast.literal_eval(text)
            except (ValueError, SyntaxError):
                pass
        run.problem(g, f"{safejson.describe(exc)} (line {exc.lineno} column {exc.colno} of the value)", key)
        return _INVALID


_INVALID = object()


def _object(run: _Parse, g: _Golden, key: str) -> dict[str, Any] | None:
    value = _json_value(run, g, key)
    if value is None or value is _INVALID:
        return None
    if not isinstance(value, dict):
        run.problem(g, f"must be an object, not {_kind(value)}", key)
        return None
    return value


def _shared_metadata(run: _Parse, g: _Golden) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    context = _string_list(run, g, "context")
    if context is not None:
        metadata["context"] = context
    comments = _text(run, g, "comments")
    if comments is not None:
        metadata["comments"] = comments
    for key in ("additional_metadata", "custom_column_key_values"):
        value = _object(run, g, key)
        if value:
            metadata[key] = value
    if g.extra:
        metadata["extra"] = g.extra
    return metadata


def _tags(run: _Parse, g: _Golden) -> list[str]:
    value = g.values.get("tags")
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip() for t in value.split(LIST_DELIMITER) if t.strip()]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return value
    run.problem(g, "must be a list of text", "tags")
    return []


def _case(run: _Parse, g: _Golden, **fields: Any) -> EvalCase | None:
    name = _text(run, g, "name") or ""
    tags = _tags(run, g)
    try:
        return EvalCase(eval_id=g.eval_id, name=name, tags=tags, **fields)
    except ValidationError as exc:  # pragma: no cover - every field was checked above
        for error in exc.errors(include_url=False):
            run.problem(g, error["msg"])
        return None


# --- Tools ---------------------------------------------------------------------------------


_TOOL_KEYS = {"name", "input_parameters", "inputParameters", "output", "description", "reasoning", "type"}


def parse_tool_list(value: Any) -> tuple[list[Any] | None, str | None]:
    """The list of tools a cell or key holds: a JSON list (or one object), or, as older
    DeepEval CSVs wrote, tool names separated by `;`. (None, why) when it is not one."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith(("[", "{")):
            try:
                value = safejson.loads(text)
            except json.JSONDecodeError as exc:
                return None, f"{safejson.describe(exc)} (line {exc.lineno} column {exc.colno} of the value)"
        else:
            return [name.strip() for name in text.split(TOOLS_DELIMITER) if name.strip()], None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return None, f"must be a list of tool calls, not {_kind(value)}"
    return value, None


def _tools(run: _Parse, g: _Golden, key: str, *, value: Any = None, path: Sequence[PathPart] = ()
           ) -> tuple[list[ToolCall], list[dict[str, Any]]]:
    """Native tool calls plus, per call, what the native ToolCall has no field for."""
    raw = g.values.get(key) if value is None else value
    if raw is None:
        return [], []
    where = [key, *path] if path else [key]
    items, why = parse_tool_list(raw)
    if items is None:
        run.problem(g, why or "not a list of tool calls", *where)
        return [], []
    calls: list[ToolCall] = []
    notes: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            calls.append(ToolCall(name=item))
            notes.append({})
            continue
        if not isinstance(item, dict):
            run.problem(g, f"a tool call must be an object with a `name`, not {_kind(item)}", *where, index)
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name:
            run.problem(g, "required field is missing (a tool call needs a `name`)", *where, index, "name")
            continue
        params_key = "inputParameters" if "inputParameters" in item else "input_parameters"
        params = item.get(params_key)
        if params is not None and not isinstance(params, dict):
            run.problem(g, f"must be an object of parameters, not {_kind(params)}", *where, index, params_key)
            continue
        calls.append(ToolCall(name=name, args=params or {}, result=item.get("output")))
        note = {k: v for k, v in item.items() if k not in {"name", "input_parameters", "inputParameters", "output"}
                and v is not None and not (k == "type" and v == "FUNCTION")}
        notes.append(note)
    return calls, notes


def _tool_dicts(calls: list[ToolCall], notes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**call.model_dump(exclude_none=True, exclude={"call_id"}), **note}
            for call, note in zip(calls, notes, strict=True)]


# --- Turns ---------------------------------------------------------------------------------


@dataclass
class _Turn:
    role: str
    content: str
    retrieval_context: list[Any] | None
    tools: list[ToolCall]
    tool_notes: list[dict[str, Any]]
    other: dict[str, Any]  # user_id, metadata, mcp_* calls: kept on the message


def _conversation(run: _Parse, g: _Golden) -> tuple[list[Invocation], list[dict[str, Any]]]:
    raw = g.values.get("turns")
    if raw is None:
        return [], []
    turns_value = raw
    if isinstance(raw, str):
        try:
            turns_value = safejson.loads(raw)
        except json.JSONDecodeError as exc:
            run.problem(g, f"{safejson.describe(exc)} (line {exc.lineno} column {exc.colno} of the value)", "turns")
            return [], []
    if not isinstance(turns_value, list):
        run.problem(g, f"must be a list of turns, not {_kind(turns_value)}", "turns")
        return [], []
    turns = [t for index, item in enumerate(turns_value) if (t := _turn(run, g, index, item)) is not None]
    if len(turns) != len(turns_value):
        return [], []

    groups: list[tuple[_Turn, list[_Turn]]] = []
    opening: list[dict[str, Any]] = []
    for turn in turns:
        if turn.role == "user":
            groups.append((turn, []))
        elif groups:
            groups[-1][1].append(turn)
        else:
            opening.append({"role": turn.role, "content": turn.content, **_message_metadata(turn)})
    invocations = []
    for number, (user, replies) in enumerate(groups, start=1):
        metadata: dict[str, Any] = {}
        retrieval = [item for reply in replies for item in (reply.retrieval_context or [])]
        if retrieval:
            metadata["retrieval_context"] = retrieval
        if user.retrieval_context:
            metadata["user_retrieval_context"] = user.retrieval_context
        messages = [MessageContent(role="assistant", content=r.content, metadata=_message_metadata(r))
                    for r in replies]
        invocations.append(
            Invocation(
                invocation_id=f"turn_{number}",
                user_content=MessageContent(role="user", content=user.content, metadata=_message_metadata(user)),
                expected_tool_trajectory=[call for reply in replies for call in reply.tools],
                expected_intermediate_responses=messages[:-1],
                expected_final_response=messages[-1] if messages else None,
                metadata=metadata,
            )
        )
    return invocations, opening


def _message_metadata(turn: _Turn) -> dict[str, Any]:
    """What a turn carries besides its text (not the retrieval context: that is the invocation's)."""
    metadata = dict(turn.other)
    if turn.role == "user" and turn.tools:
        metadata["tools_called"] = _tool_dicts(turn.tools, turn.tool_notes)
    elif any(turn.tool_notes):
        metadata["tools_called_notes"] = turn.tool_notes
    return metadata


def _turn(run: _Parse, g: _Golden, index: int, item: Any) -> _Turn | None:
    if not isinstance(item, dict):
        run.problem(g, f"a turn must be an object with `role` and `content`, not {_kind(item)}", "turns", index)
        return None
    fields = {_TURN_ALIASES.get(k, k): v for k, v in item.items() if v is not None}
    ok = True
    role = fields.pop("role", None)
    if role not in ("user", "assistant"):
        message = "required field is missing" if role is None else f"must be 'user' or 'assistant', not {role!r}"
        run.problem(g, message, "turns", index, "role")
        ok = False
    content = fields.pop("content", None)
    if not isinstance(content, str):
        message = "required field is missing" if content is None else f"must be text, not {_kind(content)}"
        run.problem(g, message, "turns", index, "content")
        ok = False
    retrieval = fields.pop("retrieval_context", None)
    if isinstance(retrieval, str):
        retrieval = split_list(retrieval)
    elif retrieval is not None and not isinstance(retrieval, list):
        run.problem(g, f"must be a list of text, not {_kind(retrieval)}", "turns", index, "retrieval_context")
        ok = False
    errors_before = len(run.problems)
    tools, notes = _tools(run, g, "turns", value=fields.pop("tools_called", None) or [], path=(index, "tools_called"))
    if len(run.problems) > errors_before or not ok:
        return None
    return _Turn(role=str(role), content=str(content), retrieval_context=retrieval or None, tools=tools,
                 tool_notes=notes, other={str(k): v for k, v in fields.items() if v not in ("", [], {})})
