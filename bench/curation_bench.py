"""Curation benchmark: saving an edit to a 10,000-case eval set, and the diff of two
10,000-case versions, through the real services, with the storage each save adds.

    python bench/curation_bench.py [--cases 10000] [--repeat 7]                      # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_curation python bench/curation_bench.py

Targets (issue 18): a save of one edited case <= 500 ms; the diff of two 10,000-case
versions <= 300 ms. The eval set is bench/import_bench.py's ADK set (3 turns a case, 2-4
tool calls a turn), imported once (untimed). Then, each timed `--repeat` times, best and
median printed:

- save: `evalset_edit` replacing one case's expected answer (a new version each time);
- save, bulk tag of 100 cases;
- diff of the latest two versions (one case apart: the usual review of a save);
- diff of two uploads of the 10,000 cases (the same set uploaded again with one case
  changed: no rows shared, so all 2 x 10,000 rows' hashes are compared).

Floors, measured in the same run on the same database: for a save, reading the version's
10,000 (id, eval id, position, hash) rows and inserting one case row, committed; for a diff,
the two SELECTs of the rows only one side has, run raw. Storage per save: the rows it wrote
and their bytes, against a copy of every case (what a version without sharing would cost).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

SAVE_TARGET = 0.5
DIFF_TARGET = 0.3


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-curation-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import import_bench
    import scratch
    from django.db import connection, transaction

    from evaluations.evalsets.curation import case_native, evalset_edit, parse_edit
    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.models import EvalCase, EvalSet
    from evaluations.review.versions import version_diff

    scratch.migrate()
    project = project_get_or_create_default()
    document = import_bench.generate(args.cases)
    started = time.perf_counter()
    [outcome] = evalset_import(project=project, files=[SourceFile("bench.evalset.json", json.dumps(document).encode())])
    print(
        f"{connection.vendor}: imported {outcome.case_count:,} ADK cases in {time.perf_counter() - started:.1f} s "
        "(untimed setup)"
    )
    evalset = outcome.evalset
    middle = EvalCase.objects.in_version(outcome.version).order_by("position")[args.cases // 2]
    base_case = case_native(middle)
    counter = iter(range(1_000_000))

    def latest() -> Any:
        return EvalSet.objects.select_related("latest_version").get(pk=evalset.pk).latest_version

    def save_one() -> None:
        case = json.loads(json.dumps(base_case))
        case["conversation"][0]["expected_final_response"] = {"role": "model", "content": f"fixed {next(counter)}"}
        evalset_edit(
            evalset=evalset,
            edit=parse_edit(
                {
                    "base_version": latest().number,
                    "note": "bench",
                    "changes": [{"op": "put", "eval_id": case["eval_id"], "case": case}],
                }
            ),
        )

    tagged = list(
        EvalCase.objects.in_version(outcome.version).order_by("position").values_list("eval_id", flat=True)[:100]
    )

    def save_bulk_tag() -> None:
        evalset_edit(
            evalset=evalset,
            edit=parse_edit(
                {
                    "base_version": latest().number,
                    "changes": [{"op": "tag", "eval_ids": tagged, "tag": f"t{next(counter)}"}],
                }
            ),
        )

    def table_bytes() -> tuple[int, int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(conversation AS TEXT)) + LENGTH(CAST(metadata AS "
                "TEXT)) + LENGTH(CAST(tags AS TEXT)) + LENGTH(search_text) + LENGTH(eval_id) + "
                "LENGTH(content_hash) + 64), 0) FROM evaluations_evalcase"
            )
            rows, size = cursor.fetchone()
        return int(rows), int(size)

    rows_before, bytes_before = table_bytes()
    save_best, save_median = timed(save_one, args.repeat)
    rows_after, bytes_after = table_bytes()
    bulk_best, bulk_median = timed(save_bulk_tag, max(3, args.repeat // 2))
    saves = args.repeat
    per_save_rows = (rows_after - rows_before) / saves
    per_save_bytes = (bytes_after - bytes_before) / saves
    full_copy = bytes_before  # one version's rows: what a copy per save would add

    # Floors for a save: the version's small columns read, one row inserted, committed.
    version = latest()

    def save_floor() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, eval_id, position, content_hash FROM evaluations_evalcase WHERE evalset_id = %s "
                "AND valid_from <= %s AND valid_to > %s",
                [evalset.pk, version.number, version.number],
            )
            cursor.fetchall()
            cursor.execute("UPDATE evaluations_evalset SET updated_at = updated_at WHERE id = %s", [evalset.pk])

    floor_save, _ = timed(save_floor, args.repeat)

    # Diff: the latest two versions (one case apart), then two uploads with every row distinct.
    new = latest()
    old = new.evalset.versions.get(number=new.number - 1)
    diff_best, diff_median = timed(lambda: version_diff(old=old, new=new), args.repeat)
    document["eval_cases"][3]["conversation"][0]["user_content"]["parts"][0]["text"] += " (changed)"
    [again] = evalset_import(project=project, files=[SourceFile("bench2.evalset.json", json.dumps(document).encode())])
    first = outcome.version
    upload_best, upload_median = timed(lambda: version_diff(old=first, new=again.version), args.repeat)
    check = version_diff(old=first, new=again.version)
    assert check.changed >= 1, check.as_dict()["counts"]

    def diff_floor() -> None:
        with connection.cursor() as cursor:
            for a, b in ((first, again.version), (again.version, first)):
                cursor.execute(
                    "SELECT id, eval_id, content_hash, position FROM evaluations_evalcase "
                    "WHERE evalset_id = %s AND valid_from <= %s AND valid_to > %s "
                    "AND NOT (valid_from <= %s AND valid_to > %s)",
                    [evalset.pk, a.number, a.number, b.number, b.number],
                )
                cursor.fetchall()

    floor_diff, _ = timed(diff_floor, args.repeat)

    def line(name: str, best: float, median: float, target: float | None, floor: float | None) -> None:
        parts = [f"{name:<52} best {best * 1000:7.1f} ms  median {median * 1000:7.1f} ms"]
        if floor is not None:
            parts.append(f"floor {floor * 1000:6.1f} ms ({best / floor:4.1f}x)")
        if target is not None:
            parts.append(f"target <= {target * 1000:.0f} ms: {'ok' if median <= target else 'OVER'}")
        print("  ".join(parts))

    print(f"{args.cases:,} cases, {args.repeat} repeats")
    line("save: one case's expected answer edited", save_best, save_median, SAVE_TARGET, floor_save)
    line("save: bulk tag of 100 cases", bulk_best, bulk_median, SAVE_TARGET, floor_save)
    line("diff: latest two versions (one case apart)", diff_best, diff_median, DIFF_TARGET, None)
    line(
        f"diff: two uploads of {args.cases:,} cases (no shared rows)",
        upload_best,
        upload_median,
        DIFF_TARGET,
        floor_diff,
    )
    print(
        f"storage per save of one edited case: {per_save_rows:.0f} case row(s), ~{per_save_bytes / 1024:.1f} KiB "
        f"of case content, plus one version row; a full copy of the version would be "
        f"{rows_before:,} rows, ~{full_copy / 1024 / 1024:.1f} MiB ({full_copy / max(per_save_bytes, 1):,.0f}x)"
    )


if __name__ == "__main__":
    main()
