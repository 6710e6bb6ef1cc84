"""Bulk writes (`evaluations.bulk`) keep every value as it is, on the database under test:
SQLite's executemany and PostgreSQL's COPY (the CI's second pass). Text that COPY's format
must escape (tabs, newlines, backslashes, `\\N`), empty strings against NULLs, JSON text into
JSON columns, floats, booleans and large integers all come back unchanged."""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from evaluations.bulk import insert_rows
from evaluations.models import CaseResult, Project, Score
from tests.compare_helpers import generated_outputs, generated_version, make_run

HOSTILE = ["tab\there", "line\nbreak\r\nand CR", "back\\slash \\N \\t", "\\N", "", "quote ' and \"",
           "unicode é ✓ 𝄞", "comma, semicolon; pipe|", "trailing space ", "x" * 5000]


def test_rows_come_back_as_they_went_in(acme: Project) -> None:
    run = make_run(acme, generated_version(acme, 1), generated_outputs(1))
    result = CaseResult.objects.get(run=run)
    Score.objects.filter(run=run).delete()
    justifications: list[Any] = [{"text": t, "nested": [t, {"k": t}], "n": 2**62, "f": 1e-05} for t in HOSTILE]
    rows = [(run.pk, result.pk, f"c{i}", text[:100], "conversation", i, text[:200], i / 7 if i % 3 else None,
             -1.5e300 if i == 1 else None, [True, False, None][i % 3],
             json.dumps({"lower_limit": 0.5}) if i % 2 else None, json.dumps(justifications[i]), text)
            for i, text in enumerate(HOSTILE)]
    with transaction.atomic():
        insert_rows(Score, ["run_id", "result_id", "criterion", "evaluator", "applies_to", "turn_index", "node_name",
                            "score", "raw_value", "passed", "threshold", "justification", "error"],
                    rows, json_columns={"threshold", "justification"})
    stored = {s.criterion: s for s in Score.objects.filter(run=run)}
    assert len(stored) == len(HOSTILE)
    for i, text in enumerate(HOSTILE):
        score = stored[f"c{i}"]
        assert (score.evaluator, score.error, score.node_name, score.turn_index) == (text[:100], text, text[:200], i)
        assert score.score == (i / 7 if i % 3 else None) and score.passed is [True, False, None][i % 3]
        assert score.raw_value == (-1.5e300 if i == 1 else None)
        assert score.threshold == ({"lower_limit": 0.5} if i % 2 else None)
        assert score.justification == justifications[i]


def test_a_failing_bulk_write_leaves_nothing(acme: Project) -> None:
    """A row that breaks a constraint fails the whole write, in its transaction."""
    run = make_run(acme, generated_version(acme, 1), generated_outputs(1))
    result = CaseResult.objects.get(run=run)
    before = Score.objects.filter(run=run).count()
    row = (run.pk, result.pk, "dup", "", "conversation", -1, "", 1.0, None, True, None, "{}", "")
    try:
        with transaction.atomic():
            insert_rows(Score, ["run_id", "result_id", "criterion", "evaluator", "applies_to", "turn_index",
                                "node_name", "score", "raw_value", "passed", "threshold", "justification", "error"],
                        [row, row], json_columns={"threshold", "justification"})
    except Exception as exc:  # IntegrityError on both databases
        assert "unique" in str(exc).lower() or "score_unique" in str(exc)
    else:
        raise AssertionError("a duplicate score was written")
    assert Score.objects.filter(run=run).count() == before
