"""Results import: another tool's results file becomes a completed run of the matching eval set.

Read, one JSON file at a time (the format is recognised by its keys):

- **ADK** `.adk/eval_history/*.evalset_result.json` (an `EvalSetResult`, snake_case or camelCase,
  also ADK's older double-encoded JSON string): per case `overall_eval_metric_results[]`
  (`metric_name`, `threshold`, `score`, `eval_status` 1 passed / 2 failed / 3 not evaluated,
  `details`), per turn `eval_metric_result_per_invocation[].eval_metric_results[]`, the case's
  `final_eval_status`; the agent's outputs are read as uploaded outputs read them
  (`runs/targets/uploaded.py`). The eval set is the one chosen, else the project's eval set whose
  id is the file's `eval_set_id`, else one created from the expected invocations ADK paired the
  agent's turns with (`eval_metric_result_per_invocation[].expected_invocation`), when every case
  has them.
- **DeepEval / Confident AI** test runs (`testCases`, `conversationalTestCases`, also wrapped as
  `.deepeval/.latest_test_run.json` writes them, `{"testRunData": {...}}`; each case with
  `metricsData[]`: `name`, `score`, `threshold`, `success`, `reason`, `error`, ...; snake_case
  too): the test cases carry their inputs, so without a chosen eval set one is created from them
  (as DeepEval goldens: input, expected output, context, expected tools; a conversation's user
  turns and scenario), named after the run's `identifier`, else its `testFile` (`test_rag.py` ->
  `test_rag`), else the file (every `deepeval test run` saves `.latest_test_run.json`). Eval ids
  are derived as for goldens: the test case's `name` when unique, else `golden-<n>`. The same file
  holding only `{"testRunLink": ...}` (what DeepEval leaves once it sent the run to Confident AI)
  is refused as holding no results (`link_only`).
- **AgentFlow** `EvalReport` (`report_id`, `eval_set_id`, `results[]` of `EvalCaseResult` with
  `criterion_results[]`: `criterion`, `score`, `passed`, `threshold`, `details`): no outputs and
  no cases, matched by eval id against the chosen eval set (else the one with `eval_set_id`).
- **UiPath** `uipath eval --output-file` (`UiPathEvalOutput`: `evaluationSetName`,
  `evaluationSetResults[]` of `{evaluationName, score, evaluationRunResults[]: {evaluatorName,
  result: {score, details, evaluationTime}}}`): matched by case name, then eval id, against the
  chosen eval set (else the one named `evaluationSetName`). UiPath records no threshold or pass/fail
  per evaluator; its score is kept as `raw_value` (booleans are 100/0), normalised to [0, 1] by
  dividing by 100 when above 1.

Every score is stored as the other tool computed it: its metric name as the criterion, its
score, threshold (`{"lower_limit": t}`, the tool's own value also in the justification), pass/fail
and reason, with `evaluator = "imported:<tool>"`. The run is an uploaded-outputs run tagged
`imported:<tool>` whose target records the tool and file, and whose config lists the tool's metrics
(`options.imported_from`; the threshold where the tool gave one); it is completed through
`run_finish`, so its summary, comparison and exports are those of any run. A case's status is the
tool's own verdict where it gives one. Cases of the eval set the file does not cover are `missing`.

Bad input raises `EvalSetImportError` with file, case, field path and line; nothing is written
(`results_import` is one transaction).
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from evaluations import safejson
from evaluations.evalsets.formats.base import (
    EvalSetImportError,
    PathPart,
    Problem,
    SourceFile,
    format_path,
    gc_paused,
    locate,
    stem,
)
from evaluations.evalsets.formats.deepeval import derive_eval_ids
from evaluations.evalsets.services import evalset_import
from evaluations.models import CaseResult, EvalCase, EvalSet, EvalSetVersion, Project, Run, Score
from evaluations.runs import services
from evaluations.runs.engine import dumps, executemany
from evaluations.runs.targets.uploaded import read_outputs
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from evaluations.schemas.text import nul_free

TOOLS = ("adk", "deepeval", "agentflow", "uipath")
ORIGIN_PREFIX = "imported:"
_ADK_MARKERS = ("eval_case_results", "evalCaseResults")
_DEEPEVAL_MARKERS = ("testCases", "conversationalTestCases", "test_cases", "conversational_test_cases")
_ADK_STATUS = {1: True, 2: False}

Path = tuple[PathPart, ...]


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
    output: AgentOutput | None = None
    golden: dict[str, Any] | None = None  # DeepEval: the case as a golden, to create the eval set
    iteration: int = 0


@dataclass
class ParsedResults:
    tool: str
    file: SourceFile
    eval_set_id: str
    cases: list[ImportedCase]
    match_by_name: bool = False
    text: str | None = None  # the document's text, for lines (None: ADK's double-encoded form)

    @property
    def carries_cases(self) -> bool:
        return bool(self.cases) and all(c.golden is not None for c in self.cases)

    @property
    def carries_outputs(self) -> bool:
        return any(c.output is not None and (c.output.turns or c.output.error) for c in self.cases)


class _Reader:
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
        return obj.get(_camel(snake))

    def key_of(self, obj: dict[str, Any], snake: str) -> str:
        if snake in obj:
            return snake
        return _camel(snake)

    def items(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
              required: bool = True) -> list[tuple[Path, dict[str, Any]]]:
        value = self.get(obj, snake)
        where = (*path, self.key_of(obj, snake))
        if value is None:
            if required:
                self.add(where, "required field is missing", case)
            return []
        if not isinstance(value, list):
            self.add(where, f"expected a list, not {_kind(value)}", case)
            return []
        out = []
        for index, item in enumerate(value):
            if isinstance(item, dict):
                out.append(((*where, index), item))
            else:
                self.add((*where, index), f"expected an object, not {_kind(item)}", case)
        return out

    def text_field(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
                   required: bool = True) -> str | None:
        value = self.get(obj, snake)
        if value is None:
            if required:
                self.add((*path, self.key_of(obj, snake)), "required field is missing", case)
            return None
        if not isinstance(value, str) or not value.strip():
            self.add((*path, self.key_of(obj, snake)), f"expected a non-empty string, not {_kind(value)}", case)
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
            self.add((*path, self.key_of(obj, snake)), f"expected a number, not {_kind(value)}", case)
            return None
        return float(value)

    def flag(self, obj: dict[str, Any], snake: str, path: Path, case: str | None = None,
             required: bool = False) -> bool | None:
        value = self.get(obj, snake)
        if value is None:
            if required:
                self.add((*path, self.key_of(obj, snake)), "required field is missing", case)
            return None
        if not isinstance(value, bool):
            self.add((*path, self.key_of(obj, snake)), f"expected true or false, not {_kind(value)}", case)
            return None
        return value

    def fail(self, code: str = "schema") -> None:
        if self.problems:
            raise EvalSetImportError(code, self.problems, total=len(self.problems))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def _unit(value: float | None) -> float | None:
    return value if value is not None and 0.0 <= value <= 1.0 else None


# --- Reading --------------------------------------------------------------------------------


def sniff(doc: Any) -> str | None:
    """Which tool wrote this results document, or None."""
    if isinstance(doc, str) and any(m in doc for m in _ADK_MARKERS):
        return "adk"  # ADK's older double-encoded EvalSetResult
    if not isinstance(doc, dict):
        return None
    if any(m in doc for m in _ADK_MARKERS):
        return "adk"
    if any(m in doc for m in _DEEPEVAL_MARKERS):
        return "deepeval"
    if isinstance(doc.get("testRunData"), dict) and any(m in doc["testRunData"] for m in _DEEPEVAL_MARKERS):
        return "deepeval"  # `.deepeval/.latest_test_run.json`: {"testRunData": {...}, "testRunLink": ...}
    if set(doc) == {"testRunLink"}:
        return "deepeval"  # the same file once DeepEval sent the run to Confident AI: only the link is left
    if "report_id" in doc and "results" in doc:
        return "agentflow"
    if "evaluationSetResults" in doc or "evaluation_set_results" in doc:
        return "uipath"
    return None


@functools.cache
def _camel(snake: str) -> str:
    """`final_eval_status` -> `finalEvalStatus` (asked ~50 times a case: kept)."""
    head, *rest = snake.split("_")
    return head + "".join(p.title() for p in rest)


def read_results(file: SourceFile) -> ParsedResults:
    """One results file, read whole; raises `EvalSetImportError` on anything wrong with it.
    A file with no NUL (raw or escaped) skips the per-string NUL walk of every output
    (evaluations/schemas/text.py)."""
    with nul_free([file.data]), gc_paused():  # millions of objects alive until the end: no collector walks
        return _read_results(file)


def _read_results(file: SourceFile) -> ParsedResults:
    if not file.data.strip():
        raise EvalSetImportError("empty", [Problem("the file is empty", file=file.name)])
    text: str | None = None
    try:
        text = file.text
        doc = safejson.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalSetImportError("invalid_json", [Problem(f"not valid JSON: {exc.msg}", file=file.name,
                                                          line=exc.lineno, column=exc.colno)]) from None
    except ValueError as exc:
        raise EvalSetImportError("invalid_json", [Problem(str(exc), file=file.name)]) from None
    tool = sniff(doc)
    if tool is None:
        raise EvalSetImportError("unknown_format", [Problem(
            "not a results file evalsite reads: expected an ADK EvalSetResult (eval_case_results), a DeepEval "
            "test run (testCases / conversationalTestCases), an AgentFlow EvalReport (report_id, results) or "
            "UiPath `uipath eval --output-file` results (evaluationSetResults)", file=file.name)])
    if isinstance(doc, str):  # ADK's double-encoded form: no line means anything in it
        try:
            doc, text = safejson.loads(doc), None
        except ValueError as exc:
            raise EvalSetImportError("invalid_json", [Problem(f"not valid JSON inside the string: {exc}",
                                                              file=file.name)]) from None
    reader = _Reader(file, doc, text)
    parse: Callable[[_Reader], ParsedResults] = {"adk": _adk, "deepeval": _deepeval, "agentflow": _agentflow,
                                                  "uipath": _uipath}[tool]
    parsed = parse(reader)
    parsed.text = reader.text
    reader.fail()
    if not parsed.cases:
        raise EvalSetImportError("empty", [Problem("the file holds no case results", file=file.name)])
    return parsed


def _adk(r: _Reader) -> ParsedResults:
    doc = r.doc
    if not isinstance(doc, dict):
        r.add((), f"expected an object, not {_kind(doc)}")
        return ParsedResults("adk", r.file, "", [])
    cases: list[ImportedCase] = []
    seen: Counter[str] = Counter()
    for path, item in r.items(doc, "eval_case_results", ()):
        eval_id = r.text_field(item, "eval_id", path)
        if eval_id is None:
            continue
        case = ImportedCase(eval_id, path, iteration=seen[eval_id])
        seen[eval_id] += 1
        status = r.get(item, "final_eval_status")
        if status is not None and status not in (1, 2, 3):
            r.add((*path, r.key_of(item, "final_eval_status")), "expected 1 (passed), 2 (failed) or 3 "
                  "(not evaluated)", eval_id)
        case.passed = _ADK_STATUS.get(status) if isinstance(status, int) else None
        case.not_evaluated = status == 3
        for mpath, metric in r.items(item, "overall_eval_metric_results", path, eval_id, required=False):
            score = _adk_metric(r, metric, mpath, eval_id, -1)
            if score is not None:
                case.scores.append(score)
        expected = []
        for turn, (ipath, invocation) in enumerate(r.items(item, "eval_metric_result_per_invocation", path, eval_id,
                                                           required=False)):
            expected.append(r.get(invocation, "expected_invocation"))
            for mpath, metric in r.items(invocation, "eval_metric_results", ipath, eval_id, required=False):
                score = _adk_metric(r, metric, mpath, eval_id, turn)
                if score is not None:
                    case.scores.append(score)
        if expected and all(isinstance(e, dict) for e in expected):
            # What ADK paired the agent's turns with: the case, as an ADK EvalCase.
            case.golden = {"eval_id": eval_id, "conversation": expected}
        cases.append(case)
    if not r.problems:
        outputs = read_outputs([SourceFile(r.file.name, json.dumps(doc).encode() if r.text is None else r.file.data)])
        by_key = {(o.eval_id, o.iteration): o for o in outputs}
        for case in cases:
            case.output = by_key.get((case.key, case.iteration))
            if case.output is not None:
                case.latency = case.output.total_latency()
    eval_set_id = r.get(doc, "eval_set_id")
    return ParsedResults("adk", r.file, eval_set_id if isinstance(eval_set_id, str) else "", cases)


def _adk_metric(r: _Reader, metric: dict[str, Any], path: Path, case: str, turn: int) -> ImportedScore | None:
    name = r.text_field(metric, "metric_name", path, case)
    value = r.number(metric, "score", path, case)
    threshold = r.number(metric, "threshold", path, case)
    status = r.get(metric, "eval_status")
    if status is not None and status not in (1, 2, 3):
        r.add((*path, r.key_of(metric, "eval_status")), "expected 1 (passed), 2 (failed) or 3 (not evaluated)", case)
    if name is None:
        return None
    details = r.get(metric, "details")
    justification: dict[str, Any] = {"imported_from": "adk", "eval_status": status, "threshold": threshold}
    if details is not None:
        justification["details"] = details
    return ImportedScore(name, value, _unit(value), _ADK_STATUS.get(status) if isinstance(status, int) else None,
                         threshold, justification,
                         error="not evaluated (ADK eval_status 3)" if status == 3 else "", turn_index=turn)


def _deepeval(r: _Reader) -> ParsedResults:
    doc = r.doc
    prefix: Path = ()
    if set(doc) == {"testRunLink"}:
        # DeepEval overwrites `.latest_test_run.json` with `{"testRunLink": ...}` once it has sent the run
        # to Confident AI (`save_final_test_run_link`), as real published files show.
        r.add(("testRunLink",), "this DeepEval file holds only the link to the test run on Confident AI "
              f"({str(doc['testRunLink'])[:200]}), not its results: import a test run that holds them "
              "(testCases / conversationalTestCases with metricsData)")
        r.fail("link_only")
    if isinstance(doc.get("testRunData"), dict):
        doc, prefix = doc["testRunData"], ("testRunData",)
    single = r.items(doc, "test_cases", prefix, required=False)
    multi = r.items(doc, "conversational_test_cases", prefix, required=False)
    if single and multi:
        r.add((), "a DeepEval test run is single-turn or multi-turn, never both (testCases and "
                  "conversationalTestCases both hold cases)")
    rows = single or multi
    names = [row.get("name") if isinstance(row.get("name"), str) else None for _, row in rows]
    ids = derive_eval_ids([[n.strip() if n else None] for n in names], "golden")
    cases = []
    for (path, row), eval_id in zip(rows, ids, strict=True):
        case = ImportedCase(eval_id, path)
        case.passed = r.flag(row, "success", path, eval_id)
        duration = r.number(row, "run_duration", path, eval_id)
        case.latency = duration
        for mpath, metric in r.items(row, "metrics_data", path, eval_id, required=False):
            name = r.text_field(metric, "name", mpath, eval_id)
            value = r.number(metric, "score", mpath, eval_id)
            threshold = r.number(metric, "threshold", mpath, eval_id)
            success = r.flag(metric, "success", mpath, eval_id)
            error = r.get(metric, "error")
            if name is None:
                continue
            justification: dict[str, Any] = {"imported_from": "deepeval", "threshold": threshold}
            for key in ("reason", "strict_mode", "evaluation_model", "evaluation_cost", "verbose_logs"):
                if r.get(metric, key) is not None:
                    justification[key] = r.get(metric, key)
            case.scores.append(ImportedScore(name, value, _unit(value), success, threshold, justification,
                                             error=str(error) if error else ""))
        if multi:
            turns = r.get(row, "turns") or []
            if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
                r.add((*path, "turns"), "expected a list of {role, content} objects", eval_id)
                continue
            users = [{"role": "user", "content": t.get("content", "")} for t in turns if t.get("role") == "user"]
            golden: dict[str, Any] = {"name": eval_id, "turns": users}
            for key in ("scenario", "expected_outcome", "user_description", "context"):
                if r.get(row, key) is not None:
                    golden[key] = r.get(row, key)
            if "scenario" not in golden:  # goldens need one; a test case may have none
                golden["scenario"] = f"the conversation of DeepEval test case {eval_id}"
            case.golden = golden
            case.output = AgentOutput(eval_id=eval_id, latency_seconds=duration, turns=_deepeval_turns(turns))
        else:
            text = r.text_field(row, "input", path, eval_id)
            golden = {"name": eval_id, "input": text or ""}
            for key in ("expected_output", "context", "retrieval_context", "expected_tools"):
                if r.get(row, key) is not None:
                    golden[key] = r.get(row, key)
            case.golden = golden
            # One validation of plain data: building the nested models one by one cost 9 a case.
            calls = _tool_dicts(r.get(row, "tools_called") or r.get(row, "tools_used"))  # older: toolsUsed
            case.output = AgentOutput.model_validate({"eval_id": eval_id, "latency_seconds": duration, "turns": [
                {"final_response": r.get(row, "actual_output"), "tool_calls": calls}]})
        cases.append(case)
    return ParsedResults("deepeval", r.file, _deepeval_name(r, doc), cases)


def _deepeval_name(r: _Reader, doc: dict[str, Any]) -> str:
    """The eval set a test run is created as: its `identifier`, else the test file it ran
    (`testFile`: `evals/test_rag.py` -> `test_rag`), else the file's name. Real runs are all saved
    as `.latest_test_run.json`: named after the file alone, unrelated runs would become versions of
    one eval set `.latest_test_run`."""
    identifier, test_file = r.get(doc, "identifier"), r.get(doc, "test_file")
    if isinstance(identifier, str) and identifier.strip():
        return identifier.strip().replace("/", "_")[:200]
    if isinstance(test_file, str) and stem(test_file.strip()):
        return stem(test_file.strip())[:200]
    return stem(r.file.name).lstrip(".") or "deepeval_test_run"


def _tools(value: Any) -> list[OutputToolCall]:
    return [OutputToolCall.model_validate(call) for call in _tool_dicts(value)]


def _tool_dicts(value: Any) -> list[dict[str, Any]]:
    calls = []
    for tool in value if isinstance(value, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            args = tool.get("inputParameters", tool.get("input_parameters")) or {}
            calls.append({"name": tool["name"], "args": args if isinstance(args, dict) else {"value": args},
                          "result": tool.get("output")})
    return calls


def _deepeval_turns(turns: list[dict[str, Any]]) -> list[TurnOutput]:
    out: list[TurnOutput] = []
    for turn in turns:
        if turn.get("role") == "user":
            out.append(TurnOutput())
        elif turn.get("role") == "assistant":
            if not out:
                out.append(TurnOutput())
            if out[-1].final_response is not None:
                out[-1].intermediate_responses.append(out[-1].final_response)
            out[-1].final_response = turn.get("content")
            out[-1].tool_calls.extend(_tools(turn.get("tools_called", turn.get("toolsCalled"))))
    return out


def _agentflow(r: _Reader) -> ParsedResults:
    doc = r.doc
    cases = []
    seen: Counter[str] = Counter()
    for path, row in r.items(doc, "results", ()):
        eval_id = r.text_field(row, "eval_id", path)
        if eval_id is None:
            continue
        case = ImportedCase(eval_id, path, iteration=seen[eval_id])
        seen[eval_id] += 1
        case.passed = r.flag(row, "passed", path, eval_id, required=True)
        error = r.get(row, "error")
        case.error = str(error) if error else ""
        case.latency = r.number(row, "duration_seconds", path, eval_id)
        for cpath, result in r.items(row, "criterion_results", path, eval_id, required=False):
            name = r.text_field(result, "criterion", cpath, eval_id)
            value = r.number(result, "score", cpath, eval_id, required=True)
            passed = r.flag(result, "passed", cpath, eval_id, required=True)
            threshold = r.number(result, "threshold", cpath, eval_id)
            if name is None:
                continue
            justification: dict[str, Any] = {"imported_from": "agentflow", "threshold": threshold}
            if result.get("details"):
                justification["details"] = result["details"]
            case.scores.append(ImportedScore(name, value, _unit(value), passed, threshold, justification))
        cases.append(case)
    eval_set_id = doc.get("eval_set_id")
    return ParsedResults("agentflow", r.file, eval_set_id if isinstance(eval_set_id, str) else "", cases)


def _uipath(r: _Reader) -> ParsedResults:
    doc = r.doc
    cases = []
    seen: Counter[str] = Counter()
    for path, row in r.items(doc, "evaluation_set_results", ()):
        name = r.text_field(row, "evaluation_name", path)
        if name is None:
            continue
        case = ImportedCase(name, path, iteration=seen[name])
        seen[name] += 1
        for epath, run in r.items(row, "evaluation_run_results", path, name):
            evaluator = r.text_field(run, "evaluator_name", epath, name)
            result = r.get(run, "result")
            if not isinstance(result, dict):
                r.add((*epath, "result"), f"expected an object with a score, not {_kind(result)}", name)
                continue
            value = r.number(result, "score", (*epath, "result"), name, required=True)
            if evaluator is None:
                continue
            justification: dict[str, Any] = {"imported_from": "uipath"}
            for key in ("details", "evaluation_time", "evaluator_id"):
                holder = run if key == "evaluator_id" else result
                if r.get(holder, key) is not None:
                    justification[key] = r.get(holder, key)
            score = None if value is None else (value / 100.0 if value > 1.0 else value)
            case.scores.append(ImportedScore(evaluator, value, _unit(score), None, None, justification))
        cases.append(case)
    name = r.get(doc, "evaluation_set_name")
    return ParsedResults("uipath", r.file, name if isinstance(name, str) else "", cases, match_by_name=True)


# --- Writing --------------------------------------------------------------------------------


def _resolve_version(project: Project, parsed: ParsedResults, evalset: EvalSet | None, user: Any) -> EvalSetVersion:
    if evalset is not None:
        if evalset.project_id != project.pk or evalset.latest_version is None:
            raise EvalSetImportError("no_evalset", [Problem("the eval set is not in this project",
                                                            file=parsed.file.name)])
        return evalset.latest_version
    found = None
    if parsed.eval_set_id:
        found = (EvalSet.objects.filter(project=project, eval_set_id=parsed.eval_set_id).first()
                 or EvalSet.objects.filter(project=project, name=parsed.eval_set_id).first())
    if parsed.tool == "adk" and found is not None and found.latest_version is not None:
        return found.latest_version  # ADK's expected invocations are the eval set's cases, as it ran them
    if parsed.carries_cases and parsed.tool == "adk":
        first: dict[str, dict[str, Any]] = {}
        for c in parsed.cases:
            first.setdefault(c.key, c.golden or {})
        doc = {"eval_set_id": parsed.eval_set_id or stem(parsed.file.name), "eval_cases": list(first.values())}
        try:
            outcome = evalset_import(project=project, files=[SourceFile(f"{doc['eval_set_id']}.evalset.json",
                                                                        json.dumps(doc).encode())],
                                     format="adk", user=user)
        except EvalSetImportError as exc:
            raise EvalSetImportError(exc.code, [Problem(f"the expected invocations are not an ADK eval set: {p}",
                                                        file=parsed.file.name, case=p.case) for p in exc.problems],
                                     total=exc.total) from None
        return outcome[0].version
    if parsed.carries_cases:
        goldens = json.dumps([c.golden for c in parsed.cases]).encode()
        name = f"{parsed.eval_set_id or stem(parsed.file.name)}.json"
        try:
            outcome = evalset_import(project=project, files=[SourceFile(name, goldens)], format="deepeval", user=user)
        except EvalSetImportError as exc:  # said of the test cases, where they are in the uploaded file
            raise EvalSetImportError(exc.code, [_in_file(parsed, p) for p in exc.problems], total=exc.total) from None
        return outcome[0].version
    if found is None or found.latest_version is None:
        raise EvalSetImportError("no_evalset", [Problem(
            f"a {parsed.tool} results file does not carry its eval cases, and this project has no eval set "
            f"{parsed.eval_set_id!r}: import the eval set first, or choose one (--evalset / evalset)",
            file=parsed.file.name)])
    return found.latest_version


def _in_file(parsed: ParsedResults, problem: Problem) -> Problem:
    """A problem the goldens reader found in the goldens made of the test cases, placed in the
    results file: `[3].expected_output` -> `testCases[3]`, with the line of that test case."""
    path = problem.path or ""
    index = path[1:path.find("]")] if path.startswith("[") and "]" in path else ""
    if not index.isdigit() or int(index) >= len(parsed.cases):
        return Problem(problem.message, file=parsed.file.name, case=problem.case)
    case = parsed.cases[int(index)]
    field = path[path.find("]") + 1:].lstrip(".")
    located = locate(parsed.text, case.path) if parsed.text is not None else None
    return Problem(f"{field}: {problem.message}" if field else problem.message, file=parsed.file.name,
                   case=problem.case or case.key, path=format_path(case.path),
                   line=located[0] if located else None, column=located[1] if located else None)


def _match(parsed: ParsedResults, version: EvalSetVersion) -> None:
    """Each case's eval id in `version`: unknown ones are reported with their place in the file."""
    rows = list(EvalCase.objects.in_version(version).values_list("eval_id", "name"))
    ids = {eval_id for eval_id, _ in rows}
    names = Counter(name for _, name in rows if name)
    by_name = {name: eval_id for eval_id, name in rows if name and names[name] == 1}
    reader = _Reader(parsed.file, None, parsed.text)
    for case in parsed.cases:
        key = case.key
        if parsed.match_by_name and key in by_name:
            key = by_name[key]
        if key not in ids:
            what = "no case with this name or eval id" if parsed.match_by_name else "no case with this eval id"
            reader.add(case.path, f"{what} in eval set {version.evalset.eval_set_id!r} (version {version.number})",
                       case.key)
            continue
        case.key = key
        if case.output is not None:
            case.output = case.output.model_copy(update={"eval_id": key, "iteration": case.iteration})
    reader.fail("unknown_cases")
    twice = [c for c, n in Counter((c.key, c.iteration) for c in parsed.cases).items() if n > 1]
    if twice:
        raise EvalSetImportError("duplicate_outputs", [Problem("two results for one case and iteration",
                                                               file=parsed.file.name, case=k) for k, _ in twice])


def _status(case: ImportedCase) -> str:
    if case.error:
        return CaseResult.Status.ERROR
    if case.not_evaluated:
        return CaseResult.Status.NOT_RUNNABLE
    if case.passed is not None:
        return CaseResult.Status.PASSED if case.passed else CaseResult.Status.FAILED
    if any(s.passed is False for s in case.scores if s.turn_index == -1):
        return CaseResult.Status.FAILED
    return CaseResult.Status.PASSED


def results_import(*, project: Project, file: SourceFile, evalset: EvalSet | None = None, user: Any = None,
                   name: str = "") -> Run:
    """Import one results file as a completed run; all or nothing."""
    parsed = read_results(file)
    with gc_paused(), transaction.atomic():
        version = _resolve_version(project, parsed, evalset, user)
        _match(parsed, version)
        outputs = [c.output if c.output is not None else AgentOutput(eval_id=c.key, iteration=c.iteration)
                   for c in parsed.cases]
        run = services.run_create(
            project=project, version=version, target_kind=Run.TargetKind.UPLOADED, outputs=outputs,
            target={"imported": parsed.tool, "filename": file.name[:255], "outputs": parsed.carries_outputs},
            labels={"tags": [f"{ORIGIN_PREFIX}{parsed.tool}"]}, name=name or f"{parsed.tool} results: {file.basename}",
            user=user, enqueue=False,
        )
        pending = {(eval_id, iteration): pk for pk, eval_id, iteration in
                   CaseResult.objects.filter(run=run, status=CaseResult.Status.PENDING)
                   .values_list("pk", "case__eval_id", "iteration")}
        now = timezone.now()
        stamp = connection.ops.adapt_datetimefield_value(now)
        results: list[tuple[Any, ...]] = []  # (status, error, latency, updated_at, pk)
        scores: list[tuple[Any, ...]] = []
        origin = f"{ORIGIN_PREFIX}{parsed.tool}"
        criteria: dict[str, dict[str, Any]] = {}  # the run's config: the tool's metrics, for pages and exports
        for case in parsed.cases:
            pk = pending[(case.key, case.iteration)]
            error = case.error or next((s.error for s in case.scores if s.error), "")
            results.append((_status(case), error, case.latency, stamp, pk))
            for s in case.scores:
                entry = criteria.setdefault(s.criterion[:100],
                                            {"enabled": True, "options": {"imported_from": parsed.tool}})
                if s.threshold is not None and "threshold" not in entry:
                    entry["threshold"] = s.threshold
                level = Score.Level.CONVERSATION if s.turn_index == -1 else Score.Level.INTERACTION
                scores.append((run.pk, pk, s.criterion[:100], origin, level.value, s.turn_index, "", s.score,
                               s.raw_value, s.passed,
                               dumps({"lower_limit": s.threshold}) if s.threshold is not None else None,
                               dumps(s.justification), s.error))
        # Rows as tuples, as the engine writes them (`runs/engine.py`): bulk_update builds a CASE
        # per field per batch, seconds at 10,000 results.
        with connection.cursor() as cursor:
            cursor.executemany(f"UPDATE {CaseResult._meta.db_table} SET status = %s, error = %s, "  # noqa: S608
                               "latency_seconds = %s, updated_at = %s WHERE id = %s", results)
        executemany(Score, ["run_id", "result_id", "criterion", "evaluator", "applies_to", "turn_index",
                                      "node_name", "score", "raw_value", "passed", "threshold", "justification",
                                      "error"], scores, json_columns={"threshold", "justification"})
        statuses = Counter(r[0] for r in results)
        not_runnable = statuses[CaseResult.Status.NOT_RUNNABLE]
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.RUNNING, started_at=now, heartbeat_at=now, config={"criteria": criteria},
            criteria_order=list(criteria), cases_done=len(results) - not_runnable,
            cases_not_runnable=run.cases_not_runnable + not_runnable,
            cases_failed=statuses[CaseResult.Status.FAILED], cases_errored=statuses[CaseResult.Status.ERROR])
        services.run_finish(run.pk)
    run.refresh_from_db()
    return run


def run_rescore(*, run: Run, user: Any = None) -> Run:
    """Queue a normal evalsite run on the outputs an imported run holds, for the compare page."""
    if not (run.target or {}).get("outputs"):
        raise services.RunError("this run holds no agent outputs to rescore (the results file carried none)")
    outputs = [AgentOutput.model_validate(o) for o in
               CaseResult.objects.filter(run=run).exclude(output=None).order_by("pk").values_list("output", flat=True)]
    return services.run_create(
        project=run.project, version=run.evalset_version, target_kind=Run.TargetKind.UPLOADED, outputs=outputs,
        target={"rescored_from": run.pk}, name=f"{run.name} (rescored by evalsite)"[:255], user=user,
        labels={"model": run.model, "git_commit": run.git_commit, "branch": run.branch,
                "tags": [t for t in run.tags if not str(t).startswith(ORIGIN_PREFIX)]},
    )
