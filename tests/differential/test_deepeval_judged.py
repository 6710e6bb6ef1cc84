"""Differential tests of evalsite's `deepeval_*` judged criteria against DeepEval 4.3.1's own
metrics, given the same judge replies.

For each metric, hypothesis draws a test case (text in several scripts, empty answers, missing
contexts, tool calls, conversations) and, for every structured reply the metric may ask for,
the judge's answers: verdicts in and out of the vocabulary (`yes`, `No, it is off`, `idk`,
`maybe`), missing and null reasons, empty and malformed lists, JSON wrapped in prose, with a
trailing comma or without its closing brace. DeepEval's metric is measured with a scripted
`DeepEvalBaseLLM` (tests/differential/bridge.py, in DeepEval's own venv) and evalsite's
criterion with a scripted OpenAI-compatible server on 127.0.0.1 (tests/llm_server.py), both
answering from the same per-schema queues. Asserted, bit for bit: the score, pass/fail, the
reason, the intermediate steps (statements, truths, claims, opinions, verdicts...), the
sequence of structured replies asked for, and each one's JSON schema (which evalsite sends
as `response_format`). Where DeepEval raises, evalsite records an error instead of a score.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.base import ScoreResult
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MessageContent
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from tests.differential.test_differential import REPO, Bridge, _interpreter, texts
from tests.llm_server import Behaviour, FakeLLM

# A third of the suite's examples per metric: 18 tests of several judge calls each.
EXAMPLES = int(os.environ.get("EVALSITE_DIFFERENTIAL_EXAMPLES", "300")) // 3 or 1
SETTINGS = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def deepeval() -> Iterator[Bridge]:
    bridge = Bridge(_interpreter("EVALSITE_DIFFERENTIAL_PYTHON", REPO / ".differential/py311/bin/python",
                                 "deepeval"))
    yield bridge
    bridge.close()


@pytest.fixture(scope="module")
def judge() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


# --- Judge replies --------------------------------------------------------------------------------

short = st.sampled_from(["Paris is sunny.", "Zürich", "東京の天気は晴れです。", "", "It rains 2 days.", "😀 ok",
                         "Погода хорошая", "x"]) | texts
def mostly(usual: st.SearchStrategy[Any], edge: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`usual` nine times in ten, `edge` the tenth: so that most examples get as far as a score."""
    return st.integers(0, 9).flatmap(lambda i: edge if i == 0 else usual)


VERDICTS = ["yes", "no", "borderline", "idk", "No, it is off-topic", "YES", " yes.", "maybe", "", "Borderline"]


@st.composite
def decorated(draw: Any, value: Any) -> str:
    """The reply's text: plain JSON, or as a chatty model writes it."""
    text = json.dumps(value, ensure_ascii=draw(st.booleans()))
    style = draw(st.sampled_from(["plain"] * 8 + ["prose", "fence", "comma", "unclosed"]))
    if style == "prose":
        return f"Sure! Here it is: {text} Hope that helps."
    if style == "fence":
        return f"```json\n{text}\n```"
    if style == "comma" and text.endswith("]}"):
        return text[:-2] + ",]}"
    if style == "unclosed":
        return text[:-1]
    return text


def listing(key: str) -> st.SearchStrategy[Any]:
    items = st.lists(short, max_size=4)
    return mostly(st.fixed_dictionaries({key: items}), st.fixed_dictionaries({key: st.none() | short}) | st.just({}))


def verdict_item(reason_required: bool = False, statement: bool = False) -> st.SearchStrategy[Any]:
    required: dict[str, Any] = {"verdict": st.sampled_from(VERDICTS)}
    optional: dict[str, Any] = {"reason": st.none() | short}
    if reason_required:
        required["reason"] = short
        optional = {}
    if statement:
        required["statement"] = short
    return st.fixed_dictionaries(required, optional=optional)


def verdict_list(**kwargs: Any) -> st.SearchStrategy[Any]:
    return mostly(st.fixed_dictionaries({"verdicts": st.lists(verdict_item(**kwargs), max_size=5)}),
                  st.just({"verdicts": None}) | st.just({}))


reason = mostly(st.fixed_dictionaries({"reason": short}), st.just({"reason": None}) | st.just({}))
number = st.sampled_from([0, 1, 0.5, 0.25, 0.75, 1.0, 0.0]) | st.floats(0, 1)
scored = st.fixed_dictionaries({"score": number, "reason": short})


def queue(value: st.SearchStrategy[Any], size: int = 3) -> st.SearchStrategy[list[str]]:
    return st.lists(value.flatmap(decorated), min_size=1, max_size=size)


# --- Test cases ------------------------------------------------------------------------------------

tool = st.fixed_dictionaries({"name": st.sampled_from(["search", "weather", "book"]),
                              "input_parameters": st.dictionaries(st.sampled_from(["q", "city"]), short, max_size=2)})


def maybe(value: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.integers(0, 4).flatmap(lambda i: st.none() if i == 0 else value)


@st.composite
def single_turn_case(draw: Any) -> dict[str, Any]:
    return {"input": draw(short), "actual_output": draw(mostly(short.filter(bool), st.just(""))),
            "expected_output": draw(maybe(short)), "context": draw(maybe(st.lists(short, max_size=3))),
            "retrieval_context": draw(maybe(st.lists(short, max_size=3))),
            "tools_called": draw(st.lists(tool, max_size=3))}


def evalsite_single(fields: dict[str, Any]) -> tuple[EvalCase, AgentOutput]:
    metadata = {k: fields[k] for k in ("context", "retrieval_context") if fields.get(k) is not None}
    expected = fields.get("expected_output")
    case = EvalCase(eval_id="c", metadata=metadata, conversation=[Invocation(
        invocation_id="t1", user_content=MessageContent(role="user", content=fields["input"]),
        expected_final_response=None if expected is None else MessageContent(role="model", content=expected))])
    calls = [OutputToolCall(name=t["name"], args=t["input_parameters"]) for t in fields.get("tools_called") or []]
    output = AgentOutput(eval_id="c", turns=[TurnOutput(final_response=fields["actual_output"], tool_calls=calls)])
    return case, output


@st.composite
def conversation(draw: Any) -> list[dict[str, Any]]:
    pairs = draw(mostly(st.lists(st.tuples(short, short, st.lists(tool, max_size=2)), min_size=1, max_size=4),
                        st.just([])))
    turns: list[dict[str, Any]] = []
    for user, answer, tools in pairs:
        turns.append({"role": "user", "content": user})
        turns.append({"role": "assistant", "content": answer, "tools_called": tools or None})
    return turns


def evalsite_conversation(turns: list[dict[str, Any]], metadata: dict[str, Any]) -> tuple[EvalCase, AgentOutput]:
    users = [t for t in turns if t["role"] == "user"]
    answers = [t for t in turns if t["role"] == "assistant"]
    case = EvalCase(eval_id="c", metadata=metadata, conversation=[
        Invocation(invocation_id=f"t{i}", user_content=MessageContent(role="user", content=u["content"]))
        for i, u in enumerate(users)])
    output = AgentOutput(eval_id="c", turns=[TurnOutput(
        invocation_id=f"t{i}", final_response=a["content"],
        tool_calls=[OutputToolCall(name=t["name"], args=t["input_parameters"]) for t in a.get("tools_called") or []])
        for i, a in enumerate(answers)])
    return case, output


# --- Running both ----------------------------------------------------------------------------------


def ours(judge: FakeLLM, criterion: str, case: EvalCase, output: AgentOutput, threshold: float,
         options: dict[str, Any], replies: dict[str, list[str]]) -> tuple[ScoreResult, list[dict[str, Any]]]:
    queues = {k: list(v) for k, v in replies.items()}
    asked: list[dict[str, Any]] = []

    def respond(body: dict[str, Any]) -> Behaviour:
        form = body["response_format"]["json_schema"]
        asked.append({"schema": form["name"], "json_schema": form["schema"]})
        waiting = queues.get(form["name"]) or ["{}"]
        return Behaviour(content=waiting.pop(0) if len(waiting) > 1 else waiting[0])

    judge.responder = respond
    evaluator = get_evaluator_class(criterion)(judge.client(max_retries=0))  # type: ignore[call-arg]
    [result] = evaluator.score(case, output, CriterionConfig(threshold=threshold, options=options), criterion)
    return result, asked


def compare(deepeval: Bridge, judge: FakeLLM, *, metric: str, criterion: str, case: EvalCase, output: AgentOutput,
            threshold: float, options: dict[str, Any], kwargs: dict[str, Any], replies: dict[str, list[str]],
            request: dict[str, Any], steps: Any) -> None:
    theirs = deepeval("deepeval_judged", metric=metric, kwargs={"threshold": threshold, **kwargs},
                      replies=replies, **request)
    result, asked = ours(judge, criterion, case, output, threshold, options, replies)
    context = {"metric": metric, "request": request, "kwargs": kwargs, "replies": replies}
    if "raises" in theirs or "raised" in theirs.get("score", {}):
        why = theirs.get("raises") or theirs["score"]["raised"]
        event(f"{metric}: DeepEval raised")
        assert result.score is None and result.error, (context, why, result)
        calls = theirs.get("score", {}).get("calls")
        if calls is not None and "cannot be" not in why:
            assert [c["schema"] for c in calls] == [a["schema"] for a in asked], (context, why)
        return
    got = theirs["score"]
    event(f"{metric}: both scored")
    assert result.error == "", (context, got, result.error)
    assert result.score is not None
    assert float(got["score"]) == result.score and repr(float(got["score"])) == repr(result.score), (context, got,
                                                                                                      result)
    assert result.passed is got["success"], (context, got, result)
    if result.justification.get("reason") is not None or metric not in ("GEval", "TaskCompletionMetric",
                                                                         "ToolUseMetric"):
        assert result.justification.get("reason") == got["reason"], (context, got, result)
    assert [c["schema"] for c in got["calls"]] == [a["schema"] for a in asked], (context, got, asked)
    assert [c["json_schema"] for c in got["calls"]] == [a["json_schema"] for a in asked], context
    assert result.justification["calls"] == [a["schema"] for a in asked]
    mine, theirs_steps = steps(result.justification["steps"], got["steps"])
    assert mine == theirs_steps, (context, mine, theirs_steps)


thresholds = st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0])


@st.composite
def common(draw: Any, reasons: bool = True) -> tuple[float, dict[str, Any]]:
    options: dict[str, Any] = {"strict_mode": draw(st.booleans())}
    if reasons:
        options["include_reason"] = draw(st.booleans())
    return draw(thresholds), options


def same_keys(*pairs: tuple[str, str]) -> Any:
    def pick(mine: dict[str, Any], theirs: dict[str, Any]) -> tuple[Any, Any]:
        return [mine.get(a) for a, _ in pairs], [theirs.get(b) for _, b in pairs]
    return pick


SINGLE_TURN = {
    "AnswerRelevancyMetric": ("deepeval_answer_relevancy", lambda: {
        "Statements": queue(listing("statements")), "Verdicts": queue(verdict_list()), "AnswerRelevancyScoreReason":
        queue(reason)}, same_keys(("statements", "statements"), ("verdicts", "verdicts"))),
    "FaithfulnessMetric": ("deepeval_faithfulness", lambda: {
        "Truths": queue(listing("truths")), "Claims": queue(listing("claims")), "Verdicts": queue(verdict_list()),
        "FaithfulnessScoreReason": queue(reason)},
        same_keys(("truths", "truths"), ("claims", "claims"), ("verdicts", "verdicts"))),
    "ContextualPrecisionMetric": ("deepeval_contextual_precision", lambda: {
        "Verdicts": queue(verdict_list() | verdict_list(reason_required=True)),
        "ContextualPrecisionScoreReason": queue(reason)}, same_keys(("verdicts", "verdicts"))),
    "ContextualRecallMetric": ("deepeval_contextual_recall", lambda: {
        "Verdicts": queue(verdict_list(reason_required=True) | verdict_list()),
        "ContextualRecallScoreReason": queue(reason)},
        lambda m, t: (m["verdicts"], [{"verdict": v["verdict"], "reason": v["reason"]} for v in t["verdicts"]])),
    "ContextualRelevancyMetric": ("deepeval_contextual_relevancy", lambda: {
        "ContextualRelevancyVerdicts": queue(verdict_list(statement=True) | verdict_list(), 4),
        "ContextualRelevancyScoreReason": queue(reason)},
        lambda m, t: (m["verdicts"], [v["verdicts"] for v in t["verdicts_list"]])),
    "HallucinationMetric": ("deepeval_hallucination", lambda: {
        "Verdicts": queue(verdict_list(reason_required=True) | verdict_list()),
        "HallucinationScoreReason": queue(reason)}, same_keys(("verdicts", "verdicts"))),
    "BiasMetric": ("deepeval_bias", lambda: {
        "Opinions": queue(listing("opinions")), "Verdicts": queue(verdict_list()), "BiasScoreReason": queue(reason)},
        same_keys(("opinions", "opinions"), ("verdicts", "verdicts"))),
    "ToxicityMetric": ("deepeval_toxicity", lambda: {
        "Opinions": queue(listing("opinions")), "Verdicts": queue(verdict_list()),
        "ToxicityScoreReason": queue(reason)}, same_keys(("opinions", "opinions"), ("verdicts", "verdicts"))),
    "ArgumentCorrectnessMetric": ("deepeval_argument_correctness", lambda: {
        "Verdicts": queue(verdict_list()), "ArgumentCorrectnessScoreReason": queue(reason)},
        same_keys(("verdicts", "verdicts"))),
}


@pytest.mark.parametrize("metric", sorted(SINGLE_TURN))
def test_single_turn_metrics_score_as_deepeval_does_given_the_same_replies(deepeval: Bridge, judge: FakeLLM,
                                                                           metric: str) -> None:
    criterion, schemas, steps = SINGLE_TURN[metric]

    @SETTINGS
    @given(fields=single_turn_case(), setup=common(), replies=st.fixed_dictionaries(schemas()))
    def check(fields: dict[str, Any], setup: tuple[float, dict[str, Any]], replies: dict[str, list[str]]) -> None:
        threshold, options = setup
        case, output = evalsite_single(fields)
        request_case = {k: v for k, v in fields.items() if v is not None}
        compare(deepeval, judge, metric=metric, criterion=criterion, case=case, output=output, threshold=threshold,
                options=options, kwargs=options, replies=replies, request={"test_case": request_case}, steps=steps)

    check()


@SETTINGS
@given(fields=single_turn_case(), setup=common(), limit=st.none() | st.integers(-1, 3),
       questions=st.none() | st.just([]) | st.lists(short, min_size=1, max_size=3), n=st.integers(1, 4),
       replies=st.fixed_dictionaries({
           "Truths": queue(listing("truths")), "Claims": queue(listing("claims")),
           "Questions": queue(listing("questions")), "Answers": queue(listing("answers") | st.fixed_dictionaries(
               {"answers": st.lists(st.sampled_from(["yes", "no", "idk", " Yes ", "NO"]), max_size=4)}), 2),
           "Verdicts": queue(verdict_list()), "SummarizationScoreReason": queue(reason)}))
def test_summarization_scores_as_deepeval_does_given_the_same_replies(
        deepeval: Bridge, judge: FakeLLM, fields: dict[str, Any], setup: tuple[float, dict[str, Any]],
        limit: int | None, questions: list[str] | None, n: int, replies: dict[str, list[str]]) -> None:
    threshold, options = setup
    options = {**options, "n": n, "truths_extraction_limit": limit, "assessment_questions": questions}
    case, output = evalsite_single(fields)
    compare(deepeval, judge, metric="SummarizationMetric", criterion="deepeval_summarization", case=case,
            output=output, threshold=threshold, options=options, kwargs=options, replies=replies,
            request={"test_case": {"input": fields["input"], "actual_output": fields["actual_output"]}},
            steps=same_keys(("truths", "truths"), ("claims", "claims"), ("verdicts", "alignment_verdicts"),
                            ("score_breakdown", "score_breakdown"), ("coverage", "coverage_verdicts"),
                            ("questions", "assessment_questions")))


@SETTINGS
@given(fields=single_turn_case(), setup=common(), penalize=st.booleans(), limit=st.none() | st.integers(-1, 3),
       replies=st.fixed_dictionaries({"Truths": queue(listing("truths")), "Claims": queue(listing("claims")),
                                      "Verdicts": queue(verdict_list()), "FaithfulnessScoreReason": queue(reason)}))
def test_faithfulness_options_score_as_deepeval_does(deepeval: Bridge, judge: FakeLLM, fields: dict[str, Any],
                                                     setup: tuple[float, dict[str, Any]], penalize: bool,
                                                     limit: int | None, replies: dict[str, list[str]]) -> None:
    threshold, options = setup
    options = {**options, "penalize_ambiguous_claims": penalize, "truths_extraction_limit": limit}
    case, output = evalsite_single(fields)
    compare(deepeval, judge, metric="FaithfulnessMetric", criterion="deepeval_faithfulness", case=case, output=output,
            threshold=threshold, options=options, kwargs=options, replies=replies,
            request={"test_case": {k: v for k, v in fields.items() if v is not None}},
            steps=same_keys(("truths", "truths"), ("claims", "claims"), ("verdicts", "verdicts")))


RUBRICS = [None, [{"score_range": [0, 3], "expected_outcome": "wrong"}, {"score_range": [4, 7], "expected_outcome":
           "partly"}, {"score_range": [8, 10], "expected_outcome": "right"}],
           [{"score_range": [2, 5], "expected_outcome": "fair"}, {"score_range": [1, 1], "expected_outcome": "bad"}],
           [{"score_range": [5, 5], "expected_outcome": "only five"}]]


@SETTINGS
@given(fields=single_turn_case(), threshold=thresholds, strict=st.booleans(),
       how=st.sampled_from(["criteria", "steps", "both"]), rubric=st.sampled_from(RUBRICS),
       params=st.lists(st.sampled_from(["input", "actual_output", "expected_output", "context", "retrieval_context"]),
                       min_size=1, max_size=3, unique=True),
       replies=st.fixed_dictionaries({"Steps": queue(listing("steps")), "ReasonScore": queue(
           st.fixed_dictionaries({"score": st.integers(-1, 11) | st.floats(0, 10) | st.sampled_from(["7", "1", "x"]),
                                  "reason": short}) | st.fixed_dictionaries({"score": st.integers(0, 10)}))}))
def test_g_eval_scores_as_deepeval_does_without_log_probabilities(
        deepeval: Bridge, judge: FakeLLM, fields: dict[str, Any], threshold: float, strict: bool, how: str,
        rubric: list[dict[str, Any]] | None, params: list[str], replies: dict[str, list[str]]) -> None:
    kwargs: dict[str, Any] = {"name": "Correctness", "evaluation_params": params, "strict_mode": strict,
                              "rubric": rubric}
    if how in ("criteria", "both"):
        kwargs["criteria"] = "Is the answer correct and complete?"
    if how in ("steps", "both"):
        kwargs["evaluation_steps"] = ["Check the facts.", "Check nothing is missing."]
    case, output = evalsite_single(fields)
    compare(deepeval, judge, metric="GEval", criterion="deepeval_g_eval", case=case, output=output,
            threshold=threshold, options=kwargs, kwargs=kwargs, replies=replies,
            request={"test_case": {k: v for k, v in fields.items() if v is not None}},
            steps=same_keys(("evaluation_steps", "evaluation_steps")))


@SETTINGS
@given(fields=single_turn_case(), setup=common(reasons=False), task=st.none() | short,
       replies=st.fixed_dictionaries({
           "TaskAndOutcome": queue(mostly(st.fixed_dictionaries({"task": short, "outcome": short}),
                                          st.just({"task": "t"}))),
           "TaskCompletionVerdict": queue(st.fixed_dictionaries({"verdict": number, "reason": short}))}))
def test_task_completion_scores_as_deepeval_does(deepeval: Bridge, judge: FakeLLM, fields: dict[str, Any],
                                                 setup: tuple[float, dict[str, Any]], task: str | None,
                                                 replies: dict[str, list[str]]) -> None:
    threshold, options = setup
    options = {**options, "task": task}
    case, output = evalsite_single(fields)
    compare(deepeval, judge, metric="TaskCompletionMetric", criterion="deepeval_task_completion", case=case,
            output=output, threshold=threshold, options=options, kwargs=options, replies=replies,
            request={"test_case": {k: v for k, v in fields.items() if v is not None}},
            steps=same_keys(("task", "task"), ("outcome", "outcome"), ("verdict", "verdict")))


# --- Conversational --------------------------------------------------------------------------------

single_verdict = st.fixed_dictionaries({"verdict": st.sampled_from(VERDICTS)}, optional={"reason": st.none() | short})
knowledge = mostly(st.fixed_dictionaries({"data": st.dictionaries(st.sampled_from(["name", "city", "dates"]),
                                                                      short | st.lists(short, max_size=2),
                                                                      max_size=2)}) | st.just({"data": None}),
                   st.just({}) | st.just({"data": {"a": "b"}, "extra": 1}))
CONVERSATIONAL = {
    "TurnRelevancyMetric": ("deepeval_turn_relevancy", lambda: {
        "TurnRelevancyVerdict": queue(single_verdict, 4), "TurnRelevancyScoreReason": queue(reason)},
        same_keys(("verdicts", "verdicts"))),
    "KnowledgeRetentionMetric": ("deepeval_knowledge_retention", lambda: {
        "Knowledge": queue(knowledge, 4), "KnowledgeRetentionVerdict": queue(single_verdict, 4),
        "KnowledgeRetentionScoreReason": queue(reason)},
        lambda m, t: ([m["verdicts"], m["knowledge"]],
                      [t["verdicts"], [k["data"] if k is not None else None for k in t["knowledges"]]])),
    "ConversationCompletenessMetric": ("deepeval_conversation_completeness", lambda: {
        "UserIntentions": queue(listing("intentions")), "ConversationCompletenessVerdict": queue(single_verdict, 4),
        "ConversationCompletenessScoreReason": queue(reason)},
        same_keys(("intentions", "user_intentions"), ("verdicts", "verdicts"))),
}


@pytest.mark.parametrize("metric", sorted(CONVERSATIONAL))
def test_conversational_metrics_score_as_deepeval_does_given_the_same_replies(deepeval: Bridge, judge: FakeLLM,
                                                                              metric: str) -> None:
    criterion, schemas, steps = CONVERSATIONAL[metric]

    @SETTINGS
    @given(turns=conversation(), setup=common(), replies=st.fixed_dictionaries(schemas()))
    def check(turns: list[dict[str, Any]], setup: tuple[float, dict[str, Any]], replies: dict[str, list[str]]) -> None:
        threshold, options = setup
        case, output = evalsite_conversation(turns, {})
        compare(deepeval, judge, metric=metric, criterion=criterion, case=case, output=output, threshold=threshold,
                options=options, kwargs=options, replies=replies, request={"turns": turns}, steps=steps)

    check()


@SETTINGS
@given(turns=conversation(), setup=common(), role=mostly(short.filter(bool), st.none()), replies=st.fixed_dictionaries({
    "OutOfCharacterResponseVerdicts": queue(mostly(st.fixed_dictionaries({"verdicts": st.lists(
        st.fixed_dictionaries({"index": st.integers(-3, 8), "reason": short}), max_size=4)}), st.just({}))),
    "RoleAdherenceScoreReason": queue(reason)}))
def test_role_adherence_scores_as_deepeval_does(deepeval: Bridge, judge: FakeLLM, turns: list[dict[str, Any]],
                                                setup: tuple[float, dict[str, Any]], role: str | None,
                                                replies: dict[str, list[str]]) -> None:
    threshold, options = setup
    case, output = evalsite_conversation(turns, {"chatbot_role": role} if role is not None else {})
    compare(deepeval, judge, metric="RoleAdherenceMetric", criterion="deepeval_role_adherence", case=case,
            output=output, threshold=threshold, options=options, kwargs=options, replies=replies,
            request={"turns": turns, "chatbot_role": role},
            steps=lambda m, t: (m["out_of_character"], t["out_of_character_verdicts"]["verdicts"]))


@SETTINGS
@given(turns=conversation(), setup=common(reasons=False), replies=st.fixed_dictionaries({
    "ToolSelectionScore": queue(mostly(scored, st.just({"score": 1})), 4),
    "ArgumentCorrectnessScore": queue(scored, 4), "Reason": queue(st.fixed_dictionaries({"reason": short}), 2)}))
def test_tool_use_scores_as_deepeval_does(deepeval: Bridge, judge: FakeLLM, turns: list[dict[str, Any]],
                                          setup: tuple[float, dict[str, Any]], replies: dict[str, list[str]]) -> None:
    threshold, options = setup
    tools = [{"name": "search", "description": "web search"}, {"name": "weather"}]
    case, output = evalsite_conversation(turns, {})
    compare(deepeval, judge, metric="ToolUseMetric", criterion="deepeval_tool_use", case=case, output=output,
            threshold=threshold, options={**options, "available_tools": tools},
            kwargs={**options, "available_tools": tools}, replies=replies, request={"turns": turns},
            steps=lambda m, t: (m, m))
