"""Queue fairness benchmark: a short uploaded-outputs run started behind a long agent run,
on a real `qcluster` with 2 workers (issue 27: a 4.6 s run had made no progress for 45 s
behind an HTTP-target run's 24 queued batches).

    python bench/fairness_bench.py [--cases 2000] [--long-batches 24] [--json]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_fairbench python bench/fairness_bench.py

The floor, measured in the same run: the same short run on the idle cluster (solo). Then a
long run of the demo agent (0.1 s an answer, --long-batches batches of EVALSITE_BATCH_SIZE
cases)
is queued, and once a batch of it is in progress the same short run is queued behind it.
Prints both times and their ratio; target (issue 27): <= 2x solo. The long run is
cancelled afterwards. The CPU is shared: read the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from engine_bench import CRITERIA, generate  # noqa: E402

BATCH = 250  # EVALSITE_BATCH_SIZE, the default


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000, help="cases of the short run (uploaded outputs)")
    parser.add_argument("--long-batches", type=int, default=24, help="batches of the long run")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="evalsite-fairness-") as tmp:
        figures = measure(args, Path(tmp))
    if args.json:
        print(json.dumps(figures))
    return figures


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    os.environ.setdefault("EVALSITE_DATA_DIR", str(tmp))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    os.environ["EVALSITE_BATCH_SIZE"] = str(BATCH)
    import django

    django.setup()
    import scratch
    from django.conf import settings
    from django.db import connection

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_outputs
    from evaluations.models import CaseResult, Run
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig

    scratch.migrate()
    project = project_get_or_create_default()
    evalset, raw_outputs = generate(args.cases)
    [short_set] = evalset_import(project=project,
                                 files=[SourceFile("short.evalset.json", json.dumps(evalset).encode())])
    long_evalset, _ = generate(args.long_batches * BATCH, seed=5)
    [long_set] = evalset_import(project=project,
                                files=[SourceFile("long.evalset.json", json.dumps(long_evalset).encode())])
    outputs = read_outputs([SourceFile("outputs.json", json.dumps(raw_outputs).encode())])
    config = EvalConfig.model_validate({"criteria": CRITERIA})

    def short_run(cases: int | None = None) -> float:
        began = time.perf_counter()
        subset = outputs if cases is None else outputs[:cases]
        run = runs.run_create(project=project, version=short_set.version, target_kind="uploaded", outputs=subset,
                              config=config, eval_ids=[o.eval_id for o in subset] if cases else None)
        while Run.objects.filter(pk=run.pk).values_list("status", flat=True).get() != "completed":
            time.sleep(0.05)
        return time.perf_counter() - began

    env = {**os.environ, "EVALSITE_WORKERS": "2", "SECRET_KEY": settings.SECRET_KEY}
    env.pop("REDIS_URL", None)
    log = open(tmp / "qcluster.log", "w")  # noqa: SIM115 - closed below
    cluster = subprocess.Popen([sys.executable, "manage.py", "qcluster"], cwd=REPO, env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        short_run(cases=8)  # the cluster's workers are up and have imported what a batch needs
        solo = short_run()
        long = runs.run_create(project=project, version=long_set.version, target_kind="python", config=config,
                               target={"callable": "evaluations.demo.agent:respond", "timeout_seconds": 10,
                                       "metadata": {"faults": {"slow_answer_seconds": 0.1, "rate": 1.0}}})
        while Run.objects.get(pk=long.pk).cases_done < 1:
            time.sleep(0.05)
        behind = short_run()
        long_left = CaseResult.objects.filter(run=long, status="pending").count()
        runs.run_cancel(run=long)
    finally:
        cluster.send_signal(signal.SIGTERM)
        cluster.wait(timeout=60)
        log.close()
    long_batches = -(-long.cases_total // BATCH)
    db = connection.vendor
    print(f"{db}: a {args.cases}-case uploaded-outputs run, 2 workers: solo {solo:.2f} s (the floor); "
          f"behind a {long.cases_total}-result agent run ({long_batches} batches) {behind:.2f} s; "
          f"ratio {behind / solo:.2f}x (target <= 2x): {'OK' if behind <= 2 * solo else 'OVER TARGET'}; "
          f"the long run still had {long_left} results pending")
    return {"db": db, "solo_seconds": solo, "behind_seconds": behind, "ratio": behind / solo,
            "long_batches": long_batches, "long_pending": long_left}


if __name__ == "__main__":
    main()
