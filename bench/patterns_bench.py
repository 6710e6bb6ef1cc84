"""Members' patterns and JSON Schemas on hostile answers (issue 38), each beside the typical
case measured in the same run as its floor. In-process, no database.

    python bench/patterns_bench.py [--quick] [--json]

Before: `regex_match` with `(a+)+$` on 25 characters took 9.8 s (Python's `re`), `$defs`
doubling 19 times through `allOf` 13.8 s. Targets: a pattern RE2 can say costs about what `re`
costs on ordinary answers and stays linear on hostile ones; a backtracking-only pattern stops
at its 0.5 s bound; a schema's validation at its 20,000-keyword budget (or 1 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jsonschema import Draft202012Validator


def best(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def _bounded_error(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    with contextlib.suppress(Exception):  # the bound: that is what is timed
        work()
    return time.perf_counter() - started


def doubling(n: int) -> dict[str, Any]:
    defs: dict[str, Any] = {"d0": {"type": "string"}}
    for i in range(1, n + 1):
        defs[f"d{i}"] = {"allOf": [{"$ref": f"#/$defs/d{i - 1}"}, {"$ref": f"#/$defs/d{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/d{n}"}


def measure(quick: bool = False) -> dict[str, float]:
    from evaluations.jsonschemas import schema_problems, validation_problems
    from evaluations.patterns import compile_bounded

    runs = 3 if quick else 7
    answer = "Your flight LIS-NRT on 2024-11-05 is confirmed, seat 14A, ref QX7Y2. " * 3
    typical = r"\bconfirmed\b.*\d{4}-\d\d-\d\d"
    python, bounded = re.compile(typical), compile_bounded(typical)
    bounded.search(answer)  # compiled and warmed, as the second case of a run finds it
    hostile_re_n = 18 if quick else 20
    record = {
        "Name": "Ann", "city": "Paris", "items": [{"sku": f"S{i}", "qty": i} for i in range(20)], "ok": True}
    schema = {"type": "object", "required": ["Name", "city", "items"], "properties": {
        "Name": {"type": "string", "pattern": "^[A-Z]"}, "city": {"type": "string", "minLength": 2},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku"], "properties": {
            "sku": {"type": "string", "pattern": "^S\\d+$"}, "qty": {"type": "integer", "minimum": 0}}}}}}
    plain = Draft202012Validator(schema)
    recursive = {"$defs": {"a": {"allOf": [{"items": {"$ref": "#/$defs/a"}}, {"items": {"$ref": "#/$defs/a"}}]}},
                 "$ref": "#/$defs/a"}
    deep = json.loads("[" * 30 + "]" * 30)
    lookahead = compile_bounded(r"(?=(a|aa)+$)")
    lookahead.search("aaaa")  # the helper process started, as after the first backtracking match
    return {
        "regex_typical_re_s": best(lambda: python.search(answer), runs * 200),
        "regex_typical_bounded_s": best(lambda: bounded.search(answer), runs * 200),
        "regex_hostile_re_n": hostile_re_n,
        "regex_hostile_re_s": best(lambda: re.search(r"(a+)+$", "a" * hostile_re_n + "!"), 1),
        "regex_hostile_bounded_25_s": best(lambda: compile_bounded(r"(a+)+$").search("a" * 25 + "!"), runs),
        "regex_hostile_bounded_100k_s": best(lambda: compile_bounded(r"(a+)+$").search("a" * 100_000 + "!"), runs),
        "regex_words_bounded_100k_s": best(lambda: compile_bounded(r"^(\w+\s?)*$").search("word " * 20_000 + "!"),
                                           runs),
        "regex_backtracking_to_bound_s": _bounded_error(lambda: lookahead.search("a" * 60 + "!")),
        "schema_typical_jsonschema_s": best(lambda: list(plain.iter_errors(record)), runs * 20),
        "schema_typical_bounded_s": best(lambda: validation_problems(schema, record), runs * 20),
        "schema_doubling_refused_s": best(lambda: schema_problems(doubling(19)), runs),
        "schema_deep_answer_to_budget_s": _bounded_error(lambda: validation_problems(recursive, deep)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.quick)
    if args.json:
        print(json.dumps(r))
        return
    floor = r["regex_typical_re_s"]
    print(f"regex, a typical pattern on a 216-char answer, re (floor): {floor * 1e6:.1f} us")
    print(f"  the same through RE2 (bounded):                  {r['regex_typical_bounded_s'] * 1e6:.1f} us "
          f"({r['regex_typical_bounded_s'] / floor:.1f}x the floor)")
    print(f"(a+)+$ on {r['regex_hostile_re_n']:.0f} a's and a bang, re:                 "
          f"{r['regex_hostile_re_s']:.3f} s (doubling with each a: 25 took 9.8 s)")
    print(f"(a+)+$ on 25 a's and a bang, bounded (RE2):        {r['regex_hostile_bounded_25_s'] * 1e6:.1f} us "
          f"({r['regex_hostile_bounded_25_s'] / floor:.1f}x the floor)")
    print(f"(a+)+$ on 100,000 a's and a bang, bounded (RE2):   {r['regex_hostile_bounded_100k_s'] * 1e6:.1f} us")
    print(f"^(\\w+\\s?)*$ on 100,000 chars and a bang, bounded:   {r['regex_words_bounded_100k_s'] * 1000:.2f} ms "
          "(re: exponential)")
    print(f"(?=(a|aa)+$) on 60 a's and a bang (re helper):     {r['regex_backtracking_to_bound_s']:.3f} s "
          "to its 0.5 s bound, an error on the score")
    sfloor = r["schema_typical_jsonschema_s"]
    print(f"json_schema, a 20-item order, jsonschema (floor):  {sfloor * 1000:.3f} ms")
    print(f"  the same, bounded:                               {r['schema_typical_bounded_s'] * 1000:.3f} ms "
          f"({r['schema_typical_bounded_s'] / sfloor:.1f}x the floor)")
    print(f"$defs doubling 19 times, refused when saved in:    {r['schema_doubling_refused_s'] * 1000:.2f} ms "
          "(validating it took 13.8 s)")
    print(f"a recursion a 30-deep answer doubles, to budget:   {r['schema_deep_answer_to_budget_s']:.3f} s "
          "(2^30 applications unbounded)")


if __name__ == "__main__":
    main()
