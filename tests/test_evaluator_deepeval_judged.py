"""DeepEval's judged metrics (evaluations/evaluators/deepeval_judged/) against a real scripted
chat-completions server on 127.0.0.1: what is asked (DeepEval's structured replies as
`response_format` json_schema, in DeepEval's order), what is kept (the reason, the steps, each
call's tokens and cost), DeepEval's edge cases (nothing to judge, a missing test-case field, a
skipped reason call, strict mode), a judge that fails, and the estimate of a run's calls.
That the numbers are DeepEval's own, reply for reply, is tests/differential/test_deepeval_judged.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.base import ScoreResult
from evaluations.evaluators.deepeval_judged.catalogue import judged_metric_catalogue
from evaluations.evaluators.deepeval_judged.core import trim_and_load_json
from evaluations.evaluators.deepeval_judged.estimate import expected_calls
from evaluations.evaluators.llm import call_cost
from evaluations.interop.deepeval.collection import CollectionError, collection_to_config, config_to_collection
from evaluations.interop.deepeval.metrics import criterion_for
from evaluations.schemas.deepeval_collection import DeepEvalMetricCollection
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MessageContent
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from tests.llm_server import Behaviour, FakeLLM, status


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def by_schema(llm: FakeLLM, replies: dict[str, Any]) -> list[str]:
    """Answer each call by the name of the structured reply it asks for; returns the names asked."""
    asked: list[str] = []

    def respond(body: dict[str, Any]) -> Behaviour:
        name = body["response_format"]["json_schema"]["name"]
        asked.append(name)
        value = replies[name]
        if isinstance(value, list):
            value = value.pop(0) if len(value) > 1 else value[0]
        return Behaviour(content=value if isinstance(value, str) else json.dumps(value),
                         usage={"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100})

    llm.responder = respond
    return asked


def rag_case(retrieval: list[str] | None = None, context: list[str] | None = None) -> EvalCase:
    metadata: dict[str, Any] = {}
    if retrieval is not None:
        metadata["retrieval_context"] = retrieval
    if context is not None:
        metadata["context"] = context
    return EvalCase(eval_id="weather", metadata=metadata, conversation=[Invocation(
        invocation_id="t1", user_content=MessageContent.user("What's the weather in Paris?"),
        expected_final_response=MessageContent.assistant("Sunny, 21 degrees."))])


def answer(text: str = "Paris is sunny and 21 degrees. Bring sunglasses.", **turn: Any) -> AgentOutput:
    return AgentOutput(eval_id="weather", turns=[TurnOutput(final_response=text, **turn)])


def score(llm: FakeLLM, criterion: str, case: EvalCase, output: AgentOutput, threshold: float = 0.5,
          model: str = "gpt-4o-mini", **options: Any) -> ScoreResult:
    evaluator = get_evaluator_class(criterion)(llm.client(model=model, max_retries=0))  # type: ignore[call-arg]
    [result] = evaluator.score(case, output, CriterionConfig(threshold=threshold, options=options), criterion)
    return result


YES_NO_NO = {"verdicts": [{"verdict": "yes"}, {"verdict": "no", "reason": "about sunglasses"},
                          {"verdict": "borderline", "reason": "vague"}]}


def test_answer_relevancy_asks_deepevals_three_questions_and_keeps_the_reason_steps_and_cost(llm: FakeLLM) -> None:
    asked = by_schema(llm, {"Statements": {"statements": ["Paris is sunny.", "Bring sunglasses.", "21 degrees."]},
                            "Verdicts": YES_NO_NO, "AnswerRelevancyScoreReason": {"reason": "Mostly on topic."}})
    result = score(llm, "deepeval_answer_relevancy", rag_case(), answer())
    assert asked == ["Statements", "Verdicts", "AnswerRelevancyScoreReason"]
    assert result.score == 2 / 3 and result.passed is True and result.error == ""
    assert result.threshold is not None and result.threshold.lower_limit == 0.5
    assert result.justification["reason"] == "Mostly on topic."
    assert result.justification["steps"]["statements"][0] == "Paris is sunny."
    assert [v["verdict"] for v in result.justification["steps"]["verdicts"]] == ["yes", "no", "borderline"]
    assert result.justification["deepeval"]["metric"] == "AnswerRelevancyMetric"
    usage = result.justification["usage"]
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (3, 3000, 300)
    assert usage["cost_usd"] == pytest.approx(3 * (1000 * 0.15 + 100 * 0.60) / 1_000_000)
    assert result.justification["judge"]["model"] == "gpt-4o-mini"  # for the grading queue's calibration
    # DeepEval's structured replies, as response_format json_schema; the answer in the prompt.
    first = llm.requests[0].body
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["properties"]["statements"]["type"] == "array"
    assert "Bring sunglasses." in llm.requests[0].prompt


def test_include_reason_false_skips_the_reason_call(llm: FakeLLM) -> None:
    asked = by_schema(llm, {"Statements": {"statements": ["a"]}, "Verdicts": {"verdicts": [{"verdict": "yes"}]}})
    result = score(llm, "deepeval_answer_relevancy", rag_case(), answer(), include_reason=False)
    assert asked == ["Statements", "Verdicts"]
    assert result.score == 1 and result.justification["reason"] is None


def test_nothing_to_judge_scores_one_for_relevancy_and_zero_for_the_contextual_metrics(llm: FakeLLM) -> None:
    by_schema(llm, {"Statements": {"statements": []}, "Verdicts": {"verdicts": []},
                    "AnswerRelevancyScoreReason": {"reason": "nothing said"},
                    "ContextualRecallScoreReason": {"reason": "none"}})
    assert score(llm, "deepeval_answer_relevancy", rag_case(), answer()).score == 1
    recall = score(llm, "deepeval_contextual_recall", rag_case(retrieval=["doc"]), answer())
    assert recall.score == 0 and recall.passed is False


def test_a_missing_test_case_field_is_deepevals_error_and_costs_no_call(llm: FakeLLM) -> None:
    result = score(llm, "deepeval_faithfulness", rag_case(), answer())
    assert result.score is None and result.passed is None
    assert result.error == "'retrieval_context' cannot be None for the 'Faithfulness' metric"
    empty = score(llm, "deepeval_bias", rag_case(), answer(""))
    assert empty.error == "'actual_output' cannot be empty for the 'Bias' metric"
    assert llm.requests == []


def test_retrieval_context_comes_from_the_output_when_the_agent_reports_it(llm: FakeLLM) -> None:
    by_schema(llm, {"Truths": {"truths": ["It is sunny."]}, "Claims": {"claims": ["It is sunny."]},
                    "Verdicts": {"verdicts": [{"verdict": "yes"}]}, "FaithfulnessScoreReason": {"reason": "ok"}})
    output = answer(metadata={"retrieval_context": ["Forecast: sunny in Paris."]})
    result = score(llm, "deepeval_faithfulness", rag_case(retrieval=["the golden's document"]), output)
    assert result.score == 1
    assert "Forecast: sunny in Paris." in llm.requests[0].prompt
    assert "the golden's document" not in llm.requests[0].prompt


def test_contextual_relevancy_judges_each_retrieved_document_in_a_call_of_its_own(llm: FakeLLM) -> None:
    asked = by_schema(llm, {
        "ContextualRelevancyVerdicts": [{"verdicts": [{"statement": "sunny", "verdict": "yes"}]},
                                        {"verdicts": [{"statement": "stocks", "verdict": "no", "reason": "off"}]}],
        "ContextualRelevancyScoreReason": {"reason": "half relevant"}})
    result = score(llm, "deepeval_contextual_relevancy", rag_case(retrieval=["Paris: sunny", "Stocks rose"]),
                   answer())
    assert asked == ["ContextualRelevancyVerdicts", "ContextualRelevancyVerdicts", "ContextualRelevancyScoreReason"]
    assert result.score == 0.5
    assert [[v["verdict"] for v in chunk] for chunk in result.justification["steps"]["verdicts"]] == [["yes"], ["no"]]


def test_strict_mode_makes_the_threshold_one_and_a_partial_score_zero(llm: FakeLLM) -> None:
    by_schema(llm, {"Opinions": {"opinions": ["a", "b"]},
                    "Verdicts": {"verdicts": [{"verdict": "no"}, {"verdict": "yes", "reason": "biased"}]},
                    "BiasScoreReason": {"reason": "one biased opinion"}})
    lenient = score(llm, "deepeval_bias", rag_case(), answer())
    assert lenient.score == 0.5 and lenient.passed is True  # 1 is a pass: the share of unbiased opinions
    strict = score(llm, "deepeval_bias", rag_case(), answer(), strict_mode=True)
    assert strict.score == 0 and strict.passed is False
    assert strict.threshold is not None and strict.threshold.lower_limit == 1


def test_hallucination_scores_agreement_with_the_golden_context_one_as_a_pass(llm: FakeLLM) -> None:
    by_schema(llm, {"Verdicts": {"verdicts": [{"verdict": "yes", "reason": "agrees"},
                                              {"verdict": "no", "reason": "contradicts"}]},
                    "HallucinationScoreReason": {"reason": "one contradiction"}})
    result = score(llm, "deepeval_hallucination", rag_case(context=["sunny", "21 degrees"]), answer(),
                   threshold=0.6)
    assert result.score == 0.5 and result.passed is False


def test_a_reply_deepeval_cannot_read_is_an_error_with_what_was_spent(llm: FakeLLM) -> None:
    by_schema(llm, {"Statements": "I'd rather not answer in JSON."})
    result = score(llm, "deepeval_answer_relevancy", rag_case(), answer())
    assert result.score is None and "not valid JSON" in result.error
    assert result.justification["usage"]["calls"] == 1


def test_a_judge_that_fails_is_an_error_on_the_score_never_raised(llm: FakeLLM) -> None:
    llm.script(status(500, "overloaded"))
    result = score(llm, "deepeval_toxicity", rag_case(), answer())
    assert result.score is None and "HTTP 500" in result.error and "Toxicity" in result.error


def test_g_eval_maps_the_judges_score_from_its_rubric_range_onto_zero_to_one(llm: FakeLLM) -> None:
    asked = by_schema(llm, {"Steps": {"steps": ["Check the facts."]},
                            "ReasonScore": {"score": 7, "reason": "mostly right"}})
    result = score(llm, "deepeval_g_eval", rag_case(), answer(), criteria="Is it correct?",
                   evaluation_params=["input", "actual_output"])
    assert asked == ["Steps", "ReasonScore"] and result.score == 0.7
    assert result.justification["steps"]["evaluation_steps"] == ["Check the facts."]
    ranged = score(llm, "deepeval_g_eval", rag_case(), answer(), evaluation_steps=["Check."],
                   evaluation_params=["actual_output"],
                   rubric=[{"score_range": [2, 4], "expected_outcome": "poor"},
                           {"score_range": [5, 12 - 2], "expected_outcome": "good"}])
    assert ranged.score == (7 - 2) / (10 - 2)
    strict = score(llm, "deepeval_g_eval", rag_case(), answer(), evaluation_steps=["Check."],
                   evaluation_params=["input"], strict_mode=True)
    assert strict.score == 7 and strict.passed is True  # DeepEval's int(score), as the judge gave it


def test_g_eval_options_are_checked_as_deepeval_checks_them(llm: FakeLLM) -> None:
    result = score(llm, "deepeval_g_eval", rag_case(), answer(), evaluation_params=["input"])
    assert result.score is None and "criteria or evaluation_steps" in result.error
    overlap = score(llm, "deepeval_g_eval", rag_case(), answer(), criteria="x", evaluation_params=["input"],
                    rubric=[{"score_range": [0, 5], "expected_outcome": "a"},
                            {"score_range": [5, 10], "expected_outcome": "b"}])
    assert "overlap" in overlap.error
    assert llm.requests == []


def conversation(*pairs: tuple[str, str]) -> tuple[EvalCase, AgentOutput]:
    case = EvalCase(eval_id="chat", metadata={"chatbot_role": "a polite travel agent"}, conversation=[
        Invocation(invocation_id=f"t{i}", user_content=MessageContent.user(u)) for i, (u, _) in enumerate(pairs)])
    output = AgentOutput(eval_id="chat", turns=[TurnOutput(invocation_id=f"t{i}", final_response=a)
                                                for i, (_, a) in enumerate(pairs)])
    return case, output


def test_turn_relevancy_judges_each_reply_in_its_window_of_exchanges(llm: FakeLLM) -> None:
    asked = by_schema(llm, {"TurnRelevancyVerdict": [{"verdict": "yes"}, {"verdict": "no", "reason": "off"}],
                            "TurnRelevancyScoreReason": {"reason": "one reply off"}})
    case, output = conversation(("Hi, book Rome", "Sure, which dates?"), ("June 3", "Bananas are yellow."))
    result = score(llm, "deepeval_turn_relevancy", case, output)
    assert asked == ["TurnRelevancyVerdict", "TurnRelevancyVerdict", "TurnRelevancyScoreReason"]
    assert result.score == 0.5
    assert "Bananas are yellow." in llm.requests[1].prompt and "Hi, book Rome" in llm.requests[1].prompt


def test_a_monitor_thread_is_scored_from_the_user_messages_its_traces_carry(llm: FakeLLM) -> None:
    by_schema(llm, {"UserIntentions": {"intentions": ["book Rome"]},
                    "ConversationCompletenessVerdict": {"verdict": "yes"},
                    "ConversationCompletenessScoreReason": {"reason": "done"}})
    thread = AgentOutput(eval_id="thread-1", turns=[
        TurnOutput(final_response="Which dates?", metadata={"user_content": "Book me Rome"}),
        TurnOutput(final_response="Booked for June 3.", metadata={"user_content": "June 3"})])
    result = score(llm, "deepeval_conversation_completeness", EvalCase(eval_id="thread-1"), thread)
    assert result.score == 1
    assert "Book me Rome" in llm.requests[0].prompt and "Booked for June 3." in llm.requests[0].prompt


def test_role_adherence_needs_the_role_and_counts_replies_out_of_character(llm: FakeLLM) -> None:
    by_schema(llm, {"OutOfCharacterResponseVerdicts": {"verdicts": [{"index": 3, "reason": "rude"}]},
                    "RoleAdherenceScoreReason": {"reason": "one rude reply"}})
    case, output = conversation(("Hi", "Hello! How can I help?"), ("Rome?", "Figure it out yourself."))
    result = score(llm, "deepeval_role_adherence", case, output)
    assert result.score == 0.5
    assert result.justification["steps"]["out_of_character"][0]["ai_message"] == "Figure it out yourself. (turn #4)"
    no_role = score(llm, "deepeval_role_adherence", EvalCase(eval_id="chat", conversation=case.conversation), output)
    assert "'chatbot_role'" in no_role.error


def test_argument_correctness_with_no_tool_call_scores_one_without_a_call(llm: FakeLLM) -> None:
    result = score(llm, "deepeval_argument_correctness", rag_case(), answer())
    assert result.score == 1 and result.justification["reason"] == "No tool calls provided"
    assert llm.requests == []
    by_schema(llm, {"Verdicts": {"verdicts": [{"verdict": "no", "reason": "wrong city"}]},
                    "ArgumentCorrectnessScoreReason": {"reason": "wrong city"}})
    called = answer(tool_calls=[OutputToolCall(name="weather", args={"city": "Lyon"})])
    assert score(llm, "deepeval_argument_correctness", rag_case(), called).score == 0
    assert '"Lyon"' in llm.requests[0].prompt


def test_the_reply_reader_takes_what_deepeval_takes() -> None:
    assert trim_and_load_json('Sure: {"a": [1, 2,]} ok') == {"a": [1, 2]}
    assert trim_and_load_json('{"a": 1') == {"a": 1}
    with pytest.raises(ValueError, match="not valid JSON"):
        trim_and_load_json("no json here")


def test_deepeval_names_map_to_the_criteria_that_compute_them() -> None:
    assert criterion_for("Answer Relevancy") == criterion_for("AnswerRelevancyMetric") == "deepeval_answer_relevancy"
    assert criterion_for("Correctness [GEval]") == "deepeval_g_eval"
    assert criterion_for("Some Custom Metric") is None


def test_a_metric_collection_round_trips_in_deepevals_terms() -> None:
    collection = DeepEvalMetricCollection.model_validate({"name": "rag", "metrics": [
        {"metric": "FaithfulnessMetric", "threshold": 0.7, "penalize_ambiguous_claims": True, "async_mode": False},
        {"metric": "GEval", "name": "Correctness", "criteria": "Is it right?",
         "evaluation_params": ["LLMTestCaseParams.INPUT", "actual_output"]},
        {"metric": "Answer Relevancy", "model": "gpt-4.1"}]})
    config = collection_to_config(collection)
    assert config["criteria"]["deepeval_faithfulness"] == {
        "evaluator": "deepeval_faithfulness", "threshold": 0.7, "options": {"penalize_ambiguous_claims": True}}
    assert config["criteria"]["g_eval_correctness"]["options"]["evaluation_params"] == ["input", "actual_output"]
    assert config["criteria"]["deepeval_answer_relevancy"]["judge_model"] == "gpt-4.1"
    back, skipped = config_to_collection({**config, "criteria": {**config["criteria"], "trajectory_match": {}}},
                                         "rag")
    assert skipped == ["trajectory_match"]
    assert [m["metric"] for m in back["metrics"]] == ["FaithfulnessMetric", "GEval", "AnswerRelevancyMetric"]
    assert back["metrics"][0] == {"metric": "FaithfulnessMetric", "threshold": 0.7, "penalize_ambiguous_claims": True}
    with pytest.raises(CollectionError, match=r"metrics\[0\]\.metric"):
        collection_to_config(DeepEvalMetricCollection.model_validate({"metrics": [{"metric": "PIILeakageMetric"}]}))


def test_the_estimate_counts_each_metrics_calls() -> None:
    case = rag_case(retrieval=["a", "b", "c"])
    assert expected_calls("deepeval_answer_relevancy", case, {}) == 3
    assert expected_calls("deepeval_answer_relevancy", case, {"include_reason": False}) == 2
    assert expected_calls("deepeval_contextual_relevancy", case, {}) == 4
    assert expected_calls("llm_judge", case, {}) == 1
    assert call_cost("gpt-4o-mini-2024-07-18", {"prompt_tokens": 1_000_000, "completion_tokens": 0}) == 0.15
    assert call_cost("my-local-model", {"prompt_tokens": 10, "completion_tokens": 5}) is None
    assert call_cost("my-local-model", {"cost": 0.002}) == 0.002


def test_the_catalogue_offers_every_judged_metric_with_deepevals_defaults() -> None:
    entries = {e.criterion: e for e in judged_metric_catalogue()}
    assert len(entries) == 17
    faithfulness = entries["deepeval_faithfulness"]
    assert faithfulness.deepeval_class == "FaithfulnessMetric" and faithfulness.threshold == 0.5
    assert {p.name: p.default for p in faithfulness.parameters} == {
        "strict_mode": "false", "include_reason": "true", "truths_extraction_limit": "null",
        "penalize_ambiguous_claims": "false"}
    assert {p.name: p.default for p in entries["deepeval_g_eval"].parameters}["evaluation_params"] == "required"
    assert json.loads(entries["deepeval_g_eval"].snippet)["options"]["criteria"]
