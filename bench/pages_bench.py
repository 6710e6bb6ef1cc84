"""Page benchmark: two runs of 10,000 cases each (a baseline and a regressed candidate); the
compare page, the run page and a case drill-down rendered through the Django test client.

    python bench/pages_bench.py [--cases 10000] [--repeat 15]                      # SQLite
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalsite_pages python bench/pages_bench.py

Targets (issue 4): median server time compare <= 300 ms, run detail <= 200 ms, drill-down
<= 50 ms on SQLite. Each page is requested once to warm it (the comparison is stored when
the candidate finishes, as in production), then timed `--repeat` times. "compare, cold
cache" empties the cache before each request: the page body is rebuilt from the stored
comparison every time (the first view of a pair, or after a triage change).
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    os.environ.setdefault("EVALSITE_DATA_DIR", tempfile.mkdtemp(prefix="evalsite-pages-"))
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
    from evaluations.models import CaseResult, Membership
    from evaluations.runs import services as runs
    from evaluations.schemas.evalset import EvalConfig

    setup_test_environment()  # lets the test client run against this database
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
    started = time.perf_counter()
    built = []
    for name, raw in (("baseline", perfect), ("candidate", outputs)):
        run = runs.run_create(project=project, version=outcome.version, target_kind="uploaded", config=config,
                              outputs=read_outputs([SourceFile(f"{name}.json", json.dumps(raw).encode())]),
                              name=name, enqueue=False)
        built.append(runs.run_execute_here(run.pk, workers=1))
    baseline, candidate = built
    print(f"{connection.vendor}: built two runs of {args.cases} cases in {time.perf_counter() - started:.1f} s "
          f"(candidate: {candidate.cases_failed} failed)")

    regressed = (CaseResult.objects.filter(run=candidate, status="failed").order_by("pk").values_list("pk", flat=True)
                 .first())
    compare_url = f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}"
    pages = {
        "compare": (compare_url, 300),
        "compare, cold cache": (compare_url, 300),
        "run detail": (f"/runs/{candidate.pk}/", 200),
        "drill-down": (f"/runs/{candidate.pk}/cases/{regressed}/?baseline={baseline.pk}", 50),
    }
    client = Client()
    client.force_login(user)
    for label, (url, target) in pages.items():
        response = client.get(url)  # warm: session, project, stored comparison
        assert response.status_code == 200, (label, response.status_code)
        times = []
        for _ in range(args.repeat):
            if "cold" in label:
                cache.clear()  # the page body is built from the stored comparison again
            t = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t) * 1000)
            assert response.status_code == 200
        median = statistics.median(times)
        verdict = "" if connection.vendor != "sqlite" else (" OK" if median <= target else " OVER TARGET")
        print(f"{label:<19} median {median:7.1f} ms  (min {min(times):.1f}, max {max(times):.1f}; "
              f"{len(response.content) / 1024:.0f} KB; target <= {target} ms){verdict}")


if __name__ == "__main__":
    main()
