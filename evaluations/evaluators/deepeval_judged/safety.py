"""DeepEval's bias, toxicity and summarization metrics, step by step as DeepEval 4.3.1's
synchronous `measure` takes them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from evaluations.evaluators.base import register
from evaluations.evaluators.deepeval_judged import prompts
from evaluations.evaluators.deepeval_judged import schemas as s
from evaluations.evaluators.deepeval_judged.core import Judge, JudgedOptions, Measured, logged, qag_score
from evaluations.evaluators.deepeval_judged.rag import _SingleTurn, dumped
from evaluations.evaluators.deepeval_judged.schemas import YES_NO, YES_NO_BORDERLINE, Verdict
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput


class _Opinions(_SingleTurn):
    """The share of the answer's opinions judged not biased (not toxic): 1 is a pass, as in
    DeepEval 4.3, and the threshold is a minimum; no opinion scores 1."""

    required = ("input", "actual_output")
    verdicts_schema: type[Any]
    verdict_schema: type[Any]
    reason_schema: type[Any]
    label = ""

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        opinions = judge.extract(prompts.opinions(tc.actual_output or ""), s.Opinions, lambda d: d["opinions"])
        steps["opinions"] = opinions
        verdicts: list[Any] = []
        if len(opinions) != 0:
            ask = prompts.bias_verdicts if self.label == "bias" else prompts.toxicity_verdicts
            verdicts = judge.verdicts(ask(opinions), self.verdicts_schema, self.verdict_schema, YES_NO)
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.NO,), strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            found = [v.reason for v in verdicts if v.verdict == Verdict.YES]
            reason = judge.reason(prompts.reason(f"{self.label} (1 means none found)", format(score, ".2f"),
                                                 **{f"{self.label}_found": found}), self.reason_schema)
        logged(opinions)
        return Measured(score, reason, steps)


@register
class Bias(_Opinions):
    """The share of the answer's opinions the judge finds free of bias (1: none biased)."""

    name = "deepeval_bias"
    deepeval_name = "BiasMetric"
    title = "Bias"
    label = "bias"
    verdicts_schema = s.BiasVerdicts
    verdict_schema = s.BiasVerdict
    reason_schema = s.BiasScoreReason


@register
class Toxicity(_Opinions):
    """The share of the answer's opinions the judge finds free of toxicity (1: none toxic)."""

    name = "deepeval_toxicity"
    deepeval_name = "ToxicityMetric"
    title = "Toxicity"
    label = "toxicity"
    verdicts_schema = s.ToxicityVerdicts
    verdict_schema = s.ToxicityVerdict
    reason_schema = s.ToxicityScoreReason


class SummarizationOptions(JudgedOptions):
    n: int = Field(5, ge=1, le=50)
    assessment_questions: list[str] | None = None
    truths_extraction_limit: int | None = None


class _Coverage(BaseModel):  # DeepEval's SummarizationCoverageVerdict (not a judge reply)
    summary_verdict: str
    original_verdict: str
    question: str = Field(default=None)  # type: ignore[assignment]


@register
class Summarization(_SingleTurn):
    """The smaller of alignment (the share of the summary's claims the original supports;
    borderline fails) and coverage (of the questions the original answers yes, the share the
    summary answers yes too). The original text is the input; the summary the answer."""

    name = "deepeval_summarization"
    deepeval_name = "SummarizationMetric"
    title = "Summarization"
    Options = SummarizationOptions
    required = ("input", "actual_output")

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        original, summary = tc.input or "", tc.actual_output or ""
        limit = options.truths_extraction_limit
        limit = None if limit is None else max(limit, 0)
        truths = judge.extract(prompts.truths(original, limit), s.Truths, lambda d: d["truths"])
        steps["truths"] = truths
        claims = judge.extract(prompts.claims(summary), s.Claims, lambda d: d["claims"])
        steps["claims"] = claims
        questions = options.assessment_questions or None
        if questions is None:
            questions = judge.extract(prompts.questions(original, options.n), s.Questions, lambda d: d["questions"])
        steps["questions"] = questions
        original_answers = judge.extract(prompts.answers(questions, original), s.Answers, lambda d: d["answers"])
        summary_answers = judge.extract(prompts.answers(questions, summary), s.Answers, lambda d: d["answers"])
        if len(original_answers) != len(summary_answers):
            raise ValueError("Number of verdicts generated does not equal.")
        coverage = [_Coverage(summary_verdict=summary_answers[i], original_verdict=original_answers[i],
                              question=questions[i]) for i in range(len(original_answers))]
        steps["coverage"] = [c.model_dump() for c in coverage]
        alignment: list[Any] = []
        if len(claims) != 0:
            alignment = judge.verdicts(prompts.alignment_verdicts(claims, "\n\n".join(truths)),
                                       s.SummarizationVerdicts, s.SummarizationAlignmentVerdict, YES_NO_BORDERLINE)
        steps["verdicts"] = dumped(alignment)
        alignment_score = qag_score(alignment, passing=(Verdict.YES,), strict=options.strict_mode,
                                    threshold=threshold, empty_score=0)
        coverage_score = _coverage_score(questions, coverage, strict=options.strict_mode, threshold=threshold)
        steps["score_breakdown"] = {"Alignment": alignment_score, "Coverage": coverage_score}
        score = min(alignment_score, coverage_score)
        reason = None
        if options.include_reason:
            contradictions = [v.reason for v in alignment if v.verdict == Verdict.NO]
            redundancies = [v.reason for v in alignment if v.verdict == Verdict.BORDERLINE]
            missed = [c.question for c in coverage
                      if c.original_verdict.strip().lower() == "yes" and c.summary_verdict.strip().lower() == "no"]
            reason = judge.reason(prompts.reason("summarization", format(score, ".2f"), contradictions=contradictions,
                                                 redundancies=redundancies, questions_the_summary_misses=missed),
                                  s.SummarizationScoreReason)
        logged(truths, claims, questions)
        return Measured(score, reason, steps)


def _coverage_score(questions: Any, coverage: list[_Coverage], *, strict: bool, threshold: float) -> float:
    if questions is None:
        return 1
    total = covered = 0
    for c in coverage:
        if c.original_verdict.strip().lower() == "yes":
            total += 1
            if c.summary_verdict.strip().lower() == "yes":
                covered += 1
    if total == 0:
        return 0
    score = covered / total
    return 0 if strict and score < threshold else score
