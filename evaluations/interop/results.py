"""Other tools' results files, read into `ParsedResults`: the registry and what every reader shares.

A results format is a `ResultsFormat` in its tool's package (`interop/<tool>/results.py`):
`claims(doc)` says whether a parsed JSON document is that tool's results, `read(reader)` turns it
into `ParsedResults` and reports what is wrong through the `Reader` (file, case, field path,
line). `read_results()` picks the format by `claims`, in `RESULTS_MODULES` order; writing the
run is `runs/imports.py`'s `results_import`, which names no tool.

Every score is kept as the other tool computed it: its metric name as the criterion, its score,
threshold, pass/fail and reason (`ImportedScore`).
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluations import safejson
from evaluations.interop.base import (
    TOO_LARGE_A_NUMBER,
    EvalSetImportError,
    PathPart,
    Problem,
    SourceFile,
    as_float,
    format_path,
    gc_paused,
    locate,
)
from evaluations.interop.limits import expansion
from evaluations.interop.outputs import OutputRow
from evaluations.schemas.outputs import AgentOutput
from evaluations.schemas.text import nul_free

Path = tuple[PathPart, ...]

# Detection order: the first format whose `claims` accepts the document reads it.
RESULTS_MODULES = [
    "evaluations.interop.adk.results",
    "evaluations.interop.deepeval.results",
    "evaluations.interop.agentflow.results",
    "evaluations.interop.uipath.results",
    "evaluations.interop.inspect.results",
    "evaluations.interop.promptfoo.results",
]


@dataclass
class ImportedScore:
    criterion: str
    raw_value: float | None
    score: float | None
    passed: bool | None
    threshold: float | None
    justification: dict[str, Any]
    error: str = ""
    turn_index: int = -1


@dataclass
class ImportedCase:
    key: str  # the eval id, or (UiPath) the case name, matched against the eval set
    path: Path
    scores: list[ImportedScore] = field(default_factory=list)
    passed: bool | None = None
    not_evaluated: bool = False
    error: str = ""
    latency: float | None = None
    # The output, or (DeepEval) its JSON as the run stores it, the model let go: `has_output` then
    # says whether it holds turns or an error.
    output: AgentOutput | OutputRow | None = None
    # The case as it makes the eval set: ADK's expected case; DeepEval's golden as its JSON (`json.dumps`).
    golden: dict[str, Any] | str | None = None
    iteration: int = 0
    has_output: bool = False

    def keep_output(self, output: AgentOutput) -> None:
        """Keep `output` as the JSON a run stores (`model_dump_json(exclude_defaults=True)`):
        about a fifth of what the model takes."""
        self.output = OutputRow(output.eval_id, output.iteration, output.model_dump_json(exclude_defaults=True))
        self.has_output = bool(output.turns or output.error)


@dataclass
class ParsedResults:
    tool: str
    file: SourceFile
    eval_set_id: str
    cases: list[ImportedCase]
    match_by_name: bool = False
    text: str | None = None  # the document's text, for lines (None: ADK's double-encoded form)
    # Run labels the file names (model, git_commit, branch; tags beside `imported:<tool>`), and
    # what else it says of the run, kept in the run's target.
    labels: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    # The eval set the file's cases make, as a file for `evalset_import` in `evalset_format` (the
    # tool's own reader when empty), when there is no eval set to match them against; with
    # `evalset_if_missing`, only when the project has no eval set of that id (one imported from
    # the tool's own suite file is the truer copy).
    evalset_file: SourceFile | None = None
    evalset_format: str = ""
    evalset_if_missing: bool = False
    text_released: bool = False  # `text` let go (`release_text`): decoded again from the file if needed

    def release_text(self) -> None:
        """Let the document's text go (and the file's decoded forms): it is only needed again to
        locate a problem (`located_text`), and a results import holds a lot besides."""
        if self.text is not None:
            self.text, self.text_released = None, True
        self.file.release()

    def located_text(self) -> str | None:
        """The text problems are located in (None: no line means anything, as for ADK's double-encoded form)."""
        return self.file.text if self.text_released else self.text

    @property
    def carries_cases(self) -> bool:
        return bool(self.cases) and all(c.golden is not None for c in self.cases)

    @property
    def carries_outputs(self) -> bool:
        return any(c.has_output if isinstance(c.output, OutputRow) else
                   c.output is not None and (c.output.turns or c.output.error) for c in self.cases)


class Reader:
    """A JSON document and the problems found in it, located by field path."""

    def __init__(self, file: SourceFile, doc: Any, text: str | None):
        self.file, self.doc, self.text = file, doc, text
        self.problems: list[Problem] = []

    def add(self, path: Path, message: str, case: str | None = None) -> None:
        line = column = None
        if self.text is not None and len(self.problems) < 20:
            located = locate(self.text, path)
            if located:
                line, column = located
        self.problems.append(Problem(message, file=self.file.name, case=case, path=format_path(path) or None,
                                     line=line, column=column))

    def get(self, obj: dict[str, Any], snake: str) -> Any:
        if snake in obj:
            return obj[snake]
        return obj.get(camel(snake))

    def key_of(self, obj: dict[str, Any], snake: str) -> str:
        if snake in obj:
            return snake
        return camel(snake)

    def items(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
              required: bool = True) -> list[tuple[Path, dict[str, Any]]]:
        value = self.get(obj, snake)
        where = (*path, self.key_of(obj, snake))
        if value is None:
            if required:
                self.add(where, "required field is missing", case)
            return []
        if not isinstance(value, list):
            self.add(where, f"expected a list, not {kind(value)}", case)
            return []
        out = []
        for index, item in enumerate(value):
            if isinstance(item, dict):
                out.append(((*where, index), item))
            else:
                self.add((*where, index), f"expected an object, not {kind(item)}", case)
        return out

    def text_field(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
                   required: bool = True) -> str | None:
        value = self.get(obj, snake)
        if value is None:
            if required:
                self.add((*path, self.key_of(obj, snake)), "required field is missing", case)
            return None
        if not isinstance(value, str) or not value.strip():
            self.add((*path, self.key_of(obj, snake)), f"expected a non-empty string, not {kind(value)}", case)
            return None
        return value

    def number(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
               required: bool = False) -> float | None:
        value = self.get(obj, snake)
        if value is None:
            if required:
                self.add((*path, self.key_of(obj, snake)), "required field is missing", case)
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.add((*path, self.key_of(obj, snake)), f"expected a number, not {kind(value)}", case)
            return None
        number = as_float(value)
        if number is None:
            self.add((*path, self.key_of(obj, snake)), TOO_LARGE_A_NUMBER, case)
        return number

    def flag(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
             required: bool = False) -> bool | None:
        value = self.get(obj, snake)
        if value is None:
            if required:
                self.add((*path, self.key_of(obj, snake)), "required field is missing", case)
            return None
        if not isinstance(value, bool):
            self.add((*path, self.key_of(obj, snake)), f"expected true or false, not {kind(value)}", case)
            return None
        return value

    def fail(self, code: str = "schema") -> None:
        if self.problems:
            raise EvalSetImportError(code, self.problems, total=len(self.problems))


def kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def unit(value: float | None) -> float | None:
    return value if value is not None and 0.0 <= value <= 1.0 else None


@dataclass(frozen=True)
class ResultsFormat:
    """One tool's results files: `claims` a parsed JSON document (a dict, or ADK's older JSON
    string holding the JSON), `read` it through a `Reader`."""

    name: str
    claims: Callable[[Any], bool]
    read: Callable[[Reader], ParsedResults]
    # For files that are not one JSON document (a zip) or too large to parse whole: reads the
    # file itself, or returns None when it is not this tool's.
    read_file: Callable[[SourceFile], ParsedResults | None] | None = None


def results_formats() -> list[ResultsFormat]:
    return [importlib.import_module(path).results_format for path in RESULTS_MODULES]


def sniff(doc: Any) -> ResultsFormat | None:
    """The format whose tool wrote this results document, or None."""
    for fmt in results_formats():
        if fmt.claims(doc):
            return fmt
    return None


@functools.cache
def camel(snake: str) -> str:
    """`final_eval_status` -> `finalEvalStatus` (asked ~50 times a case: kept)."""
    head, *rest = snake.split("_")
    return head + "".join(p.title() for p in rest)


def read_results(file: SourceFile) -> ParsedResults:
    """One results file, read whole; raises `EvalSetImportError` on anything wrong with it.
    A file with no NUL (raw or escaped) skips the per-string NUL walk of every output
    (evaluations/schemas/text.py)."""
    with nul_free([file.data]), gc_paused(), expansion() as budget:  # gc: millions of objects stay alive
        budget.own += len(file.data)
        return _read_results(file)


def _read_results(file: SourceFile) -> ParsedResults:
    if not file.data.strip():
        raise EvalSetImportError("empty", [Problem("the file is empty", file=file.name)])
    for own in results_formats():
        found = own.read_file(file) if own.read_file is not None else None
        if found is not None:
            if not found.cases:
                raise EvalSetImportError("empty", [Problem("the file holds no case results", file=file.name)])
            return found
    text: str | None = None
    try:
        text = file.text
        doc = safejson.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalSetImportError("invalid_json", [Problem(safejson.describe(exc), file=file.name,
                                                          line=exc.lineno, column=exc.colno)]) from None
    except ValueError as exc:
        raise EvalSetImportError("invalid_json", [Problem(str(exc), file=file.name)]) from None
    fmt = sniff(doc)
    if fmt is None:
        raise EvalSetImportError("unknown_format", [Problem(
            "not a results file evalsite reads: expected an ADK EvalSetResult (eval_case_results), a DeepEval "
            "test run (testCases / conversationalTestCases), an AgentFlow EvalReport (report_id, results), "
            "UiPath `uipath eval --output-file` results (evaluationSetResults), promptfoo `promptfoo eval -o "
            "results.json` results or an Inspect AI eval log (.eval, or .json with version, status, eval)",
            file=file.name)])
    if isinstance(doc, str):  # ADK's double-encoded form: no line means anything in it
        try:
            doc, text = safejson.loads(doc), None
        except ValueError as exc:
            raise EvalSetImportError("invalid_json", [Problem(f"not valid JSON inside the string: {exc}",
                                                              file=file.name)]) from None
    reader = Reader(file, doc, text)
    parsed = fmt.read(reader)
    parsed.text = reader.text
    reader.fail()
    if not parsed.cases:
        raise EvalSetImportError("empty", [Problem("the file holds no case results", file=file.name)])
    return parsed
