"""Writing eval sets back out in the native `.evalset.json` format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from evaluations.models import EvalCase, EvalSetVersion

CASE_FIELDS = ("eval_id", "name", "conversation", "session_input", "metadata", "tags",
               "conversation_scenario", "rubrics", "criteria")


def case_native_dict(case: EvalCase) -> dict[str, Any]:
    """The native EvalCase JSON of a stored case (the same dict the import dumped)."""
    return {field: getattr(case, field) for field in CASE_FIELDS}


def version_native_chunks(version: EvalSetVersion, *, chunk_cases: int = 500) -> Iterator[str]:
    """The version as native JSON text, streamed case by case so a 10,000-case set never
    sits in memory whole. Parsing the output gives back exactly the imported content."""
    evalset = version.evalset
    head = {
        "eval_set_id": evalset.eval_set_id,
        "name": version.name,
        "description": version.description,
        "metadata": version.metadata,
    }
    yield json.dumps(head, ensure_ascii=False, indent=2)[:-2] + ',\n  "eval_cases": ['
    first = True
    cases = version.cases.order_by("position").only(*CASE_FIELDS, "position").iterator(chunk_size=chunk_cases)
    parts: list[str] = []
    for case in cases:
        text = _case_text(case)
        parts.append(("\n    " if first else ",\n    ") + text)
        first = False
        if len(parts) >= chunk_cases:
            yield "".join(parts)
            parts = []
    if parts:
        yield "".join(parts)
    yield "\n  ]\n}\n"


def _case_text(case: EvalCase) -> str:
    """The case's JSON: fields in the native model's order, keys sorted inside them, so the
    export is the same text whichever database stored it (PostgreSQL reorders jsonb keys)."""
    fields = ", ".join(
        f"{json.dumps(name)}: {json.dumps(value, ensure_ascii=False, sort_keys=True)}"
        for name, value in case_native_dict(case).items()
    )
    return "{" + fields + "}"


def version_native_text(version: EvalSetVersion) -> str:
    return "".join(version_native_chunks(version))
