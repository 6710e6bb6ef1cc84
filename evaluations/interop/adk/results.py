"""ADK results files, read for `results_import` (`interop/results.py` is the registry).

- **ADK** `.adk/eval_history/*.evalset_result.json` (an `EvalSetResult`, snake_case or camelCase,
  also ADK's older double-encoded JSON string): per case `overall_eval_metric_results[]`
  (`metric_name`, `threshold`, `score`, `eval_status` 1 passed / 2 failed / 3 not evaluated /
  4 informational: google-adk 2.13's efficiency metrics, kept as a value with no verdict,
  `details`), per turn `eval_metric_result_per_invocation[].eval_metric_results[]`, the case's
  `final_eval_status`; the agent's outputs are read as uploaded outputs read them
  (`interop/outputs.py`). The eval set is the one chosen, else the project's eval set whose
  id is the file's `eval_set_id`, else one created from the expected invocations ADK paired the
  agent's turns with (`eval_metric_result_per_invocation[].expected_invocation`), when every case
  has them.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from evaluations.interop.base import SourceFile
from evaluations.interop.outputs import read_outputs
from evaluations.interop.results import (
    ImportedCase,
    ImportedScore,
    ParsedResults,
    Path,
    Reader,
    ResultsFormat,
    kind,
    unit,
)

_MARKERS = ("eval_case_results", "evalCaseResults")
_STATUS = {1: True, 2: False}
# EvalStatus: PASSED, FAILED, NOT_EVALUATED, and (google-adk 2.13) INFORMATIONAL.
_INFORMATIONAL = 4
_EVAL_STATUSES = (1, 2, 3, _INFORMATIONAL)

def _adk(r: Reader) -> ParsedResults:
    doc = r.doc
    if not isinstance(doc, dict):
        r.add((), f"expected an object, not {kind(doc)}")
        return ParsedResults("adk", r.file, "", [])
    cases: list[ImportedCase] = []
    seen: Counter[str] = Counter()
    for path, item in r.items(doc, "eval_case_results", ()):
        eval_id = r.text_field(item, "eval_id", path)
        if eval_id is None:
            continue
        case = ImportedCase(eval_id, path, iteration=seen[eval_id])
        seen[eval_id] += 1
        status = r.get(item, "final_eval_status")
        if status is not None and status not in (1, 2, 3):
            r.add((*path, r.key_of(item, "final_eval_status")), "expected 1 (passed), 2 (failed) or 3 "
                  "(not evaluated)", eval_id)
        case.passed = _STATUS.get(status) if isinstance(status, int) else None
        case.not_evaluated = status == 3
        for mpath, metric in r.items(item, "overall_eval_metric_results", path, eval_id, required=False):
            score = _adk_metric(r, metric, mpath, eval_id, -1)
            if score is not None:
                case.scores.append(score)
        expected = []
        for turn, (ipath, invocation) in enumerate(r.items(item, "eval_metric_result_per_invocation", path, eval_id,
                                                           required=False)):
            expected.append(r.get(invocation, "expected_invocation"))
            for mpath, metric in r.items(invocation, "eval_metric_results", ipath, eval_id, required=False):
                score = _adk_metric(r, metric, mpath, eval_id, turn)
                if score is not None:
                    case.scores.append(score)
        if expected and all(isinstance(e, dict) for e in expected):
            # What ADK paired the agent's turns with: the case, as an ADK EvalCase.
            case.golden = {"eval_id": eval_id, "conversation": expected}
        cases.append(case)
    if not r.problems:
        outputs = read_outputs([SourceFile(r.file.name, json.dumps(doc).encode() if r.text is None else r.file.data)])
        by_key = {(o.eval_id, o.iteration): o for o in outputs}
        for case in cases:
            case.output = by_key.get((case.key, case.iteration))
            if case.output is not None:
                case.latency = case.output.total_latency()
    eval_set_id = r.get(doc, "eval_set_id")
    return ParsedResults("adk", r.file, eval_set_id if isinstance(eval_set_id, str) else "", cases)


def _adk_metric(r: Reader, metric: dict[str, Any], path: Path, case: str, turn: int) -> ImportedScore | None:
    name = r.text_field(metric, "metric_name", path, case)
    value = r.number(metric, "score", path, case)
    threshold = r.number(metric, "threshold", path, case)
    status = r.get(metric, "eval_status")
    if status is not None and status not in _EVAL_STATUSES:
        r.add((*path, r.key_of(metric, "eval_status")),
              "expected 1 (passed), 2 (failed), 3 (not evaluated) or 4 (informational)", case)
    if name is None:
        return None
    details = r.get(metric, "details")
    justification: dict[str, Any] = {"imported_from": "adk", "eval_status": status, "threshold": threshold}
    if details is not None:
        justification["details"] = details
    if status == _INFORMATIONAL:
        # ADK 2.13's reference-free metrics (tool_call_count_v1, token_usage_v1, ...): a value
        # recorded, in its own unit, that never passes or fails a case (ADK leaves them out of
        # final_eval_status). Kept as the raw value, with no score and no verdict.
        justification["informational"] = True
        return ImportedScore(name, value, None, None, threshold, justification, turn_index=turn)
    return ImportedScore(name, value, unit(value), _STATUS.get(status) if isinstance(status, int) else None,
                         threshold, justification,
                         error="not evaluated (ADK eval_status 3)" if status == 3 else "", turn_index=turn)


def _claims(doc: Any) -> bool:
    if isinstance(doc, str):  # ADK's older double-encoded EvalSetResult
        return any(m in doc for m in _MARKERS)
    return isinstance(doc, dict) and any(m in doc for m in _MARKERS)


results_format = ResultsFormat("adk", _claims, _adk)
