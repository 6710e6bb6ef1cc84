"""Results import benchmark: a 10,000-case DeepEval test run (`deepeval test run` / Confident AI
`TestRun` JSON: `testCases` with `metricsData`) imported as a completed run through the real
service (`evaluations.runs.imports.results_import`): the eval set created from the file, one
result per case with its output, DeepEval's scores kept, the run's summary.

    python bench/results_import_bench.py [--cases 10000] [--runs 3] [--json]

Each import runs in a fresh process on a fresh SQLite database (the embedded default);
target (issue 19): <= 5 s. The floor, in a fresh process on the same file, right after each
import: `json.loads` of the file, `json.dumps` of each case's, output's and score's columns,
and `executemany` of those rows (cases, results, scores) into three tables of a fresh SQLite
database with the project's pragmas, committed. Nothing a real import could skip.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from import_bench import peak_rss_mb  # noqa: E402

CITIES = ["Tokyo", "Paris", "Lisbon", "Oslo", "Nairobi", "Lima", "Toronto", "Seoul", "Madrid", "Cairo"]
METRICS = [("Answer Relevancy", 0.7, "gpt-4o"), ("Tool Correctness", 0.5, None), ("Faithfulness", 0.6, "gpt-4o")]


def generate(cases: int, seed: int = 19) -> dict:
    r = random.Random(seed)
    test_cases = []
    for n in range(cases):
        city = r.choice(CITIES)
        calls = [
            {
                "name": "get_weather",
                "inputParameters": {"city": city, "units": "metric"},
                "output": f"{r.randint(-5, 35)} C, {r.choice(['clear', 'rain', 'snow'])}",
            }
            for _ in range(r.randint(1, 3))
        ]
        metrics = []
        for name, threshold, model in METRICS:
            score = round(r.random(), 4)
            metrics.append(
                {
                    "name": name,
                    "threshold": threshold,
                    "success": score >= threshold,
                    "score": score,
                    "reason": f"The score is {score:.2f} because the answer about {city} "
                    f"{'covers' if score >= threshold else 'misses'} the question.",
                    "strictMode": False,
                    "evaluationModel": model,
                    "error": None,
                    "evaluationCost": 0.0021 if model else None,
                }
            )
        test_cases.append(
            {
                "name": f"test_case_{n}",
                "input": f"What's the weather in {city} tomorrow morning, and should I bring an umbrella? (case {n})",
                "actualOutput": f"Tomorrow morning in {city} it will be mild, showers likely; take an umbrella.",
                "expectedOutput": f"Mild in {city}, showers likely: bring an umbrella.",
                "retrievalContext": [f"Forecast {city}: showers 60%"],
                "toolsCalled": calls,
                "expectedTools": [{"name": "get_weather", "inputParameters": {"city": city}}],
                "success": all(m["success"] for m in metrics),
                "metricsData": metrics,
                "runDuration": round(r.random() * 3, 3),
                "evaluationCost": 0.0042,
                "order": n,
            }
        )
    return {
        "testFile": "test_weather_bot.py",
        "testCases": test_cases,
        "conversationalTestCases": [],
        "metricsScores": [],
        "testPassed": sum(c["success"] for c in test_cases),
        "testFailed": sum(not c["success"] for c in test_cases),
        "runDuration": 1234.5,
        "evaluationCost": 42.0,
    }


def import_once(path: Path) -> None:
    """Child process: fresh SQLite database, migrate (untimed), then the timed import."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    import scratch

    from evaluations.evalsets.services import project_get_or_create_default
    from evaluations.interop import SourceFile
    from evaluations.models import Score
    from evaluations.runs.imports import results_import

    scratch.migrate()
    project = project_get_or_create_default()
    started = time.perf_counter()
    run = results_import(project=project, file=SourceFile(path.name, path.read_bytes()))
    elapsed = time.perf_counter() - started
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "peak_rss_mb": peak_rss_mb(),
                "status": run.status,
                "results": run.cases_total,
                "scores": Score.objects.filter(run=run).count(),
            }
        )
    )


def floor_once(path: Path, db_path: Path) -> None:
    """Child process: the floor (see the module docstring)."""
    import sqlite3

    gc.disable()
    started = time.perf_counter()
    doc = json.loads(path.read_bytes())

    def dumps(value: object) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    cases, results, scores = [], [], []
    for n, case in enumerate(doc["testCases"]):
        cases.append(
            (
                n,
                case["name"],
                dumps(
                    [
                        {
                            "user": case["input"],
                            "expected": case.get("expectedOutput"),
                            "tools": case.get("expectedTools"),
                        }
                    ]
                ),
            )
        )
        results.append((n, dumps({"final_response": case.get("actualOutput"), "tools": case.get("toolsCalled")})))
        scores += [
            (
                n,
                m["name"],
                m["score"],
                m["success"],
                dumps({"threshold": m["threshold"]}),
                dumps({"reason": m["reason"]}),
            )
            for m in case["metricsData"]
        ]
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE cases (id INTEGER PRIMARY KEY, position INTEGER, eval_id TEXT, conversation TEXT)")
    con.execute("CREATE TABLE results (id INTEGER PRIMARY KEY, case_id INTEGER, output TEXT)")
    con.execute(
        "CREATE TABLE scores (id INTEGER PRIMARY KEY, result_id INTEGER, criterion TEXT, score REAL, "
        "passed INTEGER, threshold TEXT, justification TEXT)"
    )
    with con:
        con.executemany("INSERT INTO cases (position, eval_id, conversation) VALUES (?, ?, ?)", cases)
        con.executemany("INSERT INTO results (case_id, output) VALUES (?, ?)", results)
        con.executemany(
            "INSERT INTO scores (result_id, criterion, score, passed, threshold, justification) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            scores,
        )
    con.close()
    print(json.dumps({"seconds": time.perf_counter() - started}))


def measure(cases: int = 10_000, runs: int = 3, echo: bool = True) -> dict:
    """Import `runs` times, the floor after each; the best import and the median ratio."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "test_run.json"
        path.write_text(json.dumps(generate(cases), indent=2))
        size_mb = path.stat().st_size / 1e6
        if echo:
            print(f"generated a DeepEval test run of {cases} cases: {size_mb:.1f} MB")
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        results, floors = [], []
        for run in range(runs):
            env["EVALSITE_DATA_DIR"] = str(Path(tmp) / f"data{run}")
            out = subprocess.run(
                [sys.executable, __file__, "--import-file", str(path)],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
            )
            if out.returncode:
                raise SystemExit(f"the import failed:\n{out.stderr[-3000:]}")
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--floor-file",
                    str(path),
                    "--floor-db",
                    str(Path(tmp) / f"floor{run}.sqlite3"),
                ],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            )
            floors.append(json.loads(out.stdout.strip().splitlines()[-1]))
            if echo:
                r = results[-1]
                print(
                    f"run {run + 1}: {r['seconds']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB, run {r['status']}, "
                    f"{r['results']} results, {r['scores']} scores; floor {floors[-1]['seconds']:.2f} s"
                )
    ratio = statistics.median(r["seconds"] / f["seconds"] for r, f in zip(results, floors, strict=True))
    return {
        "seconds": min(r["seconds"] for r in results),
        "floor_seconds": min(f["seconds"] for f in floors),
        "ratio": ratio,
        "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
        "size_mb": size_mb,
        "cases": cases,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--import-file", help=argparse.SUPPRESS)
    parser.add_argument("--floor-file", help=argparse.SUPPRESS)
    parser.add_argument("--floor-db", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.import_file:
        import_once(Path(args.import_file))
        return
    if args.floor_file:
        floor_once(Path(args.floor_file), Path(args.floor_db))
        return
    r = measure(args.cases, args.runs)
    print(
        f"results import of a {args.cases}-case DeepEval test run: best {r['seconds']:.2f} s "
        f"(target <= 5 s: {'OK' if r['seconds'] <= 5 else 'OVER TARGET'}), peak RSS {r['peak_rss_mb']:.0f} MB; "
        f"floor (json.loads + json.dumps + executemany of cases, results, scores) {r['floor_seconds']:.2f} s; "
        f"ratio (median of each import over its floor) {r['ratio']:.2f}x"
    )
    if args.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
