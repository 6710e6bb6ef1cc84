"""Causes benchmark: a run's failures grouped by cause when it completes, beside what the
completion already does (the comparison with its baseline).

    python bench/causes_bench.py [--cases 100000] [--repeat 3] [--json]        # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_causes python bench/causes_bench.py

The candidate is engine_bench's generated run (about 10 % of the cases call a tool with
another city, about 10 % answer differently), evaluated through the engine against a
perfect baseline. Printed, each the median of `--repeat`, in wall-clock seconds and in the
process's CPU seconds (on a machine shared with other work the CPU figure is the steadier:
waiting for a core is not in it; SQLite runs in the process, so its work is):

- "causes": what the completion hook adds for causes (and its three parts): the failing scores and results read,
  each failing (case, criterion) given its signature (the tool-call diff realigned for the
  trajectory criteria), folded, and the causes and a row per failing (result, criterion)
  written (`causes.run_failures`, `causes.group`, `causes.causes_store`). Target: <= 1 s at
  100,000 cases (issue 30);
- the floor, measured in the same process on the same runs: today's completion work for
  the comparison (`comparison.compare` over `run_data` of both runs, and
  `comparison_store`), which the causes come on top of; "causes / floor" is the share the
  causes add to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
TARGET_SECONDS = 1.0


def _median(call, repeat: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall seconds, CPU seconds), each the median of `repeat` calls."""
    times, cpu = [], []
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        call()
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(times), statistics.median(cpu)


def measure(cases: int, repeat: int) -> dict[str, float]:
    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-causes-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import engine_bench
    import scratch
    from django.db import connection, transaction

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_outputs
    from evaluations.models import RunCause
    from evaluations.review import causes, comparison
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig

    scratch.migrate()
    project = project_get_or_create_default()
    evalset, outputs = engine_bench.generate(cases)
    [outcome] = evalset_import(project=project, files=[SourceFile("bench.evalset.json", json.dumps(evalset).encode())])
    config = EvalConfig.model_validate({"criteria": engine_bench.CRITERIA})
    perfect = [{"eval_id": case["eval_id"], "turns": [{
        "invocation_id": "t1", "latency_seconds": 0.5,
        "final_response": case["conversation"][0]["expected_final_response"]["content"],
        "tool_calls": case["conversation"][0]["expected_tool_trajectory"]}]} for case in evalset["eval_cases"]]
    built = []
    started = time.perf_counter()
    for name, raw in (("baseline", perfect), ("candidate", outputs)):
        run = runs.run_create(project=project, version=outcome.version, target_kind="uploaded", config=config,
                              outputs=read_outputs([SourceFile(f"{name}.json", json.dumps(raw).encode())]),
                              name=name, enqueue=False)
        built.append(runs.run_execute_here(run.pk, workers=1))
    baseline, candidate = built
    print(f"{connection.vendor}: built two runs of {cases:,} cases in {time.perf_counter() - started:.1f} s",
          file=sys.stderr)

    phases: dict[str, list[float]] = {"read": [], "group": [], "store": []}

    def with_causes() -> None:
        with transaction.atomic():
            started = time.perf_counter()
            failures = causes.run_failures(candidate)
            read = time.perf_counter()
            grouped = causes.group(failures)
            folded = time.perf_counter()
            causes.causes_store(run=candidate, causes=grouped)
            phases["read"].append(read - started)
            phases["group"].append(folded - read)
            phases["store"].append(time.perf_counter() - folded)

    def floor() -> None:
        summary = comparison.compare(comparison.run_data(baseline), comparison.run_data(candidate))
        with transaction.atomic():
            comparison.comparison_store(baseline=baseline, candidate=candidate, summary=summary)

    seconds, cpu = _median(with_causes, repeat)
    floor_seconds, floor_cpu = _median(floor, repeat)
    found = causes.run_causes(candidate, limit=None)
    return {"cases": cases, "seconds": seconds, "floor": floor_seconds, "ratio": seconds / floor_seconds,
            "cpu_seconds": cpu, "floor_cpu": floor_cpu, "cpu_ratio": cpu / floor_cpu,
            **{f"{name}_seconds": statistics.median(times) for name, times in phases.items()},
            "causes": found.total if found else 0, "failing_cases": found.failing_cases if found else 0,
            "cause_rows": RunCause.objects.filter(cause_set__run=candidate).count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.cases, args.repeat)
    verdict = ("OK" if result["seconds"] <= TARGET_SECONDS
               else "OVER TARGET in wall time, within it in CPU time (a loaded machine?)"
               if result["cpu_seconds"] <= TARGET_SECONDS else "OVER TARGET")
    print(f"causes of {args.cases:,} cases ({result['failing_cases']:,} failing, {result['causes']:,} causes): "
          f"{result['seconds']:.2f} s wall, {result['cpu_seconds']:.2f} s CPU "
          f"(target <= {TARGET_SECONDS:.0f} s) {verdict}")
    print(f"  of which: failures read and given their signatures {result['read_seconds']:.2f} s, "
          f"folded {result['group_seconds']:.2f} s, stored {result['store_seconds']:.2f} s")
    print(f"floor (today's completion: the comparison of the same two runs computed and stored): "
          f"{result['floor']:.2f} s wall, {result['floor_cpu']:.2f} s CPU; causes / floor "
          f"{result['ratio']:.2f}x wall, {result['cpu_ratio']:.2f}x CPU")
    print(f"load average over the last minute: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
