"""N-way benchmark: four runs of 10,000 cases of one eval set, the `/compare/runs/` page
rendered through the Django test client.

    python bench/nway_bench.py [--cases 10000] [--repeat 9]                       # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_nway python bench/nway_bench.py

Targets (issue 20): <= 500 ms cold, <= 50 ms cached. Printed:

- "first view": once, right after the runs finished: the pairwise comparisons against the
  reference are not stored yet; at this size (over EVALSITE_NWAY_INLINE_CASES cases) they are
  queued and the page shows the means and the matrix with the tests pending;
- "the queued task": the task's work, timed in this process (`nway.comparisons_compute`:
  the comparisons computed and stored, `comparison.comparison_get`);
- "cold": the cache emptied before each request, the stored comparisons read back: the page
  body (per-run means, one GROUP BY for the matrix's order and count, one page of 50 cases)
  is rebuilt every time;
- "cached": the body from the cache; the request reads the runs (access and freshness) only;
- the floors, measured in the same process: a logged-in request that renders the site's
  frame and a 400 message (session, user, middleware, template: what any page costs), and
  the matrix's GROUP BY query alone.
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


def _timed(call, repeat: int, before=None) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return times


def _line(label: str, times: list[float], target: float | None = None, extra: str = "") -> str:
    median = statistics.median(times)
    verdict = "" if target is None else (" OK" if median <= target else " OVER TARGET")
    goal = f"; target <= {target:.0f} ms" if target is not None else ""
    return (f"{label:<24} median {median:8.1f} ms  (min {min(times):.1f}, max {max(times):.1f}{extra}{goal}){verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-nway-"))
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import engine_bench
    import scratch
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import setup_test_environment

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_outputs
    from evaluations.models import Membership
    from evaluations.review import nway
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig

    setup_test_environment()
    scratch.migrate()
    project = project_get_or_create_default()
    user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-pass-123")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)

    evalset, outputs = engine_bench.generate(args.cases)
    [outcome] = evalset_import(project=project, files=[SourceFile("bench.evalset.json", json.dumps(evalset).encode())])
    config = EvalConfig.model_validate({"criteria": engine_bench.CRITERIA})
    perfect = [{"eval_id": case["eval_id"], "turns": [{
        "invocation_id": "t1", "latency_seconds": 0.5,
        "final_response": case["conversation"][0]["expected_final_response"]["content"],
        "tool_calls": case["conversation"][0]["expected_tool_trajectory"]}]} for case in evalset["eval_cases"]]
    # four variants: perfect, the generator's (with its failures), and two mixes of them
    variants = {"perfect": perfect, "generated": outputs,
                "even-perfect": [p if i % 2 == 0 else o for i, (p, o) in enumerate(zip(perfect, outputs, strict=True))],
                "odd-perfect": [o if i % 2 == 0 else p for i, (p, o) in enumerate(zip(perfect, outputs, strict=True))]}
    started = time.perf_counter()
    built = []
    for name, raw in variants.items():
        run = runs.run_create(project=project, version=outcome.version, target_kind="uploaded", config=config,
                              outputs=read_outputs([SourceFile(f"{name}.json", json.dumps(raw).encode())]),
                              name=name, enqueue=False)
        built.append(runs.run_execute_here(run.pk, workers=1))
    print(f"{connection.vendor}: built four runs of {args.cases:,} cases in {time.perf_counter() - started:.1f} s")

    ids = [run.pk for run in built]
    url = "/compare/runs/?runs=" + ",".join(str(pk) for pk in ids)
    client = Client()
    client.force_login(user)

    def get(path: str, status: int = 200) -> int:
        response = client.get(path)
        assert response.status_code == status, (path, response.status_code)
        return len(response.content)

    get(f"/compare/runs/?runs={ids[0]}", 400)  # warm the session and templates
    t = time.perf_counter()
    size = get(url)
    print(f"{'first view':<24} {(time.perf_counter() - t) * 1000:8.1f} ms  (runs over EVALSITE_NWAY_INLINE_CASES: "
          f"the missing pairwise comparisons queued, their tests shown as pending; {size / 1024:.0f} KB)")
    missing = [run.pk for run in built[1:]]
    t = time.perf_counter()
    nway.comparisons_compute(ids[0], missing)  # what the queued task does on a worker
    print(f"{'the queued task':<24} {(time.perf_counter() - t) * 1000:8.1f} ms  (the pairwise comparisons "
          f"computed and stored, on a worker)")
    floor = _timed(lambda: get(f"/compare/runs/?runs={ids[0]}", 400), args.repeat)
    query = _timed(lambda: nway.matrix_count(ids), args.repeat)
    cold = _timed(lambda: get(url), args.repeat, before=cache.clear)
    get(url)
    cached = _timed(lambda: get(url), args.repeat)
    print(_line("floor: a 400 page", floor))
    print(_line("floor: matrix GROUP BY", query))
    print(_line("N-way page, cold", cold, 500))
    print(_line("N-way page, cached", cached, 50))


if __name__ == "__main__":
    main()
