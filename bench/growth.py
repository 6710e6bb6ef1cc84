"""Growth benchmark: what each step costs at 1k, 10k and 100k cases, and how it grows.

    python bench/growth.py [--sizes 1000,10000,100000] [--repeat 5] [--json]

Each size runs in a fresh process on a fresh SQLite database (the embedded default): import
the eval set, evaluate two runs of it (a perfect baseline, then a candidate with regressions;
6 evaluators, in-process on one thread; the candidate is timed, its comparison with the
baseline included), then the pages through the Django test client, median of `--repeat`
requests: the run page (with its Causes table) and the run page filtered to its largest
cause (cold: the cache emptied, so its charts are drawn again), the compare page with the
cache emptied before each request ("cold": rebuilt from the stored comparison and causes)
and cached, the compare page filtered to its largest cause (cold), the run's causes through
the API, a case drill-down, and the eval set's trend over
30 runs. Each page's SQL statements are counted too (the last request): a page that shows
causes must make as many at 100k as at 10k, and the table says "grows" where one does not.
The 28 extra runs of the trend are written with bulk SQL (copies of the candidate's result
rows, some statuses flipped), not evaluated, so 100k stays cheap.

Printed: each cost per size and its growth factor per 10x data. Targets (issue 17): pages
<= 1.5x from 10k to 100k; import and runs linear (about 10x); at 100k the compare page cold
<= 1 s and cached <= 50 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

STAGES = ["import", "run", "run page", "run, one cause", "compare cold", "compare cached", "compare, one cause",
          "causes API", "drill-down", "trend (30 runs)"]
PAGES = {"run page", "run, one cause", "compare cold", "compare cached", "compare, one cause", "causes API",
         "drill-down", "trend (30 runs)"}
QUERIES = " queries"  # a page's statement count is kept under "<page> queries"
TREND_RUNS = 30


def one_size(cases: int, repeat: int) -> dict[str, float]:
    """Child process: every stage at one size, in seconds."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    import django

    django.setup()
    import engine_bench
    import scratch
    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment
    from django.utils import timezone

    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.interop.outputs import read_outputs
    from evaluations.models import CaseResult, Membership, Run
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig

    setup_test_environment()
    scratch.migrate()
    project = project_get_or_create_default()
    user = get_user_model().objects.create_user("bench", "bench@example.com", "bench-pass-123")
    Membership.objects.create(project=project, user=user, role=Membership.Role.MEMBER)
    evalset, outputs = engine_bench.generate(cases)
    perfect = [{"eval_id": case["eval_id"], "turns": [{
        "invocation_id": "t1", "latency_seconds": 0.5,
        "final_response": case["conversation"][0]["expected_final_response"]["content"],
        "tool_calls": case["conversation"][0]["expected_tool_trajectory"]}]} for case in evalset["eval_cases"]]
    config = EvalConfig.model_validate({"criteria": engine_bench.CRITERIA})
    costs: dict[str, float] = {}

    data = json.dumps(evalset).encode()
    started = time.perf_counter()
    [outcome] = evalset_import(project=project, files=[SourceFile("growth.evalset.json", data)])
    costs["import"] = time.perf_counter() - started

    def evaluate(name: str, raw: list[dict]) -> Run:
        run = runs.run_create(project=project, version=outcome.version, target_kind="uploaded", config=config,
                              outputs=read_outputs([SourceFile(f"{name}.json", json.dumps(raw).encode())]),
                              name=name, enqueue=False)
        return runs.run_execute_here(run.pk, workers=1)

    baseline = evaluate("baseline", perfect)
    started = time.perf_counter()
    candidate = evaluate("candidate", outputs)
    costs["run"] = time.perf_counter() - started

    # The trend's other runs: the candidate's result rows copied by SQL, a few statuses flipped.
    table = CaseResult._meta.db_table
    stamp = timezone.now()
    with transaction.atomic():
        for k in range(TREND_RUNS - 2):
            copy = Run.objects.create(
                project=project, evalset_version=outcome.version, name=f"copy {k}", config=candidate.config,
                target_kind=candidate.target_kind, status=Run.Status.COMPLETED, summary=candidate.summary,
                cases_total=candidate.cases_total, cases_done=candidate.cases_done,
                created_at=stamp + timezone.timedelta(seconds=k + 1), finished_at=stamp)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {table} (run_id, case_id, iteration, status, error, latency_seconds, "
                    f"prompt_tokens, completion_tokens, cost_usd, attempts, created_at, updated_at) "
                    f"SELECT %s, case_id, iteration, CASE WHEN (id + %s) % 11 = 0 THEN 'failed' ELSE status END, "
                    f"error, latency_seconds, prompt_tokens, completion_tokens, cost_usd, attempts, created_at, "
                    f"updated_at FROM {table} WHERE run_id = %s", [copy.pk, k, candidate.pk])

    regressed = (CaseResult.objects.filter(run=candidate, status="failed").order_by("pk")
                 .values_list("pk", flat=True).first())
    compare_url = f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}"
    from evaluations.review.causes import run_causes

    found = run_causes(candidate, limit=1)
    top = found.rows[0].pk if found and found.rows else 0
    pages = {
        "run page": f"/runs/{candidate.pk}/",
        "run, one cause": f"/runs/{candidate.pk}/?cause={top}",
        "compare cold": compare_url,
        "compare cached": compare_url,
        "compare, one cause": f"{compare_url}&status=all&cause={top}",  # cold: its cases table filtered
        "causes API": f"/api/v1/runs/{candidate.pk}/causes/",
        "drill-down": f"/runs/{candidate.pk}/cases/{regressed}/?baseline={baseline.pk}",
        "trend (30 runs)": f"/evalsets/{outcome.evalset.pk}/trend/",
    }
    client = Client()
    client.force_login(user)
    for label, url in pages.items():
        response = client.get(url)  # warm: session, project, stored comparison
        assert response.status_code == 200, (label, response.status_code)
        times = []
        for _ in range(repeat):
            if "cold" in label or "cause" in label:
                cache.clear()
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - started)
            assert response.status_code == 200, (label, response.status_code)
        costs[label] = statistics.median(times)
        costs[label + QUERIES] = len(queries)
    return costs


def measure(sizes: list[int], repeat: int = 5, echo: bool = True) -> dict[int, dict[str, float]]:
    """Every size in a fresh process with a fresh database. Used by bench/all.py."""
    out: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="evalsite-growth-") as tmp:
        for size in sizes:
            env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
            env["EVALSITE_DATA_DIR"] = str(Path(tmp) / f"data{size}")
            started = time.perf_counter()
            done = subprocess.run([sys.executable, __file__, "--one", str(size), "--repeat", str(repeat)],
                                  env=env, cwd=REPO, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"growth at {size} cases failed:\n{done.stderr[-3000:]}")
            out[size] = json.loads(done.stdout.strip().splitlines()[-1])
            if echo:
                print(f"{size} cases: done in {time.perf_counter() - started:.0f} s", flush=True)
    return out


def _fmt(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds >= 1 else f"{seconds * 1000:.1f} ms"


def table(results: dict[int, dict[str, float]]) -> str:
    sizes = sorted(results)
    head = ["stage", *[f"{s:,}" for s in sizes], *[f"x {a:,}->{b:,}" for a, b in pairwise(sizes)]]
    lines = [" | ".join(head)]
    for stage in STAGES:
        costs = [results[s][stage] for s in sizes]
        factors = []
        for (a, ca), (b, cb) in pairwise(zip(sizes, costs, strict=True)):
            per_10x = (cb / ca) ** (1 / math.log10(b / a)) if ca > 0 else float("nan")
            factors.append(f"{per_10x:.2f}")
        lines.append(" | ".join([stage, *[_fmt(c) for c in costs], *factors]))
    lines.append("(growth factor per 10x data; targets: pages <= 1.5, import and run ~10)")
    counted = [stage for stage in STAGES if all(stage + QUERIES in results[s] for s in sizes)]
    if counted:
        lines.append(" | ".join(["SQL statements", *[f"{s:,}" for s in sizes], "flat?"]))
        for stage in counted:
            counts = [int(results[s][stage + QUERIES]) for s in sizes]
            lines.append(" | ".join([stage, *map(str, counts), "flat" if len(set(counts)) == 1 else "GROWS"]))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_size(args.one, args.repeat)))
        return
    results = measure([int(s) for s in args.sizes.split(",")], args.repeat)
    print(table(results))
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
