"""ADK's `response_match_score`: ROUGE-1 F-measure of each actual final response against the
expected one, averaged over the invocations (google/adk-python,
`evaluation/final_response_match_v1.py`, `RougeEvaluator`).

As ADK computes it:

- the text of a response is its text parts joined by newlines; a missing expected or actual
  response is the empty string, which scores 0 (rouge-score gives 0 when either side has no
  tokens), so an invocation whose expected response is only a tool call still counts, as 0;
- `rouge_score.rouge_scorer.RougeScorer(["rouge1"], use_stemmer=...)` with
  `scorer.score(reference=expected, prediction=actual)`; the Porter stemmer is used only when
  both texts are mostly Latin script (ADK's `_is_latin_script`), which for Latin text is
  `use_stemmer=True`;
- invocations are paired with actual turns and only the pairs are scored (ADK zips the two
  lists): an invocation without an actual turn is left out of the average and listed in the
  justification; with no pairs at all the metric is not evaluated (score None);
- each invocation passes when its score is at or above the threshold, and so does the mean.

`response_match` is the same metric under AgentFlow's criterion name.
"""

from __future__ import annotations

import functools
import unicodedata

from nltk.stem import porter
from rouge_score import rouge_scorer, tokenize, tokenizers

from evaluations.evaluators.base import Evaluator, Level, ScoreResult, aligned_turns, register, text_of
from evaluations.evaluators.output import actual_value
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput


class _CachingTokenizer(tokenizers.Tokenizer):
    """rouge-score's own tokenisation and Porter stemming, with the stems memoised: nltk's
    stemmer costs about 60 us a word, and eval sets repeat their words all the time (it was
    80% of a 10,000-case run's scoring time). The scores are the same to the bit."""

    def __init__(self, use_stemmer: bool) -> None:
        self._stemmer = _CachedStemmer() if use_stemmer else None

    @functools.lru_cache(maxsize=20_000)  # noqa: B019 - two module-level instances, kept for good
    def tokenize(self, text: str) -> list[str]:
        return tokenize.tokenize(text, self._stemmer)


class _CachedStemmer:
    def __init__(self) -> None:
        self.stem = functools.lru_cache(maxsize=200_000)(porter.PorterStemmer().stem)


_SCORERS = {
    True: rouge_scorer.RougeScorer(["rouge1"], tokenizer=_CachingTokenizer(use_stemmer=True)),
    False: rouge_scorer.RougeScorer(["rouge1"], tokenizer=_CachingTokenizer(use_stemmer=False)),
}


def is_latin_script(text: str) -> bool:
    """ADK's test: more than half of the letters are Latin (no letters: Latin)."""
    if text.isascii():
        return True  # ASCII letters are all Latin
    letters = latin = 0
    for char in text:
        if unicodedata.category(char).startswith("L"):
            letters += 1
            if "LATIN" in unicodedata.name(char, ""):
                latin += 1
    return letters == 0 or latin / letters > 0.5


def rouge_1(candidate: str, reference: str) -> tuple[float, float, float]:
    """(precision, recall, f-measure) of ROUGE-1, as ADK's `_calculate_rouge_1_scores`."""
    use_stemmer = is_latin_script(candidate) and is_latin_script(reference)
    score = _SCORERS[use_stemmer].score(reference, candidate)["rouge1"]
    return score.precision, score.recall, score.fmeasure


@register
class ResponseMatchScoreEvaluator(Evaluator):
    name = "response_match_score"
    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        threshold = self.threshold(config)
        turns: list[ScoreResult] = []
        unanswered: list[str] = []
        for index, (invocation, turn) in enumerate(aligned_turns(case, output)):
            if turn is None:
                unanswered.append(invocation.invocation_id)
                continue
            reference = invocation.expected_final_response.get_text() if invocation.expected_final_response else ""
            candidate = text_of(actual_value(turn.final_response))
            precision, recall, fmeasure = rouge_1(candidate, reference)
            turns.append(ScoreResult(
                criterion=criterion, score=fmeasure, passed=threshold.passes(fmeasure),
                applies_to=Level.INTERACTION, turn_index=index, raw_value=fmeasure, threshold=threshold,
                justification={"expected": reference, "actual": candidate, "precision": precision,
                               "recall": recall, "fmeasure": fmeasure},
            ))
        summary: dict[str, object] = {"invocations_scored": len(turns), "unanswered_invocations": unanswered}
        if not turns:
            return [ScoreResult(criterion=criterion, score=None, passed=None, threshold=threshold,
                                justification={**summary, "status": "NOT_EVALUATED"})]
        mean = sum(r.score or 0.0 for r in turns) / len(turns)
        overall = ScoreResult(criterion=criterion, score=mean, passed=threshold.passes(mean), raw_value=mean,
                              threshold=threshold, justification=summary)
        return [*turns, overall]


@register
class ResponseMatchEvaluator(ResponseMatchScoreEvaluator):
    name = "response_match"
