"""One case's tool-call trajectories across 2-8 runs, side by side in aligned rows.

Each turn is aligned on a pivot: the case's expected tool calls for that turn when the case
expects any, else the reference run's calls. Every run's calls are paired with the pivot's by
the alignment the two-run diff uses (`evaluators.diffing.align`, in order): a pivot call's
row holds each run's call that answers it (matched, or the same tool with other arguments),
or a gap where the run missed it; the calls a run made beyond the pivot sit in rows of their
own, after the pivot call they followed. Rows line up across all runs because every run is
aligned on the same pivot.

A row **diverges** when the runs' cells differ (another tool, other arguments, a call one
run made and another did not); the first diverging row of the case is where the runs part
ways. Simulated results (the model target) keep their source, which the page shows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evaluations.evaluators.diffing import ARGS_DIFFER, MATCHED, MISSING, align
from evaluations.models import CaseResult, EvalCase, Run
from evaluations.schemas.evalset import MatchType, ToolCall


@dataclass(frozen=True)
class Cell:
    kind: str  # matched / args_differ / missing / unexpected / absent (the run has no such turn or case)
    name: str = ""
    args: str = ""  # compact JSON
    result: str | None = None
    error: str | None = None
    simulated: str | None = None

    @property
    def signature(self) -> tuple[str, str] | None:
        return None if self.kind in (MISSING, "absent") else (self.name, self.args)


@dataclass(frozen=True)
class Row:
    turn: int  # 1-based
    step: int  # 1-based within the table
    pivot: Cell | None  # None: a row of calls beyond the pivot
    cells: list[Cell]
    first_divergence: bool = False

    @property
    def diverges(self) -> bool:
        return len({cell.signature for cell in self.cells}) > 1


@dataclass(frozen=True)
class TurnEnd:
    turn: int
    responses: list[str]  # each run's final response for the turn
    diverges: bool


@dataclass
class Table:
    eval_id: str
    pivot_label: str  # "expected" or the reference run's label
    labels: list[str]
    run_ids: list[int]
    result_pks: list[int | None]
    statuses: list[str]
    rows: list[Row] = field(default_factory=list)
    ends: list[TurnEnd] = field(default_factory=list)

    @property
    def first_divergence(self) -> Row | None:
        return next((row for row in self.rows if row.first_divergence), None)

    @property
    def turns(self) -> list[tuple[int, list[Row], TurnEnd | None]]:
        numbers = sorted({row.turn for row in self.rows} | {end.turn for end in self.ends})
        ends = {end.turn: end for end in self.ends}
        return [(n, [row for row in self.rows if row.turn == n], ends.get(n)) for n in numbers]

    def as_dict(self) -> dict[str, Any]:
        def cell(c: Cell | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {"kind": c.kind, "name": c.name or None, "args": json.loads(c.args) if c.args else None,
                    "result": c.result, "error": c.error, "simulated": c.simulated}

        return {"eval_id": self.eval_id, "pivot": self.pivot_label,
                "runs": [{"id": pk, "label": label, "result": result, "status": status}
                         for pk, label, result, status in zip(self.run_ids, self.labels, self.result_pks,
                                                              self.statuses, strict=True)],
                "rows": [{"turn": r.turn, "step": r.step, "diverges": r.diverges,
                          "first_divergence": r.first_divergence, "pivot": cell(r.pivot),
                          "cells": [cell(c) for c in r.cells]} for r in self.rows],
                "final_responses": [{"turn": e.turn, "diverges": e.diverges, "responses": e.responses}
                                    for e in self.ends]}


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "), default=str)


def _calls(turn: dict[str, Any]) -> list[tuple[ToolCall, dict[str, Any]]]:
    out = []
    for raw in turn.get("tool_calls") or []:
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            args = raw.get("args")
            out.append((ToolCall(name=raw["name"], args=args if isinstance(args, dict) else {}), raw))
    return out


def _cell(kind: str, raw: dict[str, Any] | None) -> Cell:
    if raw is None:
        return Cell(kind)
    result = raw.get("result")
    return Cell(kind, str(raw.get("name", "")), _compact(raw.get("args") if isinstance(raw.get("args"), dict) else {}),
                None if result is None else _compact(result), raw.get("error") if isinstance(raw.get("error"), str)
                else None, raw.get("simulated") if isinstance(raw.get("simulated"), str) else None)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return _compact(value)


def trajectories_across(runs: list[Run], labels: list[str], eval_id: str) -> Table | None:
    """The aligned table of one case across the runs (their first repeat); None when no run
    has the case. Two queries."""
    results = {r["run_id"]: r for r in CaseResult.objects.filter(run__in=runs, case__eval_id=eval_id)
               .order_by("-iteration", "-pk").values("pk", "run_id", "status", "output", "case_id")}
    if not results:
        return None
    reference = next(results[run.pk] for run in runs if run.pk in results)
    conversation = (EvalCase.objects.filter(pk=reference["case_id"]).values_list("conversation", flat=True).first()
                    or [])
    expected = [[ToolCall(name=c["name"], args=c.get("args") or {}) for c in inv.get("expected_tool_trajectory") or []
                 if isinstance(c, dict) and isinstance(c.get("name"), str)]
                for inv in conversation if isinstance(inv, dict)]
    raw_expected = [[c for c in inv.get("expected_tool_trajectory") or [] if isinstance(c, dict)]
                    for inv in conversation if isinstance(inv, dict)]
    use_expected = any(expected)
    turns_of: list[list[dict[str, Any]] | None] = []
    for run in runs:
        found = results.get(run.pk)
        output = found["output"] if found is not None and isinstance(found["output"], dict) else None
        turns_of.append([t for t in output.get("turns") or [] if isinstance(t, dict)] if output is not None else None)
    table = Table(eval_id, "expected" if use_expected else labels[runs.index(next(r for r in runs if r.pk in results))],
                  labels, [run.pk for run in runs], [results[run.pk]["pk"] if run.pk in results else None
                                                     for run in runs],
                  [results[run.pk]["status"] if run.pk in results else "" for run in runs])
    reference_index = next(i for i, run in enumerate(runs) if run.pk in results)
    turn_count = max([len(expected)] + [len(t) for t in turns_of if t is not None])
    step = 0
    diverged = False
    for t in range(turn_count):
        if use_expected:
            pivot = expected[t] if t < len(expected) else []
            pivot_raw: list[dict[str, Any]] = raw_expected[t] if t < len(raw_expected) else []
        else:
            reference_turns = turns_of[reference_index] or []
            pairs = _calls(reference_turns[t]) if t < len(reference_turns) else []
            pivot, pivot_raw = [c for c, _ in pairs], [raw for _, raw in pairs]
        at_pivot: list[list[Cell]] = []  # per run, a cell per pivot call
        beyond: list[dict[int, list[Cell]]] = []  # per run: pivot index -> the calls after it
        for turns in turns_of:
            if turns is None or t >= len(turns):
                at_pivot.append([Cell("absent")] * len(pivot))
                beyond.append({})
                continue
            calls = _calls(turns[t])
            cells = [Cell(MISSING)] * len(pivot)
            extra: dict[int, list[Cell]] = {}
            rows = align(pivot, [c for c, _ in calls], MatchType.IN_ORDER).rows
            # An extra call goes after the pivot call answered just before it in the run's own order.
            answered = sorted((r.actual_index, r.expected_index) for r in rows
                              if r.actual_index is not None and r.expected_index is not None)
            for paired in rows:
                raw = calls[paired.actual_index][1] if paired.actual_index is not None else None
                if paired.expected_index is not None:
                    cells[paired.expected_index] = _cell(paired.kind if paired.kind in (MATCHED, ARGS_DIFFER)
                                                         else MISSING, raw)
                elif paired.actual_index is not None:
                    anchor = max((e for a, e in answered if a < paired.actual_index), default=-1)
                    extra.setdefault(anchor, []).append(_cell(paired.kind, raw))
            at_pivot.append(cells)
            beyond.append(extra)
        for k in range(-1, len(pivot)):
            if k >= 0:
                step += 1
                row = Row(t + 1, step, _cell(MATCHED, pivot_raw[k]) if k < len(pivot_raw) else None,
                          [cells[k] for cells in at_pivot])
                row = _mark(row, diverged)
                diverged = diverged or row.diverges
                table.rows.append(row)
            depth = max((len(extra.get(k, [])) for extra in beyond), default=0)
            for j in range(depth):
                step += 1
                cells_beyond = [extra[k][j] if j < len(extra.get(k, [])) else Cell(MISSING) for extra in beyond]
                row = _mark(Row(t + 1, step, None, cells_beyond), diverged)
                diverged = diverged or row.diverges
                table.rows.append(row)
        responses = [_text(turns[t].get("final_response")) if turns is not None and t < len(turns) else ""
                     for turns in turns_of]
        table.ends.append(TurnEnd(t + 1, responses, len(set(responses)) > 1))
    return table


def _mark(row: Row, diverged: bool) -> Row:
    if row.diverges and not diverged:
        return Row(row.turn, row.step, row.pivot, row.cells, first_divergence=True)
    return row
