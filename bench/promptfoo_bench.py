"""promptfoo: a promptfooconfig.yaml of N tests (four deterministic assertions each) imported
through the import service, and the `promptfoo_*` criteria scoring N outputs; beside floors
measured in the same run: the same cases as a plain JSONL import, and evalsite's native
`contains` and `regex_match` criteria on the same outputs.

    python bench/promptfoo_bench.py [--tests 10000] [--json]

Run on an embedded database of its own (bench/all.py gives it a scratch data directory).
Targets: the import within 4x its floor (the floor's JSON is parsed by C alone; YAML is composed
by libyaml calling Python once per node, then each test is checked and converted: measured 3.5-3.7x
on 10,000 tests), scoring within 3x its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django  # noqa: E402

django.setup()

import scratch  # noqa: E402

from evaluations.evalsets.services import evalset_import  # noqa: E402
from evaluations.evaluators import get_evaluator_class  # noqa: E402
from evaluations.interop import SourceFile, read_upload  # noqa: E402
from evaluations.interop.promptfoo.js import dump_yaml  # noqa: E402
from evaluations.models import Project  # noqa: E402
from evaluations.schemas.evalset import CriterionConfig, EvalCase  # noqa: E402
from evaluations.schemas.outputs import AgentOutput  # noqa: E402


def suite(tests: int) -> bytes:
    return dump_yaml({"description": "bench", "prompts": ["What is the weather in {{city}} on day {{day}}?"],
                      "providers": ["echo"], "tests": [
                          {"description": f"case {n}", "vars": {"city": f"City {n % 97}", "day": n},
                           "assert": [{"type": "icontains", "value": f"city {n % 97}"},
                                      {"type": "regex", "value": "\\d+ °C$"},
                                      {"type": "levenshtein", "value": f"Sunny in City {n % 97}, 21 °C",
                                       "threshold": 4},
                                      {"type": "not-contains", "value": "error"}]} for n in range(tests)]}).encode()


def plain(tests: int) -> bytes:
    return "".join(json.dumps({"input": f"What is the weather in City {n % 97} on day {n}?",
                               "expected_output": f"Sunny in City {n % 97}, 21 °C"}) + "\n"
                   for n in range(tests)).encode()


def timed(files: list[SourceFile], project: Project) -> float:
    started = time.perf_counter()
    evalset_import(project=project, files=files)
    return time.perf_counter() - started


def scoring(cases: list[EvalCase], criteria: list[tuple[str, str, CriterionConfig]]) -> float:
    outputs = [AgentOutput.model_validate({"eval_id": c.eval_id, "turns": [
        {"final_response": f"Sunny in City {n % 97}, 2{n % 10} °C"}]}) for n, c in enumerate(cases)]
    evaluators = [(key, get_evaluator_class(name)(), config) for key, name, config in criteria]
    started = time.perf_counter()
    for case, output in zip(cases, outputs, strict=True):
        for key, evaluator, config in evaluators:
            evaluator.score(case, output, config, key)
    return time.perf_counter() - started


def measure(tests: int) -> dict[str, float]:
    scratch.migrate()
    project = Project.objects.get_or_create(slug="bench-promptfoo", defaults={"name": "bench"})[0]
    data = suite(tests)
    seconds = timed([SourceFile("bench.promptfooconfig.yaml", data)], project)
    floor = timed([SourceFile("bench.jsonl", plain(tests))], project)
    [parsed] = read_upload([SourceFile("bench.promptfooconfig.yaml", data)])
    config = parsed.default_config.criteria if parsed.default_config else {}
    cases = parsed.evalset.eval_cases
    ours = scoring(cases, [(k, c.evaluator or k, c) for k, c in config.items()])
    native = [EvalCase(eval_id=c.eval_id, criteria={"contains": {"searchText": "City"}, "regex_match":
                                                    {"pattern": "\\d+ °C$"}}) for c in cases]
    base = scoring(native, [("contains", "contains", CriterionConfig()), ("regex_match", "regex_match",
                                                                           CriterionConfig())] * 2)
    return {"tests": tests, "megabytes": len(data) / 2**20, "import_seconds": seconds, "import_floor_seconds": floor,
            "import_ratio": seconds / floor, "scoring_seconds": ours, "scoring_floor_seconds": base,
            "scoring_ratio": ours / base}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.tests)
    if args.json:
        print(json.dumps(r))
        return
    print(f"promptfoo config, {r['tests']:,} tests x 4 assertions ({r['megabytes']:.1f} MB): imported in "
          f"{r['import_seconds']:.2f} s; floor, the same cases as plain JSONL: {r['import_floor_seconds']:.2f} s "
          f"({r['import_ratio']:.1f}x; target <= 4x)")
    print(f"promptfoo_* criteria, {r['tests']:,} outputs x 4: {r['scoring_seconds']:.2f} s; floor, native contains "
          f"and regex_match x 2: {r['scoring_floor_seconds']:.2f} s ({r['scoring_ratio']:.1f}x; target <= 3x)")


if __name__ == "__main__":
    main()
