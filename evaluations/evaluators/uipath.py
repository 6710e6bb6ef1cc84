"""UiPath's output evaluators, as uipath 2.14 computes them (differentially tested against
the library: tests/differential/).

UiPath evaluators (registered under their `evaluatorTypeId` and the importer's legacy names)
behave as `uipath eval` does: the criterion comes from `case.criteria[criterion]` (a `null`
criterion means the evaluator's `defaultEvaluationCriteria`; a case without the key is not
scored), the actual output is the agent's last final response, options are read in camelCase
or snake_case, and unknown options are ignored (so `ignoreCase`, which UiPath does not know,
changes nothing: UiPath's switch is `caseSensitive`, default false). One conversation-level
score each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from evaluations import safejson
from evaluations.evaluators.base import (
    Evaluator,
    Level,
    ScoreResult,
    register,
)
from evaluations.evaluators.output import (
    Comparison,
    Unscorable,
    actual_value,
    canonical_json,
    criterion_value,
    json_similarity,
    normalize_numbers,
    options_error,
    resolve_output_path,
    split_lines,
    turn_result,
)
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput


class UiPathOptions(BaseModel):
    """An `evaluatorConfig`: camelCase or snake_case; keys UiPath ignores are ignored here too."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")
    target_output_key: str = "*"
    default_evaluation_criteria: dict[str, Any] | None = None


class UiPathOutputOptions(UiPathOptions):
    case_sensitive: bool = False
    negated: bool = False
    line_by_line_evaluator: bool = False
    line_delimiter: str = "\n"


NOT_SCORED = object()


def uipath_criteria(case: EvalCase, criterion: str, options: UiPathOptions) -> Any:
    """The case's criteria for this evaluator: its own, else the evaluator's defaults.
    `NOT_SCORED` when the case does not name the evaluator; Unscorable when neither exists."""
    if criterion not in case.criteria:
        return NOT_SCORED
    value = case.criteria[criterion]
    if value is None:
        value = options.default_evaluation_criteria
    if value is None:
        raise Unscorable("no evaluation criteria: the case gives null and the evaluator has no "
                         "defaultEvaluationCriteria")
    if not isinstance(value, dict):
        raise Unscorable(f"the evaluation criteria must be an object, not {type(value).__name__}")
    return value


def uipath_actual(output: AgentOutput) -> Any:
    """The agent output UiPath evaluates: the last final response, as it is (a string holding
    JSON stays a string, as in UiPath); a falsy one (none, "", {}, 0) is `{}`, as UiPath's eval
    runtime passes `output or {}` to every evaluator."""
    for turn in reversed(output.turns):
        if turn.final_response is not None:
            return actual_value(turn.final_response) or {}
    return {}


def _uipath_expected_output(criteria: dict[str, Any]) -> Any:
    for key in ("expectedOutput", "expected_output"):
        if key in criteria:
            return criteria[key]
    raise Unscorable("the criterion has no expectedOutput")


def _uipath_output_criterion(criteria: dict[str, Any]) -> Any:
    """The `expectedOutput` of a current UiPath output evaluator: UiPath's
    `OutputEvaluationCriteria` accepts an object or a string only."""
    value = _uipath_expected_output(criteria)
    if not isinstance(value, (dict, str)):
        raise Unscorable(f"expectedOutput must be an object or a string, not {type(value).__name__} "
                         "(UiPath's OutputEvaluationCriteria)")
    return value


def uipath_target(value: Any, path: str, side: str) -> Any:
    """UiPath's `_get_actual_output` / `_get_expected_output`: a missing key is an error."""
    if path == "*":
        return normalize_numbers(value)
    if side == "expected" and isinstance(value, str):
        try:
            value = safejson.loads(value)
        except ValueError:
            raise Unscorable("when targetOutputKey is not '*', the expected output must be an object "
                             "or JSON text") from None
    try:
        return normalize_numbers(resolve_output_path(value, path))
    except (KeyError, IndexError, TypeError) as exc:
        raise Unscorable(f"target output key {path!r} not found in the {side} output "
                         f"({type(exc).__name__}: {exc})") from None


class _UiPathEvaluator(Evaluator):
    """One conversation-level score computed from the case's UiPath criteria."""

    group = "output"
    Options: ClassVar[type[BaseModel]] = UiPathOutputOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        threshold = self.threshold(config)
        try:
            criteria = uipath_criteria(case, criterion, options)
        except Unscorable as exc:
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold, error=str(exc))]
        if criteria is NOT_SCORED:
            return []
        actual = uipath_actual(output)
        if not isinstance(actual, (dict, str)):
            # UiPath's WorkloadExecution takes an object or a string: it raises on anything else.
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold,
                                error=f"UiPath evaluates an object or a string output, not {type(actual).__name__} "
                                      f"({str(actual)[:40]})")]
        return [turn_result(criterion, -1, threshold, lambda: self.evaluate(criteria, actual, options),
                            level=Level.CONVERSATION)]

    def evaluate(self, criteria: dict[str, Any], actual: Any, options: Any) -> Comparison:
        raise NotImplementedError


def _uipath_line_text(value: Any, key: str) -> str:
    """UiPath's `split_into_lines` before splitting: a dict that holds the target key (again:
    `{"result": {"result": "..."}}` after the key was resolved once) gives that key's value."""
    if key != "*" and isinstance(value, dict) and key in value:
        value = value[key]
    return value if isinstance(value, str) else str(value)


def _uipath_lines(expected: Any, actual: Any, options: UiPathOutputOptions,
                  line_match: Callable[[str, str], bool]) -> Comparison:
    """UiPath's `_evaluate_line_by_line`: per-line results averaged, 0 when there are none."""
    expected = _uipath_line_text(expected, options.target_output_key)
    actual = _uipath_line_text(actual, options.target_output_key)
    expected_lines = split_lines(expected, options.line_delimiter)
    actual_lines = split_lines(actual, options.line_delimiter)
    details: list[dict[str, Any]] = []
    scores: list[float] = []
    for number in range(max(len(expected_lines), len(actual_lines))):
        e = expected_lines[number] if number < len(expected_lines) else ""
        a = actual_lines[number] if number < len(actual_lines) else ""
        scores.append(float(line_match(e, a) != options.negated))
        details.append({"line_number": number + 1, "expected": e, "actual": a, "score": scores[-1]})
    score = sum(scores) / len(scores) if scores else 0.0
    return Comparison(score, {"expected": expected, "actual": actual, "line_by_line_results": details,
                              "total_lines_actual": len(actual_lines), "total_lines_expected": len(expected_lines),
                              "aggregation_method": "average"})


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.lower()


@register
class UiPathExactMatchEvaluator(_UiPathEvaluator):
    """UiPath's `ExactMatchEvaluator`: strings compared as `str()`, lower-cased unless
    `caseSensitive`; two structured values compared as values (numbers as floats)."""

    name = "uipath-exact-match"

    def evaluate(self, criteria: dict[str, Any], actual: Any, options: UiPathOutputOptions) -> Comparison:
        expected = uipath_target(_uipath_output_criterion(criteria), options.target_output_key, "expected")
        actual = uipath_target(actual, options.target_output_key, "actual")
        if options.line_by_line_evaluator:
            return _uipath_lines(expected, actual, options,
                                 lambda e, a: _fold(e, options.case_sensitive) == _fold(a, options.case_sensitive))
        if isinstance(expected, str) or isinstance(actual, str):
            match = _fold(str(actual), options.case_sensitive) == _fold(str(expected), options.case_sensitive)
        else:
            match = actual == expected
        if options.negated:
            match = not match
        return Comparison(float(match), {"expected": str(expected), "actual": str(actual)})


@register
class UiPathContainsEvaluator(_UiPathEvaluator):
    """UiPath's `ContainsEvaluator`: `searchText` in `str(actual)`, case-insensitive by default."""

    name = "uipath-contains"

    def evaluate(self, criteria: dict[str, Any], actual: Any, options: UiPathOutputOptions) -> Comparison:
        search = criterion_value(criteria, "searchText", "search_text")
        if not isinstance(search, str):
            raise Unscorable("the criterion has no searchText")
        actual = uipath_target(actual, options.target_output_key, "actual")
        if options.line_by_line_evaluator:
            needle = _fold(search, options.case_sensitive)
            return _uipath_lines(search, actual, options,
                                 lambda _e, a: needle in _fold(a, options.case_sensitive))
        haystack, needle = _fold(str(actual), options.case_sensitive), _fold(search, options.case_sensitive)
        match = (needle in haystack) != options.negated
        return Comparison(float(match), {"expected": needle, "actual": haystack})


class UiPathJsonOptions(UiPathOptions):
    pass


@register
class UiPathJsonSimilarityEvaluator(_UiPathEvaluator):
    name = "uipath-json-similarity"
    Options = UiPathJsonOptions

    def evaluate(self, criteria: dict[str, Any], actual: Any, options: UiPathJsonOptions) -> Comparison:
        expected = uipath_target(_uipath_output_criterion(criteria), options.target_output_key, "expected")
        actual = uipath_target(actual, options.target_output_key, "actual")
        score, matched, total = json_similarity(expected, actual)
        return Comparison(score, {"expected": str(expected), "actual": str(actual),
                                  "matched_leaves": matched, "total_leaves": total})


def _legacy_resolve(value: Any, path: str) -> tuple[Any, bool]:
    try:
        return resolve_output_path(value, path), True
    except (KeyError, IndexError, TypeError):
        return value, False


class UiPathLegacyOptions(UiPathOptions):
    line_by_line_evaluation: bool = False
    line_delimiter: str = "\n"


def _wrap_line(line: str, key: str) -> Any:
    return line if key == "*" else {key: line}


def _legacy_line_by_line(criteria: dict[str, Any], actual: Any, options: UiPathLegacyOptions,
                         evaluate: Callable[[dict[str, Any], Any, UiPathLegacyOptions], Comparison]) -> Comparison:
    """UiPath's legacy `_evaluate_line_by_line` (`lineByLineEvaluation: true`): the actual
    output's top-level `targetOutputKey` (the whole output when it is missing) and the whole
    expected output, each read under the key again when it is a dict holding it, as text, split
    on `lineDelimiter` with blank lines dropped; each pair of lines (a missing one is "")
    scored by the evaluator itself with both lines wrapped as `{key: line}` (or bare under
    "*"); the mean of the line scores, 0 with no lines."""
    key = options.target_output_key or "*"
    if key != "*" and isinstance(actual, dict) and key in actual:
        actual = actual[key]
    expected = _uipath_expected_output(criteria)
    actual_lines = split_lines(_uipath_line_text(actual, key), options.line_delimiter)
    expected_lines = split_lines(_uipath_line_text(expected, key), options.line_delimiter)
    scores: list[float] = []
    raw: list[float] = []  # on the evaluator's own scale (0-100 for JSON similarity), averaged as UiPath does
    details: list[dict[str, Any]] = []
    for number in range(max(len(actual_lines), len(expected_lines))):
        a = actual_lines[number] if number < len(actual_lines) else ""
        e = expected_lines[number] if number < len(expected_lines) else ""
        line = evaluate({**criteria, "expectedOutput": _wrap_line(e, key)}, _wrap_line(a, key), options)
        scores.append(line.score)
        raw.append(line.raw_value if line.raw_value is not None else line.score)
        details.append({"line_number": number + 1, "expected": e, "actual": a, "score": raw[-1]})
    score = sum(scores) / len(scores) if scores else 0.0
    return Comparison(score, {"expected": str(expected), "actual": str(actual), "line_by_line_results": details,
                              "total_lines_actual": len(actual_lines), "total_lines_expected": len(expected_lines),
                              "aggregation_method": "average"}, raw_value=sum(raw) / len(raw) if raw else 0.0)


@register
class UiPathLegacyExactMatchEvaluator(_UiPathEvaluator):
    """UiPath's `LegacyExactMatchEvaluator`: canonical JSON equality (sorted keys, numbers as
    floats, case-sensitive). With a `targetOutputKey` and two objects, the key is compared; when
    either side lacks it, UiPath compares `{}` with `{}`, which matches: kept as UiPath does.
    `lineByLineEvaluation` scores the share of matching lines (`_legacy_line_by_line`)."""

    name = "uipath-legacy-exact-match"
    Options = UiPathLegacyOptions

    def evaluate(self, criteria: dict[str, Any], actual: Any, options: UiPathLegacyOptions) -> Comparison:
        if options.line_by_line_evaluation:
            return _legacy_line_by_line(criteria, actual, options.model_copy(update={"line_by_line_evaluation": False}),
                                        self.evaluate)
        expected = _uipath_expected_output(criteria)
        path = options.target_output_key
        if path and path != "*" and isinstance(actual, dict) and isinstance(expected, dict):
            actual, found_actual = _legacy_resolve(actual, path)
            expected, found_expected = _legacy_resolve(expected, path)
            if not (found_actual and found_expected):
                actual = expected = {}
        match = canonical_json(actual) == canonical_json(expected)
        return Comparison(float(match), {"expected": str(expected), "actual": str(actual)})


@register
class UiPathLegacyJsonSimilarityEvaluator(_UiPathEvaluator):
    """UiPath's `LegacyJsonSimilarityEvaluator`: the same similarity on a 0-100 scale (our
    score is it divided by 100; raw_value keeps UiPath's number). A `targetOutputKey` that is
    missing on either side compares `{}` on that side."""

    name = "uipath-legacy-json-similarity"
    Options = UiPathLegacyOptions

    def evaluate(self, criteria: dict[str, Any], actual: Any, options: UiPathLegacyOptions) -> Comparison:
        if options.line_by_line_evaluation:
            return _legacy_line_by_line(criteria, actual, options.model_copy(update={"line_by_line_evaluation": False}),
                                        self.evaluate)
        expected = _uipath_expected_output(criteria)
        path = options.target_output_key
        if path and path != "*":
            actual, found = _legacy_resolve(actual, path)
            actual = actual if found else {}
            expected, found = _legacy_resolve(expected, path)
            expected = expected if found else {}
        score, matched, total = json_similarity(expected, actual)
        return Comparison(score, {"expected": str(expected), "actual": str(actual),
                                  "matched_leaves": matched, "total_leaves": total}, raw_value=score * 100.0)
