"""Output evaluators: is the agent's final response the expected one?

Native evaluators (criterion options in `CriterionConfig.options`):

- `exact_match`: the response equals the invocation's `expected_final_response`. Text is
  compared as text (`case_sensitive`, `strip_whitespace`); structured values (JSON) are compared
  as values, with ints and floats equal when their values are. `target_output_key` compares
  one key of a structured response (UiPath's dot/bracket paths: `result.items[0].name`; `"*"` is
  the whole response). `line_by_line` scores the share of matching lines (UiPath's rule: split
  on `line_delimiter`, blank lines dropped, the shorter side padded with empty lines).
  `negated` inverts each comparison.
- `contains`: the response contains search text(s): the case's criterion (`searchText` or
  `substrings`), else the `substrings` option, else each turn's expected final response.
  `match` is `all` or `any`.
- `regex_match`: the response matches `pattern` (the case's criterion `pattern`, else the
  option); `flags` by name (`IGNORECASE`, `MULTILINE`, `DOTALL`, `VERBOSE`, `ASCII` or their
  one-letter forms); `full_match` anchors the pattern at both ends. Python's syntax and
  meaning, run in bounded time (`evaluations.patterns`: RE2, else backtracking with a timeout,
  which is the score's error when it runs out).
- `json_similarity`: UiPath's JSON similarity (below) against the expected final response.

Scores: when the expected values are per turn (expected final responses), each such turn gets
an interaction score and the conversation gets their mean. Case-wide search texts and
patterns are checked against the last answer (`turns: "last"`) or every answer (`"all"`).
A turn the agent never answered is compared as an empty response.

UiPath's evaluators, which behave as `uipath eval` does, are in `evaluators/uipath.py`.

JSON similarity (UiPath's `JsonSimilarityEvaluator`): walk the expected tree; only expected
keys count. Each expected leaf scores 1 when equal, a number `max(0, 1 - |e - a| / |e|)` (an
expected 0 needs an actual 0), a string `1 - levenshtein / max(len)`, and 0 when missing or
of another type (a missing or mistyped subtree counts all its leaves). Score = matched leaves /
total leaves, 1.0 when the expected tree has no leaves.

Agent responses that arrive as JSON text (an HTTP agent answering `{"result": 5}` as a string)
are read as the JSON they carry wherever a structured value is needed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rapidfuzz.distance import Levenshtein

from evaluations import safejson
from evaluations.evaluators.base import (
    Evaluator,
    Level,
    ScoreResult,
    Threshold,
    aligned_turns,
    register,
    text_of,
)
from evaluations.patterns import PatternBoundExceeded, compile_bounded
from evaluations.schemas.evalset import CriterionConfig, EvalCase, MessageContent
from evaluations.schemas.outputs import AgentOutput

# --- Values ------------------------------------------------------------------------------------


def expected_value(message: MessageContent | None) -> Any:
    """An expected response as a value: the JSON of a one-part `[{"type": "json", ...}]`
    content, else its text. None when there is no expected response."""
    if message is None:
        return None
    content = message.content
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) and "json" in content[0]:
        return content[0]["json"]
    return message.get_text()


def actual_value(value: Any) -> Any:
    """An actual `final_response` as a value: content-part lists are unwrapped like expected
    content (one JSON part -> its JSON; text parts -> their text)."""
    if isinstance(value, list) and value and all(isinstance(p, dict) for p in value):
        if len(value) == 1 and "json" in value[0] and set(value[0]) <= {"type", "json"}:
            return value[0]["json"]
        if all(isinstance(p.get("text"), str) for p in value):
            return "\n".join(p["text"] for p in value)
    return value


def as_structured(value: Any) -> Any:
    """`value`, or the JSON object/array a string holds."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return safejson.loads(stripped)
            except ValueError:
                return value
    return value


_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def resolve_output_path(value: Any, path: str) -> Any:
    """UiPath's `targetOutputKey`: `"*"` is the whole value, `a.b` a nested key, `items[0]` an
    index. Raises KeyError, IndexError or TypeError when the path is not there."""
    if path == "*":
        return value
    tokens: list[str | int] = [int(index) if index else key for key, index in _PATH_TOKEN.findall(path)]
    if not tokens:
        raise KeyError(path)
    current = value
    for token in tokens:
        if isinstance(token, int):
            if not isinstance(current, (list, tuple)):
                raise TypeError(f"cannot index {type(current).__name__} with [{token}]")
            current = current[token]
        else:
            if not isinstance(current, dict):
                raise TypeError(f"cannot read key {token!r} of {type(current).__name__}")
            current = current[token]
    return current


def normalize_numbers(value: Any) -> Any:
    """Ints as floats, recursively (booleans stay booleans), so 5 equals 5.0."""
    if isinstance(value, dict):
        return {k: normalize_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalize_numbers(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(normalize_numbers(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def split_lines(text: str, delimiter: str) -> list[str]:
    return [line for line in text.split(delimiter) if line.strip()]


# --- JSON similarity (UiPath) ---------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def levenshtein(source: str, target: str) -> int:
    """The edit distance (insertions, deletions, substitutions of code points), as UiPath's
    `_levenshtein` counts it. In C (rapidfuzz, O(n·m/64)): outputs are untrusted, and the pure
    Python loop took 2 s for two 3,000-character values."""
    return int(Levenshtein.distance(source, target))


def count_leaves(value: Any) -> float:
    if isinstance(value, dict):
        return sum((count_leaves(v) for v in value.values()), 0.0)
    if isinstance(value, list):
        return sum((count_leaves(v) for v in value), 0.0)
    return 1.0


def compare_tokens(expected: Any, actual: Any) -> tuple[float, float]:
    """(matched leaves, total leaves) of `expected` found in `actual`."""
    if _is_number(expected) and _is_number(actual):
        if math.isclose(expected, 0.0, abs_tol=1e-12):
            return (1.0 if math.isclose(actual, 0.0, abs_tol=1e-12) else 0.0), 1.0
        return max(0.0, min(1.0, 1.0 - abs(expected - actual) / abs(expected))), 1.0
    if type(expected) is not type(actual):
        return 0.0, count_leaves(expected)
    if isinstance(expected, dict):
        matched = total = 0.0
        for key, value in expected.items():
            m, t = compare_tokens(value, actual[key]) if key in actual else (0.0, count_leaves(value))
            matched += m
            total += t
        return matched, total
    if isinstance(expected, list):
        matched = total = 0.0
        for e, a in zip(expected, actual, strict=False):
            m, t = compare_tokens(e, a)
            matched += m
            total += t
        for e in expected[len(actual):]:
            total += count_leaves(e)
        return matched, total
    if isinstance(expected, bool):
        return (1.0 if expected == actual else 0.0), 1.0
    if isinstance(expected, str):
        if not expected and not actual:
            return 1.0, 1.0
        longest = max(len(expected), len(actual))
        return max(0.0, min(1.0, 1.0 - levenshtein(expected, actual) / longest)), 1.0
    return (1.0 if str(expected) == str(actual) else 0.0), 1.0


def json_similarity(expected: Any, actual: Any) -> tuple[float, float, float]:
    """(score in [0, 1], matched leaves, total leaves)."""
    matched, total = compare_tokens(expected, actual)
    score = 1.0 if total == 0 else max(0.0, min(1.0, matched / total))
    return score, matched, total


# --- Shared machinery -------------------------------------------------------------------------------


class Unscorable(Exception):
    """This comparison cannot be made (a configuration or data problem): recorded as the
    score's error."""


@dataclass
class Comparison:
    score: float
    justification: dict[str, Any] = field(default_factory=dict)
    raw_value: float | None = None


def options_error(criterion: str, exc: ValidationError) -> list[ScoreResult]:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'options'}: {e['msg']}" for e in exc.errors()[:5])
    return [ScoreResult(criterion=criterion, score=None, passed=None, error=f"invalid options: {problems}")]


def mean_result(criterion: str, turns: list[ScoreResult], threshold: Threshold) -> ScoreResult:
    """The conversation score: the mean of the turn scores that could be computed."""
    scores = [r.score for r in turns if r.score is not None]
    justification: dict[str, Any] = {"turn_scores": [r.score for r in turns], "turns_scored": len(scores)}
    if len(turns) == 1:
        justification.update({k: v for k, v in turns[0].justification.items() if k in ("expected", "actual")})
    if not scores:
        return ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold,
                           justification=justification, error="no turn could be scored")
    mean = sum(scores) / len(scores)
    return ScoreResult(criterion=criterion, score=mean, passed=threshold.passes(mean), raw_value=mean,
                       threshold=threshold, justification=justification)


def turn_result(criterion: str, index: int, threshold: Threshold, compare: Callable[[], Comparison],
                level: Level = Level.INTERACTION) -> ScoreResult:
    try:
        outcome = compare()
    except Unscorable as exc:
        return ScoreResult(criterion=criterion, score=None, passed=None, applies_to=level,
                           turn_index=index if level is Level.INTERACTION else -1, threshold=threshold,
                           error=str(exc))
    return ScoreResult(
        criterion=criterion,
        score=outcome.score,
        passed=threshold.passes(outcome.score),
        applies_to=level,
        turn_index=index if level is Level.INTERACTION else -1,
        raw_value=outcome.raw_value if outcome.raw_value is not None else outcome.score,
        threshold=threshold,
        justification=outcome.justification,
    )


def criterion_value(criteria: dict[str, Any] | None, *keys: str) -> Any:
    if not criteria:
        return None
    return next((criteria[k] for k in keys if k in criteria), None)


def _targeted(value: Any, path: str, side: str) -> Any:
    """The value under `path`, reading JSON text as JSON; Unscorable naming the side when absent."""
    if path == "*":
        return value
    try:
        return resolve_output_path(as_structured(value), path)
    except (KeyError, IndexError, TypeError) as exc:
        raise Unscorable(f"target output key {path!r} is not in the {side} output ({type(exc).__name__}: {exc})") \
            from None


# --- Native evaluators -------------------------------------------------------------------------------


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _NativeOutputEvaluator(Evaluator):
    """Per-turn comparison against each invocation's expected final response."""

    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        threshold = self.threshold(config)
        turns: list[ScoreResult] = []
        for index, (invocation, turn) in enumerate(aligned_turns(case, output)):
            if invocation.expected_final_response is None:
                continue
            expected = expected_value(invocation.expected_final_response)
            actual = actual_value(turn.final_response) if turn is not None else None
            compare = partial(self._compare_turn, expected, actual, options, turn is None)
            turns.append(turn_result(criterion, index, threshold, compare))
        if not turns:
            return []
        return [*turns, mean_result(criterion, turns, threshold)]

    def _compare_turn(self, expected: Any, actual: Any, options: Any, unanswered: bool) -> Comparison:
        comparison = self.compare(expected, actual, options)
        if unanswered:
            comparison.justification["no_response"] = True
        return comparison

    def compare(self, expected: Any, actual: Any, options: Any) -> Comparison:
        raise NotImplementedError


class ExactMatchOptions(_Options):
    case_sensitive: bool = True
    strip_whitespace: bool = True
    target_output_key: str = "*"
    negated: bool = False
    line_by_line: bool = False
    line_delimiter: str = "\n"


def _texts_equal(expected: str, actual: str, options: ExactMatchOptions) -> bool:
    if options.strip_whitespace:
        expected, actual = expected.strip(), actual.strip()
    if not options.case_sensitive:
        expected, actual = expected.casefold(), actual.casefold()
    return expected == actual


@register
class ExactMatchEvaluator(_NativeOutputEvaluator):
    name = "exact_match"
    Options = ExactMatchOptions

    def compare(self, expected: Any, actual: Any, options: ExactMatchOptions) -> Comparison:
        expected = _targeted(expected, options.target_output_key, "expected")
        try:
            actual = _targeted(actual, options.target_output_key, "actual")
        except Unscorable as exc:
            # The agent did not produce the key: a wrong answer, not a broken evaluator.
            return Comparison(float(options.negated),
                              {"expected": text_of(expected), "actual": None, "target_missing": str(exc)})
        if options.line_by_line:
            return self._lines(text_of(expected), text_of(actual), options)
        if expected is not None and not isinstance(expected, str):
            actual = as_structured(actual)  # a JSON answer sent as text compares as JSON
        if expected is not None and actual is not None and not isinstance(expected, str) \
                and not isinstance(actual, str):
            match = normalize_numbers(expected) == normalize_numbers(actual)
        else:
            match = _texts_equal(text_of(expected), text_of(actual), options)
        if options.negated:
            match = not match
        return Comparison(float(match), {"expected": text_of(expected), "actual": text_of(actual)})

    @staticmethod
    def _lines(expected: str, actual: str, options: ExactMatchOptions) -> Comparison:
        expected_lines = split_lines(expected, options.line_delimiter)
        actual_lines = split_lines(actual, options.line_delimiter)
        lines: list[dict[str, Any]] = []
        scores: list[float] = []
        for number in range(max(len(expected_lines), len(actual_lines))):
            e = expected_lines[number] if number < len(expected_lines) else ""
            a = actual_lines[number] if number < len(actual_lines) else ""
            scores.append(float(_texts_equal(e, a, options) != options.negated))
            lines.append({"line_number": number + 1, "expected": e, "actual": a, "score": scores[-1]})
        # UiPath scores an output with no lines at all as 0.
        score = sum(scores) / len(scores) if scores else 0.0
        return Comparison(score, {"expected": expected, "actual": actual, "lines": lines,
                                  "total_lines_expected": len(expected_lines),
                                  "total_lines_actual": len(actual_lines)})


class JsonSimilarityOptions(_Options):
    target_output_key: str = "*"


@register
class JsonSimilarityEvaluator(_NativeOutputEvaluator):
    name = "json_similarity"
    Options = JsonSimilarityOptions

    def compare(self, expected: Any, actual: Any, options: JsonSimilarityOptions) -> Comparison:
        expected = _targeted(as_structured(expected), options.target_output_key, "expected")
        try:
            actual = _targeted(as_structured(actual), options.target_output_key, "actual")
        except Unscorable:
            actual = None
        score, matched, total = json_similarity(expected, as_structured(actual))
        return Comparison(score, {"expected": text_of(expected), "actual": text_of(actual),
                                  "matched_leaves": matched, "total_leaves": total})


class _CaseWideOptions(_Options):
    case_sensitive: bool = True
    negated: bool = False
    target_output_key: str = "*"
    # Which answers a case-wide search text or pattern is checked against.
    turns: Literal["last", "all"] = "last"


class _CaseWideEvaluator(_NativeOutputEvaluator):
    """Evaluators whose expectation may be one for the whole case (search texts, patterns)."""

    #: Without a case-wide expectation, use each turn's expected final response.
    per_turn_fallback: ClassVar[bool] = True
    missing_expectation: ClassVar[str] = ""

    def case_expectation(self, case: EvalCase, options: Any, criterion: str) -> Any:
        raise NotImplementedError

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        expectation = self.case_expectation(case, options, criterion)
        threshold = self.threshold(config)
        if expectation is None:
            if self.per_turn_fallback:
                return super().score(case, output, config, criterion)
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold,
                                error=self.missing_expectation)]
        pairs = [(i, turn) for i, (_, turn) in enumerate(aligned_turns(case, output))]
        if not pairs:  # a scenario-driven case: the turns are the output's own
            pairs = list(enumerate(output.turns))
        if options.turns == "last":
            answered = [(i, t) for i, t in pairs if t is not None]
            target = answered[-1] if answered else (pairs[-1] if pairs else (0, None))
            actual = actual_value(target[1].final_response) if target[1] is not None else None
            return [turn_result(criterion, -1, threshold, lambda: self.compare(expectation, actual, options),
                                level=Level.CONVERSATION)]
        turns = [
            turn_result(criterion, i, threshold,
                        partial(self.compare, expectation, actual_value(t.final_response) if t else None, options))
            for i, t in pairs
        ]
        if not turns:
            return []
        return [*turns, mean_result(criterion, turns, threshold)]


class ContainsOptions(_CaseWideOptions):
    substrings: list[str] | str | None = None
    match: Literal["all", "any"] = "all"


@register
class ContainsEvaluator(_CaseWideEvaluator):
    name = "contains"
    Options = ContainsOptions

    def case_expectation(self, case: EvalCase, options: ContainsOptions, criterion: str) -> Any:
        value = criterion_value(case.criteria.get(criterion), "searchText", "search_text", "substrings")
        return value if value is not None else options.substrings

    def compare(self, expected: Any, actual: Any, options: ContainsOptions) -> Comparison:
        needles = [expected] if isinstance(expected, str) else [text_of(n) for n in expected] \
            if isinstance(expected, list) else [text_of(expected)]
        try:
            actual = _targeted(actual, options.target_output_key, "actual")
        except Unscorable as exc:
            return Comparison(float(options.negated),
                              {"expected": needles, "actual": None, "target_missing": str(exc)})
        haystack = text_of(actual)
        fold: Callable[[str], str] = (lambda s: s) if options.case_sensitive else str.casefold
        found = [n for n in needles if fold(n) in fold(haystack)]
        match = len(found) == len(needles) if options.match == "all" else bool(found)
        if options.negated:
            match = not match
        return Comparison(float(match), {"expected": needles if len(needles) > 1 else needles[0],
                                         "actual": haystack, "found": found,
                                         "missing": [n for n in needles if n not in found]})


_FLAGS = {
    "I": re.IGNORECASE, "IGNORECASE": re.IGNORECASE,
    "M": re.MULTILINE, "MULTILINE": re.MULTILINE,
    "S": re.DOTALL, "DOTALL": re.DOTALL,
    "X": re.VERBOSE, "VERBOSE": re.VERBOSE,
    "A": re.ASCII, "ASCII": re.ASCII,
}


class RegexOptions(_CaseWideOptions):
    pattern: str | None = None
    flags: list[str] = Field(default_factory=list)
    full_match: bool = False


@register
class RegexMatchEvaluator(_CaseWideEvaluator):
    name = "regex_match"
    Options = RegexOptions
    per_turn_fallback = False
    missing_expectation = "no pattern: set the `pattern` option or the case's criterion {\"pattern\": ...}"

    def case_expectation(self, case: EvalCase, options: RegexOptions, criterion: str) -> Any:
        value = criterion_value(case.criteria.get(criterion), "pattern", "regex")
        return value if value is not None else options.pattern

    def compare(self, expected: Any, actual: Any, options: RegexOptions) -> Comparison:
        flags = 0
        for name in options.flags:
            if name.upper() not in _FLAGS:
                raise Unscorable(f"unknown regex flag {name!r}; known: {', '.join(sorted(set(_FLAGS)))}")
            flags |= _FLAGS[name.upper()]
        try:
            pattern = compile_bounded(text_of(expected), flags)
        except re.error as exc:
            raise Unscorable(f"invalid regular expression {text_of(expected)!r}: {exc}") from None
        try:
            actual = _targeted(actual, options.target_output_key, "actual")
        except Unscorable as exc:
            return Comparison(float(options.negated), {"expected": pattern.pattern, "actual": None,
                                                       "target_missing": str(exc)})
        text = text_of(actual)
        try:  # RE2 where it can say the pattern, else backtracking within a time bound
            found = pattern.fullmatch(text) if options.full_match else pattern.search(text)
        except PatternBoundExceeded as exc:
            raise Unscorable(str(exc)) from None
        match = (found is not None) != options.negated
        return Comparison(float(match), {"expected": pattern.pattern, "actual": text,
                                         "matched_text": found.text if found else None})




































# Legacy definitions (`{category, type, targetOutputKey, ...}`); the importer gives every legacy
# evaluator the criterion {expectedOutput, expectedAgentBehavior}.












