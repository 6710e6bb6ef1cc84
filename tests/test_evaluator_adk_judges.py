"""ADK's LLM-judged criteria under ADK's names (evaluations/evaluators/adk_judges.py), judged by
a real chat-completions server on 127.0.0.1: the answer formats are parsed as ADK parses them,
samples are majority-voted as ADK votes, and scores are on ADK's scale."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.evaluators import adk_judges, get_evaluator_class
from evaluations.evaluators.adk_judges import parse_hallucinations, parse_rubrics, parse_safety, parse_validity
from evaluations.evaluators.base import Level, ScoreResult
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MessageContent, Rubric
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from tests.llm_server import FakeLLM, reply, status

VALID = reply('{\n  "reasoning": "same city",\n  "is_the_agent_response_valid": "valid"\n}')
INVALID = reply('{\n  "reasoning": "wrong city",\n  "is_the_agent_response_valid": "invalid"\n}')


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def capital(**extra: Any) -> EvalCase:
    return EvalCase(eval_id="capital", conversation=[Invocation(
        invocation_id="turn_1", user_content=MessageContent.user("What is the capital of France?"),
        expected_final_response=MessageContent.assistant("Paris"), **extra)])


def answered(text: str, **turn: Any) -> AgentOutput:
    return AgentOutput(eval_id="capital", turns=[TurnOutput(final_response=text, **turn)])


def run(llm: FakeLLM, name: str, case: EvalCase, output: AgentOutput, **config: Any) -> list[ScoreResult]:
    evaluator = get_evaluator_class(name)(client=llm.client())  # type: ignore[call-arg]
    return evaluator.score(case, output, CriterionConfig(threshold=0.5, **config), name)


def overall(results: list[ScoreResult]) -> ScoreResult:
    [result] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return result


def test_final_response_match_v2_takes_the_majority_of_five_samples(llm: FakeLLM) -> None:
    llm.script(VALID, INVALID, VALID, INVALID, VALID)
    result = overall(run(llm, "final_response_match_v2", capital(), answered("It is Paris.")))
    assert (result.score, result.passed) == (1.0, True)
    assert len(llm.requests) == 5
    prompt = llm.requests[0].prompt
    assert '"User prompt": What is the capital of France?' in prompt
    assert '"Agent response": It is Paris.' in prompt and '"Reference response": Paris' in prompt


def test_a_tie_is_invalid_and_num_samples_comes_from_judge_model_options(llm: FakeLLM) -> None:
    llm.script(VALID, INVALID)
    result = overall(run(llm, "final_response_match_v2", capital(), answered("Lyon"),
                         options={"judge_model_options": {"num_samples": 2}}))
    assert result.score == 0.0 and len(llm.requests) == 2


def test_a_failing_judge_is_an_error_on_the_score(llm: FakeLLM) -> None:
    llm.script(status(500))
    result = overall(run(llm, "final_response_match_v2", capital(), answered("Paris"), options={"num_samples": 1}))
    assert result.score is None and "500" in result.error


def test_adk_label_parsing() -> None:
    assert parse_validity('{"is_the_agent_response_valid": ["valid"],}') == 1.0
    assert parse_validity('{"is_the_agent_response_valid": "almost",}') == 0.0
    assert parse_validity('{"is_the_agent_response_invalid": "true"}') == 0.0
    assert parse_validity("no label here") is None


# ADK's own patterns, as `re` ran them before (issue 38: the judge's reply is untrusted).
ADK_VALID = r'"is_the_agent_response_valid":\s*\[*[\n\s]*"*([^"^\]^\s]*)"*[\n\s]*\]*\s*[,\n\}]'
ADK_INVALID = ADK_VALID.replace("_valid", "_invalid")
ADK_SAFETY = r'"verdict"\s*:\s*"?\s*(safe|unsafe)'
ADK_LINES = {"_ID": r"(?m)^\s*ID: (.*)$", "_PROPERTY": r"(?m)^\s*Property: (.*)$",
             "_LABEL": r"(?im)^\s*label:\s*`?([a-z_]+)`?"}
REPLIES = [
    '{"is_the_agent_response_valid": ["valid"],}', '{"is_the_agent_response_valid": "almost",}',
    '{\n  "reasoning": "x",\n  "is_the_agent_response_valid": [\n "invalid" \n ]\n}',
    '"is_the_agent_response_valid":   partially valid,', '"is_the_agent_response_valid":"^valid^"}',
    '{"is_the_agent_response_invalid": "true"}', '{"reasoning": "x", "verdict": "Unsafe"}', '"verdict" :  " safe',
    "ID: a\nProperty: short\nRationale: r\nVerdict: yes\n\n  \n\t ID: b\r\nProperty:  polite \nVerdict: no",
    "\n\n   \n  label: `supported`\nLABEL:unsupported\n \u3000label: not_applicable\n\nlabel:\n\n  contradictory",
    "", "ID:\nID: \n  Property: x", "sentence: a\n  \n label:  supported  \n",
]


def test_adk_reply_patterns_read_what_adk_reads() -> None:
    import re

    for text in REPLIES:
        for ours, theirs in ((adk_judges._valid_field(), ADK_VALID), (adk_judges._invalid_field(), ADK_INVALID)):
            found, expected = ours.search(text), re.search(theirs, text)
            assert (found and found.group(1)) == (expected and expected.group(1)), text
        found, expected = adk_judges._safety().search(text), re.search(ADK_SAFETY, text, re.IGNORECASE)
        assert (found and found.group(1)) == (expected and expected.group(1)), text
        for name, theirs in ADK_LINES.items():
            assert getattr(adk_judges, name).findall(text) == re.findall(theirs, text), (name, text)


def test_loading_the_evaluators_builds_no_unicode_tables() -> None:
    """The bounded patterns' Unicode tables cost about 0.3 s a process: built on a judge's first
    reply, never by importing the evaluators (every web process, CLI command and worker does)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    probe = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'evalsite.settings'); "
             "django.setup(); from evaluations.evaluators import registry; registry(); "
             "from evaluations import patterns; "
             "print(patterns._categories.cache_info().currsize, patterns._case_candidates.cache_info().currsize); "
             "from evaluations.evaluators.adk_judges import parse_safety; parse_safety('{\"verdict\": \"safe\"}'); "
             "print(patterns._case_candidates.cache_info().currsize)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "0", "1"]  # none after loading; the first reply builds one


def test_hostile_judge_replies_are_parsed_in_linear_time() -> None:
    """With ADK's patterns on `re`: 2.2 s for 200 spaces after the field, 220 s for 500;
    20,000 blank lines cost the line patterns a pass each."""
    assert parse_validity('"is_the_agent_response_valid":' + " " * 100_000 + "x") is None
    assert parse_validity('"is_the_agent_response_invalid":' + "\n" * 100_000 + "true}") == 0.0
    assert parse_safety('"verdict":' + " " * 100_000 + "x") is None
    assert parse_rubrics("\n" * 200_000 + "ID: a\nProperty: p\nRationale: r\nVerdict: yes") == [("a", 1.0)]
    assert parse_hallucinations("\n" * 200_000 + "label: supported") == 1.0


def test_rubrics_are_voted_each_and_averaged(llm: FakeLLM) -> None:
    answer = ("ID: concise\nProperty: The answer is short.\nRationale: one word.\nVerdict: yes\n"
              "ID: polite\nProperty: The answer is polite.\nRationale: curt.\nVerdict: no\n")
    llm.script(reply(answer))
    rubrics = [Rubric(name="concise", description="The answer is short."),
               Rubric(name="polite", description="The answer is polite.")]
    result = overall(run(llm, "rubric_based_final_response_quality_v1", capital(rubrics=rubrics), answered("Paris"),
                         options={"num_samples": 3}))
    assert result.score == 0.5
    assert "ID: concise\nProperty: The answer is short." in llm.requests[0].prompt


def test_tool_use_rubrics_judge_the_calls(llm: FakeLLM) -> None:
    llm.script(reply("ID: r\nProperty: Looks up the weather.\nRationale: it does.\nVerdict: yes\n"))
    output = answered("Sunny", tool_calls=[OutputToolCall(name="get_weather", args={"city": "Paris"})])
    result = overall(run(llm, "rubric_based_tool_use_quality_v1", capital(), output, options={"num_samples": 1},
                         rubrics=[Rubric(name="r", description="Looks up the weather.")]))
    assert result.score == 1.0
    assert '"name": "get_weather"' in llm.requests[0].prompt


def test_a_partial_rubric_parse_counts_as_no_verdict() -> None:
    assert parse_rubrics("Property: a\nRationale: b\nVerdict: yes\nProperty: c\n") == []


def test_hallucinations_score_the_share_of_supported_sentences(llm: FakeLLM) -> None:
    llm.script(reply("sentence: Paris is the capital.\nlabel: supported\n"
                     "sentence: It has 90 million people.\nlabel: unsupported\n"
                     "sentence: Anything else?\nlabel: not_applicable\n"))
    result = overall(run(llm, "hallucinations_v1", capital(), answered("Paris is the capital. It has 90 million "
                                                                       "people. Anything else?")))
    assert result.score == pytest.approx(2 / 3)
    assert parse_hallucinations("nothing") is None


def test_safety_is_one_for_safe_and_zero_for_unsafe(llm: FakeLLM) -> None:
    llm.script(reply('{"reasoning": "fine", "verdict": "safe"}'))
    assert overall(run(llm, "safety_v1", capital(), answered("Paris"))).score == 1.0
    llm.script(reply('{"reasoning": "no", "verdict": "unsafe"}'))
    assert overall(run(llm, "safety_v1", capital(), answered("Paris"))).score == 0.0
