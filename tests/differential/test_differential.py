"""Differential tests: evalsite's tool-named criteria against the tools' own libraries.

Hypothesis generates agent outputs (non-ASCII text, empty and missing answers, repeated,
swapped and extra calls, nested args, line-by-line text, JSON in strings, several turns) for
the real eval sets in tests/data/realworld/ and for synthetic cases; each is scored by
evalsite and by the library (tests/differential/bridge.py, run by the library's own venv),
and any difference fails. Where the library raises, evalsite must record an error on the
score (never a number, never a crash).

The libraries live in venvs of their own, made by `.ci/differential.sh` (pinned in
requirements-differential.txt): EVALSITE_DIFFERENTIAL_PYTHON is the interpreter with
google-adk, uipath and deepeval; EVALSITE_DIFFERENTIAL_PYTHON312 the Python 3.12 one with
10xscale-agentflow. Without them these tests are skipped with that reason, unless
EVALSITE_REQUIRE_DIFFERENTIAL=1 (CI), where a missing venv is a failure.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from evaluations.evaluators import get_evaluator_class
from evaluations.evaluators.base import Level, ScoreResult
from evaluations.evaluators.output import levenshtein
from evaluations.interop.adk.evalset import reader as adk_reader
from evaluations.interop.base import SourceFile
from evaluations.interop.deepeval.evalset import reader as deepeval_reader
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Invocation, MatchType, MessageContent, ToolCall
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput
from tests.conftest import REALWORLD

BRIDGE = Path(__file__).with_name("bridge.py")
REPO = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=int(os.environ.get("EVALSITE_DIFFERENTIAL_EXAMPLES", "300")), derandomize=True,
                    deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


# --- The libraries, through the bridge ------------------------------------------------------------


class Bridge:
    def __init__(self, python: str) -> None:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/tmp"),
               "PYTHONIOENCODING": "utf-8", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
               "ALL_PROXY": "http://127.0.0.1:9"}  # a dead proxy: nothing the libraries try may reach a network
        self.process = subprocess.Popen([python, str(BRIDGE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, text=True, encoding="utf-8", env=env)

    def __call__(self, kind: str, **request: Any) -> dict[str, Any]:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps({"kind": kind, **request}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the bridge ({kind}) exited"
        reply: dict[str, Any] = json.loads(line)
        return reply

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # the libraries' exit handlers, slow on a loaded machine
            self.process.kill()
            self.process.wait()


def _interpreter(variable: str, default: Path, what: str) -> str:
    python = os.environ.get(variable) or (str(default) if default.exists() else "")
    if python and Path(python).exists():
        return python
    reason = (f"{what} not installed: {variable} names no interpreter and {default.relative_to(REPO)} is absent "
              f"(run .ci/differential.sh)")
    if os.environ.get("EVALSITE_REQUIRE_DIFFERENTIAL") == "1" and not (
            variable.endswith("312") and os.environ.get("EVALSITE_DIFFERENTIAL_NO_PY312")):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def libs() -> Iterator[Bridge]:
    bridge = Bridge(_interpreter("EVALSITE_DIFFERENTIAL_PYTHON", REPO / ".differential/py311/bin/python",
                                 "google-adk, uipath and deepeval"))
    yield bridge
    bridge.close()


@pytest.fixture(scope="module")
def agentflow() -> Iterator[Bridge]:
    reason = os.environ.get("EVALSITE_DIFFERENTIAL_NO_PY312")
    if reason:
        pytest.skip(f"10xscale-agentflow 0.10.1 needs Python >= 3.12: {reason}")
    bridge = Bridge(_interpreter("EVALSITE_DIFFERENTIAL_PYTHON312", REPO / ".differential/py312/bin/python",
                                 "10xscale-agentflow (Python 3.12)"))
    yield bridge
    bridge.close()


def evalsite(evaluator: str, case: EvalCase, output: AgentOutput, config: CriterionConfig,
             criterion: str = "crit") -> list[ScoreResult]:
    return get_evaluator_class(evaluator)().score(case, output, config, criterion)


def overall(results: list[ScoreResult]) -> ScoreResult:
    [result] = [r for r in results if r.applies_to is Level.CONVERSATION]
    return result


def same(ours: ScoreResult, theirs: dict[str, Any], context: Any, raw: bool = False) -> None:
    """Equal scores (to the bit) and pass/fail; or the library raised and evalsite recorded an
    error instead of a number. `raw`: the library's number is on its own scale (UiPath's legacy
    JSON similarity, 0-100), which evalsite keeps as the raw value."""
    event("the library raised" if "raises" in theirs else "both scored")  # --hypothesis-show-statistics
    if "raises" in theirs:
        assert ours.score is None and ours.error, f"{context!r}: {theirs['raises']!r}, evalsite {ours!r}"
        return
    score = theirs["score"]
    expected = score["score"] if isinstance(score, dict) else score
    assert ours.error == "", f"{context!r}: evalsite {ours.error!r}, the library {expected!r}"
    assert (ours.raw_value if raw else ours.score) == expected, f"{context!r}: evalsite {ours!r}, the library {expected!r}"
    if isinstance(score, dict) and "passed" in score:
        assert ours.passed is score["passed"], (context, ours.passed, score)


# --- What the outputs are made of -----------------------------------------------------------------

WORDS = ["the", "weather", "in", "Paris", "is", "sunny", "rolled", "rolling", "dice", "prime", "numbers", "4", "2024",
         "Zürich", "zürich", "sént", "café", "naïve", "Погода", "в", "Париже", "солнечная", "東京", "の", "天気",
         "は", "晴れ", "曇り", "です", "สวัสดีครับ", "\ufb01ne", "\uff12\uff10\uff12\uff14", "e\u0301", "İstanbul", "ß", "STRASSE", "x_y",
         "don't", "well-known", "1.5", "—", "!!", "?", "😀", "مرحبا", "नमस्ते"]
SEPARATORS = [" ", " ", " ", "\n", ", ", ". ", "\t", "  ", "\u3000", "\u00a0"]

words = st.lists(st.sampled_from(WORDS), max_size=12)
texts = st.builds(lambda ws, seps: "".join(w + seps[i % len(seps)] for i, w in enumerate(ws)).strip(),
                  words, st.lists(st.sampled_from(SEPARATORS), min_size=1, max_size=4)) | st.text(max_size=30)
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5, -0.0]) | st.sampled_from(
    ["Paris", "paris", "", "東京", "5", "5.0"])
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["a", "b", "city", "result", "n"]), inner, max_size=3), max_leaves=8)
args = st.dictionaries(st.sampled_from(["city", "days", "query", "opts", "n"]), json_values, max_size=3)


def mutate_text(draw: Any, text: str | None) -> str | None:
    """A variant of an expected answer: itself, changed, extended with other scripts, or none."""
    choice = draw(st.integers(0, 6))
    if choice == 0 or text is None:
        return draw(st.none() | texts)
    if choice == 1:
        return text
    pieces = text.split()
    if choice == 2 and pieces:
        del pieces[draw(st.integers(0, len(pieces) - 1))]
        return " ".join(pieces)
    if choice == 3:
        return text + " " + draw(texts)
    if choice == 4:
        return text.upper()
    if choice == 5:
        return " ".join(reversed(pieces))
    return draw(texts) + " " + text


def mutate_calls(draw: Any, calls: list[ToolCall], names: list[str]) -> list[dict[str, Any]]:
    """A variant of an expected trajectory: repeated, dropped, swapped, renamed, extra calls,
    changed or nested args."""
    out = [{"name": c.name, "args": copy.deepcopy(c.args)} for c in calls]
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.integers(0, 5))
        if op == 0 and out:
            out.insert(draw(st.integers(0, len(out))), copy.deepcopy(out[draw(st.integers(0, len(out) - 1))]))
        elif op == 1 and out:
            del out[draw(st.integers(0, len(out) - 1))]
        elif op == 2 and len(out) > 1:
            i, j = draw(st.integers(0, len(out) - 1)), draw(st.integers(0, len(out) - 1))
            out[i], out[j] = out[j], out[i]
        elif op == 3 and out:
            out[draw(st.integers(0, len(out) - 1))]["args"] = draw(args)
        elif op == 4:
            out.append({"name": draw(st.sampled_from(names)), "args": draw(args)})
        elif op == 5 and out:
            out[draw(st.integers(0, len(out) - 1))]["name"] = draw(st.sampled_from(names))
    return out


# --- The real eval sets ---------------------------------------------------------------------------


def real_cases() -> list[EvalCase]:
    """The ADK eval sets and the DeepEval goldens (single- and multi-turn) kept in the repository."""
    cases: list[EvalCase] = []
    for path in sorted((REALWORLD / "google-adk").rglob("*.json")):
        if path.name == "test_config.json":
            continue
        parsed = adk_reader.parse(SourceFile(path.name, path.read_bytes()), [])
        cases.extend(c for c in parsed.evalset.eval_cases if c.conversation)
    for path in sorted((REALWORLD / "deepeval").glob("*.json")):
        parsed = deepeval_reader.parse(SourceFile(path.name, path.read_bytes()), [])
        cases.extend(c for c in parsed.evalset.eval_cases if c.conversation)
    assert len(cases) >= 20
    return cases


REAL_CASES = real_cases()
NAMES = sorted({c.name for case in REAL_CASES for i in case.conversation for c in i.expected_tool_trajectory}
               | {"get_weather", "get_forecast", "search"})


@st.composite
def synthetic_case(draw: Any) -> EvalCase:
    conversation = []
    for index in range(draw(st.integers(1, 3))):
        expected = draw(st.none() | texts)
        calls = draw(st.lists(st.builds(lambda n, a: ToolCall(name=n, args=a), st.sampled_from(NAMES), args
                                        | st.just({})), max_size=3))
        conversation.append(Invocation(
            invocation_id=f"turn_{index}", user_content=MessageContent.user(draw(texts) or "q"),
            expected_final_response=MessageContent.assistant(expected) if expected is not None else None,
            expected_tool_trajectory=calls))
    return EvalCase(eval_id="synthetic", conversation=conversation)


cases = st.sampled_from(REAL_CASES) | synthetic_case()


@st.composite
def case_and_output(draw: Any, same_turns: bool = False) -> tuple[EvalCase, AgentOutput]:
    case = draw(cases)
    turns = len(case.conversation) if same_turns else draw(st.integers(0, len(case.conversation) + 1))
    out = []
    for index in range(turns):
        invocation = case.conversation[index] if index < len(case.conversation) else None
        expected = invocation.expected_final_response.get_text() \
            if invocation and invocation.expected_final_response else None
        calls = mutate_calls(draw, invocation.expected_tool_trajectory if invocation else [], NAMES)
        out.append(TurnOutput(final_response=mutate_text(draw, expected),
                              tool_calls=[OutputToolCall(name=c["name"], args=c["args"],
                                                         result=draw(st.none() | json_values)) for c in calls]))
    return case, AgentOutput(eval_id=case.eval_id, turns=out)


# --- ADK ------------------------------------------------------------------------------------------


@SETTINGS
@given(pair=case_and_output(same_turns=True), threshold=st.sampled_from([0.0, 0.5, 0.8, 1.0]))
def test_adk_response_match_score(libs: Bridge, pair: tuple[EvalCase, AgentOutput], threshold: float) -> None:
    # ADK scores one actual invocation per expected one (it raises on a count mismatch).
    case, output = pair
    results = evalsite("response_match_score", case, output, CriterionConfig(threshold=threshold))
    theirs = libs("adk_rouge", threshold=threshold,
                  expected=[i.expected_final_response.get_text() if i.expected_final_response else None
                            for i in case.conversation],
                  actual=[t.final_response for t in output.turns])
    score = theirs["score"]
    turns = [r for r in results if r.applies_to is Level.INTERACTION]
    assert [r.score for r in turns] == score["turns"], (case.eval_id, output.turns)
    assert [r.passed for r in turns] == score["passed"]
    assert overall(results).score == score["overall"]


@SETTINGS
@given(pair=case_and_output(same_turns=True), match_type=st.sampled_from(list(MatchType)),
       ignore_args=st.booleans(), threshold=st.sampled_from([0.0, 0.5, 1.0]))
def test_adk_tool_trajectory_avg_score(libs: Bridge, pair: tuple[EvalCase, AgentOutput], match_type: MatchType,
                                       ignore_args: bool, threshold: float) -> None:
    case, output = pair
    config = CriterionConfig(threshold=threshold, match_type=match_type, options={"ignore_args": ignore_args})
    results = evalsite("tool_trajectory_avg_score", case, output, config)
    theirs = libs("adk_trajectory", threshold=threshold, match_type=match_type.value, ignore_args=ignore_args,
                  expected=[[{"name": c.name, "args": c.args} for c in i.expected_tool_trajectory]
                            for i in case.conversation],
                  actual=[[{"name": c.name, "args": c.args} for c in t.tool_calls] for t in output.turns])
    score = theirs["score"]
    turns = [r for r in results if r.applies_to is Level.INTERACTION]
    context = f"{case.eval_id}: {[[c.name for c in t.tool_calls] for t in output.turns]}"
    assert [r.score for r in turns] == score["turns"], context
    assert [r.passed for r in turns] == score["passed"], context
    assert overall(results).score == score["overall"], context


def test_adk_examples_from_the_issue(libs: Bridge) -> None:
    for expected, actual, score in [
            ("東京の天気は晴れです", "東京の天気は曇りです", 0.8),
            ("The weather in Paris is sunny.", "The weather in Paris is sunny. Погода в Париже солнечная сегодня",
             12 / 17),
            ("fine 2024", "\ufb01ne \uff12\uff10\uff12\uff14", 1.0)]:
        case = EvalCase(eval_id="c", conversation=[Invocation(
            invocation_id="t", user_content=MessageContent.user("q"),
            expected_final_response=MessageContent.assistant(expected))])
        ours = overall(evalsite("response_match_score", case, AgentOutput(eval_id="c", turns=[
            TurnOutput(final_response=actual)]), CriterionConfig(threshold=0.5)))
        theirs = libs("adk_rouge", threshold=0.5, expected=[expected], actual=[actual])
        assert ours.score == theirs["score"]["overall"] == pytest.approx(score)


# --- ADK's own result files ----------------------------------------------------------------------

# The real ADK eval sets ADK's own loader runs with a scripted agent (trip_inquiry's older format
# raises KeyError 'data' in google-adk 2.13's loader; the live agent's cases are user-simulator
# scenarios, with no conversation to script).
ADK_HISTORY_SETS = ["hello_world_agent/roll_die.test.json", "ecommerce_customer_service_agent/order_query.test.json"]
# What `adk eval` scores with a default config, and google-adk 2.13's informational metrics.
ADK_HISTORY_METRICS = [["tool_trajectory_avg_score", 1.0], ["response_match_score", 0.8], ["tool_call_count_v1", None],
                       ["inference_call_count_v1", None], ["token_usage_v1", None], ["invocation_duration_v1", None]]
INFORMATIONAL = {"tool_call_count_v1", "inference_call_count_v1", "token_usage_v1", "invocation_duration_v1"}


def adk_script(cases: list[EvalCase]) -> dict[str, list[dict[str, Any]]]:
    """What the scripted agent says to each user message: the expected calls and answer, with
    every other turn changed (a call dropped, an argument changed, another answer)."""
    script: dict[str, list[dict[str, Any]]] = {}
    number = 0
    for case in cases:
        for invocation in case.conversation:
            said = invocation.user_content.get_text() or ""
            if said in script:
                continue
            calls = [{"call": c.name, "args": dict(c.args), "result": {"ok": True}}
                     for c in invocation.expected_tool_trajectory]
            answer = invocation.expected_final_response.get_text() if invocation.expected_final_response else ""
            change = number % 4
            if change == 1 and calls:
                calls.pop()
            elif change == 2 and calls and calls[0]["args"]:
                key = sorted(calls[0]["args"])[0]
                calls[0]["args"][key] = f"{calls[0]['args'][key]}-changed"
            elif change == 3:
                answer = f"Something else entirely, not {answer[:20]}"
            script[said] = [*calls, {"text": answer or "done"}]
            number += 1
    return script


@pytest.mark.parametrize("name", ADK_HISTORY_SETS)
def test_adk_eval_history_written_by_adk_reads_back_with_every_score(libs: Bridge, name: str) -> None:
    """google-adk 2.13 runs the eval set (LocalEvalService, as `adk eval` does) with a scripted
    agent and writes its eval history; evalsite's results reader takes that file with every
    metric as ADK recorded it (informational ones as values with no verdict), and the same file
    read as uploaded outputs scores exactly as ADK did."""
    from evaluations.interop import read_upload
    from evaluations.interop.outputs import read_outputs
    from evaluations.interop.results import read_results

    path = REALWORLD / "google-adk" / name
    [parsed_set] = read_upload([SourceFile(path.name, path.read_bytes())], format="adk")
    cases = parsed_set.evalset.eval_cases or (parsed_set.sink.cases if parsed_set.sink else [])
    written = libs("adk_eval_history", eval_set_path=str(path), eval_set_id=path.name.split(".")[0],
                   script=adk_script(cases), metrics=ADK_HISTORY_METRICS)
    assert "score" in written, written  # ADK raised
    written = written["score"]["file"]
    file = SourceFile(f"{path.name.split('.')[0]}.evalset_result.json", written.encode())
    doc = json.loads(written)
    doc = json.loads(doc) if isinstance(doc, str) else doc

    parsed = read_results(file)  # raises on any problem
    assert [c.key for c in parsed.cases] == [r["eval_id"] for r in doc["eval_case_results"]]
    for imported, raw in zip(parsed.cases, doc["eval_case_results"], strict=True):
        assert imported.passed is {1: True, 2: False}.get(raw["final_eval_status"])
        recorded = [(m["metric_name"], m["score"], m["eval_status"]) for m in raw["overall_eval_metric_results"]]
        recorded += [(m["metric_name"], m["score"], m["eval_status"]) for turn in
                     raw["eval_metric_result_per_invocation"] for m in turn["eval_metric_results"]]
        assert [(s.criterion, s.raw_value, s.justification["eval_status"]) for s in imported.scores] == recorded
        assert {m for m, _, status in recorded if status == 4} == INFORMATIONAL  # ADK 2.13 wrote them
        for score in imported.scores:
            if score.criterion in INFORMATIONAL:
                assert score.passed is None and score.score is None and score.justification["informational"]
            else:
                assert score.passed is (score.justification["eval_status"] == 1)

    outputs = {o.eval_id: o for o in read_outputs([file])}
    by_id = {c.eval_id: c for c in cases}
    compared = 0
    for raw in doc["eval_case_results"]:
        theirs = {m["metric_name"]: m["score"] for m in raw["overall_eval_metric_results"]}
        case, output = by_id[raw["eval_id"]], outputs[raw["eval_id"]]
        for metric, threshold in ADK_HISTORY_METRICS[:2]:
            ours = overall(evalsite(metric, case, output, CriterionConfig(threshold=threshold)))
            assert ours.score == theirs[metric], (name, raw["eval_id"], metric, ours, theirs[metric])
            compared += 1
    assert compared == 2 * len(doc["eval_case_results"]) > 0


# --- UiPath ---------------------------------------------------------------------------------------

CALCULATOR = REALWORLD / "uipath" / "calculator" / "evaluators"
UIPATH_NEW = ["exact-match.json", "contains.json", "json-similarity.json"]
UIPATH_LEGACY = ["legacy-equality.json", "legacy-equality-with-target-key.json", "legacy-json-similarity.json"]
LEGACY_BOOKKEEPING = {"id", "fileName", "description", "category", "type", "createdAt", "updatedAt"}

multiline = st.lists(st.sampled_from(["Line 1", "line 1", "Line 2", "Line 2 changed", "", "  ", "5", "5.0", "東京"]),
                     max_size=4).map("\n".join)
# The expected outputs of UiPath's calculator sample (legacy eval set and the evaluators' defaults).
CALCULATOR_OUTPUTS = [e["expectedOutput"] for e in json.loads(
    (REALWORLD / "uipath" / "calculator" / "eval-sets" / "legacy.json").read_text())["evaluations"]] + [
    json.loads((REALWORLD / "uipath" / "calculator" / "evaluators" / name).read_text())["evaluatorConfig"][
        "defaultEvaluationCriteria"]["expectedOutput"] for name in ("exact-match.json", "json-similarity.json")]
# Empty and falsy values, on both sides: UiPath's runtime turns a falsy agent output into {}.
empties = st.sampled_from(["", " ", "\n", {}, [], 0, 0.0, False, {"result": ""}, '""', "{}"])
uipath_values = (empties | st.sampled_from(CALCULATOR_OUTPUTS) | json_values | texts | multiline
                 | st.builds(lambda v: {"result": v}, json_values | multiline)
                 | st.builds(lambda v: {"result": {"result": v}}, multiline | json_values)  # the same key, nested
                 | st.builds(lambda v: json.dumps({"result": v}), json_values | multiline))  # JSON in a string


EXACT_MATCH_WHOLE = json.loads((CALCULATOR / "exact-match.json").read_text())
EXACT_MATCH_WHOLE["evaluatorConfig"]["targetOutputKey"] = "*"


@st.composite
def uipath_setup(draw: Any) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """(the evaluator definition UiPath reads, the evalsite evaluator name, evalsite's options)."""
    name = draw(st.sampled_from(UIPATH_NEW + UIPATH_LEGACY))
    definition = json.loads((CALCULATOR / name).read_text())
    key = draw(st.sampled_from(["*", "result"]))
    if name in UIPATH_NEW:
        config = definition["evaluatorConfig"]
        config["targetOutputKey"] = key
        if "json" not in name:
            config["lineByLineEvaluator"] = draw(st.booleans())
            config["lineDelimiter"] = draw(st.sampled_from(["\n", ","]))
            config["caseSensitive"] = draw(st.booleans())
            config["negated"] = draw(st.booleans())
        return definition, definition["evaluatorTypeId"], dict(config)
    definition["targetOutputKey"] = key
    definition["lineByLineEvaluation"] = draw(st.booleans())
    definition["lineDelimiter"] = draw(st.sampled_from(["\n", ","]))
    evaluator = {"legacy-equality.json": "uipath-legacy-exact-match",
                 "legacy-equality-with-target-key.json": "uipath-legacy-exact-match",
                 "legacy-json-similarity.json": "uipath-legacy-json-similarity"}[name]
    return definition, evaluator, {k: v for k, v in definition.items() if k not in LEGACY_BOOKKEEPING}


@SETTINGS
@example(setup=(EXACT_MATCH_WHOLE, "uipath-exact-match", dict(EXACT_MATCH_WHOLE["evaluatorConfig"])),
         expected="", actual="", search="", use_default=False)  # `uipath eval` gives 0.0: "" is {} to it
@given(setup=uipath_setup(), expected=uipath_values, actual=st.none() | empties | uipath_values,
       search=st.sampled_from(["5", "line", "Line 2", "東京", ""]), use_default=st.booleans())
def test_uipath_output_evaluators(libs: Bridge, setup: tuple[dict[str, Any], str, dict[str, Any]], expected: Any,
                                  actual: Any, search: str, use_default: bool) -> None:
    definition, evaluator, options = setup
    legacy = "evaluatorTypeId" not in definition
    if legacy:
        criteria: dict[str, Any] | None = {"expectedOutput": expected, "expectedAgentBehavior": ""}
    elif evaluator == "uipath-contains":
        criteria = None if use_default else {"searchText": search}
    else:
        criteria = None if use_default else {"expectedOutput": expected}
    case = EvalCase(eval_id="c", conversation=[Invocation(invocation_id="t", user_content=MessageContent.user("q"))],
                    criteria={"E": criteria})
    output = AgentOutput(eval_id="c", turns=[TurnOutput(final_response=actual)])
    [ours] = evalsite(evaluator, case, output, CriterionConfig(threshold=0.5, options=options), "E")
    theirs = libs("uipath", definition=definition, criteria=criteria, output=actual)
    same(ours, theirs, (definition, criteria, actual), raw=evaluator == "uipath-legacy-json-similarity")


# Any code point, lone surrogates included, and a small alphabet whose strings share runs.
edit_texts = (st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=30)
              | st.text(st.sampled_from("ab東京🙂\u0301 "), max_size=30))


@SETTINGS
@given(pairs=st.lists(st.tuples(edit_texts, edit_texts), min_size=1, max_size=10))
def test_uipath_edit_distance(libs: Bridge, pairs: list[tuple[str, str]]) -> None:
    """JSON similarity's string score is 1 - distance / longest: evalsite's distance (rapidfuzz)
    is the same integer as UiPath's own `_levenshtein`, in both its evaluators."""
    theirs = libs("uipath_levenshtein", pairs=pairs)["score"]
    assert [[levenshtein(a, b)] * 2 for a, b in pairs] == theirs, pairs


# --- DeepEval -------------------------------------------------------------------------------------

tool_options = st.fixed_dictionaries({}, optional={
    "should_consider_ordering": st.booleans(), "should_exact_match": st.booleans(),
    "evaluation_params": st.lists(st.sampled_from(["input_parameters", "output"]), unique=True),
    "strict_mode": st.booleans()})


@SETTINGS
@given(pair=case_and_output(), options=tool_options, threshold=st.sampled_from([0.0, 0.5, 0.8, 1.0]))
def test_deepeval_tool_correctness(libs: Bridge, pair: tuple[EvalCase, AgentOutput], options: dict[str, Any],
                                   threshold: float) -> None:
    case, output = pair
    [ours] = evalsite("deepeval_tool_correctness", case, output, CriterionConfig(threshold=threshold,
                                                                                  options=options))
    expected = [{"name": c.name, "args": c.args, "result": c.result} for i in case.conversation
                for c in i.expected_tool_trajectory]
    called = [{"name": c.name, "args": c.args, "result": c.result} for t in output.turns for c in t.tool_calls]
    same(ours, libs("deepeval_tool_correctness", threshold=threshold, options=options, expected=expected,
                    called=called), (expected, called, options))


@SETTINGS
@given(pair=case_and_output(), threshold=st.sampled_from([0.5, 1.0]))
def test_deepeval_exact_match(libs: Bridge, pair: tuple[EvalCase, AgentOutput], threshold: float) -> None:
    case, output = pair
    [ours] = evalsite("deepeval_exact_match", case, output, CriterionConfig(threshold=threshold))
    expected = next((i.expected_final_response.get_text() for i in reversed(case.conversation)
                     if i.expected_final_response is not None), None)
    actual = output.turns[-1].final_response if output.turns else None
    same(ours, libs("deepeval_exact_match", threshold=threshold, expected=expected, actual=actual),
         (expected, actual))


# --- AgentFlow ------------------------------------------------------------------------------------

AGENTFLOW = {"agentflow_trajectory_match": "trajectory_match", "agentflow_tool_name_match": "tool_name_match",
             "agentflow_rouge_match": "rouge_match", "agentflow_exact_match": "exact_match"}


def agentflow_case(case: EvalCase) -> dict[str, Any]:
    conversation = []
    for invocation in case.conversation:
        item: dict[str, Any] = {"invocation_id": invocation.invocation_id,
                                "user_content": {"role": "user", "content": invocation.user_content.content},
                                "expected_tool_trajectory": [{"name": c.name, "args": c.args}
                                                             for c in invocation.expected_tool_trajectory]}
        if invocation.expected_final_response is not None:
            item["expected_final_response"] = {"role": "assistant",
                                               "content": invocation.expected_final_response.content}
        conversation.append(item)
    return {"eval_id": case.eval_id, "conversation": conversation}


@pytest.mark.parametrize("evaluator", sorted(AGENTFLOW))
@SETTINGS
@given(pair=case_and_output(), match_type=st.sampled_from(list(MatchType)), check_args=st.booleans(),
       threshold=st.sampled_from([0.5, 0.7, 0.8, 1.0]))
def test_agentflow_criteria(agentflow: Bridge, pair: tuple[EvalCase, AgentOutput], evaluator: str,
                            match_type: MatchType, check_args: bool, threshold: float) -> None:
    case, output = pair
    options = {"check_args": check_args} if evaluator == "agentflow_trajectory_match" else {}
    [ours] = evalsite(evaluator, case, output, CriterionConfig(threshold=threshold, match_type=match_type,
                                                               options=options))
    last = output.turns[-1].final_response if output.turns else None
    theirs = agentflow("agentflow", criterion=AGENTFLOW[evaluator], case=agentflow_case(case),
                       config={"threshold": threshold, "match_type": match_type.value, "check_args": check_args},
                       tool_calls=[{"name": c.name, "args": c.args} for t in output.turns for c in t.tool_calls],
                       actual_response=last if isinstance(last, str) else "")
    same(ours, theirs, (evaluator, case.eval_id, output.turns))


# --- AgentFlow's own files -------------------------------------------------------------------------

node_names = st.sampled_from(["planner", "search", "book", "answer", "router"])


@st.composite
def agentflow_written_case(draw: Any, index: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """(an AgentFlow EvalCase as its fields, an execution of it: calls, node visits, answer)."""
    turns = []
    for turn in range(draw(st.integers(1, 3))):
        calls = draw(st.lists(st.builds(lambda n, a: {"name": n, "args": a}, st.sampled_from(NAMES), args),
                              max_size=2))
        turns.append({"invocation_id": f"t{turn}", "user_content": {"role": "user", "content": draw(texts)},
                      "expected_tool_trajectory": calls, "expected_node_order": draw(st.lists(node_names, max_size=4)),
                      "expected_final_response": {"role": "assistant", "content": draw(texts)}})
    case: dict[str, Any] = {"eval_id": f"case_{index}_{draw(st.integers(0, 99))}", "name": draw(texts),
                            "description": draw(texts), "conversation": turns, "tags": draw(st.lists(node_names,
                                                                                                      max_size=2))}
    if draw(st.booleans()):
        case["session_input"] = {"app_name": draw(texts), "user_id": "u1", "state": {"n": draw(st.integers(0, 3))},
                                 "config": {"k": "v"}}
    expected_nodes = [n for t in turns for n in t["expected_node_order"]]
    visits = draw(st.sampled_from([expected_nodes, expected_nodes[::-1], expected_nodes[1:], []]) | st.lists(node_names))
    execution = {"tool_calls": [c for t in turns for c in t["expected_tool_trajectory"]], "node_visits": visits,
                 "actual_response": draw(texts)}
    return case, execution


@settings(SETTINGS, max_examples=max(20, SETTINGS.max_examples // 10))
@given(data=st.data(), match_type=st.sampled_from(list(MatchType)), threshold=st.sampled_from([0.5, 1.0]))
def test_agentflow_files_read_back_and_node_order_scores_as_agentflow(agentflow: Bridge, data: Any,
                                                                      match_type: MatchType, threshold: float) -> None:
    """10xscale-agentflow 0.10.1 writes an eval set (its EvalSet.model_dump_json: cases with a
    description, expected_node_order, its {app_name, user_id, state, config} session input) and
    the EvalReport of its own criteria. evalsite reads both; the eval set it writes back is read
    by AgentFlow as the same content; node_order scores each execution as AgentFlow did, and the
    report's every criterion result is imported as AgentFlow recorded it."""
    from evaluations.interop import read_upload
    from evaluations.interop.results import read_results
    from evaluations.schemas.text import without_nul

    drawn = [data.draw(agentflow_written_case(i)) for i in range(data.draw(st.integers(1, 4)))]
    criteria = {"node_order": {"threshold": threshold, "match_type": match_type.value},
                "trajectory_match": {"threshold": threshold, "match_type": match_type.value}}
    written = agentflow("agentflow_files", eval_set_id="flow_set", name="Flow set", cases=[c for c, _ in drawn],
                        executions=[e for _, e in drawn], criteria=criteria)
    assert "score" in written, written
    files = written["score"]

    [parsed] = read_upload([SourceFile("flow_set.evalset.json", files["evalset"].encode())])
    assert parsed.format == "native"
    cases = parsed.evalset.eval_cases
    # evalsite reads a NUL as U+FFFD (docs/evalsets.md: PostgreSQL stores no NUL), so the
    # AgentFlow file it reads back is the one written, with that replacement made.
    theirs = without_nul(json.loads(files["evalset"]))
    ours = {**parsed.evalset.model_dump(mode="json"), "eval_cases": [c.model_dump(mode="json") for c in cases]}
    back = json.loads(agentflow("agentflow_reads", text=json.dumps(ours))["score"]["evalset"])
    assert back == theirs  # AgentFlow reads evalsite's native dump as the file it wrote
    for case, raw in zip(cases, theirs["eval_cases"], strict=True):
        assert case.description == raw["description"]
        assert [i.expected_node_order for i in case.conversation] == [i["expected_node_order"] for i in raw["conversation"]]
        dumped = case.model_dump(mode="json")["session_input"]
        if "session_input" in drawn[cases.index(case)][0]:
            assert set(dumped) == {"app_name", "user_id", "state", "config"}  # the shape that was read

    report = json.loads(files["report"])
    for case, (_, execution), result in zip(cases, drawn, report["results"], strict=True):
        output = AgentOutput(eval_id=case.eval_id, trajectory=[
            {"step_type": "NODE", "name": node} for node in execution["node_visits"]])
        [mine] = evalsite("node_order", case, output, CriterionConfig(threshold=threshold, match_type=match_type))
        [recorded] = [r for r in result["criterion_results"] if r["criterion"] == "node_order_score"]
        assert (mine.score, mine.passed) == (recorded["score"], recorded["passed"]), (execution, recorded)
    imported = read_results(SourceFile("report.json", files["report"].encode()))
    assert imported.tool == "agentflow"
    for case_result, raw_result in zip(imported.cases, report["results"], strict=True):
        assert case_result.passed is raw_result["passed"]
        assert [(s.criterion, s.raw_value, s.passed) for s in case_result.scores] == [
            (r["criterion"], r["score"], r["passed"]) for r in raw_result["criterion_results"]]


def pins(name: str) -> dict[str, str]:
    lines = (REPO / name).read_text().splitlines()
    pairs = (line.split("==") for line in lines if "==" in line and not line.startswith("#"))
    return {name.split("[")[0]: version for name, version in pairs}  # google-adk[eval] is google-adk


def test_the_venv_holds_the_pinned_libraries(libs: Bridge) -> None:
    """A stale venv would compare against other versions than the ones the README names."""
    wanted = pins("requirements-differential.txt")
    assert {"google-adk", "uipath", "deepeval"} <= set(wanted)
    assert libs("versions", packages=sorted(wanted))["score"] == wanted


def test_the_py312_venv_holds_the_pinned_agentflow(agentflow: Bridge) -> None:
    wanted = pins("requirements-differential-py312.txt")
    assert agentflow("versions", packages=sorted(wanted))["score"] == wanted == {"10xscale-agentflow": "0.10.1"}
