"""The `promptfoo_*` criteria (evaluators/promptfoo.py): promptfoo 0.123.1's deterministic
assertions with its pass and score, called with no database. Each expectation here was checked
against promptfoo's own run (its echo provider); the generated comparison is
tests/differential/test_promptfoo.py."""

from __future__ import annotations

from typing import Any

import pytest

from evaluations.evaluators import get_evaluator_class
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput

pytestmark = pytest.mark.database_free


def score(assertion: dict[str, Any], output: Any, variables: dict[str, Any] | None = None,
          calls: list[str] | None = None) -> tuple[bool | None, float | None, str]:
    kind = assertion["type"].removeprefix("not-")
    key = "promptfoo_x"
    case = EvalCase(eval_id="c", criteria={key: assertion}, metadata={"promptfoo": {"vars": variables or {}}})
    out = AgentOutput.model_validate({"eval_id": "c", "turns": [
        {"final_response": output, "tool_calls": [{"name": n} for n in calls or []]}]})
    evaluator = get_evaluator_class("promptfoo_" + kind.replace("-", "_"))()
    [result] = evaluator.score(case, out, CriterionConfig(), key)
    return result.passed, result.score, result.error


@pytest.mark.parametrize(("assertion", "output", "expected"), [
    ({"type": "equals", "value": "Paris"}, "Paris", (True, 1.0)),
    ({"type": "equals", "value": "Paris"}, "Paris ", (False, 0.0)),
    ({"type": "equals", "value": {"a": [1, 2.0]}}, '{"a": [1, 2]}', (True, 1.0)),
    ({"type": "equals", "value": {"a": 1}}, '{"a": true}', (False, 0.0)),
    ({"type": "not-equals", "value": 42}, "42", (False, 0.0)),
    ({"type": "contains", "value": 2.5}, "it is 2.5 km", (True, 1.0)),
    ({"type": "icontains", "value": "ZÜRICH"}, "in zürich", (True, 1.0)),
    ({"type": "icontains", "value": "ΣΟΦΟΣ"}, "σοφος", (True, 1.0)),
    ({"type": "contains-any", "value": 'x, "a, b"'}, "has a, b", (True, 1.0)),
    ({"type": "contains-all", "value": ["a", "b"]}, "a only", (False, 0.0)),
    ({"type": "not-icontains-all", "value": ["A", "B"]}, "a b", (False, 0.0)),
    ({"type": "starts-with", "value": "The"}, "The end", (True, 1.0)),
    ({"type": "regex", "value": "\\d+$"}, "year 2024\n", (False, 0.0)),  # `$`: the end of the text only
    ({"type": "regex", "value": "^\\d+$"}, "\uff12\uff10\uff12\uff14", (False, 0.0)),  # `\d` is ASCII
    ({"type": "regex", "value": "^.$"}, "😀", (False, 0.0)),  # `.` is one UTF-16 unit
    ({"type": "regex", "value": "\\s"}, "a\u3000b", (True, 1.0)),
    ({"type": "regex", "value": "(?<d>\\d)\\k<d>"}, "a 11", (True, 1.0)),
    ({"type": "regex", "value": "("}, "x", (False, 0.0)),  # an invalid pattern fails, not raises
    ({"type": "is-json"}, '{"a": 1}', (True, 1.0)),
    ({"type": "is-json"}, '{"a": NaN}', (False, 0.0)),
    ({"type": "contains-json"}, "see {a: 1} here", (True, 1.0)),  # read as YAML, as promptfoo does
    ({"type": "contains-json"}, "x {b", (True, 1.0)),
    ({"type": "not-contains-json"}, "none here", (True, 1.0)),
    ({"type": "levenshtein", "value": "kitten"}, "sitting", (True, 1.0)),
    ({"type": "levenshtein", "value": "kitten", "threshold": 2}, "sitting", (False, 0.0)),
    ({"type": "levenshtein", "value": "a", "threshold": 1}, "😀", (False, 0.0)),  # two UTF-16 units
    ({"type": "contains", "value": "x", "weight": 0}, "y", (True, 0.0)),  # weight 0 always passes
    ({"type": "tool-call-f1", "value": "get_weather, search", "threshold": 0.6},
     '{"tool_calls": [{"function": {"name": "get_weather"}}]}', (True, 2 / 3)),
    ({"type": "tool-call-f1", "value": ["a"]}, "text\n[{\"name\": \"a\"}]", (True, 1.0)),
    ({"type": "tool-call-f1", "value": ["a"]}, "text [{\"name\": \"a\"}]", (False, 0.0)),
])
def test_assertions_give_promptfoos_pass_and_score(assertion: dict[str, Any], output: Any,
                                                    expected: tuple[bool, float]) -> None:
    passed, value, problem = score(assertion, output)
    assert problem == ""
    assert (passed, value) == expected


def test_values_are_rendered_with_the_vars_and_recorded_tool_calls_count() -> None:
    assert score({"type": "contains", "value": "{{ city }}"}, "in Paris", {"city": "Paris\n"})[:2] == (True, 1.0)
    assert score({"type": "tool-call-f1", "value": ["search"]}, "done", calls=["search"])[:2] == (True, 1.0)
    assert score({"type": "equals", "value": "{\"a\":1}"}, {"a": 1})[:2] == (True, 1.0)  # JSON.stringify'd


def test_where_promptfoo_throws_the_score_is_an_error() -> None:
    assert score({"type": "contains", "value": ""}, "x") == (
        None, None, '"contains" assertion type must have a string or number value')
    assert score({"type": "contains-any", "value": '"a'}, "x")[2] == "Unterminated quoted field in contains assertion value"
    assert "Nunjucks" in score({"type": "contains", "value": "{{ x | upper }}"}, "x")[2]


def test_a_case_without_the_criterion_is_not_scored_by_it() -> None:
    evaluator = get_evaluator_class("promptfoo_contains")()
    assert evaluator.score(EvalCase(eval_id="c"), AgentOutput(eval_id="c"), CriterionConfig(), "promptfoo_contains") == []


