"""Reading a chunk of a run's pending results for evaluation, fast.

Each result needs its case as a native `EvalCase` and, for uploaded outputs, its stored
`AgentOutput`. Through the ORM that was a model instance per row, `json.loads` of every JSON
column, then pydantic validating the dicts and walking every string for a NUL: most of a
batch's time besides the scoring. Here one query reads the JSON columns as text, and
pydantic parses and validates each case and output from its JSON in one step, without the
NUL hook on text that holds no NUL (`schemas.text.validate_json`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection
from pydantic import ValidationError

from evaluations.models import CaseResult, EvalCase
from evaluations.runs.exports import CASE_FIELDS
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.outputs import AgentOutput
from evaluations.schemas.text import validate_json

# The case's JSON columns (CASE_FIELDS less the text ones), in CASE_FIELDS order.
_JSON_FIELDS = [f for f in CASE_FIELDS if f not in ("eval_id", "name", "description")]


@dataclass(slots=True)
class PendingResult:
    pk: int
    iteration: int
    eval_id: str
    case: NativeCase
    output_text: str | None

    def stored_output(self) -> AgentOutput:
        """The uploaded output stored for this result (validated when it was uploaded)."""
        if self.output_text is None:  # a traces run cancelled, then resumed, before its trace came
            return AgentOutput(eval_id=self.eval_id, iteration=self.iteration,
                               error="no output was stored for this case (no trace arrived for it)")
        try:
            return validate_json(AgentOutput, self.output_text)
        except ValidationError as exc:  # stored at creation, so this means a bug or an edit
            return AgentOutput(eval_id=self.eval_id, iteration=self.iteration,
                               error=f"stored output is invalid: {exc}")


def load_pending(pks: Sequence[int], *, with_output: bool) -> list[PendingResult]:
    """The results among `pks` still pending, in pk order, with their native cases."""
    if not pks:
        return []
    text = "::text" if connection.vendor == "postgresql" else ""
    columns = ", ".join(f"c.{connection.ops.quote_name(f)}{text}" for f in _JSON_FIELDS)
    output = f"r.output{text}" if with_output else "NULL"
    sql = (f"SELECT r.id, r.iteration, {output}, c.eval_id, c.name, c.description, {columns} "  # noqa: S608 - names from the models
           f"FROM {CaseResult._meta.db_table} r JOIN {EvalCase._meta.db_table} c ON c.id = r.case_id "
           f"WHERE r.id IN ({', '.join(['%s'] * len(pks))}) AND r.status = %s ORDER BY r.id")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*pks, CaseResult.Status.PENDING])
        rows = cursor.fetchall()
    loaded = []
    for pk, iteration, output_text, eval_id, name, description, *values in rows:
        parts = [f'"eval_id":{json.dumps(eval_id)},"name":{json.dumps(name)},"description":{json.dumps(description)}']
        parts += [f'"{field}":{value if value is not None else "null"}' for field, value in zip(
            _JSON_FIELDS, values, strict=True)]
        case_text = "{" + ",".join(parts) + "}"
        loaded.append(PendingResult(pk, iteration, eval_id, validate_json(NativeCase, case_text), output_text))
    return loaded
