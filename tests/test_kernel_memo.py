"""What the scoring kernel keeps between cases (issue 39) gives the numbers and the text it
would without keeping anything: ROUGE's tokens memoised per whitespace-separated piece, an
evaluator's threshold and options built once per config, and an alignment's rows sharing the
call dicts their justification lists."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from rouge_score import rouge_scorer
from rouge_score.tokenizers import Tokenizer

from evaluations.evaluators.base import Threshold
from evaluations.evaluators.diffing import align, call_dict
from evaluations.evaluators.performance import LatencyEvaluator
from evaluations.evaluators.rouge import _rouge, rouge_1
from evaluations.evaluators.trajectory import TrajectoryMatchEvaluator
from evaluations.schemas.evalset import CriterionConfig, MatchType, ToolCall

# Words and marks that stress ADK's tokenizer: stems, CJK characters (one token each), Thai
# with combining marks, Greek capital sigma (its lower case depends on what follows), NFKC
# compatibility characters (a ligature, full-width letters, an acute accent that NFKC turns
# into a space and a combining mark, a no-break space), digits, punctuation, odd whitespace.
WORDS = ["running", "runs", "ran", "jacket", "jackets", "umbrella", "Tokyo", "degrees", "wind;", "sunset.",
         "東京", "天気", "ภาษาไทย", "กิน", "ΟΔΟΣ", "Σ", "σας", "\ufb01le", "\uff21\uff22\uff23", "\u00b4", "a\u00a0b", "zürich",
         "привет", "e\u0301", "3.14", "don't", "x-ray", "(ok)", "\u3000", "İstanbul", "ß", "ẞ", "",
         "\u0e01\u0e34", "ABC123def", "…", "—", "🙂", "\u200b"]
SPACES = [" ", "  ", "\n", "\t", "\u2028", "\u00a0", "\u3000", ""]


def _uncached_scorer() -> Any:
    tokenizer, _ = _rouge()

    class WholeText(Tokenizer):
        def tokenize(self, text: str) -> list[str]:
            return tokenizer.tokenize_uncached(text)

    return rouge_scorer.RougeScorer(["rouge1"], tokenizer=WholeText())


def _texts(seed: int, count: int) -> list[str]:
    r = random.Random(seed)
    return ["".join(r.choice(WORDS) + r.choice(SPACES) for _ in range(r.randint(0, 14))) for _ in range(count)]


def test_rouge_scores_with_the_token_memo_equal_those_without_it_over_a_generated_corpus() -> None:
    tokenizer, _ = _rouge()
    scorer = _uncached_scorer()
    texts = _texts(39, 1500)
    for candidate, reference in zip(texts, texts[1:] + texts[:1], strict=True):
        assert tokenizer.tokenize(candidate) == tokenizer.tokenize_uncached(candidate)
        expected = scorer.score(reference, candidate)["rouge1"]
        assert rouge_1(candidate, reference) == (expected.precision, expected.recall, expected.fmeasure)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60))
def test_rouge_tokens_memoised_per_piece_equal_the_whole_texts_for_any_text(text: str) -> None:
    tokenizer, _ = _rouge()
    assert tokenizer.tokenize(text) == tokenizer.tokenize_uncached(text)


def test_an_evaluator_builds_its_threshold_once_per_limit_and_keeps_zero_and_minus_zero_apart() -> None:
    evaluator = TrajectoryMatchEvaluator()
    first = evaluator.threshold(CriterionConfig(threshold=0.8))
    assert evaluator.threshold(CriterionConfig(threshold=0.8)) is first
    assert first == Threshold(lower_limit=0.8)
    assert evaluator.threshold(CriterionConfig(threshold=0.5)) == Threshold(lower_limit=0.5)
    assert str(evaluator.threshold(CriterionConfig(threshold=-0.0)).lower_limit) == "-0.0"
    assert str(evaluator.threshold(CriterionConfig(threshold=0.0)).lower_limit) == "0.0"
    assert LatencyEvaluator().threshold(CriterionConfig(threshold=5.0)) == Threshold(upper_limit=5.0)


def test_an_evaluator_validates_options_again_when_they_change_and_refuses_bad_ones_every_time() -> None:
    evaluator = TrajectoryMatchEvaluator()
    config = CriterionConfig(options={"args": "subset"})
    options = evaluator.options(config)
    assert evaluator.options(config) is options and options.args == "subset"
    config.options["args"] = "ignore"  # changed in place: the kept options are not used
    assert evaluator.options(config).args == "ignore"
    bad = CriterionConfig(options={"args": "sometimes"})
    for _ in range(2):
        try:
            evaluator.options(bad)
        except ValidationError:
            continue
        raise AssertionError("invalid options were accepted")
    latency = LatencyEvaluator()
    assert latency.options(CriterionConfig()).metric == "latency_seconds"
    assert latency.options(CriterionConfig(options={"per_turn_limit": 2.0})).per_turn_limit == 2.0


def _calls(r: random.Random, count: int) -> list[ToolCall]:
    return [ToolCall(name=r.choice(["search", "book", "cancel"]),
                     args={"city": r.choice(["Oslo", "Lima"]), "days": r.randint(1, 3)}) for _ in range(count)]


def test_alignment_rows_sharing_the_justifications_call_dicts_write_the_same_json() -> None:
    r = random.Random(7)
    for _ in range(400):
        expected = _calls(r, r.randint(0, 5))
        actual = [c.model_copy() for c in expected]
        for _ in range(r.randint(0, 3)):  # drop, add and change calls
            move = r.random()
            if move < 0.33 and actual:
                actual.pop(r.randrange(len(actual)))
            elif move < 0.66:
                actual.insert(r.randint(0, len(actual)), *_calls(r, 1))
            elif actual:
                actual[r.randrange(len(actual))].args["days"] = 9
        for match_type in MatchType:
            alignment = align(expected, actual, match_type)
            shared = alignment.as_dict([call_dict(c) for c in expected], [call_dict(c) for c in actual])
            assert shared == alignment.as_dict()
