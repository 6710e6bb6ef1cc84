"""ADK's `response_match_score`: ROUGE-1 F-measure of each actual final response against the
expected one, averaged over the invocations (google/adk-python,
`evaluation/final_response_match_v1.py`, `RougeEvaluator`).

As ADK computes it:

- the text of a response is its text parts joined by newlines; a missing expected or actual
  response is the empty string, which scores 0 (rouge-score gives 0 when either side has no
  tokens), so an invocation whose expected response is only a tool call still counts, as 0;
- `rouge_score.rouge_scorer.RougeScorer(["rouge1"])` with ADK's Unicode-aware tokenizer
  (`UnicodeAwareTokenizer` below: NFKC, lower case, non-ASCII words and each CJK character
  kept as tokens, Porter stemming of ASCII words only) and
  `scorer.score(reference=expected, prediction=actual)`;
- invocations are paired with actual turns and only the pairs are scored (ADK zips the two
  lists): an invocation without an actual turn is left out of the average and listed in the
  justification; with no pairs at all the metric is not evaluated (score None);
- each invocation passes when its score is at or above the threshold, and so does the mean.

`response_match` is the same metric under AgentFlow's criterion name.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from typing import Any

from evaluations.evaluators.base import Evaluator, Level, ScoreResult, aligned_turns, register, text_of
from evaluations.evaluators.output import actual_value
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput


def _is_cjk(char: str) -> bool:
    """ADK's `_is_cjk`: CJK ideographs, hiragana, katakana, hangul syllables."""
    code = ord(char)
    return (0x4E00 <= code <= 0x9FFF or 0x3040 <= code <= 0x309F or 0x30A0 <= code <= 0x30FF
            or 0xAC00 <= code <= 0xD7AF)


def _is_non_spaced_script(char: str) -> bool:
    """ADK's `_is_non_spaced_script`: Thai, Lao, Khmer, Myanmar."""
    code = ord(char)
    return (0x0E00 <= code <= 0x0E7F or 0x0E80 <= code <= 0x0EFF or 0x1780 <= code <= 0x17FF
            or 0x1000 <= code <= 0x109F)


def _is_mark(char: str) -> bool:
    return unicodedata.category(char).startswith("M")


PIECES_KEPT = 200_000  # whitespace-separated pieces whose tokens a process keeps (a few tens of MB at most)


@functools.cache
def _rouge() -> Any:
    """rouge-score and nltk, imported on first use: nltk takes about half a second to import,
    which a process that only lists the evaluators (a web process creating a run) need not
    pay. Queue workers import it as they start (evaluations.apps)."""
    from nltk.stem import porter
    from rouge_score import rouge_scorer, tokenize, tokenizers

    class _CachedStemmer:
        def __init__(self) -> None:
            self.stem = functools.lru_cache(maxsize=200_000)(porter.PorterStemmer().stem)

    class UnicodeAwareTokenizer(tokenizers.Tokenizer):
        """ADK's `_UnicodeAwareTokenizer` (google-adk 2.13, `final_response_match_v1.py`): NFKC
        and lower case; each CJK character is a token; Thai, Lao, Khmer and Myanmar split into a
        base character with its combining marks; other characters that are alphanumeric or
        combining marks make words, everything else separates them; an ASCII word goes through
        rouge-score's own tokenisation (a-z0-9 only, Porter stemming of words longer than 3
        letters), a non-ASCII word ("zürich", "привет") is one token as it is, never stemmed.

        Memoised per token: a text is cut at its whitespace (after NFKC and lower case, as a
        whole), and each piece's tokens are kept, so a word is classified character by
        character, split and stemmed once however many texts hold it (nltk's stemmer alone
        costs about 60 us a word). The tokens are the same: every step after the case
        folding treats each character on its own, and whitespace only ever separates words
        (`tokenize_uncached` is the whole-text path, which tests compare it with)."""

        def __init__(self, use_stemmer: bool = True) -> None:
            self._stemmer = _CachedStemmer() if use_stemmer else None
            self._piece = functools.lru_cache(maxsize=PIECES_KEPT)(self._piece_tokens)

        def tokenize(self, text: str) -> list[str]:
            tokens: list[str] = []
            for piece in unicodedata.normalize("NFKC", text).lower().split():
                tokens.extend(self._piece(piece))
            return tokens

        def _piece_tokens(self, piece: str) -> tuple[str, ...]:
            return tuple(self._words(piece))

        def tokenize_uncached(self, text: str) -> list[str]:
            """ADK's tokenisation of the whole text, character by character, nothing kept."""
            return self._words(unicodedata.normalize("NFKC", text).lower())

        def _words(self, text: str) -> list[str]:
            """The tokens of text already normalised and in lower case."""
            chars: list[str] = []
            for char in text:
                if _is_cjk(char):
                    chars.extend((" ", char, " "))
                elif _is_non_spaced_script(char):
                    chars.append(char if _is_mark(char) else " " + char)
                elif char.isalnum() or _is_mark(char):
                    chars.append(char)
                else:
                    chars.append(" ")
            tokens: list[str] = []
            for word in "".join(chars).split():
                if word.isascii():
                    tokens.extend(tokenize.tokenize(word, self._stemmer))
                else:
                    tokens.append(word)
            return tokens

    return UnicodeAwareTokenizer(use_stemmer=True), rouge_scorer


@functools.lru_cache(maxsize=20_000)
def _unigrams(text: str) -> Counter[tuple[str, ...]]:
    """A text's ROUGE-1 n-grams, as `RougeScorer(["rouge1"]).score` makes them (its own
    `_create_ngrams` over the tokens), once per distinct text: an expected answer is scored
    against every repeat and every run of it, and eval sets repeat their answers. Never
    changed by the scoring (a Counter gives 0 for a missing key without adding it)."""
    tokenizer, rouge_scorer = _rouge()
    return rouge_scorer._create_ngrams(tokenizer.tokenize(text), 1)


def rouge_1(candidate: str, reference: str) -> tuple[float, float, float]:
    """(precision, recall, f-measure) of ROUGE-1, as ADK's `_calculate_rouge_1_scores`:
    `RougeScorer(["rouge1"], tokenizer=...).score(reference, candidate)`, step for step
    (tokenise each side, its unigrams, rouge-score's `_score_ngrams`)."""
    _, rouge_scorer = _rouge()
    score = rouge_scorer._score_ngrams(_unigrams(reference), _unigrams(candidate))
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


def warm_up() -> None:
    """Import rouge-score and nltk now (a queue worker as it starts), not in the first batch."""
    _rouge()
