"""AgentFlow results files, read for `results_import` (`interop/results.py` is the registry).

- **AgentFlow** `EvalReport` (`eval_set_id`, `results[]` of `EvalCaseResult` with
  `criterion_results[]`: `criterion`, `score`, `passed`, `threshold`, `details`; 10xscale-agentflow
  0.10 writes `summary` beside them, the documented shape a `report_id`): no outputs and no cases,
  matched by eval id against the chosen eval set (else the one with `eval_set_id`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evaluations.interop.results import ImportedCase, ImportedScore, ParsedResults, Reader, ResultsFormat, unit


def _agentflow(r: Reader) -> ParsedResults:
    doc = r.doc
    cases = []
    seen: Counter[str] = Counter()
    for path, row in r.items(doc, "results", ()):
        eval_id = r.text_field(row, "eval_id", path)
        if eval_id is None:
            continue
        case = ImportedCase(eval_id, path, iteration=seen[eval_id])
        seen[eval_id] += 1
        case.passed = r.flag(row, "passed", path, eval_id, required=True)
        error = r.get(row, "error")
        case.error = str(error) if error else ""
        case.latency = r.number(row, "duration_seconds", path, eval_id)
        for cpath, result in r.items(row, "criterion_results", path, eval_id, required=False):
            name = r.text_field(result, "criterion", cpath, eval_id)
            value = r.number(result, "score", cpath, eval_id, required=True)
            passed = r.flag(result, "passed", cpath, eval_id, required=True)
            threshold = r.number(result, "threshold", cpath, eval_id)
            if name is None:
                continue
            justification: dict[str, Any] = {"imported_from": "agentflow", "threshold": threshold}
            if result.get("details"):
                justification["details"] = result["details"]
            case.scores.append(ImportedScore(name, value, unit(value), passed, threshold, justification))
        cases.append(case)
    eval_set_id = doc.get("eval_set_id")
    return ParsedResults("agentflow", r.file, eval_set_id if isinstance(eval_set_id, str) else "", cases)


def _claims(doc: Any) -> bool:
    # The documented report has a `report_id`; the one 10xscale-agentflow 0.10.1's
    # `EvalReport.model_dump_json()` writes has none, but `eval_set_id` and `summary`.
    return isinstance(doc, dict) and "results" in doc and (
        "report_id" in doc or ("eval_set_id" in doc and "summary" in doc))


results_format = ResultsFormat("agentflow", _claims, _agentflow)
