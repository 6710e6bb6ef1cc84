"""Results promoted into cases: what a run's agent actually said and called, proposed as a
case's expectation. Selectors only: the proposal is shown in the case editor (or saved in
one step for a selection) and written by `evalsets.curation.evalset_edit`.

(Promotion from an ingested OTLP trace is not here yet: traces are received by another piece
of work; once a trace becomes a run result it can be promoted like any other result.)"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from evaluations.evalsets.curation import CASE_FIELDS, case_native
from evaluations.evaluators.base import aligned_turns, text_of
from evaluations.models import CaseResult, EvalCase, EvalSetVersion, Run
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.outputs import AgentOutput


def _free(wanted: str, taken: set[str]) -> str:
    candidate, n = wanted, 2
    while candidate in taken:
        candidate, n = f"{wanted}-{n}", n + 1
    return candidate


def proposed_case(*, base: dict[str, Any], result: CaseResult, new_case: bool, taken: set[str]) -> dict[str, Any]:
    """`base` (a native case dict) with each turn's expected response and expected tool calls
    replaced by the agent's actual ones in `result`. A new case gets a free eval id, named
    after the run, and the tag `promoted`."""
    case = dict(base)
    try:
        native = NativeCase.model_validate(base)
        output = AgentOutput.model_validate(result.output) if result.output else None
    except ValidationError:
        native, output = None, None
    if native is not None and output is not None:
        conversation = []
        for invocation, turn in aligned_turns(native, output):
            data = invocation.model_dump(mode="json")
            if turn is not None:
                text = text_of(turn.final_response)
                data["expected_final_response"] = {"role": "model", "content": text} if text else None
                data["expected_tool_trajectory"] = [{"name": c.name, "args": c.args} for c in turn.tool_calls]
            conversation.append(data)
        case["conversation"] = conversation
    if new_case:
        case["eval_id"] = _free(f"{base.get('eval_id') or 'case'}-run{result.run_id}", taken)
        taken.add(case["eval_id"])
        case["tags"] = list(dict.fromkeys([*(base.get("tags") or []), "promoted"]))
    return case


def proposed_expectations(*, run: Run, version: EvalSetVersion, eval_ids: list[str]) -> list[dict[str, Any]]:
    """The cases of `version` named by `eval_ids` with the run's answers as their expected
    ones (its first repeat of each); ids the version no longer has are left out. Two queries."""
    current = {
        c.eval_id: case_native(c) for c in EvalCase.objects.in_version_by_eval_id(version, eval_ids).only(*CASE_FIELDS)
    }
    results = (
        CaseResult.objects.filter(run=run, case__eval_id__in=list(current))
        .select_related("case")
        .only("pk", "run_id", "iteration", "output", "case__eval_id")
        .order_by("case__position", "iteration")
    )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for result in results:
        eval_id = result.case.eval_id
        if eval_id not in seen:
            seen.add(eval_id)
            out.append(proposed_case(base=current[eval_id], result=result, new_case=False, taken=set()))
    return out


def proposed_cases(*, run: Run, eval_ids: list[str], taken: set[str]) -> list[dict[str, Any]]:
    """New cases from a run's results for `eval_ids` (its first repeat of each), in the
    run's case order: two queries."""
    results = (
        CaseResult.objects.filter(run=run, case__eval_id__in=eval_ids)
        .select_related("case")
        .only("pk", "run_id", "iteration", "output", "case_id", *(f"case__{f}" for f in CASE_FIELDS), "case__position")
        .order_by("case__position", "iteration")
    )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for result in results:
        if result.case.eval_id in seen:
            continue
        seen.add(result.case.eval_id)
        out.append(proposed_case(base=case_native(result.case), result=result, new_case=True, taken=taken))
    return out
