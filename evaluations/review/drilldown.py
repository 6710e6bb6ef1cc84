"""Pieces of the case drill-down that help a reviewer read it: whether two responses are close
enough to diff word by word (else they are shown side by side), an evaluator's justification
as rows of a table, and the run's other repeats of the case."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from evaluations.evaluators.base import aligned_turns
from evaluations.models import CaseResult
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import Invocation
from evaluations.schemas.outputs import AgentOutput, TurnOutput

# Below this share of unchanged text a word diff interleaves two unrelated texts: the
# responses are shown side by side instead.
CLOSE_ENOUGH = 0.5
MAX_ROWS = 40
VALUE_CHARS = 600


def shared_fraction(segments: list[Any]) -> float:
    """How much of the longer text the word diff keeps unchanged (0..1)."""
    equal = sum(len(s.text) for s in segments if s.kind == "equal")
    before = equal + sum(len(s.text) for s in segments if s.kind == "del")
    after = equal + sum(len(s.text) for s in segments if s.kind == "ins")
    longest = max(before, after)
    return equal / longest if longest else 1.0


@dataclass(frozen=True)
class Row:
    key: str
    value: str
    long: bool


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def justification_rows(value: Any, prefix: str = "", rows: list[Row] | None = None, depth: int = 0) -> list[Row]:
    """A justification as `path: value` rows: objects are opened two levels deep (lists of
    plain values stay on one row), longer structures are shown as compact JSON."""
    rows = [] if rows is None else rows
    if isinstance(value, dict) and value and depth < 2:
        for key in sorted(value, key=str):
            justification_rows(value[key], f"{prefix}.{key}" if prefix else str(key), rows, depth + 1)
    elif isinstance(value, list) and value and depth < 2 and any(isinstance(v, dict) for v in value):
        for index, item in enumerate(value):
            justification_rows(item, f"{prefix}[{index}]", rows, depth + 1)
    else:
        text = _text(value)
        rows.append(Row(prefix or "value", text, len(text) > VALUE_CHARS))
    return rows[:MAX_ROWS] if depth == 0 else rows


@dataclass(frozen=True)
class Repeat:
    number: int  # 1-based
    status: str
    pk: int
    current: bool


def repeats_of(result: CaseResult) -> list[Repeat]:
    """The run's results for the same case, one per iteration: one query; empty when the
    run has a single repeat."""
    rows = list(CaseResult.objects.filter(run_id=result.run_id, case_id=result.case_id).order_by("iteration")
                .values_list("pk", "iteration", "status"))
    if len(rows) < 2:
        return []
    return [Repeat(iteration + 1, status, pk, pk == result.pk) for pk, iteration, status in rows]


def result_output(result: CaseResult) -> tuple[AgentOutput | None, str | None]:
    """The result's output as the evaluators saw it (a trace fills in what the agent did
    not report), or why there is none."""
    if result.output is None:
        return None, result.error or "no output was recorded for this case"
    try:
        output = AgentOutput.model_validate(result.output)
    except ValidationError as exc:
        return None, f"the stored output cannot be read: {exc}"
    if output.trace:
        from evaluations.interop.otel.spans import apply_trace

        with contextlib.suppress(Exception):  # a broken trace was reported when the run scored it
            output = apply_trace(output)
    return output, output.error


def turn_pairs(case: NativeCase, output: AgentOutput | None) -> list[tuple[Invocation | None, TurnOutput | None]]:
    """Each expected turn with the actual turn that answers it, then actual turns nothing
    expected (a simulated conversation has only those)."""
    if output is None:
        return [(inv, None) for inv in case.conversation]
    pairs: list[tuple[Invocation | None, TurnOutput | None]] = list(aligned_turns(case, output))
    used = {id(turn) for _, turn in pairs if turn is not None}
    pairs += [(None, turn) for turn in output.turns if id(turn) not in used]
    return pairs


# --- A DeepEval judged metric's steps (issue 42) ------------------------------------------------

STEP_LABELS = {"statements": "Statements", "truths": "Truths", "claims": "Claims", "opinions": "Opinions",
               "questions": "Assessment questions", "intentions": "User intentions", "evaluation_steps":
               "Evaluation steps", "verdicts": "Verdicts", "coverage": "Coverage answers", "knowledge": "Knowledge",
               "out_of_character": "Out of character", "tool_selection": "Tool selection",
               "argument_correctness": "Argument correctness"}
MAX_STEP_ITEMS = 50
STEP_ORDER = ["task", "outcome", "statements", "truths", "claims", "opinions", "questions", "coverage", "intentions",
              "knowledge", "evaluation_steps", "verdicts", "out_of_character", "tool_selection", "argument_correctness",
              "verdict", "judge_score", "score_range", "score_breakdown"]


@dataclass(frozen=True)
class StepItem:
    text: str
    verdict: str = ""  # yes / no / borderline, or a number
    reason: str = ""


@dataclass(frozen=True)
class JudgedStep:
    label: str
    items: list[StepItem]


@dataclass(frozen=True)
class JudgedSteps:
    metric: str
    reason: str | None
    steps: list[JudgedStep]
    facts: list[tuple[str, str]]  # single values: the task, the judge's raw score...


def _item(value: Any) -> StepItem:
    if isinstance(value, dict):
        verdict = value.get("verdict", value.get("score", value.get("index", "")))
        text = value.get("statement") or value.get("question") or value.get("ai_message") or ""
        if "summary_verdict" in value:
            verdict = f"original {value.get('original_verdict')} / summary {value.get('summary_verdict')}"
        return StepItem(_text(text) if text else "", _text(verdict) if verdict != "" else "",
                        _text(value.get("reason")) if value.get("reason") is not None else "")
    if value is None:
        return StepItem("(the judge's reply was dropped: outside the verdict vocabulary)")
    return StepItem(_text(value))


def judged_steps(justification: dict[str, Any]) -> JudgedSteps | None:
    """What a `deepeval_*` judged criterion recorded, as the drill-down lists it: its reason,
    then each step's items (statements, verdicts with their reasons...) in order."""
    about, steps = justification.get("deepeval"), justification.get("steps")
    if not isinstance(about, dict) or not isinstance(steps, dict):
        return None
    shown: list[JudgedStep] = []
    facts: list[tuple[str, str]] = []
    # in the metric's order (PostgreSQL's jsonb does not keep the keys' order)
    for key in sorted(steps, key=lambda k: (STEP_ORDER.index(k) if k in STEP_ORDER else len(STEP_ORDER), k)):
        value = steps[key]
        label = STEP_LABELS.get(key, key.replace("_", " ").capitalize())
        if isinstance(value, list):
            flat = [v for group in value for v in group] if value and all(isinstance(v, list) for v in value) \
                else value  # contextual relevancy: a list of verdicts per retrieved document
            shown.append(JudgedStep(label, [_item(v) for v in flat[:MAX_STEP_ITEMS]]))
        else:
            facts.append((label, _text(value)))
    reason = justification.get("reason")
    return JudgedSteps(str(about.get("metric", "")), None if reason is None else _text(reason), shown, facts)
