"""Deleting a 10,000-case run: the whole deletion, and the longest single write in it (what
another writer may wait behind), next to a floor measured in the same run.

    python bench/deletion_bench.py [--cases 10000] [--json]     # SQLite (a scratch data dir)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/es_scratch python bench/deletion_bench.py

Setup (untimed): a generated one-turn eval set of `--cases` cases and three identical
completed runs of uploaded outputs (results, scores, tool usage), the third compared with each
of the others, through the real services. Then:

- `run_delete` of one run (evalsite's path: leaves first, at most 5,000 rows per transaction),
  timed whole, with the longest DELETE statement it ran (timed by a connection wrapper);
- the floor, on the other run: one transaction of plain `DELETE ... WHERE run_id = ?` per table,
  leaves first: the least work that removes the same rows, and one long lock.

Targets (issue 28): the deletion <= 3x the floor; its longest statement well under the floor's
(the floor holds the write lock for all of it at once).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

RATIO_TARGET = 3.0


def measure(cases: int) -> dict[str, Any]:
    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-deletion-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import scratch
    from django.db import connection, transaction

    from evaluations.evalsets.services import project_get_or_create_default
    from evaluations.models import Comparison, Run, Score
    from evaluations.review import comparison
    from evaluations.review.deletion import run_delete
    from tests.compare_helpers import generated_outputs, generated_version, make_run

    scratch.migrate()
    project = project_get_or_create_default()
    started = time.perf_counter()
    version = generated_version(project, cases, eval_set_id=f"deletion_{cases}")
    outputs = generated_outputs(cases, wrong=set(range(0, cases, 7)))
    first = make_run(project, version, outputs)
    second = make_run(project, version, outputs)
    third = make_run(project, version, outputs)  # each of the two compared with it: the same work
    comparison.comparison_get(baseline=first, candidate=third)
    comparison.comparison_get(baseline=second, candidate=third)
    scores = Score.objects.filter(run=first).count()
    print(f"{connection.vendor}: 3 runs of {cases:,} results ({scores:,} scores each) and their comparison in "
          f"{time.perf_counter() - started:.1f} s (untimed setup)", file=sys.stderr)

    statements: list[float] = []

    def timing(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if sql.startswith("DELETE"):
                statements.append(time.perf_counter() - began)

    with connection.execute_wrapper(timing):
        began = time.perf_counter()
        rows = run_delete(run=first, actor=None, via="the benchmark")
        seconds = time.perf_counter() - began
    assert not Run.objects.filter(pk=first.pk).exists()

    tables = [("evaluations_comparisoncase", "comparison_id IN (SELECT id FROM evaluations_comparison "
                                             "WHERE baseline_id = %s OR candidate_id = %s)"),
              ("evaluations_comparisonscatter", "comparison_id IN (SELECT id FROM evaluations_comparison "
                                                "WHERE baseline_id = %s OR candidate_id = %s)"),
              ("evaluations_comparisonsummary", "comparison_id IN (SELECT id FROM evaluations_comparison "
                                                "WHERE baseline_id = %s OR candidate_id = %s)"),
              ("evaluations_comparison", "baseline_id = %s OR candidate_id = %s"),
              ("evaluations_resultcause", "cause_id IN (SELECT id FROM evaluations_runcause "
                                          "WHERE cause_set_id = %s)"),
              ("evaluations_runcause", "cause_set_id = %s"), ("evaluations_causeset", "run_id = %s"),
              ("evaluations_runbatch", "run_id = %s"),
              ("evaluations_score", "run_id = %s"), ("evaluations_toolusage", "run_id = %s"),
              ("evaluations_caseresult", "run_id = %s"), ("evaluations_run", "id = %s")]
    assert Comparison.objects.filter(baseline=second).exists()
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        for table, where in tables:
            cursor.execute(f"DELETE FROM {table} WHERE {where}", [second.pk] * where.count("%s"))
    floor = time.perf_counter() - began
    assert not Run.objects.filter(pk=second.pk).exists()
    return {"cases": cases, "scores": scores, "rows": rows, "seconds": seconds, "floor_seconds": floor,
            "ratio": seconds / floor, "longest_statement_seconds": max(statements), "statements": len(statements),
            "db": connection.vendor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line at the end")
    args = parser.parse_args()
    found = measure(args.cases)
    print(f"delete a {found['cases']:,}-case run ({found['rows']:,} rows, {found['statements']} DELETE statements): "
          f"{found['seconds']:.2f} s; floor (one transaction, a DELETE per table, same run): "
          f"{found['floor_seconds']:.2f} s; ratio {found['ratio']:.2f}x (target <= {RATIO_TARGET:g}x: "
          f"{'OK' if found['ratio'] <= RATIO_TARGET else 'OVER TARGET'}); longest DELETE statement "
          f"{found['longest_statement_seconds'] * 1000:.0f} ms vs the floor's one lock of "
          f"{found['floor_seconds'] * 1000:.0f} ms")
    if args.json:
        print(json.dumps(found))


if __name__ == "__main__":
    main()
