"""The engine benchmark's run in one process, for CPU accounting and for checking that a
change to the engine scores and writes the same.

    python bench/engine_profile.py [--cases 10000] [--profile 30] [--repeat 2]

Same eval set, outputs and criteria as `bench/engine_bench.py`, on a fresh SQLite database,
but the queue is django-q2's `sync` mode (EVALSITE_Q_SYNC): every batch task runs in this
process as the run creates and hands it on, so no worker, broker or lock is shared, and the
process CPU time (`time.process_time`) of reading the outputs and of creating and evaluating
the run is what the engine's code costs, whatever else the machine is doing. It prints that
CPU time, the wall time, and the hashes of the run's scores, results, tool usage and summary
(`engine_bench.run_hashes`): in one process the rows are written in one order, so all four
hashes must stay the same across a change that is meant to change no result. `--profile N`:
a cProfile of the timed part, its N most expensive functions by own time and by total time.
`--repeat N`: N runs of the same eval set, each its own run, the CPU time of each.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the N costliest functions")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    if not os.environ.get("EVALSITE_DATA_DIR"):
        os.environ["EVALSITE_DATA_DIR"] = tempfile.mkdtemp(prefix="evalsite-bench-")
    os.environ.pop("DATABASE_URL", None)  # SQLite: the benchmark's target database
    os.environ["EVALSITE_Q_SYNC"] = "1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import logging

    import scratch
    from engine_bench import CRITERIA, generate, run_hashes

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_output_rows
    from evaluations.models import Run
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig

    logging.getLogger("django-q").setLevel(logging.WARNING)  # a line per task in sync mode
    scratch.migrate()
    evalset, raw_outputs = generate(args.cases)
    project = project_get_or_create_default()
    [outcome] = evalset_import(project=project, files=[SourceFile("bench.evalset.json", json.dumps(evalset).encode())])
    outputs_file = SourceFile("outputs.json", json.dumps(raw_outputs).encode())
    config = EvalConfig.model_validate({"criteria": CRITERIA})
    from evaluations.apps import _warm_worker

    _warm_worker(None)  # what a queue worker imports as it starts, before the benchmark's clock
    for _ in range(args.repeat):
        profiler = cProfile.Profile(time.process_time) if args.profile else None  # CPU, not wall
        collected = _collector_clock()
        cpu, wall = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        outputs = read_output_rows([outputs_file])  # as the API, the form and the CLI read them
        read_cpu = time.process_time() - cpu
        run = runs.run_create(project=project, version=outcome.version, target_kind="uploaded", outputs=outputs,
                              config=config)
        if profiler:
            profiler.disable()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        gc.callbacks.remove(collected)
        run = Run.objects.get(pk=run.pk)
        print(f"{args.cases} cases: CPU {cpu:.2f} s (outputs read {read_cpu:.2f} s, run created and evaluated "
              f"{cpu - read_cpu:.2f} s), wall {wall:.2f} s; status {run.status}")
        print(f"cyclic garbage collections: {collected.runs} (of the oldest generation {collected.full}), "
              f"CPU {collected.cpu:.2f} s")
        print("hashes: " + ", ".join(f"{name} {value}" for name, value in run_hashes(run.pk, exact=True).items()))
        if profiler:
            for order in ("tottime", "cumulative"):
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(args.profile)
                print(text.getvalue())


class _CollectorClock:
    """A `gc.callbacks` entry that counts the cyclic collections and the CPU they take."""

    def __init__(self) -> None:
        self.runs = self.full = 0
        self.cpu = self.began = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.began = time.process_time()
            return
        self.runs += 1
        self.full += info["generation"] == 2
        self.cpu += time.process_time() - self.began


def _collector_clock() -> _CollectorClock:
    clock = _CollectorClock()
    gc.callbacks.append(clock)
    return clock


if __name__ == "__main__":
    main()
