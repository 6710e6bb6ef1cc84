"""ADK's response_match_score (evaluations/evaluators/rouge.py): ROUGE-1 F-measure per
invocation from the rouge-score package, averaged as ADK averages it, on the real ADK
hello_world_agent eval set."""

from __future__ import annotations

from typing import Any

import pytest
from rouge_score import rouge_scorer

from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.rouge import (
    ResponseMatchEvaluator,
    ResponseMatchScoreEvaluator,
    rouge_1,
)
from evaluations.interop.adk.evalset import reader
from evaluations.interop.base import SourceFile
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MessageContent
from evaluations.schemas.outputs import AgentOutput, TurnOutput
from tests.conftest import REALWORLD

ROLL_DIE = REALWORLD / "google-adk" / "hello_world_agent" / "roll_die.test.json"

# What an agent might have answered to the three turns of roll_die.test.json.
ANSWERS = [
    "Hi! I am a data processing agent: I roll dice and check whether the results are prime.",
    "I can roll dice of different sizes and check if the rolls are prime numbers.",
    "I rolled a 6-sided die and got 4.",
]


def roll_die_case() -> EvalCase:
    parsed = reader.parse(SourceFile(ROLL_DIE.name, ROLL_DIE.read_bytes()), [])
    [case] = parsed.evalset.eval_cases
    return case


def adk_rouge(reference: str, candidate: str) -> float:
    """ADK's computation, straight from rouge-score."""
    scorer = rouge_scorer.RougeScorer(["rouge1"], use_stemmer=True)
    return float(scorer.score(reference, candidate)["rouge1"].fmeasure)


def simple_case(*expected: str | None) -> EvalCase:
    return EvalCase(eval_id="c", conversation=[
        Invocation(invocation_id=f"t{i}", user_content=MessageContent.user("q"),
                   expected_final_response=MessageContent.assistant(e) if e is not None else None)
        for i, e in enumerate(expected)])


def outputs(*answers: Any, ids: list[str] | None = None) -> AgentOutput:
    return AgentOutput(eval_id="c", turns=[
        TurnOutput(final_response=a, invocation_id=ids[i] if ids else None) for i, a in enumerate(answers)])


def overall(results: list[ScoreResult]) -> ScoreResult:
    [result] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return result


class TestOnTheRealAdkEvalSet:
    def test_each_invocation_scores_rouge_1_f_measure_from_rouge_score(self) -> None:
        case = roll_die_case()
        results = ResponseMatchScoreEvaluator().score(case, outputs(*ANSWERS), CriterionConfig(threshold=0.5),
                                                      "response_match_score")
        turns = [r for r in results if r.applies_to is Level.INTERACTION]
        references = [inv.expected_final_response.get_text() if inv.expected_final_response else ""
                      for inv in case.conversation]
        assert [r.score for r in turns] == [adk_rouge(ref, ans) for ref, ans in zip(references, ANSWERS, strict=True)]
        assert [r.turn_index for r in turns] == [0, 1, 2]
        assert turns[0].justification["expected"].startswith("I am a data processing agent.")

    def test_the_tool_only_turn_has_no_expected_text_and_counts_as_zero_in_the_mean(self) -> None:
        # Turn 3 of roll_die expects only a tool call (its final_response has no text): ADK
        # scores it 0 and still divides by 3.
        case = roll_die_case()
        assert case.conversation[2].expected_final_response is None
        results = ResponseMatchScoreEvaluator().score(case, outputs(*ANSWERS), CriterionConfig(threshold=0.5),
                                                      "response_match_score")
        turns = [r.score or 0.0 for r in results if r.applies_to is Level.INTERACTION]
        assert turns[2] == 0.0
        assert overall(results).score == pytest.approx(sum(turns) / 3)
        assert 0 < overall(results).score < 0.5

    def test_pass_and_fail_follow_adk_score_at_or_above_threshold(self) -> None:
        case = roll_die_case()
        references = [inv.expected_final_response.get_text() for inv in case.conversation[:2]
                      if inv.expected_final_response]
        results = ResponseMatchScoreEvaluator().score(case, outputs(references[0], references[1], "4"),
                                                      CriterionConfig(threshold=0.5), "response_match_score")
        assert [r.passed for r in results] == [True, True, False, True]  # mean = 2/3
        assert overall(results).score == pytest.approx(2 / 3)


class TestRougeNumbers:
    def test_a_hand_computed_rouge_1(self) -> None:
        # 3 of 3 candidate unigrams match, 3 of 6 reference ones: P=1, R=0.5, F=2/3.
        assert rouge_1("the cat sat", "the cat sat on the mat") == (1.0, 0.5, pytest.approx(2 / 3))

    def test_stemming_matches_inflections(self) -> None:
        # Porter: rolling, rolled -> roll; dice -> dice.
        assert rouge_1("rolling dice", "rolled dice")[2] == 1.0

    def test_tokens_are_lowercased_and_punctuation_dropped(self) -> None:
        assert rouge_1("PARIS!", "paris")[2] == 1.0

    def test_an_empty_side_scores_zero(self) -> None:
        assert rouge_1("", "something")[2] == 0.0
        assert rouge_1("something", "")[2] == 0.0
        assert rouge_1("", "")[2] == 0.0

    def test_cjk_characters_are_tokens_as_in_adk_2_13(self) -> None:
        # 10 characters each, 8 shared (晴れ vs 曇り): F = 0.8 in google-adk 2.13.
        assert rouge_1("東京の天気は曇りです", "東京の天気は晴れです")[2] == pytest.approx(0.8)

    def test_non_ascii_words_stay_whole_and_count(self) -> None:
        # An appended Cyrillic sentence lowers precision: 6 of 11 candidate tokens match.
        precision, recall, fmeasure = rouge_1("The weather in Paris is sunny. Погода в Париже солнечная сегодня",
                                              "The weather in Paris is sunny.")
        assert (precision, recall) == (pytest.approx(6 / 11), 1.0)
        assert fmeasure == pytest.approx(12 / 17)
        assert rouge_1("Zürich", "zürich")[2] == 1.0
        assert rouge_1("sént", "sent")[2] == 0.0  # non-ASCII words are neither folded nor stemmed

    def test_nfkc_normalises_ligatures_and_full_width_digits(self) -> None:
        assert rouge_1("\ufb01ne \uff12\uff10\uff12\uff14", "fine 2024")  # "ﬁ" ligature, full-width digits[2] == 1.0

    def test_ascii_words_are_still_stemmed_beside_non_latin_text(self) -> None:
        assert rouge_1("rolling 東京", "rolled 東京")[2] == 1.0


class TestAlignment:
    def test_an_invocation_without_an_actual_turn_is_left_out_as_adk_zips(self) -> None:
        results = ResponseMatchScoreEvaluator().score(simple_case("the cat sat", "a dog ran"), outputs("the cat sat"),
                                                      CriterionConfig(threshold=0.5), "r")
        assert [r.score for r in results] == [1.0, 1.0]
        assert overall(results).justification["unanswered_invocations"] == ["t1"]

    def test_turns_match_invocations_by_id(self) -> None:
        results = ResponseMatchScoreEvaluator().score(simple_case("alpha beta", "gamma delta"),
                                                      outputs("gamma delta", ids=["t1"]), CriterionConfig(), "r")
        [turn, total] = results
        assert (turn.turn_index, turn.score) == (1, 1.0)
        assert total.justification["unanswered_invocations"] == ["t0"]

    def test_no_pairs_at_all_is_not_evaluated(self) -> None:
        [result] = ResponseMatchScoreEvaluator().score(simple_case("x"), outputs(), CriterionConfig(), "r")
        assert (result.score, result.passed) == (None, None)
        assert result.justification["status"] == "NOT_EVALUATED"

    def test_a_missing_actual_response_scores_zero(self) -> None:
        results = ResponseMatchScoreEvaluator().score(simple_case("x y"), outputs(None), CriterionConfig(), "r")
        assert results[0].score == 0.0

    def test_structured_answers_are_scored_on_their_json_text(self) -> None:
        results = ResponseMatchScoreEvaluator().score(simple_case('{"city": "Tokyo"}'),
                                                      outputs({"city": "Tokyo"}), CriterionConfig(), "r")
        assert results[0].score == 1.0


def test_response_match_is_the_same_metric_under_agentflows_name() -> None:
    from evaluations.evaluators import get_evaluator_class

    assert get_evaluator_class("response_match_score") is ResponseMatchScoreEvaluator
    assert get_evaluator_class("response_match") is ResponseMatchEvaluator
    case, out = simple_case("the cat sat on the mat"), outputs("the cat sat")
    a = ResponseMatchEvaluator().score(case, out, CriterionConfig(), "response_match")
    b = ResponseMatchScoreEvaluator().score(case, out, CriterionConfig(), "response_match")
    assert [r.score for r in a] == [r.score for r in b] == [pytest.approx(2 / 3)] * 2
