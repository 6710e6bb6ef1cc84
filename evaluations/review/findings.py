"""The changed cases a comparison leads with: each regression with its tags, the criteria it
fails, its repeats ("2/2 → 0/2") and a one-line cause read from the tool-call diff
("missing get_weather(city=Rome); city Oslo→Milan").

A fixed number of queries whatever the runs' size: the cases come from the comparison's
summary (already loaded), and at most `LIMIT` of each kind are read, in two queries (the
candidate's results with their cases and outputs; their failing scores).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from evaluations.evaluators.base import aligned_turns
from evaluations.evaluators.diffing import ADDED, ARGS_DIFFER, MISSING, REMOVED, UNEXPECTED, align
from evaluations.models import CaseResult, Run, Score
from evaluations.review import comparison
from evaluations.review.verdict import reproducibility
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import MatchType, ToolCall
from evaluations.schemas.outputs import AgentOutput

LIMIT = 20  # per kind: the rest are one click away in the cases table
VALUE_CHARS = 40
CAUSE_PARTS = 3


@dataclass(frozen=True)
class Finding:
    eval_id: str
    status: comparison.StatusStyle
    tags: tuple[str, ...]
    failing: tuple[str, ...]  # criteria the candidate failed
    repeats: str  # "2/2 → 0/2"
    reproducibility: str
    cause: str
    result_pk: int | None  # the candidate's result a link opens


def value_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def call_text(call: ToolCall) -> str:
    """`get_weather(city=Rome)`."""
    args = call.args if isinstance(call.args, dict) else {}
    return f"{call.name}({', '.join(f'{k}={value_text(v)}' for k, v in args.items())})"


def cause_of(case: NativeCase, output: AgentOutput | None, error: str, match_type: MatchType = MatchType.IN_ORDER,
             rules: Any = None) -> str:
    """What went wrong, in one line: the tool-call diff's missing and unexpected calls and
    changed arguments, else the error, else the turns that were not answered."""
    if output is None:
        return _first_line(error) or "no output recorded"
    parts: list[str] = []
    for number, (invocation, turn) in enumerate(aligned_turns(case, output), start=1):
        if turn is None:
            parts.append(f"turn {number} not answered")
            continue
        if turn.error:
            parts.append(f"turn {number}: {_first_line(turn.error)}")
        kwargs = {"rules": rules} if rules is not None else {}
        for row in align(invocation.expected_tool_trajectory, turn.tool_calls, match_type, **kwargs).rows:
            if row.kind == MISSING and row.expected is not None:
                parts.append(f"missing {call_text(row.expected)}")
            elif row.kind == UNEXPECTED and row.actual is not None:
                parts.append(f"unexpected {call_text(row.actual)}")
            elif row.kind == ARGS_DIFFER:
                for diff in row.arg_diffs:
                    if diff.kind == ADDED:
                        parts.append(f"{diff.path} added ={value_text(diff.actual)}")
                    elif diff.kind == REMOVED:
                        parts.append(f"{diff.path} dropped (was {value_text(diff.expected)})")
                    else:
                        parts.append(f"{diff.path} {value_text(diff.expected)}→{value_text(diff.actual)}")
    if not parts and (output.error or error):
        parts.append(_first_line(output.error or error))
    if not parts:
        return ""
    shown = "; ".join(parts[:CAUSE_PARTS])
    return shown + (f"; +{len(parts) - CAUSE_PARTS} more" if len(parts) > CAUSE_PARTS else "")


def _first_line(text: str | None) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= 120 else line[:119] + "…"


def repeats_text(raw: dict[str, Any]) -> str:
    """"2/2 → 0/2": passed repeats over repeats in the baseline, then the candidate."""
    before = f"{raw['bp']}/{raw['bn']}" if raw["bn"] else "—"
    after = f"{raw['cp']}/{raw['cn']}" if raw["cn"] else "—"
    return f"{before} → {after}"


def findings(source: comparison.CaseSource, candidate: Run, statuses: Sequence[str] = (comparison.REGRESSED,),
             limit: int = LIMIT) -> dict[str, list[Finding]]:
    """The first `limit` cases of each of `statuses` (in the comparison's order), explained."""
    from evaluations.review.selectors import trajectory_settings

    chosen = {status: source.first(status, limit) for status in statuses}
    pks = [c["cr"] for cases in chosen.values() for c in cases if c["cr"] is not None]
    results = ({r.pk: r for r in CaseResult.objects.filter(pk__in=pks, run=candidate).select_related("case")}
               if pks else {})
    failing: dict[int, list[str]] = {}
    for result_id, criterion in (Score.objects.filter(result_id__in=list(results), passed=False,
                                                      applies_to=Score.Level.CONVERSATION)
                                 .order_by("criterion").values_list("result_id", "criterion") if results else []):
        failing.setdefault(result_id, []).append(criterion)
    match_type, rules = trajectory_settings(candidate.config)
    out: dict[str, list[Finding]] = {}
    for status, cases in chosen.items():
        rows = []
        for raw in cases:
            result = results.get(raw["cr"]) if raw["cr"] is not None else None
            cause = ""
            tags: tuple[str, ...] = ()
            if result is not None:
                tags = tuple(str(t) for t in result.case.tags or ())
                if status == comparison.REGRESSED:
                    cause = _cause(result, match_type, rules)
            rows.append(Finding(raw["id"], comparison.STATUSES[status], tags,
                                tuple(failing.get(raw["cr"], ())) if raw["cr"] is not None else (),
                                repeats_text(raw), reproducibility(raw["cn"]) if status == comparison.REGRESSED
                                else "", cause, raw["cr"]))
        out[status] = rows
    return out


def _cause(result: CaseResult, match_type: MatchType, rules: Any) -> str:
    from evaluations.runs.engine import native_case

    if result.output is None:
        return _first_line(result.error) or "no output recorded"
    try:
        case = native_case(result.case)
        output = AgentOutput.model_validate(result.output)
    except (ValidationError, ValueError):
        return _first_line(result.error)
    return cause_of(case, output, result.error, match_type, rules)
