"""Replays every hostile input of tests/data/fuzz/patterns/ (issue 38): patterns and JSON
Schemas a member can save, with agents' answers that make them explode or reach outside.

Each file says which path it goes through (`path`), what goes in (`pattern` and `flags`, or
`schema`; `output`, a text or a recipe for a long one) and what must come out (`expect`):
`passed` with `error` "" (scored), `error_contains` (the score is an error saying so), and
for schemas `refused_contains` (refused when saved). A schema refused when saved is also
scored as a stored config from before would be, straight through the evaluator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.promptfoo import Invariant, run_assertion
from evaluations.jsonschemas import schema_problems
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import DATA

CORPUS = DATA / "fuzz" / "patterns"
FILES = sorted(CORPUS.glob("*.json"))
PATHS = {"regex_match", "promptfoo_regex", "trajectory_regex", "json_schema"}


def output_text(recipe: Any) -> str:
    if isinstance(recipe, str):
        return recipe
    if "json_items" in recipe:
        return json.dumps([{"i": i} for i in range(recipe["json_items"])])
    return recipe.get("prefix", "") + recipe["repeat"] * recipe["times"] + recipe.get("suffix", "")


def case(**fields: Any) -> EvalCase:
    return EvalCase.model_validate({"eval_id": "fuzz", "conversation": [
        {"invocation_id": "t1", "user_content": {"role": "user", "content": "go"}, **fields}]})


def score(criterion: str, evaluator: str, options: dict[str, Any], the_case: EvalCase,
          output: AgentOutput) -> tuple[bool | None, str]:
    config = CriterionConfig(evaluator=evaluator, threshold=1.0, options=options)
    results = get_evaluator_class(evaluator)().score(the_case, output, config, criterion)
    overall = results[-1]
    return overall.passed, overall.error


def outcome(entry: dict[str, Any]) -> tuple[bool | None, str]:
    text = output_text(entry["output"])
    path = entry["path"]
    if path == "regex_match":
        output = AgentOutput.model_validate({"eval_id": "fuzz", "turns": [{"final_response": text}]})
        return score("fuzz", "regex_match", {"pattern": entry["pattern"], "flags": entry.get("flags", [])},
                     case(), output)
    if path == "promptfoo_regex":
        try:
            passed, _, _ = run_assertion({"type": "regex", "value": entry["pattern"]}, text, {})
        except Invariant as exc:
            return None, str(exc)
        return passed, ""
    if path == "trajectory_regex":
        call = {"name": "lookup", "args": {"city": text}}
        the_case = case(expected_tool_trajectory=[{"name": "lookup", "args": {"city": "Paris"}}])
        output = AgentOutput.model_validate({"eval_id": "fuzz", "turns": [{"invocation_id": "t1", "tool_calls": [call]}]})
        return score("fuzz", "trajectory_match", {"arg_overrides": {"city": {"regex": entry["pattern"]}}},
                     the_case, output)
    output = AgentOutput.model_validate({"eval_id": "fuzz", "turns": [{"final_response": text}]})
    return score("fuzz", "json_schema", {"schema": entry["schema"]}, case(), output)


def test_the_corpus_covers_every_path() -> None:
    entries = [json.loads(f.read_text()) for f in FILES]
    assert len(entries) >= 30
    assert {e["path"] for e in entries} == PATHS
    assert all(set(e["expect"]) <= {"passed", "error", "error_contains", "refused_contains"} for e in entries)


@pytest.mark.parametrize("file", FILES, ids=[f.stem for f in FILES])
def test_each_hostile_input_ends_as_its_file_says(file: Path) -> None:
    entry = json.loads(file.read_text())
    expect = entry["expect"]
    if entry["path"] == "json_schema":
        problems = "; ".join(schema_problems(entry["schema"]))
        if "refused_contains" in expect:
            assert expect["refused_contains"] in problems, problems
        else:
            assert problems == "", problems
    passed, error = outcome(entry)
    if "error_contains" in expect:
        assert passed is None and expect["error_contains"] in error, (passed, error)
    else:
        assert (passed, error) == (expect["passed"], expect["error"])
