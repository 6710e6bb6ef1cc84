"""Import benchmark: a 10,000-case Google ADK eval set through the real import service.

    python bench/import_bench.py [--cases 10000] [--runs 3] [--style current|verbose]

Generates an ADK EvalSet file (3 turns a case, 2-4 tool calls a turn, realistic text), then
imports it in a fresh process into a fresh SQLite database (the embedded default) and prints
the wall time and peak RSS of that process. Target (issue 2): <= 5 s and <= 300 MB.

Styles: `current` is what ADK's eval-set manager writes today (`model_dump_json(indent=2,
exclude_unset=True, exclude_defaults=True, exclude_none=True)`); `verbose` is the older
dump with every genai Part field present as null, as in ADK's 2025 test fixtures (about
2.5 times larger on disk).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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
    """Child process: fresh SQLite database, migrate (untimed), then the timed import."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    from evaluations.evalsets.formats import files_from_paths
    from evaluations.evalsets.services import evalset_import, project_get_or_create_default

    call_command("migrate", verbosity=0)
    project = project_get_or_create_default()
    rss_before = peak_rss_mb()
    started = time.perf_counter()
    [outcome] = evalset_import(project=project, files=files_from_paths([path]))
    elapsed = time.perf_counter() - started
    peak = peak_rss_mb()
    print(json.dumps({"seconds": elapsed, "peak_rss_mb": peak, "rss_before_mb": rss_before,
                      "cases": outcome.case_count, "turns": outcome.version.turn_count,
                      "tool_calls": outcome.version.tool_call_count, "format": outcome.variant}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--style", choices=["current", "verbose"], default="current")
    parser.add_argument("--import-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.import_file:
        import_once(Path(args.import_file))
        return

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench_adk.test.json"
        path.write_text(json.dumps(generate(args.cases, style=args.style), indent=2))
        print(f"generated {args.cases} ADK cases ({args.style} style): {path.stat().st_size / 1e6:.1f} MB")
        results = []
        for run in range(args.runs):
            env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
            env["EVALSITE_DATA_DIR"] = str(Path(tmp) / f"data{run}")
            out = subprocess.run([sys.executable, __file__, "--import-file", str(path)], env=env, cwd=REPO,
                                 capture_output=True, text=True, check=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(result)
            print(f"run {run + 1}: {result['seconds']:.2f} s, peak RSS {result['peak_rss_mb']:.0f} MB "
                  f"(process before import {result['rss_before_mb']:.0f} MB), {result['cases']} cases, "
                  f"{result['turns']} turns, {result['tool_calls']} tool calls [{result['format']}]")
        best = min(r["seconds"] for r in results)
        peak = max(r["peak_rss_mb"] for r in results)
        verdict = "OK" if best <= 5 and peak <= 300 else "OVER TARGET"
        print(f"import of {args.cases} ADK cases ({args.style} style): best {best:.2f} s, worst peak RSS {peak:.0f} MB "
              f"(target <= 5 s, <= 300 MB): {verdict}")


if __name__ == "__main__":
    main()
