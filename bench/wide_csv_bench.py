"""A wide CSV eval set (1,000 columns, short fields: within every documented limit) imported
through the import service, peak memory and time, beside the floor of a narrow CSV with the same
rows (3 columns) measured in the same run. Each import runs in a fresh child process on an
embedded database of its own, so the peak is its own.

    python bench/wide_csv_bench.py [--rows 5000] [--json]

Target (issue 27): the wide import's peak grows at most 160 MB at 5,000 rows (10 MB); it was
~420 MB when the reader held every row as a dict (1,655 MB at 20,000 rows).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, resource, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django; django.setup()
sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import scratch; scratch.migrate()
from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import Project
rows, columns = int(sys.argv[1]), int(sys.argv[2])
header = "input," + ",".join(f"c{i}" for i in range(columns - 1))
data = (header + "\n" + "".join(f"question {r}," + ",".join("x" for _ in range(columns - 1)) + "\n"
                                for r in range(rows))).encode()
project = Project.objects.get_or_create(slug="bench", defaults={"name": "bench"})[0]
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
[outcome] = evalset_import(project=project, files=[SourceFile("wide.csv", data)])
seconds = time.perf_counter() - started
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
assert outcome.version.case_count == rows
print(json.dumps({"seconds": seconds, "peak_growth_mb": grown, "megabytes": len(data) / 2**20}))
"""


def _import(rows: int, columns: int) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    with tempfile.TemporaryDirectory(prefix="evalsite-widecsv-") as tmp:
        env["EVALSITE_DATA_DIR"] = tmp
        done = subprocess.run([sys.executable, "-c", CHILD, str(rows), str(columns)], cwd=REPO, env=env,
                              capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"wide_csv_bench failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(rows: int) -> dict[str, float]:
    narrow, wide = _import(rows, 3), _import(rows, 1000)
    return {"rows": rows, "megabytes": wide["megabytes"], "seconds": wide["seconds"],
            "peak_growth_mb": wide["peak_growth_mb"], "floor_seconds": narrow["seconds"],
            "floor_peak_growth_mb": narrow["peak_growth_mb"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.rows)
    if args.json:
        print(json.dumps(r))
        return
    print(f"wide CSV, {r['rows']:,} rows x 1,000 columns ({r['megabytes']:.1f} MB): peak grew "
          f"{r['peak_growth_mb']:.0f} MB in {r['seconds']:.1f} s (target: at most 160 MB at 5,000 rows)")
    print(f"floor, the same rows x 3 columns: peak grew {r['floor_peak_growth_mb']:.0f} MB "
          f"in {r['floor_seconds']:.1f} s")


if __name__ == "__main__":
    main()
