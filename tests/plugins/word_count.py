"""A custom evaluator, the worked example of docs/evaluators.md: plugged in through EVALSITE_EVALUATORS."""

from __future__ import annotations

from pydantic import BaseModel

from evaluations.evaluators import Evaluator, Level, ScoreResult, aligned_turns, text_of
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput


class WordCountOptions(BaseModel):
    max_words: int = 50


class WordCount(Evaluator):
    """Passes a turn when the final response has at most `max_words` words."""

    name = "word_count"
    group = "output"
    Options = WordCountOptions
    threshold_direction = "upper"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        options = self.options(config)
        results = []
        for index, (_, turn) in enumerate(aligned_turns(case, output)):
            words = len(text_of(turn.final_response if turn else "").split())
            results.append(ScoreResult(criterion=criterion, score=None, raw_value=words,
                                       passed=words <= options.max_words, applies_to=Level.INTERACTION,
                                       turn_index=index, justification={"words": words,
                                                                        "max_words": options.max_words}))
        passed = all(r.passed for r in results)
        return [*results, ScoreResult(criterion=criterion, score=1.0 if passed else 0.0, passed=passed,
                                      justification={"turns": len(results)})]
