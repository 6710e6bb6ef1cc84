"""Output evaluators (evaluations/evaluators/output.py): the native exact match, contains,
regex and JSON similarity with each option, and UiPath's evaluators with UiPath's semantics,
on the real calculator sample's definitions and eval set. Pure: no database, no network."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.output import (
    ContainsEvaluator,
    ExactMatchEvaluator,
    JsonSimilarityEvaluator,
    RegexMatchEvaluator,
    json_similarity,
    levenshtein,
    resolve_output_path,
)
from evaluations.evaluators.uipath import (
    UiPathContainsEvaluator,
    UiPathExactMatchEvaluator,
    UiPathJsonSimilarityEvaluator,
    UiPathLegacyExactMatchEvaluator,
    UiPathLegacyJsonSimilarityEvaluator,
)
from evaluations.interop import files_from_paths
from evaluations.interop.uipath.evalset import reader as uipath_reader
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MessageContent
from evaluations.schemas.outputs import AgentOutput, TurnOutput
from tests.conftest import REALWORLD

CALCULATOR = REALWORLD / "uipath" / "calculator"


def case(*expected: Any, criteria: dict[str, Any] | None = None) -> EvalCase:
    """A case with one invocation per expected response (None: no expected response;
    a dict or list: a structured one)."""
    conversation = []
    for i, value in enumerate(expected, 1):
        if value is None:
            response = None
        elif isinstance(value, str):
            response = MessageContent.assistant(value)
        else:
            response = MessageContent.json_part("assistant", value)
        conversation.append(Invocation(invocation_id=f"turn_{i}", user_content=MessageContent.user(f"question {i}"),
                                       expected_final_response=response))
    return EvalCase(eval_id="c1", conversation=conversation, criteria=criteria or {})


def output(*responses: Any) -> AgentOutput:
    return AgentOutput(eval_id="c1", turns=[TurnOutput(final_response=r) for r in responses])


def config(threshold: float = 1.0, **options: Any) -> CriterionConfig:
    return CriterionConfig(threshold=threshold, options=options)


def conversation(results: list[ScoreResult]) -> ScoreResult:
    [overall] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return overall


def turn_scores(results: list[ScoreResult]) -> list[float | None]:
    return [r.score for r in results if r.applies_to is Level.INTERACTION]


def score(evaluator: Any, c: EvalCase, o: AgentOutput, cfg: CriterionConfig, criterion: str = "crit") -> float | None:
    return conversation(evaluator.score(c, o, cfg, criterion)).score


# --- exact_match ---------------------------------------------------------------------------------


class TestExactMatch:
    def test_each_turn_with_an_expected_response_is_scored_and_the_conversation_gets_the_mean(self) -> None:
        results = ExactMatchEvaluator().score(case("Paris", None, "Rome"), output("Paris", "whatever", "Milan"),
                                              config(), "exact")
        assert [(r.applies_to, r.turn_index, r.score) for r in results] == [
            (Level.INTERACTION, 0, 1.0), (Level.INTERACTION, 2, 0.0), (Level.CONVERSATION, -1, 0.5)]
        assert [r.passed for r in results] == [True, False, False]
        assert results[0].criterion == "exact"
        assert results[1].justification == {"expected": "Rome", "actual": "Milan"}
        assert results[2].justification["turn_scores"] == [1.0, 0.0]

    def test_it_is_case_sensitive_unless_told_otherwise(self) -> None:
        assert score(ExactMatchEvaluator(), case("Paris"), output("PARIS"), config()) == 0.0
        assert score(ExactMatchEvaluator(), case("Paris"), output("PARIS"), config(case_sensitive=False)) == 1.0

    def test_surrounding_whitespace_is_ignored_unless_told_otherwise(self) -> None:
        assert score(ExactMatchEvaluator(), case("Paris \n"), output("Paris"), config()) == 1.0
        assert score(ExactMatchEvaluator(), case("Paris \n"), output("Paris"), config(strip_whitespace=False)) == 0.0

    def test_structured_values_compare_as_values_with_ints_equal_to_floats(self) -> None:
        assert score(ExactMatchEvaluator(), case({"result": 5.0, "op": "+"}), output({"op": "+", "result": 5}),
                     config()) == 1.0
        assert score(ExactMatchEvaluator(), case({"result": 5.0}), output({"result": 5.5}), config()) == 0.0

    def test_a_structured_expectation_reads_a_json_text_answer_as_json(self) -> None:
        assert score(ExactMatchEvaluator(), case({"b": 2, "a": 1}), output('{"a": 1.0,  "b": 2}'), config()) == 1.0
        assert score(ExactMatchEvaluator(), case({"a": 1}), output("a = 1"), config()) == 0.0

    def test_target_output_key_compares_one_key_and_reads_json_text(self) -> None:
        c = case({"result": 5.0, "explanation": "2 + 3"})
        assert score(ExactMatchEvaluator(), c, output('{"result": 5, "explanation": "two plus three"}'),
                     config(target_output_key="result")) == 1.0
        assert score(ExactMatchEvaluator(), c, output({"result": 6}), config(target_output_key="result")) == 0.0

    def test_target_output_key_takes_uipath_paths(self) -> None:
        c = case({"items": [{"name": "a"}, {"name": "b"}]})
        assert score(ExactMatchEvaluator(), c, output({"items": [{"name": "x"}, {"name": "b"}]}),
                     config(target_output_key="items[1].name")) == 1.0

    def test_an_actual_output_without_the_target_key_is_a_wrong_answer(self) -> None:
        [turn, _] = ExactMatchEvaluator().score(case({"result": 5}), output({"answer": 5}),
                                                config(target_output_key="result"), "c")
        assert turn.score == 0.0
        assert turn.error == ""
        assert "not in the actual output" in turn.justification["target_missing"]

    def test_an_expected_output_without_the_target_key_is_an_error(self) -> None:
        [turn, overall] = ExactMatchEvaluator().score(case({"answer": 5}), output({"result": 5}),
                                                      config(target_output_key="result"), "c")
        assert turn.score is None
        assert "'result' is not in the expected output" in turn.error
        assert overall.error == "no turn could be scored"

    def test_negated_inverts_the_match(self) -> None:
        assert score(ExactMatchEvaluator(), case("Paris"), output("Paris"), config(negated=True)) == 0.0
        assert score(ExactMatchEvaluator(), case("Paris"), output("Rome"), config(negated=True)) == 1.0

    def test_line_by_line_scores_the_share_of_matching_lines(self) -> None:
        [turn, _] = ExactMatchEvaluator().score(case("a\nb\n\nc"), output("a\nB\nc\nd"),
                                                config(threshold=0.5, line_by_line=True), "c")
        # Blank lines are dropped; lines: a=a, b≠B, c=c, ''≠d.
        assert turn.score == 0.5
        assert [line["score"] for line in turn.justification["lines"]] == [1.0, 0.0, 1.0, 0.0]
        assert turn.passed is True

    def test_line_by_line_uses_the_delimiter_and_the_case_option(self) -> None:
        assert score(ExactMatchEvaluator(), case("a;b;c"), output("A;b;x"),
                     config(line_by_line=True, line_delimiter=";", case_sensitive=False)) == pytest.approx(2 / 3)

    def test_a_turn_the_agent_never_answered_is_compared_as_empty(self) -> None:
        [first, second, _] = ExactMatchEvaluator().score(case("a", "b"), output("a"), config(), "c")
        assert (first.score, second.score) == (1.0, 0.0)
        assert second.justification["no_response"] is True

    def test_a_case_without_expected_responses_is_not_scored(self) -> None:
        assert ExactMatchEvaluator().score(case(None), output("anything"), config(), "c") == []

    def test_unknown_options_are_an_error_on_the_score(self) -> None:
        [result] = ExactMatchEvaluator().score(case("a"), output("a"), config(case_sensitiv=False), "c")
        assert result.score is None
        assert "case_sensitiv" in result.error


# --- contains ------------------------------------------------------------------------------------


class TestContains:
    def test_each_expected_response_must_appear_in_its_turn(self) -> None:
        results = ContainsEvaluator().score(case("Paris", "22°C"), output("It is Paris.", "About 20°C"),
                                            config(), "c")
        assert turn_scores(results) == [1.0, 0.0]
        assert results[1].justification["missing"] == ["22°C"]

    def test_substrings_from_the_options_must_all_appear_in_the_last_answer(self) -> None:
        c = case("x", "y")
        o = output("hello", "Your refund of 20 EUR is on its way")
        assert score(ContainsEvaluator(), c, o, config(substrings=["refund", "EUR"])) == 1.0
        assert score(ContainsEvaluator(), c, o, config(substrings=["refund", "USD"])) == 0.0

    def test_match_any_needs_one_substring(self) -> None:
        o = output("Your refund is on its way")
        assert score(ContainsEvaluator(), case(), o, config(substrings=["refund", "USD"], match="any")) == 1.0
        assert score(ContainsEvaluator(), case(), o, config(substrings=["credit", "USD"], match="any")) == 0.0

    def test_case_sensitivity_is_an_option(self) -> None:
        o = output("REFUND issued")
        assert score(ContainsEvaluator(), case(), o, config(substrings="refund")) == 0.0
        assert score(ContainsEvaluator(), case(), o, config(substrings="refund", case_sensitive=False)) == 1.0

    def test_negated_checks_that_nothing_appears(self) -> None:
        o = output("As an AI model, I cannot.")
        assert score(ContainsEvaluator(), case(), o, config(substrings=["As an AI"], negated=True)) == 0.0
        assert score(ContainsEvaluator(), case(), o, config(substrings=["sorry"], negated=True)) == 1.0

    def test_turns_all_checks_every_answer(self) -> None:
        results = ContainsEvaluator().score(case("a", "b", "c"), output("ok", "as an AI, no", "fine"),
                                            config(substrings="as an AI", negated=True, turns="all"), "c")
        assert turn_scores(results) == [1.0, 0.0, 1.0]
        assert conversation(results).score == pytest.approx(2 / 3)

    def test_the_case_criterion_search_text_wins_over_the_options(self) -> None:
        c = case(criteria={"c": {"searchText": "Tokyo"}})
        assert score(ContainsEvaluator(), c, output("Weather in Tokyo"), config(substrings="Paris"), "c") == 1.0

    def test_target_output_key_narrows_the_haystack(self) -> None:
        o = output({"result": "5", "explanation": "refund"})
        assert score(ContainsEvaluator(), case(), o, config(substrings="refund", target_output_key="result")) == 0.0
        assert score(ContainsEvaluator(), case(), o,
                     config(substrings="refund", target_output_key="explanation")) == 1.0


# --- regex_match ---------------------------------------------------------------------------------


class TestRegex:
    def test_a_partial_match_is_enough_by_default(self) -> None:
        results = RegexMatchEvaluator().score(case(), output("Order #12345 confirmed"),
                                              config(pattern=r"#\d{5}"), "c")
        [result] = results
        assert result.score == 1.0
        assert result.justification["matched_text"] == "#12345"

    def test_full_match_anchors_the_pattern(self) -> None:
        o = output("Order #12345 confirmed")
        assert score(RegexMatchEvaluator(), case(), o, config(pattern=r"#\d{5}", full_match=True)) == 0.0
        assert score(RegexMatchEvaluator(), case(), o, config(pattern=r"Order #\d+ \w+", full_match=True)) == 1.0

    def test_flags_are_named(self) -> None:
        o = output("first line\nCONFIRMED")
        assert score(RegexMatchEvaluator(), case(), o, config(pattern="^confirmed$")) == 0.0
        assert score(RegexMatchEvaluator(), case(), o, config(pattern="^confirmed$", flags=["IGNORECASE", "m"])) == 1.0

    def test_negated_passes_when_nothing_matches(self) -> None:
        assert score(RegexMatchEvaluator(), case(), output("no digits"), config(pattern=r"\d", negated=True)) == 1.0

    def test_the_case_criterion_pattern_wins(self) -> None:
        c = case(criteria={"c": {"pattern": "^Tokyo"}})
        assert score(RegexMatchEvaluator(), c, output("Tokyo: 22°C"), config(pattern="^Paris"), "c") == 1.0

    def test_an_invalid_pattern_is_an_error(self) -> None:
        [result] = RegexMatchEvaluator().score(case(), output("x"), config(pattern="(unclosed"), "c")
        assert result.score is None
        assert "invalid regular expression" in result.error

    def test_an_unknown_flag_is_an_error(self) -> None:
        [result] = RegexMatchEvaluator().score(case(), output("x"), config(pattern="x", flags=["UNICODE_ALL"]), "c")
        assert "unknown regex flag 'UNICODE_ALL'" in result.error

    def test_no_pattern_is_an_error(self) -> None:
        [result] = RegexMatchEvaluator().score(case("x"), output("x"), config(), "c")
        assert result.error.startswith("no pattern")


# --- JSON similarity -----------------------------------------------------------------------------


class TestJsonSimilarityNumbers:
    """UiPath's algorithm, worked out by hand."""

    def test_a_calculator_result_with_near_misses_everywhere(self) -> None:
        expected = {"result": 5.0, "operator": "+", "operands": [2, 3], "ok": True}
        actual = {"result": 4.0, "operator": "plus", "operands": [2], "ok": True, "extra": 1}
        # result 1-|5-4|/5 = 0.8; "+" vs "plus": distance 4 / length 4 -> 0; operands: 2=2 -> 1,
        # the missing 3 -> 0 of 1; ok -> 1; the extra key does not count. 2.8 of 5 leaves.
        assert json_similarity(expected, actual) == (pytest.approx(0.56), pytest.approx(2.8), 5.0)

    def test_numbers_score_their_relative_closeness(self) -> None:
        assert json_similarity({"result": 5.0}, {"result": 4.5})[0] == pytest.approx(0.9)
        assert json_similarity({"result": 2}, {"result": 10})[0] == 0.0  # 1 - 8/2 clamps at 0
        assert json_similarity({"result": 0}, {"result": 0.0})[0] == 1.0
        assert json_similarity({"result": 0}, {"result": 0.001})[0] == 0.0

    def test_strings_score_their_edit_distance(self) -> None:
        assert levenshtein("Tokyo", "Tokio") == 1
        assert json_similarity({"city": "Tokyo"}, {"city": "Tokio"})[0] == pytest.approx(0.8)
        assert json_similarity({"city": ""}, {"city": ""})[0] == 1.0

    def test_a_different_type_or_a_missing_subtree_loses_all_its_leaves(self) -> None:
        assert json_similarity({"result": 5}, {"result": "5"}) == (0.0, 0.0, 1.0)
        assert json_similarity({"a": {"b": 1, "c": [1, 2]}, "d": True}, {"d": True}) == (0.25, 1.0, 4.0)
        assert json_similarity({"flag": True}, {"flag": 1}) == (0.0, 0.0, 1.0)

    def test_an_expected_tree_without_leaves_scores_one(self) -> None:
        assert json_similarity({}, {"anything": 1}) == (1.0, 0.0, 0.0)

    def test_resolve_output_path_reads_keys_and_indexes(self) -> None:
        value = {"a": {"b": [{"c": 1}, {"c": 2}]}}
        assert resolve_output_path(value, "a.b[1].c") == 2
        assert resolve_output_path(value, "*") is value
        with pytest.raises(KeyError):
            resolve_output_path(value, "a.x")
        with pytest.raises(IndexError):
            resolve_output_path(value, "a.b[5]")
        with pytest.raises(TypeError):
            resolve_output_path(value, "a[0]")


class TestNativeJsonSimilarity:
    def test_each_structured_expected_response_is_compared(self) -> None:
        results = JsonSimilarityEvaluator().score(case({"result": 5.0}, {"city": "Tokyo"}),
                                                  output({"result": 4.5}, '{"city": "Tokio"}'), config(0.86), "j")
        assert turn_scores(results) == [pytest.approx(0.9), pytest.approx(0.8)]
        assert [r.passed for r in results] == [True, False, False]
        assert conversation(results).score == pytest.approx(0.85)
        assert results[0].justification["matched_leaves"] == pytest.approx(0.9)
        assert results[0].justification["total_leaves"] == 1.0

    def test_target_output_key_compares_a_subtree(self) -> None:
        c = case({"result": {"value": 10}, "note": "ignored"})
        assert score(JsonSimilarityEvaluator(), c, output({"result": {"value": 8}, "note": "other"}),
                     config(target_output_key="result")) == pytest.approx(0.8)
        assert score(JsonSimilarityEvaluator(), c, output({"note": "no result"}),
                     config(target_output_key="result")) == 0.0


# --- UiPath evaluators -----------------------------------------------------------------------------


def definition(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((CALCULATOR / "evaluators" / name).read_text())
    return doc


def uipath_config(name: str, threshold: float = 1.0, **overrides: Any) -> CriterionConfig:
    """A criterion as the UiPath importer makes one: the definition's evaluatorConfig as options."""
    options = dict(definition(name)["evaluatorConfig"])
    options.update(overrides)
    return CriterionConfig(threshold=threshold, options=options)


def uipath_case(evaluator_id: str, criteria: dict[str, Any] | None) -> EvalCase:
    return EvalCase(eval_id="test-1", conversation=[Invocation(
        invocation_id="turn_1", user_content=MessageContent.json_part("user", {"a": 2, "b": 3, "operator": "+"}))],
        criteria={evaluator_id: criteria})


def uipath_score(evaluator: Any, config: CriterionConfig, criteria: dict[str, Any] | None, actual: Any) -> ScoreResult:
    [result] = evaluator.score(uipath_case("E", criteria), output(actual), config, "E")
    assert result.applies_to is Level.CONVERSATION
    return result


class TestUiPathExactMatch:
    """calculator/evaluators/exact-match.json: targetOutputKey "result", default {"result": "5.0"}."""

    def test_the_default_criteria_apply_when_the_case_gives_null(self) -> None:
        result = uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"), None, {"result": 5.0})
        assert (result.score, result.passed) == (1.0, True)
        assert result.justification == {"expected": "5.0", "actual": "5.0"}

    def test_an_int_result_is_normalised_to_a_float_before_the_string_comparison(self) -> None:
        assert uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"), None,
                            {"result": 5}).score == 1.0
        assert uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"), None,
                            {"result": 6}).score == 0.0

    def test_the_case_criteria_win_over_the_defaults(self) -> None:
        result = uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"),
                              {"expectedOutput": {"result": 7}}, {"result": 7.0})
        assert result.score == 1.0

    def test_strings_are_case_insensitive_by_default_and_ignore_case_is_not_a_uipath_option(self) -> None:
        # The sample writes "ignoreCase": false, which UiPath ignores: `caseSensitive` is the switch.
        cfg = uipath_config("exact-match.json")
        assert cfg.options["ignoreCase"] is False
        assert uipath_score(UiPathExactMatchEvaluator(), cfg, {"expectedOutput": {"result": "Five"}},
                            {"result": "five"}).score == 1.0
        cfg = uipath_config("exact-match.json", caseSensitive=True)
        assert uipath_score(UiPathExactMatchEvaluator(), cfg, {"expectedOutput": {"result": "Five"}},
                            {"result": "five"}).score == 0.0

    def test_structured_outputs_compare_as_values(self) -> None:
        cfg = uipath_config("exact-match.json", targetOutputKey="*")
        assert uipath_score(UiPathExactMatchEvaluator(), cfg, {"expectedOutput": {"result": 5, "op": "+"}},
                            {"op": "+", "result": 5.0}).score == 1.0

    def test_negated_and_snake_case_options(self) -> None:
        cfg = CriterionConfig(threshold=1.0, options={"target_output_key": "result", "negated": True})
        assert uipath_score(UiPathExactMatchEvaluator(), cfg, {"expected_output": {"result": 1}},
                            {"result": 2}).score == 1.0

    def test_a_missing_target_key_is_an_error_as_in_uipath(self) -> None:
        result = uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"), None, {"value": 5})
        assert result.score is None
        assert "'result' not found in the actual output" in result.error

    def test_line_by_line_averages_the_lines(self) -> None:
        cfg = CriterionConfig(threshold=1.0, options={"lineByLineEvaluator": True})
        result = uipath_score(UiPathExactMatchEvaluator(), cfg, {"expectedOutput": "a\nb\nc"}, "A\nx\nc")
        assert result.score == pytest.approx(2 / 3)
        assert result.justification["total_lines_actual"] == 3

    def test_a_case_that_does_not_name_the_evaluator_is_not_scored(self) -> None:
        c = uipath_case("Other", {"expectedOutput": "x"})
        assert UiPathExactMatchEvaluator().score(c, output("x"), uipath_config("exact-match.json"), "E") == []

    def test_null_criteria_without_defaults_are_an_error(self) -> None:
        cfg = CriterionConfig(options={"targetOutputKey": "*"})
        result = uipath_score(UiPathExactMatchEvaluator(), cfg, None, "x")
        assert "no evaluation criteria" in result.error


class TestUiPathContains:
    """calculator/evaluators/contains.json: targetOutputKey "result", default searchText "5"."""

    def test_the_search_text_is_looked_for_in_str_of_the_target(self) -> None:
        cfg = uipath_config("contains.json")
        assert uipath_score(UiPathContainsEvaluator(), cfg, None, {"result": 15.0}).score == 1.0
        assert uipath_score(UiPathContainsEvaluator(), cfg, None, {"result": 2.0}).score == 0.0

    def test_negated_and_case_sensitive(self) -> None:
        cfg = uipath_config("contains.json", negated=True)
        assert uipath_score(UiPathContainsEvaluator(), cfg, None, {"result": 15.0}).score == 0.0
        cfg = uipath_config("contains.json", targetOutputKey="*")
        assert uipath_score(UiPathContainsEvaluator(), cfg, {"searchText": "PARIS"}, "in paris").score == 1.0
        cfg = uipath_config("contains.json", targetOutputKey="*", caseSensitive=True)
        assert uipath_score(UiPathContainsEvaluator(), cfg, {"searchText": "PARIS"}, "in paris").score == 0.0

    def test_line_by_line_checks_each_line(self) -> None:
        cfg = CriterionConfig(options={"line_by_line_evaluator": True})
        result = uipath_score(UiPathContainsEvaluator(), cfg, {"searchText": "Item:"}, "Item: a\nnothing\nItem: b")
        assert result.score == pytest.approx(2 / 3)


class TestUiPathJsonSimilarity:
    """calculator/evaluators/json-similarity.json: targetOutputKey "*", default {"result": 5.0}."""

    def test_the_calculator_default_against_near_answers(self) -> None:
        cfg = uipath_config("json-similarity.json", threshold=0.7)
        exact = uipath_score(UiPathJsonSimilarityEvaluator(), cfg, None, {"result": 5})
        near = uipath_score(UiPathJsonSimilarityEvaluator(), cfg, None, {"result": 4.5})
        far = uipath_score(UiPathJsonSimilarityEvaluator(), cfg, None, {"result": 1})
        assert (exact.score, near.score, far.score) == (1.0, pytest.approx(0.9), pytest.approx(0.2))
        assert (near.passed, far.passed) == (True, False)
        assert near.justification == {"expected": "{'result': 5.0}", "actual": "{'result': 4.5}",
                                      "matched_leaves": pytest.approx(0.9), "total_leaves": 1.0}

    def test_a_multi_key_answer(self) -> None:
        cfg = uipath_config("json-similarity.json")
        result = uipath_score(UiPathJsonSimilarityEvaluator(), cfg,
                              {"expectedOutput": {"result": 5.0, "operator": "+", "operands": [2, 3], "ok": True}},
                              {"result": 4.0, "operator": "plus", "operands": [2], "ok": True})
        assert result.score == pytest.approx(0.56)

    def test_an_answer_given_as_json_text_is_a_string_as_in_uipath(self) -> None:
        # UiPath never parses the agent's output: a string against an object shares no leaf.
        cfg = uipath_config("json-similarity.json")
        assert uipath_score(UiPathJsonSimilarityEvaluator(), cfg, None, '{"result": 5.0}').score == 0.0
        assert uipath_score(UiPathJsonSimilarityEvaluator(), cfg, None, {"result": 5.0}).score == 1.0

    def test_json_text_under_a_target_key_is_not_found_as_in_uipath(self) -> None:
        result = uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"), None, '{"result": "5.0"}')
        assert (result.score, result.passed) == (None, None)
        assert "target output key 'result' not found in the actual output" in result.error


class TestUiPathRefusals:
    """Where UiPath itself fails, the score records why, with no number (UiPath's own run shows
    an error result there)."""

    def test_a_bare_number_output_is_not_scored(self) -> None:
        result = uipath_score(UiPathExactMatchEvaluator(), uipath_config("exact-match.json"), None, 5)
        assert (result.score, result.passed) == (None, None)
        assert result.error == "UiPath evaluates an object or a string output, not int (5)"

    def test_an_expected_output_that_is_neither_object_nor_string_is_not_scored(self) -> None:
        result = uipath_score(UiPathJsonSimilarityEvaluator(), uipath_config("json-similarity.json"),
                              {"expectedOutput": [5]}, {"result": 5})
        assert result.score is None
        assert "expectedOutput must be an object or a string, not list" in result.error


class TestUiPathLineByLine:
    def test_a_dict_holding_the_target_key_again_is_read_under_it_again(self) -> None:
        cfg = uipath_config("exact-match.json", lineByLineEvaluator=True)
        nested = {"result": {"result": "a\nb\nc"}}
        result = uipath_score(UiPathExactMatchEvaluator(), cfg, {"expectedOutput": {"result": "a\nB\nx"}}, nested)
        assert result.score == pytest.approx(2 / 3)  # case-insensitive: a, b match; c != x
        assert [d["actual"] for d in result.justification["line_by_line_results"]] == ["a", "b", "c"]

    def test_contains_line_by_line_reads_the_nested_key_too(self) -> None:
        cfg = uipath_config("contains.json", lineByLineEvaluator=True, targetOutputKey="result")
        result = uipath_score(UiPathContainsEvaluator(), cfg, {"searchText": "ok"},
                              {"result": {"result": "ok 1\n\nnot here\nOK 3"}})
        assert result.score == pytest.approx(2 / 3)  # the blank line is dropped, as UiPath drops it


class TestUiPathLegacy:
    """The calculator's legacy eval set through the UiPath importer: every evaluator gets
    {expectedOutput: {"result": 2.0}, expectedAgentBehavior}."""

    @pytest.fixture
    def imported(self) -> tuple[EvalCase, dict[str, CriterionConfig]]:
        files = files_from_paths([CALCULATOR])
        companions = [f for f in files if uipath_reader.is_companion(f)]
        [legacy] = [f for f in files if f.name.endswith("eval-sets/legacy.json")]
        parsed = uipath_reader.parse(legacy, companions)
        assert parsed.default_config is not None
        return parsed.evalset.eval_cases[0], parsed.default_config.criteria

    def run(self, imported: tuple[EvalCase, dict[str, CriterionConfig]], criterion: str, actual: Any) -> ScoreResult:
        c, criteria = imported
        evaluator = {"uipath-legacy-exact-match": UiPathLegacyExactMatchEvaluator,
                     "uipath-legacy-json-similarity": UiPathLegacyJsonSimilarityEvaluator}[
            criteria[criterion].evaluator or ""]()
        [result] = evaluator.score(c, output(actual), criteria[criterion], criterion)
        return result

    def test_equality_compares_canonical_json(self, imported: Any) -> None:
        assert self.run(imported, "equality", {"result": 2}).score == 1.0
        assert self.run(imported, "equality", {"result": 2, "extra": 0}).score == 0.0

    def test_equality_with_target_key_compares_the_key(self, imported: Any) -> None:
        assert self.run(imported, "equality-with-target-key", {"result": 2.0, "extra": 0}).score == 1.0
        assert self.run(imported, "equality-with-target-key", {"result": 3}).score == 0.0

    def test_equality_with_a_target_key_missing_on_one_side_matches_as_uipath_does(self, imported: Any) -> None:
        result = self.run(imported, "equality-with-target-key", {"value": 99})
        assert result.score == 1.0
        assert result.justification == {"expected": "{}", "actual": "{}"}

    def test_a_null_or_empty_output_is_an_empty_object_as_in_uipath(self, imported: Any) -> None:
        # UiPath's eval runtime passes `output or {}`: the key is missing on the actual side,
        # so it compares {} with {} and matches.
        for empty in (None, "", {}, []):
            assert self.run(imported, "equality-with-target-key", empty).score == 1.0
        assert self.run(imported, "equality", None).score == 0.0  # {} against {"result": 2.0}

    def test_line_by_line_scores_the_share_of_matching_lines(self, imported: Any) -> None:
        c, criteria = imported
        cfg = criteria["equality-with-target-key"].model_copy(
            update={"options": {**criteria["equality-with-target-key"].options, "lineByLineEvaluation": True}})
        legacy_case = c.model_copy(update={"criteria": {"equality-with-target-key": {
            "expectedOutput": {"result": "Line 1\nLine 2\nLine 3"}, "expectedAgentBehavior": ""}}})
        [result] = UiPathLegacyExactMatchEvaluator().score(
            legacy_case, output({"result": "Line 1\nLine 2 changed\nLine 3"}), cfg, "equality-with-target-key")
        assert result.score == pytest.approx(2 / 3)
        assert [d["score"] for d in result.justification["line_by_line_results"]] == [1.0, 0.0, 1.0]
        # The key missing from the output: its whole text is split instead (one line, no match).
        [result] = UiPathLegacyExactMatchEvaluator().score(
            legacy_case, output({"other": "Line 1"}), cfg, "equality-with-target-key")
        assert result.score == 0.0
        assert result.justification["total_lines_actual"] == 1

    def test_legacy_json_similarity_keeps_the_0_to_100_value_as_raw(self, imported: Any) -> None:
        result = self.run(imported, "json-similarity", {"result": 1.5})
        assert result.score == pytest.approx(0.75)
        assert result.raw_value == pytest.approx(75.0)
        assert result.passed is True  # the importer's 0.7 threshold


def test_the_registry_knows_every_output_evaluator_by_name() -> None:
    from evaluations.evaluators import get_evaluator_class

    names = {
        "exact_match": ExactMatchEvaluator, "contains": ContainsEvaluator, "regex_match": RegexMatchEvaluator,
        "json_similarity": JsonSimilarityEvaluator, "uipath-exact-match": UiPathExactMatchEvaluator,
        "uipath-contains": UiPathContainsEvaluator, "uipath-json-similarity": UiPathJsonSimilarityEvaluator,
        "uipath-legacy-exact-match": UiPathLegacyExactMatchEvaluator,
        "uipath-legacy-json-similarity": UiPathLegacyJsonSimilarityEvaluator,
    }
    for name, cls in names.items():
        assert get_evaluator_class(name) is cls
        assert cls.group == "output"
