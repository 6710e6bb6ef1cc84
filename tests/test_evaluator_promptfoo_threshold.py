"""A promptfoo test's verdict when evalsite rescores it (evaluations/evaluators/promptfoo_test.py):
promptfoo 0.123.1's rule, read in its `AssertionsResult.testResult` and `runAssertions`
(dist/src/evaluator-*.js of the published package): the weighted mean of the assertions'
scores, the test's (else defaultTest's) numeric threshold deciding over single failures, a
weight of 0 counting for nothing and always passing, assert-sets as tests inside the test. A
test with an assertion evalsite does not compute is never passed: failed when it fails whatever
that assertion scored, else not fully scored. Suites read by the real promptfoo reader, scored
by the real criteria, no database."""

from __future__ import annotations

import pytest

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.base import ScoreResult
from evaluations.evaluators.promptfoo_test import TEST_CRITERION, suite_defaults, verdict_scores
from evaluations.interop.base import SourceFile
from evaluations.interop.promptfoo.evalset import reader
from evaluations.schemas.outputs import AgentOutput

pytestmark = pytest.mark.database_free


extras: dict[str, list[ScoreResult]] = {}


def verdicts(yaml: str, answer: str) -> dict[str, ScoreResult]:
    """Each test's `promptfoo_test` score for the answer, its cases scored as a run scores them."""
    parsed = reader.parse(SourceFile("promptfooconfig.yaml", yaml.encode()), [])
    config = parsed.default_config
    assert config is not None
    suite = suite_defaults(parsed.evalset.metadata)
    out: dict[str, ScoreResult] = {}
    for case in parsed.evalset.eval_cases:
        output = AgentOutput.model_validate({"eval_id": case.eval_id, "turns": [{"final_response": answer}]})
        scores: list[ScoreResult] = []
        for name, criterion in config.criteria.items():
            if criterion.enabled:
                scores += get_evaluator_class(criterion.evaluator or name)().score(case, output, criterion, name)
        found = verdict_scores(case, output, scores, run_criteria=set(config.criteria), suite=suite)
        assert found and found[-1].criterion == TEST_CRITERION
        out[case.eval_id] = found[-1]
        extras[case.eval_id] = found[:-1]
    return out


def suite(tests: str, default: str = "") -> str:
    return f"description: s\nprompts: ['{{{{q}}}}']\n{default}tests:\n{tests}"


SEVEN = "".join(f"      - type: contains\n        value: w{i}\n" for i in range(6)) + \
    "      - type: contains\n        value: missing\n"


def test_a_test_with_a_threshold_passes_on_its_weighted_score_with_one_assertion_failing() -> None:
    found = verdicts(suite(f"  - description: six of seven\n    threshold: 0.7\n    assert:\n{SEVEN}"),
                     "w0 w1 w2 w3 w4 w5")
    test = found["six of seven"]
    assert test.passed is True and test.score == pytest.approx(6 / 7)
    assert test.justification["reason"] == "Aggregate score 0.86 ≥ 0.7 threshold"
    assert test.threshold is not None and test.threshold.lower_limit == 0.7


def test_the_same_test_fails_below_its_threshold_and_without_one() -> None:
    found = verdicts(suite(f"  - description: high\n    threshold: 0.9\n    assert:\n{SEVEN}"
                           f"  - description: none\n    assert:\n{SEVEN}"), "w0 w1 w2 w3 w4 w5")
    assert found["high"].passed is False and found["high"].justification["reason"] == \
        "Aggregate score 0.86 < 0.9 threshold"
    assert found["none"].passed is False and found["none"].score == pytest.approx(6 / 7)
    assert found["none"].justification["reason"] == 'Expected output to contain "missing"'


def test_weights_weigh_and_a_zero_weight_counts_for_nothing() -> None:
    tests = """  - description: weighted
    threshold: 0.75
    assert:
      - type: contains
        value: yes
        weight: 3
      - type: contains
        value: no
  - description: zero weight
    assert:
      - type: contains
        value: yes
      - type: contains
        value: no
        weight: 0
"""
    found = verdicts(suite(tests), "yes")
    assert found["weighted"].passed is True and found["weighted"].score == pytest.approx(0.75)
    assert found["zero weight"].passed is True and found["zero weight"].score == pytest.approx(1.0)


def test_a_threshold_of_zero_is_honoured_and_a_null_one_is_not() -> None:
    tests = """  - description: zero
    threshold: 0
    assert:
      - type: contains
        value: no
  - description: null threshold
    threshold: null
    assert:
      - type: contains
        value: no
"""
    found = verdicts(suite(tests), "yes")
    assert found["zero"].passed is True and found["zero"].score == 0.0  # 0 >= 0 (promptfoo 0.123's typeof check)
    assert found["null threshold"].passed is False


def test_the_default_tests_threshold_applies_where_a_test_has_none() -> None:
    tests = """  - description: inherits
    assert:
      - type: contains
        value: yes
      - type: contains
        value: no
  - description: own
    threshold: 0.9
    assert:
      - type: contains
        value: yes
      - type: contains
        value: no
"""
    found = verdicts(suite(tests, "defaultTest:\n  threshold: 0.5\n"), "yes")
    assert found["inherits"].passed is True and found["inherits"].score == 0.5
    assert found["own"].passed is False


def test_an_assert_set_is_a_test_inside_the_test() -> None:
    tests = """  - description: set passes on its threshold
    assert:
      - type: assert-set
        threshold: 0.5
        weight: 2
        assert:
          - type: contains
            value: yes
          - type: contains
            value: no
      - type: contains
        value: yes
  - description: a failing set of weight 0 still fails the test
    assert:
      - type: assert-set
        weight: 0
        assert:
          - type: contains
            value: no
      - type: contains
        value: yes
"""
    found = verdicts(suite(tests), "yes")
    first = found["set passes on its threshold"]
    assert first.passed is True and first.score == pytest.approx((2 * 0.5 + 1) / 3)
    second = found["a failing set of weight 0 still fails the test"]
    assert second.passed is False and second.score == pytest.approx(1.0)


def test_an_assertion_evalsite_does_not_compute_leaves_the_test_not_fully_scored_never_passed() -> None:
    tests = """  - description: rubric
    assert:
      - type: contains
        value: yes
      - type: llm-rubric
        value: is polite
  - description: rubric after a failure
    assert:
      - type: contains
        value: no
      - type: javascript
        value: output.length > 1
  - description: weight 0 rubric
    assert:
      - type: contains
        value: yes
      - type: llm-rubric
        value: is polite
        weight: 0
  - description: out of reach
    threshold: 0.9
    assert:
      - type: contains
        value: no
      - type: contains
        value: nope
      - type: contains
        value: never
      - type: python
        value: "True"
"""
    found = verdicts(suite(tests), "yes")
    rubric = found["rubric"]
    assert rubric.passed is None and rubric.score is None
    assert rubric.justification["not_scored"] == ["promptfoo_llm_rubric"]
    assert rubric.justification["score_between"] == [0.5, 1.0]
    [unscored] = extras["rubric"]
    assert unscored.criterion == "promptfoo_llm_rubric" and unscored.error.startswith("not runnable: promptfoo llm-rubric")
    assert found["rubric after a failure"].passed is False  # fails whatever the javascript says
    assert found["weight 0 rubric"].passed is True  # counts for nothing, passes in any case
    assert found["out of reach"].passed is False  # at most 0.25 < 0.9


def test_all_weights_zero_score_zero_and_select_best_counts_for_nothing() -> None:
    tests = """  - description: zeros
    threshold: 0.5
    assert:
      - type: contains
        value: yes
        weight: 0
  - description: select
    assert:
      - type: contains
        value: yes
      - type: select-best
        value: the best
"""
    found = verdicts(suite(tests), "yes")
    assert found["zeros"].passed is False and found["zeros"].score == 0.0
    assert found["select"].passed is True and found["select"].score == 1.0


def test_a_scoring_function_decides_a_test_evalsite_cannot_pass() -> None:
    tests = """  - description: scored by code
    assertScoringFunction: file://score.js
    assert:
      - type: contains
        value: yes
"""
    found = verdicts(suite(tests), "yes")
    assert found["scored by code"].passed is None
    assert "assertScoringFunction" in found["scored by code"].justification["reason"]


def test_a_null_weight_adds_nothing_to_the_score_but_its_failure_counts() -> None:
    tests = """  - description: null weight
    assert:
      - type: contains
        value: yes
      - type: contains
        value: no
        weight: null
"""
    found = verdicts(suite(tests), "yes")
    assert found["null weight"].passed is False and found["null weight"].score == 1.0


def test_a_case_not_from_promptfoo_has_no_test_verdict() -> None:
    from evaluations.schemas.evalset import EvalCase

    case = EvalCase(eval_id="plain", criteria={"response_match": None})
    output = AgentOutput(eval_id="plain")
    assert verdict_scores(case, output, [], run_criteria={"response_match"}) == []
