"""UiPath results files, read for `results_import` (`interop/results.py` is the registry).

- **UiPath** `uipath eval --output-file` (`UiPathEvalOutput`: `evaluationSetName`,
  `evaluationSetResults[]` of `{evaluationName, score, evaluationRunResults[]: {evaluatorName,
  result: {score, details, evaluationTime}}}`): matched by case name, then eval id, against the
  chosen eval set (else the one named `evaluationSetName`). UiPath records no threshold or pass/fail
  per evaluator; its score is kept as `raw_value` (booleans are 100/0), normalised to [0, 1] by
  dividing by 100 when above 1.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evaluations.interop.results import (
    ImportedCase,
    ImportedScore,
    ParsedResults,
    Reader,
    ResultsFormat,
    kind,
    unit,
)


def _uipath(r: Reader) -> ParsedResults:
    doc = r.doc
    cases = []
    seen: Counter[str] = Counter()
    for path, row in r.items(doc, "evaluation_set_results", ()):
        name = r.text_field(row, "evaluation_name", path)
        if name is None:
            continue
        case = ImportedCase(name, path, iteration=seen[name])
        seen[name] += 1
        for epath, run in r.items(row, "evaluation_run_results", path, name):
            evaluator = r.text_field(run, "evaluator_name", epath, name)
            result = r.get(run, "result")
            if not isinstance(result, dict):
                r.add((*epath, "result"), f"expected an object with a score, not {kind(result)}", name)
                continue
            value = r.number(result, "score", (*epath, "result"), name, required=True)
            if evaluator is None:
                continue
            justification: dict[str, Any] = {"imported_from": "uipath"}
            for key in ("details", "evaluation_time", "evaluator_id"):
                holder = run if key == "evaluator_id" else result
                if r.get(holder, key) is not None:
                    justification[key] = r.get(holder, key)
            score = None if value is None else (value / 100.0 if value > 1.0 else value)
            case.scores.append(ImportedScore(evaluator, value, unit(score), None, None, justification))
        cases.append(case)
    name = r.get(doc, "evaluation_set_name")
    return ParsedResults("uipath", r.file, name if isinstance(name, str) else "", cases, match_by_name=True)


def _claims(doc: Any) -> bool:
    return isinstance(doc, dict) and ("evaluationSetResults" in doc or "evaluation_set_results" in doc)


results_format = ResultsFormat("uipath", _claims, _uipath)
