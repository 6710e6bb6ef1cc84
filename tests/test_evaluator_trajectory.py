"""Trajectory evaluators: the native `trajectory_match` and ADK's `tool_trajectory_avg_score`.

The ADK tests run on ADK's own fixture files and assert the numbers ADK's
`TrajectoryEvaluator` gives (worked out in the comments): 1.0 or 0.0 per invocation, averaged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.trajectory import (
    NO_TURNS,
    AdkToolTrajectoryEvaluator,
    TrajectoryMatchEvaluator,
    adk_tool_calls_match,
)
from evaluations.interop import SourceFile
from evaluations.interop.adk.evalset import reader
from evaluations.schemas.evalset import (
    CriterionConfig,
    EvalCase,
    EvalConfig,
    Invocation,
    MatchType,
    MessageContent,
    ToolCall,
)
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


def did(name: str, **args: Any) -> OutputToolCall:
    return OutputToolCall(name=name, args=args)


def case_of(*turns: list[ToolCall]) -> EvalCase:
    return EvalCase(eval_id="c", conversation=[
        Invocation(invocation_id=f"t{i}", user_content=MessageContent.user("q"), expected_tool_trajectory=calls)
        for i, calls in enumerate(turns, 1)
    ])


def output_of(*turns: list[OutputToolCall]) -> AgentOutput:
    return AgentOutput(eval_id="c", turns=[TurnOutput(invocation_id=f"t{i}", tool_calls=calls)
                                           for i, calls in enumerate(turns, 1)])


def scores(results: list[ScoreResult]) -> list[float | None]:
    return [r.score for r in results]


def native(case: EvalCase, output: AgentOutput, **config: Any) -> list[ScoreResult]:
    return TrajectoryMatchEvaluator().score(case, output, CriterionConfig(**config), "trajectory_match")


def adk(case: EvalCase, output: AgentOutput, config: CriterionConfig) -> list[ScoreResult]:
    return AdkToolTrajectoryEvaluator().score(case, output, config, "tool_trajectory_avg_score")


class TestTrajectoryMatch:
    def test_it_scores_each_turn_then_the_conversation_as_their_mean(self) -> None:
        case = case_of([call("a"), call("b")], [call("c")])
        results = native(case, output_of([did("a")], [did("c")]), threshold=0.8)
        assert scores(results) == [0.5, 1.0, 0.75]
        assert [(r.applies_to, r.turn_index) for r in results] == [
            (Level.INTERACTION, 0), (Level.INTERACTION, 1), (Level.CONVERSATION, -1)]
        assert [r.passed for r in results] == [False, True, False]
        assert results[2].justification["counts"] == {"matched": 2, "args_differ": 0, "missing": 1, "unexpected": 0}
        assert results[2].justification["turns"] == [{"invocation_id": "t1", "score": 0.5},
                                                     {"invocation_id": "t2", "score": 1.0}]

    def test_a_turn_justification_holds_expected_actual_and_the_alignment(self) -> None:
        results = native(case_of([call("search", q="oslo")]), output_of([did("search", q="lima")]))
        justification = results[0].justification
        assert justification["expected"] == [{"name": "search", "args": {"q": "oslo"}}]
        assert justification["actual"] == [{"name": "search", "args": {"q": "lima"}}]
        assert justification["alignment"]["rows"][0]["kind"] == "args_differ"
        assert justification["alignment"]["rows"][0]["arg_diffs"] == [
            {"path": "q", "kind": "changed", "expected": "oslo", "actual": "lima"}]
        assert (justification["match_type"], justification["strict"]) == ("EXACT", False)

    def test_the_match_type_comes_from_the_criterion_unless_the_options_override_it(self) -> None:
        case, output = case_of([call("a"), call("b")]), output_of([did("a"), did("x"), did("b")])
        assert scores(native(case, output))[0] == pytest.approx(2 / 3)  # EXACT: 2 of max(2, 3)
        assert scores(native(case, output, match_type=MatchType.IN_ORDER))[0] == 1.0
        overridden = native(case, output, match_type=MatchType.IN_ORDER, options={"match_type": "EXACT"})
        assert scores(overridden)[0] == pytest.approx(2 / 3)

    def test_any_order_ignores_order(self) -> None:
        case, output = case_of([call("a"), call("b")]), output_of([did("b"), did("a")])
        assert scores(native(case, output, match_type=MatchType.IN_ORDER))[0] == 0.5
        assert scores(native(case, output, match_type=MatchType.ANY_ORDER))[0] == 1.0

    def test_strict_is_all_or_nothing(self) -> None:
        case, output = case_of([call("a"), call("b")], [call("c")]), output_of([did("a")], [did("c")])
        assert scores(native(case, output, options={"strict": True})) == [0.0, 1.0, 0.5]

    @pytest.mark.parametrize(("args", "score"), [("exact", 0.0), ("subset", 1.0), ("ignore", 1.0)])
    def test_the_args_mode_decides_whether_extra_arguments_count(self, args: str, score: float) -> None:
        case, output = case_of([call("search", q="oslo")]), output_of([did("search", q="oslo", limit=5)])
        assert scores(native(case, output, options={"args": args}))[0] == score

    def test_subset_still_needs_every_expected_argument(self) -> None:
        case, output = case_of([call("search", q="oslo", limit=5)]), output_of([did("search", q="oslo")])
        assert scores(native(case, output, options={"args": "subset"}))[0] == 0.0

    def test_argument_overrides_loosen_single_arguments(self) -> None:
        case = case_of([call("quote", city="Oslo", price=100.0, ref="R-000", trace="t1")])
        output = output_of([did("quote", city="OSLO", price=100.4, ref="R-734", trace="zz")])
        assert scores(native(case, output))[0] == 0.0
        options = {"arg_overrides": {
            "city": {"case_insensitive": True}, "price": {"abs_tol": 0.5}, "quote:ref": {"regex": r"R-\d{3}"},
            "trace": {"ignore": True},
        }}
        results = native(case, output, options=options)
        assert scores(results)[0] == 1.0
        assert results[0].justification["args"]["overrides"]["price"] == {"abs_tol": 0.5}

    def test_unknown_options_and_bad_patterns_are_refused(self) -> None:
        case, output = case_of([call("a")]), output_of([did("a")])
        with pytest.raises(ValidationError):
            native(case, output, options={"match": "EXACT"})
        with pytest.raises(ValidationError):
            native(case, output, options={"arg_overrides": {"x": {"regex": "("}}})
        with pytest.raises(ValidationError):
            native(case, output, options={"arg_overrides": {"x": {"abs_tol": -1}}})

    def test_a_turn_the_output_lacks_scores_as_a_turn_with_no_calls(self) -> None:
        results = native(case_of([call("a")], [call("b")], []), output_of([did("a")]))
        assert scores(results) == [1.0, 0.0, 1.0, pytest.approx(2 / 3)]
        assert [r.justification["turn_missing"] for r in results[:3]] == [False, True, True]

    def test_the_conversation_scope_compares_all_calls_at_once(self) -> None:
        # Turn by turn, `b` came a turn early; over the whole conversation the order holds.
        case, output = case_of([call("a")], [call("b")]), output_of([did("a"), did("b")], [])
        assert scores(native(case, output)) == [0.5, 0.0, 0.25]
        results = native(case, output, options={"scope": "conversation"})
        assert scores(results) == [1.0]
        assert results[0].applies_to == Level.CONVERSATION
        assert [c["name"] for c in results[0].justification["actual"]] == ["a", "b"]
        assert results[0].justification["alignment"]["counts"]["matched"] == 2

    def test_a_case_without_scripted_turns_is_an_error_not_a_score(self) -> None:
        results = native(EvalCase(eval_id="c"), output_of([did("a")]))
        assert [(r.score, r.passed, r.error) for r in results] == [(None, None, NO_TURNS)]


# --- ADK ------------------------------------------------------------------------------------------

ECOMMERCE = "ecommerce_customer_service_agent"


def adk_evalset(realworld: Path, folder: str, name: str) -> tuple[EvalCase, EvalConfig]:
    directory = realworld / "google-adk" / folder
    parsed = reader.parse(
        SourceFile(f"{folder}/{name}", (directory / name).read_bytes()),
        [SourceFile(f"{folder}/test_config.json", (directory / "test_config.json").read_bytes())],
    )
    assert parsed.default_config is not None
    return parsed.evalset.eval_cases[0], parsed.default_config


def replay(case: EvalCase) -> list[list[OutputToolCall]]:
    """The calls an agent that does exactly what the case expects makes, turn by turn."""
    return [[OutputToolCall(name=c.name, args=dict(c.args)) for c in inv.expected_tool_trajectory]
            for inv in case.conversation]


def as_output(case: EvalCase, turns: list[list[OutputToolCall]]) -> AgentOutput:
    return AgentOutput(eval_id=case.eval_id, turns=[
        TurnOutput(invocation_id=inv.invocation_id, tool_calls=calls)
        for inv, calls in zip(case.conversation, turns, strict=True)
    ])


@pytest.fixture
def ecommerce(realworld: Path) -> tuple[EvalCase, CriterionConfig]:
    case, config = adk_evalset(realworld, ECOMMERCE, "order_query.test.json")
    # Turns: 1 send_email; 2 get_order_status(1); 3 get_order_ids_for_user, get_order_status(1),
    # get_order_status(4), cancel_order(4); 4 get_order_ids_for_user(user_b). Threshold 0.7.
    assert [len(inv.expected_tool_trajectory) for inv in case.conversation] == [1, 1, 4, 1]
    return case, config.criteria["tool_trajectory_avg_score"]


class TestAdkToolTrajectoryAvgScore:
    def test_the_criterion_from_test_config_names_this_evaluator(self, ecommerce: Any) -> None:
        _, criterion = ecommerce
        assert (criterion.evaluator, criterion.threshold, criterion.match_type) == (
            "tool_trajectory_avg_score", 0.7, MatchType.EXACT)

    def test_an_agent_that_does_exactly_what_is_expected_scores_one(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        results = adk(case, as_output(case, replay(case)), criterion)
        # Each invocation: same length, same names, same args -> 1.0; mean 4/4.
        assert scores(results) == [1.0, 1.0, 1.0, 1.0, 1.0]
        assert [r.applies_to for r in results] == [Level.INTERACTION] * 4 + [Level.CONVERSATION]
        assert all(r.passed for r in results)

    def test_a_dropped_call_fails_that_invocation_in_every_match_type(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        turns = replay(case)
        del turns[2][2]  # turn 3 loses get_order_status(order_id="4")
        for match_type in MatchType:
            config = criterion.model_copy(update={"match_type": match_type})
            results = adk(case, as_output(case, turns), config)
            # EXACT: lengths 3 != 4 -> 0.0. IN_ORDER: cancel_order(4) is consumed while the
            # iterator still waits for get_order_status(4) -> 0.0. ANY_ORDER: get_order_status(4)
            # is not found -> 0.0. Mean (1 + 1 + 0 + 1) / 4 = 0.75 >= 0.7: the case passes.
            assert scores(results) == [1.0, 1.0, 0.0, 1.0, 0.75], match_type
            assert [r.passed for r in results] == [True, True, False, True, True]

    def test_a_changed_argument_fails_that_invocation(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        turns = replay(case)
        turns[0][0].args["email"] = "bob@example.com"
        del turns[2][2]
        results = adk(case, as_output(case, turns), criterion)
        # Turn 1: args {"email": "bob@..."} != {"email": "alice@..."} -> 0.0; turn 3 as above.
        # Mean (0 + 1 + 0 + 1) / 4 = 0.5 < 0.7: the case fails.
        assert scores(results) == [0.0, 1.0, 0.0, 1.0, 0.5]
        assert results[-1].passed is False
        assert results[0].justification["alignment"]["rows"][0]["arg_diffs"] == [
            {"path": "email", "kind": "changed", "expected": "alice@example.com", "actual": "bob@example.com"}]

    def test_an_extra_call_fails_exact_only(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        turns = replay(case)
        turns[1].insert(0, did("get_order_ids_for_user", user_id="user_a"))
        expected = {
            # EXACT: lengths 2 != 1 -> 0.0; mean 3/4.
            MatchType.EXACT: [1.0, 0.0, 1.0, 1.0, 0.75],
            # IN_ORDER: the extra call is skipped, get_order_status(1) then matches -> 1.0.
            MatchType.IN_ORDER: [1.0, 1.0, 1.0, 1.0, 1.0],
            # ANY_ORDER: get_order_status(1) is found among the actual calls -> 1.0.
            MatchType.ANY_ORDER: [1.0, 1.0, 1.0, 1.0, 1.0],
        }
        for match_type, want in expected.items():
            config = criterion.model_copy(update={"match_type": match_type})
            assert scores(adk(case, as_output(case, turns), config)) == want, match_type

    def test_a_reordered_turn_passes_any_order_only(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        turns = replay(case)
        turns[2][1], turns[2][2] = turns[2][2], turns[2][1]  # status(4) before status(1)
        expected = {
            # EXACT: position 2 has order_id 4 where 1 is expected -> 0.0.
            MatchType.EXACT: [1.0, 1.0, 0.0, 1.0, 0.75],
            # IN_ORDER: after get_order_ids_for_user it waits for status(1), skips status(4),
            # takes status(1), then waits for status(4) and sees only cancel_order -> 0.0.
            MatchType.IN_ORDER: [1.0, 1.0, 0.0, 1.0, 0.75],
            # ANY_ORDER: every expected call is found -> 1.0.
            MatchType.ANY_ORDER: [1.0, 1.0, 1.0, 1.0, 1.0],
        }
        for match_type, want in expected.items():
            config = criterion.model_copy(update={"match_type": match_type})
            assert scores(adk(case, as_output(case, turns), config)) == want, match_type

    def test_ignore_args_compares_names_only(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        turns = replay(case)
        turns[0][0].args["email"] = "bob@example.com"
        config = criterion.model_copy(update={"options": {"ignore_args": True}})
        assert scores(adk(case, as_output(case, turns), config)) == [1.0, 1.0, 1.0, 1.0, 1.0]

    def test_invocations_with_no_expected_and_no_actual_calls_score_one(self, realworld: Path) -> None:
        case, config = adk_evalset(realworld, "hello_world_agent", "roll_die.test.json")
        criterion = config.criteria["tool_trajectory_avg_score"]  # threshold 1.0
        assert [len(inv.expected_tool_trajectory) for inv in case.conversation] == [0, 0, 1]
        results = adk(case, as_output(case, [[], [], [did("roll_die", sides=6)]]), criterion)
        # Turns 1-2: EXACT on [] vs [] -> lengths equal, nothing to differ -> 1.0. Mean 3/3.
        assert scores(results) == [1.0, 1.0, 1.0, 1.0]
        assert results[-1].passed is True

    def test_a_call_where_none_is_expected_fails_exact_but_not_in_order(self, realworld: Path) -> None:
        case, config = adk_evalset(realworld, "hello_world_agent", "roll_die.test.json")
        criterion = config.criteria["tool_trajectory_avg_score"]
        turns: list[list[OutputToolCall]] = [[did("roll_die", sides=6)], [], [did("roll_die", sides=20)]]
        # EXACT: turn 1 lengths 1 != 0 -> 0.0; turn 3 sides 20 != 6 -> 0.0; mean 1/3.
        assert scores(adk(case, as_output(case, turns), criterion)) == [0.0, 1.0, 0.0, pytest.approx(1 / 3)]
        # IN_ORDER: no expected calls -> True for turn 1; turn 3 still differs -> mean 2/3.
        in_order = criterion.model_copy(update={"match_type": MatchType.IN_ORDER})
        assert scores(adk(case, as_output(case, turns), in_order)) == [1.0, 1.0, 0.0, pytest.approx(2 / 3)]

    def test_it_agrees_with_the_native_evaluator_in_strict_mode(self, ecommerce: Any) -> None:
        case, criterion = ecommerce
        turns = replay(case)
        turns[1].insert(0, did("get_order_ids_for_user", user_id="user_a"))
        turns[2][1], turns[2][2] = turns[2][2], turns[2][1]
        for match_type in MatchType:
            config = criterion.model_copy(update={"match_type": match_type})
            strict = config.model_copy(update={"options": {"strict": True}})
            output = as_output(case, turns)
            assert scores(adk(case, output, config)) == scores(
                TrajectoryMatchEvaluator().score(case, output, strict, "x")), match_type

    def test_a_case_without_scripted_turns_is_an_error_as_in_adk(self) -> None:
        results = adk(EvalCase(eval_id="c"), output_of(), CriterionConfig())
        assert [(r.score, r.error) for r in results] == [(None, NO_TURNS)]


class TestAdkMatchFunction:
    """`adk_tool_calls_match` against the examples in ADK's `ToolTrajectoryCriterion` docs."""

    def test_in_order_allows_calls_between(self) -> None:
        expected = [call("T1"), call("T2"), call("T3")]
        actual = [call(n) for n in ("T1", "T1.1", "T2", "T2.1", "T2.2", "T3", "T3.1")]
        assert adk_tool_calls_match(actual, expected, MatchType.IN_ORDER)
        assert not adk_tool_calls_match(actual, [*expected, call("T4")], MatchType.IN_ORDER)

    def test_any_order_allows_any_order_and_calls_between(self) -> None:
        expected = [call("T1"), call("T2"), call("T3")]
        actual = [call(n) for n in ("T2", "T2.1", "T1", "T1.1", "T1.2", "T3", "T3.1")]
        assert adk_tool_calls_match(actual, expected, MatchType.ANY_ORDER)
        assert not adk_tool_calls_match(actual, expected, MatchType.IN_ORDER)

    def test_any_order_uses_each_actual_call_once(self) -> None:
        assert not adk_tool_calls_match([call("a")], [call("a"), call("a")], MatchType.ANY_ORDER)
        assert adk_tool_calls_match([call("a"), call("a")], [call("a"), call("a")], MatchType.ANY_ORDER)

    def test_nothing_expected_matches_anything_except_under_exact(self) -> None:
        assert adk_tool_calls_match([call("a")], [], MatchType.IN_ORDER)
        assert adk_tool_calls_match([call("a")], [], MatchType.ANY_ORDER)
        assert not adk_tool_calls_match([call("a")], [], MatchType.EXACT)
        assert not adk_tool_calls_match([], [call("a")], MatchType.IN_ORDER)
