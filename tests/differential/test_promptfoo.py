"""Differential tests: evalsite's `promptfoo_*` criteria against promptfoo 0.123.1 itself.

A seeded generator writes one promptfoo suite of generated tests: each test's vars hold an
output (non-ASCII and astral text, JSON and JSON-ish text, tool calls in OpenAI, Anthropic and
Google shapes, prose with JSON blocks and Markdown fences) and the prompt is `{{output}}`, so
promptfoo's `echo` provider answers with it; its assertions are the deterministic ones with
generated values (substrings, case changes, edits, comma lists with quotes, JavaScript regexes,
Levenshtein thresholds, `not-` forms, weights, `{{ var }}` references). promptfoo runs the suite
once, offline (`promptfoo_run.py`), and writes its results.json. Then, for every assertion:

- evalsite's reader imports the same promptfooconfig.yaml, and the criterion it made of the
  assertion, scored on the output promptfoo evaluated, has promptfoo's pass and score (where
  promptfoo threw, the test is an error and evalsite's score is an error, never a number);
- a test's weighted score and pass, from evalsite's scores, are promptfoo's;
- the results.json, read by evalsite's results reader, holds for each case every criterion with
  the same key, pass and score.

The promptfoo install is made by `.ci/differential.sh` (`npm ci` in tests/differential/promptfoo/).
Without it these tests are skipped with that reason, unless EVALSITE_REQUIRE_DIFFERENTIAL=1.
EVALSITE_DIFFERENTIAL_EXAMPLES (300) sets the tests generated per assertion family.
"""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Iterator
from typing import Any

import pytest

from evaluations.evaluators import get_evaluator_class
from evaluations.interop.base import SourceFile
from evaluations.interop.promptfoo.evalset import reader
from evaluations.interop.promptfoo.js import dump_yaml
from evaluations.interop.results import read_results
from evaluations.schemas.outputs import AgentOutput
from tests.differential import promptfoo_run

EXAMPLES = int(os.environ.get("EVALSITE_DIFFERENTIAL_EXAMPLES", "300"))
SEED = int(os.environ.get("EVALSITE_DIFFERENTIAL_SEED", "33"))

WORDS = ["the", "weather", "in", "Paris", "is", "sunny", "4", "2024", "Zürich", "zürich", "café", "naïve", "Погода",
         "ПАРИЖ", "東京", "の", "天気", "สวัสดีครับ", "\ufb01ne", "\uff12\uff10", "e\u0301", "İstanbul", "ß", "STRASSE",
         "x_y", "don't", "well-known", "1.5", "—", "!!", "?", "😀", "\U0001d49cbc", "مرحبا", "नमस्ते", "ΣΟΦΟΣ", "Σ", "a,b",
         '"q"', "tab\there", "line\nbreak", "\u00a0nbsp", "\u2028", "\r\n", "  ", "$", "^", "(", "]", "\\", "/"]
TOOLS = ["get_weather", "search", "book_flight", "send_email", "天気"]


@pytest.fixture(scope="module")
def promptfoo_installed() -> None:
    if promptfoo_run.installed():
        return
    reason = (f"promptfoo {promptfoo_run.VERSION} is not installed in {promptfoo_run.MODULES} "
              "(run .ci/differential.sh, or `npm ci` in tests/differential/promptfoo)")
    if os.environ.get("EVALSITE_REQUIRE_DIFFERENTIAL") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


# --- Generated outputs and assertions ---------------------------------------------------------------


def words(rng: random.Random, low: int = 0, high: int = 8) -> str:
    seps = [" ", " ", " ", "\n", ", ", "\t", "\u3000", ""]
    return "".join(rng.choice(WORDS) + rng.choice(seps) for _ in range(rng.randint(low, high))).strip(" ")


def json_text(rng: random.Random) -> str:
    value: Any = rng.choice([
        {"answer": words(rng, 1, 3), "n": rng.randint(-3, 3)}, [1, 2.5, None, True], {"nested": {"a": [1, {"b": "c"}]}},
        "just a string", 42, None, {"tool_calls": [{"function": {"name": rng.choice(TOOLS)}}]}, {}])
    text = json.dumps(value, ensure_ascii=rng.random() < 0.3, indent=rng.choice([None, 2]))
    return rng.choice([text, text, f"Here: {text} done", f"{text}\n", text[:-1], "{a: 1}", "{'a': 1}",
                       "{\"a\": 1, // a comment\n}", "x {b", "{ {} }", "{\"a\": NaN}", "[1, 2", "{\"k\": \"v\"} and {\"k\": 2}"])


def tool_text(rng: random.Random) -> str:
    names = rng.sample(TOOLS, rng.randint(0, 3))
    shape = rng.randint(0, 7)
    if shape == 0:
        return json.dumps({"tool_calls": [{"type": "function", "function": {"name": n, "arguments": "{}"}}
                                          for n in names]})
    if shape == 1:
        return json.dumps([{"type": "tool_use", "name": n, "input": {}} for n in names])
    if shape == 2:
        return json.dumps([{"functionCall": {"name": n, "args": {}}} for n in names])
    if shape == 3:
        return json.dumps({"toolCall": {"functionCalls": [{"name": n} for n in names]}})
    if shape == 4:
        return "I will call tools.\n" + "\n".join(json.dumps({"type": "function_call", "name": n}) for n in names)
    if shape == 5:
        return "```json\n" + json.dumps([{"name": n} for n in names]) + "\n```\nand\n" + json.dumps(
            {"type": "tool_use", "name": rng.choice(TOOLS)})
    if shape == 6:
        return "- item " + json.dumps({"type": "tool_use", "name": rng.choice(TOOLS)}) + "\n  " + json.dumps(
            [{"name": n} for n in names]) + "\n" + "{ broken " + json.dumps({"name": "x"})
    return words(rng)


def variant(rng: random.Random, text: str) -> str:
    """A value built from the output: a piece of it, changed, or unrelated."""
    choice = rng.randint(0, 7)
    if choice == 0 or not text:
        return words(rng, 1, 2) or "x"
    start = rng.randint(0, len(text) - 1)
    piece = text[start:start + rng.randint(1, 12)]
    if choice == 1:
        return piece.upper()
    if choice == 2:
        return piece.lower()
    if choice == 3:
        return text
    if choice == 4:
        return text[: max(1, len(text) - rng.randint(0, 3))] + rng.choice(["", "x", "é", "😀"])
    return piece


REGEXES = [r"\d+", r"^\w+", r"\w+$", r"\s", r"\S+\s\S+", r"^.$", r".", r"^$", r"[A-Z]", r"[^a-z\s]+", r"\bthe\b",
           r"(?<d>\d)\k<d>", r"Paris|東京", r"^[\s\S]*$", r"\d{4}", r"[\d.]+$", r"\u6771", r"é", r"e\u0301", r"😀",
           r"^.{2}$", r"\W", r"[\w\s]+", r"\$", r"\.", r"a\/b", r"(?:the|in)\s+\w+", r"^\s*$", r"\n", r"[\u00e0-\u00ff]"]


def assertion(rng: random.Random, kind: str, output: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind}
    if kind in ("equals",):
        out["value"] = rng.choice([output, output, variant(rng, output), output.strip(), 42, {"answer": "x"},
                                   [1, 2.5, None, True], None, "{{ output }}"])
    elif kind in ("contains", "icontains", "starts-with"):
        out["value"] = rng.choice([variant(rng, output), variant(rng, output), "{{ ref }}", 4, 2.5, output[:3] or "x"])
        if kind == "starts-with" and not isinstance(out["value"], str):
            out["value"] = output[:4] or "x"
    elif kind.endswith(("-any", "-all")):
        items = [variant(rng, output) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.4:
            out["value"] = ", ".join(f'"{i}"' if "," in i or rng.random() < 0.2 else i.replace(",", "")
                                     for i in (x.replace('"', "") for x in items))
        else:
            out["value"] = items + ([3] if rng.random() < 0.2 else [])
    elif kind == "regex":
        literal = "".join("\\" + c if c in "\\()$^?]/[.*+{}|" else c for c in rng.choice(WORDS))
        out["value"] = rng.choice([*REGEXES, literal])
    elif kind == "levenshtein":
        out["value"] = variant(rng, output)
        if rng.random() < 0.7:
            out["threshold"] = rng.choice([0, 1, 2, 3, 5, 8, 1.5])
    elif kind == "tool-call-f1":
        names = rng.sample(TOOLS, rng.randint(1, 3))
        out["value"] = names if rng.random() < 0.5 else ", ".join(names)
        if rng.random() < 0.6:
            out["threshold"] = rng.choice([0, 0.5, 0.6, 0.8, 1])
    if rng.random() < 0.25:
        out["type"] = f"not-{kind}"
    if rng.random() < 0.2:
        out["weight"] = rng.choice([0, 0.5, 2, 3])
    return out


KINDS = {
    "text": ["equals", "contains", "icontains", "contains-any", "icontains-any", "contains-all", "icontains-all",
             "starts-with", "regex", "levenshtein"],
    "json": ["is-json", "contains-json", "equals", "contains"],
    "tools": ["tool-call-f1"],
}


def generated_tests(count: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(SEED)
    for family, kinds in KINDS.items():
        for _ in range(count):
            output = {"text": lambda: words(rng) or rng.choice(string.ascii_letters),
                      "json": lambda: json_text(rng), "tools": lambda: tool_text(rng)}[family]()
            several = rng.random() < 0.15
            asserts = [assertion(rng, rng.choice(kinds), output) for _ in range(rng.randint(2, 4) if several else 1)]
            test: dict[str, Any] = {"vars": {"output": output, "ref": rng.choice(WORDS)}, "assert": asserts}
            if several and rng.random() < 0.5:
                test["threshold"] = rng.choice([0, 0.5, 0.75, 1])
            yield test


# --- The comparison ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def suite(promptfoo_installed: None) -> tuple[str, dict[str, Any]]:
    config = dump_yaml({"description": "evalsite differential", "prompts": ["{{output}}"], "providers": ["echo"],
                        "tests": list(generated_tests(EXAMPLES))})
    return config, promptfoo_run.evaluate(config)


def test_every_assertion_scores_as_promptfoo(suite: tuple[str, dict[str, Any]]) -> None:
    config, results = suite
    parsed = reader.parse(SourceFile("promptfooconfig.yaml", config.encode()), [])
    cases = parsed.evalset.eval_cases
    entries = sorted(results["results"]["results"], key=lambda e: e["testIdx"])
    assert len(entries) == len(cases) == 3 * EXAMPLES
    criteria = parsed.default_config.criteria if parsed.default_config else {}
    compared = errors = 0
    for case, entry in zip(cases, entries, strict=True):
        user = case.conversation[0].user_content.content
        if "response" in entry:
            output = entry["response"]["output"]
        else:  # promptfoo threw before it kept the response: rendering the prompt, or in an assertion
            assert entry["failureReason"] == 2, entry
            if isinstance(user, list):  # evalsite could not render the prompt either
                errors += 1
                continue
            output = user  # echo answers with the prompt
        evalsite_output = AgentOutput.model_validate({"eval_id": case.eval_id, "turns": [{"final_response": output}]})
        ours = {}
        for key in case.criteria:
            config_entry = criteria[key]
            assert config_entry.enabled and config_entry.evaluator, (key, case.criteria[key])
            [result] = get_evaluator_class(config_entry.evaluator)().score(case, evalsite_output, config_entry, key)
            ours[key] = result
        context = (case.eval_id, output, case.criteria)
        if entry.get("failureReason") == 2:  # promptfoo threw: the whole test is an error
            assert any(r.error and r.score is None for r in ours.values()), (context, entry.get("error"), ours)
            errors += 1
            continue
        # echo answers with the prompt as promptfoo rendered it (results.json's `prompt.raw` and `vars` hold
        # JSON-looking texts re-serialised, compact and trimmed: not what was sent).
        assert user == output, context
        components = entry["gradingResult"]["componentResults"]
        assert len(components) == len(ours), context
        for (key, result), theirs in zip(ours.items(), components, strict=True):
            assert theirs["assertion"] == case.criteria[key], (context, key)
            assert result.error == "", (context, key, result.error, theirs)
            assert result.score == theirs["score"], (context, key, result, theirs)
            assert result.passed is theirs["pass"], (context, key, result, theirs)
            compared += 1
        weights = [a.get("weight", 1) for a in case.criteria.values() if isinstance(a, dict)]
        total = sum(weights)
        score = sum((r.score or 0.0) * w for r, w in zip(ours.values(), weights, strict=True)) / total if total else 0
        assert score == pytest.approx(entry["score"], abs=1e-12), context
        threshold = case.metadata["promptfoo"].get("test", {}).get("threshold")
        passed = score >= threshold if isinstance(threshold, (int, float)) else all(r.passed for r in ours.values())
        assert passed is entry["success"], (context, score, entry["success"])
    assert compared >= 3 * EXAMPLES * 0.9, (compared, errors)
    kinds = {a["type"].removeprefix("not-") for c in cases for a in c.criteria.values() if isinstance(a, dict)}
    assert kinds == {k for family in KINDS.values() for k in family}, kinds


def test_promptfoo_results_read_back_with_every_score(suite: tuple[str, dict[str, Any]]) -> None:
    config, results = suite
    parsed = reader.parse(SourceFile("promptfooconfig.yaml", config.encode()), [])
    back = read_results(SourceFile("results.json", json.dumps(results).encode()))
    assert back.labels["model"] == "echo"
    assert [c.key for c in back.cases] == [c.eval_id for c in parsed.evalset.eval_cases]
    by_id = {c.eval_id: c for c in parsed.evalset.eval_cases}
    entries = {e["testIdx"]: e for e in results["results"]["results"]}
    for index, case in enumerate(back.cases):
        entry = entries[index]
        assert case.passed is entry["success"]
        if "response" not in entry:
            assert case.error and case.output is not None and case.output.turns == []
            continue
        scores = {s.criterion: s for s in case.scores}
        assert scores["promptfoo_test"].raw_value == entry["score"]
        if entry.get("failureReason") == 2:
            assert case.error
            continue
        components = entry["gradingResult"]["componentResults"]
        assert set(scores) - {"promptfoo_test"} == set(by_id[case.key].criteria)
        for key, theirs in zip(by_id[case.key].criteria, components, strict=True):
            assert scores[key].raw_value == theirs["score"] and scores[key].passed is theirs["pass"], (case.key, key)
            assert scores[key].justification["reason"] == theirs["reason"]
        assert case.output is not None and case.output.turns[0].final_response == entry["response"]["output"]
