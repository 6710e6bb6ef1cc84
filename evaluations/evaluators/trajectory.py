"""Trajectory evaluators: did the agent call the expected tools, with the expected arguments?

- `trajectory_match`, the native one: partial credit per turn from the alignment of
  `evaluations.evaluators.diffing`, argument rules, and the alignment in the justification for the
  review pages.
- `tool_trajectory_avg_score`, Google ADK's `TrajectoryEvaluator`, number for number: each
  invocation scores 1.0 when its tool calls match under the match type (EXACT by default;
  IN_ORDER and ANY_ORDER as newer ADK has them), else 0.0, and the case score is their mean.
  Names and arguments are compared with `==` (`ignore_args` compares names only).

Both score a turn the output lacks as a turn that called no tools. (ADK zips actual with
expected invocations, but its inference always produces one actual invocation per expected
one, so for every input ADK can see, the numbers agree.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evaluations.evaluators.base import Evaluator, Level, ScoreResult, Threshold, aligned_turns, register
from evaluations.evaluators.diffing import EXACT_ARGS, Alignment, ArgRule, ArgRules, align, call_dict
from evaluations.patterns import PatternBoundExceeded
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MatchType, ToolCall
from evaluations.schemas.outputs import AgentOutput, TurnOutput

_NAMES_ONLY = ArgRules(mode="ignore")  # rules are frozen: one of each serves every case

NO_TURNS = "the case has no scripted turns (expected invocations) to compare tool calls with"


class ArgOverride(BaseModel):
    """A per-argument rule, keyed by path in `TrajectoryOptions.arg_overrides`."""

    model_config = ConfigDict(extra="forbid")
    ignore: bool = False
    regex: str | None = None
    abs_tol: float | None = Field(None, ge=0)
    rel_tol: float | None = Field(None, ge=0)
    case_insensitive: bool = False

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    def rule(self, raise_on_bound: bool = False) -> ArgRule:
        return ArgRule(ignore=self.ignore, regex=self.regex, abs_tol=self.abs_tol, rel_tol=self.rel_tol,
                       case_insensitive=self.case_insensitive, raise_on_bound=raise_on_bound)


class TrajectoryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: Overrides `CriterionConfig.match_type`.
    match_type: MatchType | None = None
    #: `per_turn`: each invocation's expected calls against that turn's calls, scored per turn
    #: and averaged; `conversation`: all expected calls against all actual calls, one score.
    scope: Literal["per_turn", "conversation"] = "per_turn"
    args: Literal["exact", "subset", "ignore"] = "exact"
    #: {"filters.dates[1]": {"ignore": true}, "search:query": {"case_insensitive": true}, ...}
    arg_overrides: dict[str, ArgOverride] = Field(default_factory=dict)
    #: All or nothing: a turn scores 1.0 only when its alignment is complete.
    strict: bool = False

    def rules(self, raise_on_bound: bool = False) -> ArgRules:
        """The argument rules; `raise_on_bound`: a regex override past its time bound raises
        `PatternBoundExceeded` (scoring) instead of reading as a disagreement (pages)."""
        return ArgRules(mode=self.args, overrides={path: o.rule(raise_on_bound)
                                                   for path, o in self.arg_overrides.items()})


def trajectory_score(alignment: Alignment, *, strict: bool = False) -> float:
    """The native score of one alignment: `Alignment.partial_score`, or 0/1 when strict."""
    if strict:
        return 1.0 if alignment.complete else 0.0
    return alignment.partial_score()


def match_trajectory(expected: Sequence[ToolCall], actual: Sequence[ToolCall], match_type: MatchType,
                     rules: ArgRules, *, strict: bool = False) -> tuple[float, Alignment]:
    """The native evaluator's core: align, then score."""
    alignment = align(expected, actual, match_type, rules)
    return trajectory_score(alignment, strict=strict), alignment


def _calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    return [call_dict(call) for call in calls]


def _turn_calls(turn: TurnOutput | None) -> Sequence[ToolCall]:
    return turn.tool_calls if turn is not None else []


def _no_turns(criterion: str, threshold: Threshold) -> list[ScoreResult]:
    return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold, error=NO_TURNS)]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@register
class TrajectoryMatchEvaluator(Evaluator):
    """Partial credit by default: matched calls over max(expected, actual) under EXACT, over
    the expected calls under IN_ORDER and ANY_ORDER (extra calls allowed there); a turn with
    nothing expected and nothing called scores 1.0. `strict` makes each score 0 or 1."""

    name = "trajectory_match"
    group = "trajectory"
    Options = TrajectoryOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        options: TrajectoryOptions = self.options(config)
        threshold = self.threshold(config)
        try:
            return self._scores(case, output, options, threshold, config.match_type, criterion)
        except PatternBoundExceeded as exc:  # an argument regex that needs backtracking ran out of time
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold,
                                error=f"an argument regex: {exc}")]

    def _scores(self, case: EvalCase, output: AgentOutput, options: TrajectoryOptions, threshold: Threshold,
                default_match: MatchType, criterion: str) -> list[ScoreResult]:
        match_type = options.match_type or default_match
        rules, rules_dict = self._rules(options)
        pairs = aligned_turns(case, output)
        if not pairs:
            return _no_turns(criterion, threshold)
        settings = {"match_type": match_type.value, "args": rules_dict, "strict": options.strict}

        if options.scope == "conversation":
            expected = [call for invocation in case.conversation for call in invocation.expected_tool_trajectory]
            actual = output.all_tool_calls()
            score, alignment = match_trajectory(expected, actual, match_type, rules, strict=options.strict)
            expected_calls, actual_calls = _calls(expected), _calls(actual)
            return [ScoreResult(
                criterion=criterion, score=score, passed=threshold.passes(score), threshold=threshold,
                justification={"expected": expected_calls, "actual": actual_calls,
                               "alignment": alignment.as_dict(expected_calls, actual_calls), **settings,
                               "scope": "conversation"},
            )]

        results: list[ScoreResult] = []
        for index, (invocation, turn) in enumerate(pairs):
            results.append(self._turn(criterion, index, invocation, turn, match_type, rules, options.strict,
                                      threshold, settings))
        scores = [r.score for r in results if r.score is not None]
        overall = _mean(scores)
        results.append(ScoreResult(
            criterion=criterion, score=overall, passed=threshold.passes(overall), threshold=threshold,
            justification={
                "turns": [{"invocation_id": inv.invocation_id, "score": r.score}
                          for (inv, _), r in zip(pairs, results, strict=True)],
                "counts": {kind: sum(r.justification["alignment"]["counts"][kind] for r in results)
                           for kind in ("matched", "args_differ", "missing", "unexpected")},
                **settings, "scope": "per_turn",
            },
        ))
        return results

    def _rules(self, options: TrajectoryOptions) -> tuple[ArgRules, dict[str, Any]]:
        """The options' argument rules and their JSON, built once per options object (which
        `options()` keeps while the config stays the same)."""
        memo = self.__dict__.get("_rules_memo")
        if memo is None or memo[0] is not options:
            rules = options.rules(raise_on_bound=True)
            memo = self.__dict__["_rules_memo"] = (options, rules, rules.as_dict())
        return memo[1], memo[2]

    @staticmethod
    def _turn(criterion: str, index: int, invocation: Invocation, turn: TurnOutput | None, match_type: MatchType,
              rules: ArgRules, strict: bool, threshold: Threshold, settings: dict[str, Any]) -> ScoreResult:
        expected = invocation.expected_tool_trajectory
        actual = _turn_calls(turn)
        score, alignment = match_trajectory(expected, actual, match_type, rules, strict=strict)
        expected_calls, actual_calls = _calls(expected), _calls(actual)
        return ScoreResult(
            criterion=criterion, score=score, passed=threshold.passes(score), applies_to=Level.INTERACTION,
            turn_index=index, threshold=threshold,
            justification={"invocation_id": invocation.invocation_id, "turn_missing": turn is None,
                           "expected": expected_calls, "actual": actual_calls,
                           "alignment": alignment.as_dict(expected_calls, actual_calls), **settings},
        )


# --- Google ADK: tool_trajectory_avg_score -----------------------------------------------------


class AdkTrajectoryOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: Overrides `CriterionConfig.match_type` (ADK's `ToolTrajectoryCriterion.match_type`).
    match_type: MatchType | None = None
    #: Newer ADK's `ToolTrajectoryCriterion.ignore_args`: compare tool names only.
    ignore_args: bool = False


def adk_tool_calls_match(actual: Sequence[ToolCall], expected: Sequence[ToolCall], match_type: MatchType,
                         ignore_args: bool = False) -> bool:
    """ADK's `TrajectoryEvaluator._calculate_tool_use_accuracy` as a boolean: the same three
    checks (`_are_tool_calls_exact_match`, `_in_order_match`, `_any_order_match`)."""
    if match_type == MatchType.EXACT:
        if len(actual) != len(expected):
            return False
        for a, e in zip(actual, expected, strict=True):
            if a.name != e.name or (not ignore_args and a.args != e.args):
                return False
        return True
    if not expected:
        return True
    if not actual:
        return False
    if match_type == MatchType.IN_ORDER:
        # Greedy subsequence: each expected call is taken by the first later actual call that matches.
        position = 0
        wanted = expected[0]
        for a in actual:
            if a.name == wanted.name and (ignore_args or a.args == wanted.args):
                position += 1
                if position == len(expected):
                    return True
                wanted = expected[position]
        return False
    remaining = list(actual)
    for e in expected:
        for index, a in enumerate(remaining):
            if a.name == e.name and (ignore_args or a.args == e.args):
                del remaining[index]
                break
        else:
            return False
    return True


def adk_invocation_score(actual: Sequence[ToolCall], expected: Sequence[ToolCall], match_type: MatchType,
                         ignore_args: bool = False) -> float:
    return 1.0 if adk_tool_calls_match(actual, expected, match_type, ignore_args) else 0.0


@register
class AdkToolTrajectoryEvaluator(Evaluator):
    """ADK's `tool_trajectory_avg_score`: per invocation 1.0 or 0.0, averaged over invocations;
    each invocation passes at `score >= threshold`, as ADK's `_get_eval_status`."""

    name = "tool_trajectory_avg_score"
    group = "trajectory"
    Options = AdkTrajectoryOptions

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        options: AdkTrajectoryOptions = self.options(config)
        threshold = self.threshold(config)
        match_type = options.match_type or config.match_type
        pairs = aligned_turns(case, output)
        if not pairs:
            # ADK: "expected_invocations is needed by this metric."
            return _no_turns(criterion, threshold)
        rules = _NAMES_ONLY if options.ignore_args else EXACT_ARGS
        settings = {"match_type": match_type.value, "ignore_args": options.ignore_args}
        results: list[ScoreResult] = []
        for index, (invocation, turn) in enumerate(pairs):
            expected = invocation.expected_tool_trajectory
            actual = _turn_calls(turn)
            score = adk_invocation_score(actual, expected, match_type, options.ignore_args)
            expected_calls, actual_calls = _calls(expected), _calls(actual)
            alignment = align(expected, actual, match_type, rules).as_dict(expected_calls, actual_calls)
            results.append(ScoreResult(
                criterion=criterion, score=score, passed=threshold.passes(score), applies_to=Level.INTERACTION,
                turn_index=index, threshold=threshold,
                justification={"invocation_id": invocation.invocation_id, "turn_missing": turn is None,
                               "expected": expected_calls, "actual": actual_calls,
                               "alignment": alignment, **settings},
            ))
        overall = _mean([r.score for r in results if r.score is not None])
        results.append(ScoreResult(
            criterion=criterion, score=overall, passed=threshold.passes(overall), threshold=threshold,
            justification={"invocations": [{"invocation_id": inv.invocation_id, "score": r.score}
                                           for (inv, _), r in zip(pairs, results, strict=True)], **settings},
        ))
        return results
