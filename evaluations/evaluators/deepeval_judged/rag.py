"""DeepEval's answer and retrieval metrics (RAG): answer relevancy, faithfulness, contextual
precision, recall and relevancy, hallucination. Each follows DeepEval 4.3.1's synchronous
`measure` step by step (see the package docstring for the scores)."""

from __future__ import annotations

from typing import Any

from evaluations.evaluators.base import register
from evaluations.evaluators.deepeval_judged import prompts
from evaluations.evaluators.deepeval_judged import schemas as s
from evaluations.evaluators.deepeval_judged.core import (
    Judge,
    JudgedMetric,
    JudgedOptions,
    Measured,
    TestCase,
    Unmeasurable,
    logged,
    missing,
    qag_score,
    single_turn,
)
from evaluations.evaluators.deepeval_judged.schemas import YES_NO, YES_NO_BORDERLINE, Verdict
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput


def dumped(verdicts: list[Any]) -> list[Any]:
    return [v.model_dump(mode="json") if v is not None else None for v in verdicts]


class _SingleTurn(JudgedMetric):
    required: tuple[str, ...] = ()

    def test_case(self, case: EvalCase, output: AgentOutput) -> TestCase:
        test_case = single_turn(case, output)
        why = missing(test_case, self.required, self.title)
        if why:
            raise Unmeasurable(why)
        return test_case


@register
class AnswerRelevancy(_SingleTurn):
    """The share of the answer's statements that address the input (borderline counts)."""

    name = "deepeval_answer_relevancy"
    deepeval_name = "AnswerRelevancyMetric"
    title = "Answer Relevancy"
    required = ("input", "actual_output")

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        statements = judge.extract(prompts.statements(tc.actual_output or ""), s.Statements,
                                   lambda d: d["statements"] + [])
        steps["statements"] = statements
        verdicts = [] if len(statements) == 0 else judge.verdicts(
            prompts.relevancy_verdicts(tc.input or "", statements), s.AnswerRelevancyVerdicts,
            s.AnswerRelevancyVerdict, YES_NO_BORDERLINE)
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.YES, Verdict.BORDERLINE), strict=options.strict_mode,
                          threshold=threshold)
        reason = None
        if options.include_reason:
            irrelevant = [v.reason for v in verdicts if v.verdict == Verdict.NO]
            reason = judge.reason(prompts.reason("answer relevancy", format(score, ".2f"), request=tc.input,
                                                 irrelevant_statements=irrelevant), s.AnswerRelevancyScoreReason)
        return Measured(score, reason, steps)


class FaithfulnessOptions(JudgedOptions):
    truths_extraction_limit: int | None = None
    penalize_ambiguous_claims: bool = False


@register
class Faithfulness(_SingleTurn):
    """The share of the answer's claims the retrieval context supports (borderline counts
    unless `penalize_ambiguous_claims`)."""

    name = "deepeval_faithfulness"
    deepeval_name = "FaithfulnessMetric"
    title = "Faithfulness"
    Options = FaithfulnessOptions
    required = ("input", "actual_output", "retrieval_context")

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        limit = options.truths_extraction_limit
        limit = None if limit is None else max(limit, 0)
        truths = judge.extract(prompts.truths("\n\n".join(tc.retrieval_context or []), limit), s.Truths,
                               lambda d: d["truths"])
        steps["truths"] = truths
        claims = judge.extract(prompts.claims(tc.actual_output or ""), s.Claims, lambda d: d["claims"])
        steps["claims"] = claims
        verdicts: list[Any] = []
        if len(claims) != 0:
            verdicts = judge.verdicts(prompts.faithfulness_verdicts(claims, "\n\n".join(truths)),
                                      s.FaithfulnessVerdicts, s.FaithfulnessVerdict, YES_NO_BORDERLINE)
        steps["verdicts"] = dumped(verdicts)
        passing = (Verdict.YES,) if options.penalize_ambiguous_claims else (Verdict.YES, Verdict.BORDERLINE)
        score = qag_score(verdicts, passing=passing, strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            contradictions = []
            for v in verdicts:
                if v.verdict == Verdict.NO:
                    contradictions.append(v.reason)
                if v.verdict == Verdict.BORDERLINE and options.penalize_ambiguous_claims:
                    contradictions.append(f"(Ambiguous) {v.reason}")
            reason = judge.reason(prompts.reason("faithfulness", format(score, ".2f"), contradictions=contradictions),
                                  s.FaithfulnessScoreReason)
        logged(truths, claims)
        return Measured(score, reason, steps)


@register
class ContextualPrecision(_SingleTurn):
    """Whether the useful retrieved documents rank above the others: the mean, over the useful
    ones, of the precision at their rank."""

    name = "deepeval_contextual_precision"
    deepeval_name = "ContextualPrecisionMetric"
    title = "Contextual Precision"
    required = ("input", "retrieval_context", "expected_output")
    reference_free = False

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        nodes = list(tc.retrieval_context or [])
        verdicts = judge.verdicts(prompts.precision_verdicts(tc.input or "", tc.expected_output or "", nodes),
                                  s.ContextualPrecisionVerdicts, s.ContextualPrecisionVerdict, YES_NO)
        steps["verdicts"] = dumped(verdicts)
        score = precision_score(verdicts, strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            reason = judge.reason(prompts.reason(
                "contextual precision", format(score, ".2f"), request=tc.input,
                verdicts=[{"verdict": str(v.verdict), "reason": v.reason} for v in verdicts]),
                s.ContextualPrecisionScoreReason)
        return Measured(score, reason, steps)


def precision_score(verdicts: list[Any], *, strict: bool, threshold: float) -> float:
    if len(verdicts) == 0:
        return 0
    relevant = [1 if v.verdict == Verdict.YES else 0 for v in verdicts]
    total, count = 0.0, 0
    for k, is_relevant in enumerate(relevant, start=1):
        if is_relevant:
            count += 1
            total += count / k * is_relevant
    if count == 0:
        return 0
    score = total / count
    return 0 if strict and score < threshold else score


@register
class ContextualRecall(_SingleTurn):
    """The share of the expected answer's sentences the retrieval context holds."""

    name = "deepeval_contextual_recall"
    deepeval_name = "ContextualRecallMetric"
    title = "Contextual Recall"
    required = ("input", "retrieval_context", "expected_output")
    reference_free = False

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        verdicts = judge.verdicts(prompts.recall_verdicts(tc.expected_output or "", list(tc.retrieval_context or [])),
                                  s.ContextualRecallVerdicts, s.ContextualRecallVerdict, YES_NO)
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.YES,), strict=options.strict_mode, threshold=threshold,
                          empty_score=0)
        reason = None
        if options.include_reason:
            supportive = [v.reason for v in verdicts if v.verdict == Verdict.YES]
            unsupportive = [v.reason for v in verdicts if v.verdict != Verdict.YES]
            reason = judge.reason(prompts.reason("contextual recall", format(score, ".2f"),
                                                 expected_answer=tc.expected_output, supported=supportive,
                                                 unsupported=unsupportive), s.ContextualRecallScoreReason)
        return Measured(score, reason, steps)


@register
class ContextualRelevancy(_SingleTurn):
    """The share of the retrieved statements relevant to the input; each retrieved document
    is judged in a call of its own."""

    name = "deepeval_contextual_relevancy"
    deepeval_name = "ContextualRelevancyMetric"
    title = "Contextual Relevancy"
    required = ("input", "retrieval_context")

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        chunks: list[list[Any]] = []
        steps["verdicts"] = per_chunk = []
        for chunk in tc.retrieval_context or []:
            verdicts = judge.verdicts(prompts.relevancy_of_context(tc.input or "", chunk),
                                      s.ContextualRelevancyVerdicts, s.ContextualRelevancyVerdict, YES_NO)
            chunks.append(verdicts)
            per_chunk.append(dumped(verdicts))
        flat = [v for verdicts in chunks for v in verdicts]
        score = qag_score(flat, passing=(Verdict.YES,), strict=options.strict_mode, threshold=threshold,
                          empty_score=0)
        reason = None
        if options.include_reason:
            irrelevant = [v.reason for v in flat if v.verdict == Verdict.NO]
            relevant = [v.statement for v in flat if v.verdict != Verdict.NO]
            reason = judge.reason(prompts.reason("contextual relevancy", format(score, ".2f"), request=tc.input,
                                                 irrelevant=irrelevant, relevant_statements=relevant),
                                  s.ContextualRelevancyScoreReason)
        return Measured(score, reason, steps)


@register
class Hallucination(_SingleTurn):
    """The share of the reference contexts the answer agrees with (1 is a pass, as in DeepEval
    4.3; the threshold is a minimum)."""

    name = "deepeval_hallucination"
    deepeval_name = "HallucinationMetric"
    title = "Hallucination"
    required = ("input", "actual_output", "context")
    reference_free = False

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        contexts = list(tc.context or [])
        verdicts = judge.verdicts(prompts.hallucination_verdicts(tc.actual_output or "", contexts),
                                  s.HallucinationVerdicts, s.HallucinationVerdict, YES_NO)
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.YES,), strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            agree = [v.reason for v in verdicts if v.verdict == Verdict.YES]
            contradict = [v.reason for v in verdicts if v.verdict != Verdict.YES]
            reason = judge.reason(prompts.reason("hallucination", format(score, ".2f"), agreements=agree,
                                                 contradictions=contradict), s.HallucinationScoreReason)
        return Measured(score, reason, steps)

