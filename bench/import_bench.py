"""Import benchmark: a 10,000-case Google ADK eval set through the real import service.

    python bench/import_bench.py [--cases 10000] [--runs 3] [--style current|verbose]

Generates an ADK EvalSet file (3 turns a case, 2-4 tool calls a turn, realistic text), then
imports it in a fresh process into a fresh SQLite database (the embedded default) and prints
the wall time and peak RSS of that process. Targets (issue 17): <= 2.5 s, <= 200 MB, and
<= 2x the floor.

The floor, measured in the same run on the same file, also in a fresh process: `json.loads`
of the file, `json.dumps` of each case's columns (sorted keys, as the import stores them)
and `executemany` of those 10,000 rows into a fresh SQLite database with the project's
pragmas (WAL, synchronous=NORMAL), committed, with the cyclic garbage collector off (as the
import has it). Nothing a real import could skip.

Styles: `current` is what ADK's eval-set manager writes today (`model_dump_json(indent=2,
exclude_unset=True, exclude_defaults=True, exclude_none=True)`); `verbose` is the older
dump with every genai Part field present as null, as in ADK's 2025 test fixtures (about
2.5 times larger on disk).
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

import scratch

REPO = Path(__file__).resolve().parent.parent

CITIES = ["Tokyo", "Paris", "Lisbon", "Oslo", "Nairobi", "Lima", "Toronto", "Seoul", "Madrid", "Cairo"]
TOOLS = {
    "get_weather": lambda r: {"city": r.choice(CITIES), "units": r.choice(["metric", "imperial"])},
    "get_forecast": lambda r: {"city": r.choice(CITIES), "days": r.randint(1, 7)},
    "search_flights": lambda r: {"origin": r.choice(CITIES), "destination": r.choice(CITIES),
                                 "date": f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
                                 "passengers": r.randint(1, 4), "cabin": r.choice(["economy", "business"])},
    "get_order": lambda r: {"order_id": str(r.randint(1000, 99999))},
    "cancel_order": lambda r: {"order_id": str(r.randint(1000, 99999)),
                               "reason": r.choice(["late", "damaged", "changed mind"])},
    "send_email": lambda r: {"to": f"user{r.randint(1, 999)}@example.com", "subject": "Your booking",
                             "body": "Hello, your booking is confirmed. " * r.randint(1, 3)},
}
QUESTIONS = [
    "What's the weather like in {city} this weekend, and should I pack a jacket?",
    "Find me the cheapest flight to {city} next month, I can be flexible by a day or two.",
    "Can you check the status of my last order and tell me when it will arrive?",
    "Please cancel the order I placed yesterday, it was a mistake.",
    "Compare the forecast for {city} with where I am now and suggest the better day to travel.",
]
ANSWERS = [
    "It will be {t}°C and mostly clear in {city} on Saturday, with a light breeze in the evening; "
    "a light jacket is a good idea after sunset.",
    "The cheapest option is a direct flight to {city} on the 14th for 212 EUR, departing 08:40 and arriving 11:05.",
    "Your order shipped two days ago and is expected to arrive on Thursday between 9:00 and 13:00.",
    "I have cancelled the order; the refund of 59.90 EUR will reach your card within 3-5 business days.",
]


VERBOSE_PART = {"video_metadata": None, "thought": None, "code_execution_result": None, "executable_code": None,
                "file_data": None, "function_call": None, "function_response": None, "inline_data": None}


def generate(cases: int, *, style: str = "current", seed: int = 7) -> dict:
    r = random.Random(seed)
    verbose = style == "verbose"

    def _part(text: str) -> dict:
        return {**VERBOSE_PART, "text": text} if verbose else {"text": text}

    out = []
    for i in range(cases):
        conversation = []
        for turn in range(3):
            city = r.choice(CITIES)
            names = r.sample(list(TOOLS), r.randint(2, 4))
            conversation.append({
                "invocation_id": f"inv-{i}-{turn}",
                "user_content": {"parts": [_part(r.choice(QUESTIONS).format(city=city))], "role": "user"},
                "final_response": {"parts": [_part(r.choice(ANSWERS).format(city=city, t=r.randint(-5, 35)))],
                                   "role": "model"},
                "intermediate_data": {
                    "tool_uses": [{"id": f"call-{i}-{turn}-{k}", "args": TOOLS[n](r), "name": n}
                                  for k, n in enumerate(names)],
                    "intermediate_responses": [],
                },
                "creation_timestamp": 1747341706.62 + i + turn,
            })
        out.append({
            "eval_id": f"case_{i:05d}",
            "conversation": conversation,
            "session_input": {"app_name": "travel_agent", "user_id": f"user_{i % 97}",
                              "state": {"tier": r.choice(["gold", "basic"])}},
            "creation_timestamp": 1747341700.0 + i,
        })
    doc = {"eval_set_id": "bench_adk_10k", "name": "Benchmark ADK eval set", "eval_cases": out,
           "creation_timestamp": 1747341700.0}
    if verbose:
        doc["description"] = None
    else:  # exclude_defaults: ADK leaves out empty lists
        for case in out:
            for inv in case["conversation"]:
                del inv["intermediate_data"]["intermediate_responses"]
    return doc


def peak_rss_mb() -> float:
    """This process's own peak RSS. (ru_maxrss would carry the parent's peak over exec.)"""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def import_once(path: Path) -> None:
    """Child process: fresh SQLite database, migrated by a process of its own (as a server's
    database is migrated before the server starts: applying 20-odd migrations in this process
    would leave its peak RSS at the migration's, not at a server's), then the timed import."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    scratch.seed(os.environ.get("EVALSITE_DATA_DIR"))  # bench/all.py's migrated copy, when it gave one
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--verbosity", "0"], check=True, cwd=REPO)
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from evaluations.evalsets.services import evalset_import, project_get_or_create_default
    from evaluations.interop import files_from_paths

    project = project_get_or_create_default()
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    [outcome] = evalset_import(project=project, files=files_from_paths([path]))
    elapsed = time.perf_counter() - started
    peak = peak_rss_mb()
    print(json.dumps({"seconds": elapsed, "peak_rss_mb": peak, "rss_before_mb": rss_before,
                      "cases": outcome.case_count, "turns": outcome.version.turn_count,
                      "tool_calls": outcome.version.tool_call_count, "format": outcome.variant}))


def floor_once(path: Path, db_path: Path) -> None:
    """Child process: the floor (see the module docstring)."""
    import sqlite3

    gc.disable()  # as the import has it
    started = time.perf_counter()
    doc = json.loads(path.read_bytes())
    rows = []
    for position, case in enumerate(doc["eval_cases"]):
        rows.append((position, case.get("eval_id"), json.dumps(case.get("conversation"), sort_keys=True,
                                                                separators=(",", ":"), ensure_ascii=False),
                     json.dumps(case.get("session_input"), sort_keys=True, separators=(",", ":"),
                                ensure_ascii=False)))
    con = sqlite3.connect(db_path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE cases (id INTEGER PRIMARY KEY, position INTEGER, eval_id TEXT, conversation TEXT, "
                "session_input TEXT)")
    with con:
        con.executemany("INSERT INTO cases (position, eval_id, conversation, session_input) VALUES (?, ?, ?, ?)",
                        rows)
    con.close()
    elapsed = time.perf_counter() - started
    print(json.dumps({"seconds": elapsed, "peak_rss_mb": peak_rss_mb()}))


def measure(cases: int = 10_000, runs: int = 3, style: str = "current", echo: bool = True) -> dict:
    """Generate, import `runs` times and measure the floor as many times (alternating, so
    both see the same machine); the best of each. Used by bench/all.py."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_adk.test.json"
        path.write_text(json.dumps(generate(cases, style=style), indent=2))
        size_mb = path.stat().st_size / 1e6
        if echo:
            print(f"generated {cases} ADK cases ({style} style): {size_mb:.1f} MB")
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        results, floors = [], []
        for run in range(runs):
            env["EVALSITE_DATA_DIR"] = str(Path(tmp) / f"data{run}")
            out = subprocess.run([sys.executable, __file__, "--import-file", str(path)], env=env, cwd=REPO,
                                 capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            out = subprocess.run([sys.executable, __file__, "--floor-file", str(path), "--floor-db",
                                  str(Path(tmp) / f"floor{run}.sqlite3")], env=env, cwd=REPO,
                                 capture_output=True, text=True, check=True)
            floors.append(json.loads(out.stdout.strip().splitlines()[-1]))
            if echo:
                print(f"run {run + 1}: {result['seconds']:.2f} s, peak RSS {result['peak_rss_mb']:.0f} MB "
                      f"(process before import {result['rss_before_mb']:.0f} MB), {result['cases']} cases, "
                      f"{result['turns']} turns, {result['tool_calls']} tool calls [{result['format']}]; "
                      f"floor {floors[-1]['seconds']:.2f} s")
    best = min(r["seconds"] for r in results)
    floor = min(f["seconds"] for f in floors)
    # Each import against the floor measured right after it (the same moment of a shared
    # machine), the median of those: steadier than best over best.
    ratio = statistics.median(r["seconds"] / f["seconds"] for r, f in zip(results, floors, strict=True))
    return {"seconds": best, "peak_rss_mb": max(r["peak_rss_mb"] for r in results), "floor_seconds": floor,
            "ratio": ratio, "size_mb": size_mb, "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--style", choices=["current", "verbose"], default="current")
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

    r = measure(args.cases, args.runs, args.style)
    verdict = "OK" if r["seconds"] <= 2.5 and r["peak_rss_mb"] <= 200 and r["ratio"] <= 2 else "OVER TARGET"
    print(f"import of {args.cases} ADK cases ({args.style} style): best {r['seconds']:.2f} s, worst peak RSS "
          f"{r['peak_rss_mb']:.0f} MB; floor (json.loads + json.dumps + executemany, same file, same run) "
          f"{r['floor_seconds']:.2f} s; ratio (median of each import over its floor) {r['ratio']:.2f}x "
          f"(targets <= 2.5 s, <= 200 MB, <= 2x): {verdict}")


if __name__ == "__main__":
    main()
