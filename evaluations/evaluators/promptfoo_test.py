"""A promptfoo test's verdict when evalsite scores its assertions: the rule of promptfoo 0.123.1
(`AssertionsResult` and `runAssertions` in its `src/assertions/`), so a rescored run and the
results promptfoo wrote agree case by case.

- The test's score is the weighted mean of its assertions' scores: Σ weight·score / Σ weight
  (0 when the weights sum to 0). An assertion without `weight` weighs 1; `weight: 0` counts
  for nothing and always passes; an explicit `weight: null` adds nothing to either sum, yet its
  failure still counts.
- Without a numeric `threshold` (the test's, else `defaultTest`'s; 0 counts, null does not)
  the test passes when no assertion failed. With one, the test passes when its score is at
  least the threshold, whatever failed: 6 of 7 equally weighted assertions passing (0.857) pass
  a test with `threshold: 0.7`.
- An `assert-set` is a test of its own inside the test: its assertions' weighted mean and its own
  `threshold` give its pass and score, which count in the test with the set's `weight` (a set
  of weight 0 still fails the test when it fails: promptfoo forces a pass for single
  assertions only). `select-*` and `max-score` compare several outputs and count for nothing.

evalsite computes the deterministic assertions (`evaluators/promptfoo.py`); the others
(llm-rubric, javascript, python, cost, ...) are not scored here. Their score is then only known
to lie in [0, 1], and the verdict says what that allows: failed when the test fails whatever
they scored, otherwise **not fully scored** (never passed). A test-level scoring function
(`assertScoringFunction`) is the project's own code: such a test is not fully scored unless
nothing could pass it. The verdict is kept as the conversation-level score `promptfoo_test`,
the name the results import gives promptfoo's own test score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evaluations.evaluators.base import ScoreResult, Threshold
from evaluations.evaluators.promptfoo import Invariant, output_of, run_assertion
from evaluations.evaluators.runnable import NOT_RUNNABLE
from evaluations.interop.promptfoo.assertions import not_scored_reason
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput

TEST_CRITERION = "promptfoo_test"
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"


@dataclass(frozen=True)
class Part:
    """One assertion (or assert-set) as the test counts it: its weight in the sums, the range its
    score lies in (one value when known), its pass (None when not known), whether anything in
    it went unscored, and promptfoo's reason when it failed."""

    weight: float
    low: float
    high: float
    passed: bool | None
    incomplete: bool = False
    reason: str = ""
    forced: bool = False  # weight 0: promptfoo passes it whatever it scored


@dataclass(frozen=True)
class Aggregate:
    outcome: str  # PASS / FAIL / UNKNOWN
    low: float
    high: float
    incomplete: bool
    reason: str

    @property
    def score(self) -> float | None:
        return self.low if not self.incomplete and self.low == self.high else None


def numeric(value: Any) -> float | None:
    """A threshold promptfoo honours: a number (0 too), not NaN, not a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def weight_of(assertion: dict[str, Any]) -> tuple[float, bool]:
    """(what the assertion adds to the weight sum, whether promptfoo forces its pass).
    JavaScript's `weight = 1` default applies to a missing weight only; `null` adds 0."""
    if "weight" not in assertion:
        return 1.0, False
    weight = assertion["weight"]
    if weight is None or isinstance(weight, bool) or not isinstance(weight, (int, float)):
        return 0.0, False
    return float(weight), weight == 0


def aggregate(parts: list[Part], threshold: float | None) -> Aggregate:
    """promptfoo's `testResult` over parts whose scores may be known only as a range."""
    total = math.fsum(p.weight for p in parts)
    if total > 0:
        low = math.fsum(p.weight * (p.low if p.weight >= 0 else p.high) for p in parts) / total
        high = math.fsum(p.weight * (p.high if p.weight >= 0 else p.low) for p in parts) / total
    else:
        low = high = 0.0
    incomplete = any(p.incomplete for p in parts)
    failed = [p for p in parts if p.passed is False]
    reason = failed[-1].reason if failed else "All assertions passed"
    if threshold is not None:
        if high < threshold:
            return Aggregate(FAIL, low, high, incomplete,
                             f"Aggregate score {high:.2f} < {threshold:g} threshold" if low == high else
                             f"Aggregate score at most {high:.2f} < {threshold:g} threshold")
        if incomplete or low < threshold:
            return Aggregate(UNKNOWN, low, high, True,
                             f"Aggregate score between {low:.2f} and {high:.2f}: not fully scored")
        return Aggregate(PASS, low, high, False, f"Aggregate score {low:.2f} ≥ {threshold:g} threshold")
    if failed:
        return Aggregate(FAIL, low, high, incomplete, reason)
    if incomplete or any(p.passed is None for p in parts):
        return Aggregate(UNKNOWN, low, high, True, "not fully scored")
    return Aggregate(PASS, low, high, False, reason)


def _unscored(assertion: dict[str, Any]) -> Part:
    weight, forced = weight_of(assertion)
    if forced:  # weight 0: passes, and its score counts for nothing
        return Part(0.0, 0.0, 0.0, True, forced=True)
    return Part(weight, 0.0, 1.0, None, incomplete=True)


def _known(assertion: dict[str, Any], passed: bool | None, score: float | None, reason: str) -> Part:
    weight, forced = weight_of(assertion)
    if score is None or passed is None:
        return Part(weight, 0.0, 1.0, True if forced else None, incomplete=not forced)
    return Part(weight, score, score, True if forced else passed, reason=reason, forced=forced)


def _counted(assertion: Any) -> bool:
    kind = assertion.get("type") if isinstance(assertion, dict) else None
    return not (isinstance(kind, str) and (kind.startswith("select-") or kind == "max-score"))


def _set_part(assertion: dict[str, Any], output: AgentOutput, variables: dict[str, Any],
              called: set[str]) -> Part:
    """An assert-set: its own assertions computed here (they have no criterion of their own)."""
    raw = assertion.get("assert")
    children: list[Any] = raw if isinstance(raw, list) else []
    parts = []
    value = output_of(output)
    for child in children:
        if not isinstance(child, dict) or not isinstance(child.get("type"), str) or not _counted(child):
            continue
        if child["type"] == "assert-set" or not_scored_reason(child) is not None:
            parts.append(_unscored(child))
            continue
        try:
            passed, score, reason = run_assertion(child, value, variables, called)
        except Invariant:
            parts.append(_unscored(child))
            continue
        parts.append(_known(child, passed, score, reason))
    inner = aggregate(parts, numeric(assertion.get("threshold")))
    weight, _ = weight_of(assertion)  # a set's weight 0 is not a forced pass
    verdict: bool | None = {PASS: True, FAIL: False}.get(inner.outcome)
    return Part(weight, inner.low, inner.high, verdict, inner.incomplete, inner.reason)


@dataclass(frozen=True)
class SuiteDefaults:
    """What a suite's `defaultTest` adds to each test's verdict (kept in the version's metadata)."""

    threshold: Any = None
    scoring_function: bool = False


def suite_defaults(evalset_metadata: dict[str, Any] | None) -> SuiteDefaults:
    promptfoo = (evalset_metadata or {}).get("promptfoo")
    default = promptfoo.get("defaultTest") if isinstance(promptfoo, dict) else None
    if not isinstance(default, dict):
        return SuiteDefaults()
    return SuiteDefaults(default.get("threshold"), default.get("assertScoringFunction") is not None)


def verdict_scores(case: EvalCase, output: AgentOutput, scores: list[ScoreResult], *,
                 run_criteria: frozenset[str] | set[str], suite: SuiteDefaults | None = None) -> list[ScoreResult]:
    """The test-level score (criterion `promptfoo_test`, last) of a promptfoo case, its `passed`
    the verdict (None: not fully scored), after a "not runnable" score for each assertion that
    counts and that evalsite does not compute (so the run's notices name them); nothing when the
    case is not a promptfoo test or the run's config names none of its assertions (another
    config scores it by evalsite's own rule).

    `scores` are the criteria's scores for this case; `run_criteria` every criterion the run's
    config names, enabled or not (an assertion the config disables leaves the test, as if it
    were not in it; one evalsite does not compute stays in it, unscored)."""
    meta = case.metadata.get("promptfoo")
    if not isinstance(meta, dict):
        return []
    keys = [key for key, value in case.criteria.items() if key.startswith("promptfoo_") and isinstance(value, dict)]
    if not any(key in run_criteria for key in keys):
        return []
    raw_test, raw_vars = meta.get("test"), meta.get("vars")
    test: dict[str, Any] = raw_test if isinstance(raw_test, dict) else {}
    variables: dict[str, Any] = raw_vars if isinstance(raw_vars, dict) else {}
    suite = suite or SuiteDefaults()
    raw_threshold = test["threshold"] if test.get("threshold") is not None else suite.threshold
    threshold = numeric(raw_threshold)
    by_key = {s.criterion: s for s in scores if s.turn_index == -1 and not s.node_name}
    called = {call.name for turn in output.turns for call in turn.tool_calls}
    parts: list[Part] = []
    unscored: list[str] = []
    missing: list[ScoreResult] = []
    for key in keys:
        assertion = case.criteria[key]
        assert isinstance(assertion, dict)
        if not isinstance(assertion.get("type"), str) or not _counted(assertion):
            continue
        if assertion["type"] == "assert-set":
            part = _set_part(assertion, output, variables, called)
        elif not_scored_reason(assertion) is not None:
            part = _unscored(assertion)
        elif key not in run_criteria:
            continue
        else:
            found = by_key.get(key)
            if found is None:  # disabled in this run's config: as if not in the test
                continue
            if found.error:
                part = _unscored(assertion)
            else:
                part = _known(assertion, found.passed, found.score, str(found.justification.get("reason") or ""))
        if part.incomplete:
            unscored.append(key)
            if key not in by_key:
                missing.append(ScoreResult(criterion=key, score=None, passed=None, justification={
                    "promptfoo_assertion": assertion}, error=NOT_RUNNABLE + _why(assertion)))
        parts.append(part)
    result = aggregate(parts, threshold)
    if suite.scoring_function or test.get("assertScoringFunction") is not None:
        # the project's own scoring function decides: it may pass a test that failed here
        result = Aggregate(UNKNOWN, result.low, result.high, True, "a scoring function (assertScoringFunction) "
                           "decides this test: evalsite does not run it")
    justification: dict[str, Any] = {"reason": result.reason, "rule": "promptfoo"}
    if threshold is not None:
        justification["threshold"] = threshold
    if unscored:
        justification["not_scored"] = unscored
    if result.score is None:
        justification["score_between"] = [round(result.low, 6), round(result.high, 6)]
    passed = {PASS: True, FAIL: False}.get(result.outcome)
    return [*missing, ScoreResult(criterion=TEST_CRITERION, score=result.score, passed=passed, raw_value=result.score,
                                  threshold=Threshold(lower_limit=threshold) if threshold is not None else None,
                                  justification=justification)]


def _why(assertion: dict[str, Any]) -> str:
    """Why evalsite gives no score to an assertion that counts in its test."""
    if assertion.get("type") == "assert-set":
        kinds = sorted({str(c.get("type")) for c in assertion.get("assert") or [] if isinstance(c, dict)
                        and (c.get("type") == "assert-set" or not_scored_reason(c) is not None)})
        return f"promptfoo assert-set: its {', '.join(kinds) or 'assertions'} evalsite does not compute"
    return f"promptfoo {assertion.get('type')}: {not_scored_reason(assertion) or 'not computed'}"


def outcome_of(score: ScoreResult) -> str:
    return PASS if score.passed else FAIL if score.passed is False else UNKNOWN
