"""Every benchmark, one table: so a change that slows evalsite down shows.

    python bench/all.py                  # full sizes (10k import and engine; growth 1k/10k/100k)
    python bench/all.py --quick          # small sizes, about 7 minutes on 2 cores (CI runs this)
    python bench/all.py --update-docs    # full sizes, then write the figures into docs/benchmarks.md
    python bench/all.py --postgres postgres://postgres@127.0.0.1:5432/postgres   # + the engine on PostgreSQL
    python bench/all.py --lighthouse     # + Lighthouse on the demo's pages (npm ci in bench/lighthouse first)

Each row: the figure, its target, its ratio to the floor measured in the same run (import
and engine), the figure in docs/benchmarks.md (the table between the `bench-figures` markers,
which holds the latest full run), and the change from it. Quick sizes have no such figure. It
prints; timings never fail it. It exits non-zero only when a benchmark crashes.
All on SQLite (the embedded default): DATABASE_URL and REDIS_URL are ignored. With
`--postgres URL` (a server it may create a database on), the engine benchmark also runs on
PostgreSQL, and the recovery benchmark (a database drop, a killed worker) runs there, each in
a scratch database created for it and dropped after. The benchmarks on a SQLite database of
their own start from a copy of one database migrated at the start (bench/scratch.py), not from
ninety-odd migrations each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import growth  # noqa: E402 - after the path
import import_bench  # noqa: E402
import results_import_bench  # noqa: E402
import scoring_bench  # noqa: E402
import scratch  # noqa: E402
import wide_csv_bench  # noqa: E402

DOCS = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench-figures:begin -->", "<!-- bench-figures:end -->"
FULL = {"import": 10_000, "import_runs": 3, "engine": 10_000, "growth": [1_000, 10_000, 100_000], "repeat": 5,
        "results_import": 10_000, "otlp_requests": 60, "deletion": 10_000, "review": 10_000, "causes": 100_000,
        "wide_csv_rows": 5_000, "fairness_cases": 2_000, "otlp_refusal_spans": 1_000_000, "recovery_lease": 15,
        "sweep_traces": 1_000_000, "memory_cases": 100_000, "memory_evalset_cases": 14_000, "model_loop_cases": 300,
        "judge_cases": 1_000}
QUICK = {"import": 1_000, "import_runs": 1, "engine": 1_000, "growth": [200, 2_000], "repeat": 3,
         "results_import": 1_000, "otlp_requests": 12, "deletion": 1_000, "review": 500, "causes": 1_000,
         "wide_csv_rows": 1_000, "fairness_cases": 500, "otlp_refusal_spans": 100_000, "recovery_lease": 6,
         "sweep_traces": 100_000, "memory_cases": 5_000, "memory_evalset_cases": 2_000, "model_loop_cases": 100,
         "judge_cases": 200}


@dataclass
class Figure:
    name: str
    value: float
    unit: str  # "s", "ms", "MB" or "x"
    target: str
    ratio: float | None = None  # to the floor

    def text(self) -> str:
        if self.unit == "ms":
            return f"{self.value * 1000:.1f} ms"
        if self.unit == "x":
            return f"{self.value:.2f}x"
        if self.unit == "MB":
            return f"{self.value:.0f} MB"
        if self.unit == "/s":
            return f"{self.value:.0f}/s"
        if self.unit == "score":
            return f"{self.value:.0f}"
        return f"{self.value:.2f} s"


def _size(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def run_engine(cases: int, database_url: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    if database_url:
        env["DATABASE_URL"] = database_url
    with tempfile.TemporaryDirectory(prefix="evalsite-engine-") as tmp:
        env["EVALSITE_DATA_DIR"] = tmp
        done = subprocess.run([sys.executable, str(REPO / "bench" / "engine_bench.py"), "--cases", str(cases),
                               "--json"], env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"engine_bench failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """The URL of a new, empty database on the server `server_url` points at (its own
    database is only connected to), dropped afterwards."""
    import psycopg

    name = f"evalsite_bench_{os.getpid()}"
    parts = urlsplit(server_url)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_bench(script: str, *args: str, database_url: str | None = None, scratch: bool = False) -> dict:
    """A benchmark in a child process (each sets Django up itself), its figures from the
    JSON on its last line. `scratch`: on a SQLite data directory of its own, thrown away after."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    if database_url:
        env["DATABASE_URL"] = database_url
    with tempfile.TemporaryDirectory(prefix="evalsite-bench-") as tmp:
        if scratch:
            env["EVALSITE_DATA_DIR"] = tmp
        done = subprocess.run([sys.executable, str(REPO / "bench" / script), *args, "--json"], env=env, cwd=REPO,
                              capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{script} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_otlp(requests: int) -> dict:
    """In a child process: the benchmark sets Django up in its own process for its floor."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "otlp_bench.py"), "--requests", str(requests),
                           "--json"], env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"otlp_bench failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_deletion(cases: int) -> dict:
    return run_bench("deletion_bench.py", "--cases", str(cases), scratch=True)


def run_review(cases: int) -> dict:
    return run_bench("review_bench.py", "--cases", str(cases), scratch=True)


def run_causes(cases: int) -> dict:
    return run_bench("causes_bench.py", "--cases", str(cases), scratch=True)


def run_lighthouse() -> list[Figure]:
    """bench/lighthouse.py, one Lighthouse run per page: each page's mobile performance score,
    its ratio to the login page's (the floor: the smallest page the server renders), and the
    lowest accessibility score of the five."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "lighthouse.py"), "--runs", "1", "--json"],
                          cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"lighthouse failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    print(done.stdout[:done.stdout.index("\n{")])
    found = json.loads(done.stdout[done.stdout.index("\n{") + 1:])
    floor = found.pop("login (floor)")["mobile"]["performance"]
    figures = [Figure(f"Lighthouse mobile performance, {page}", forms["mobile"]["performance"], "score", ">= 90",
                      forms["mobile"]["performance"] / floor) for page, forms in found.items()]
    lowest = min(forms[form]["accessibility"] for forms in found.values() for form in forms)
    return [*figures, Figure("Lighthouse accessibility, lowest page", lowest, "score", ">= 95")]


_STARTED = time.perf_counter()


def say(message: str) -> None:
    """A step's name, after the time since the run started: the differences say where a run's time goes."""
    print(f"[{time.perf_counter() - _STARTED:5.0f} s] {message}", flush=True)


def collect(sizes: dict, postgres: str | None = None) -> list[Figure]:
    figures: list[Figure] = []
    n = sizes["import"]
    say(f"import benchmark ({n} cases)...")
    imp = import_bench.measure(n, sizes["import_runs"], echo=False)
    figures.append(Figure(f"import {_size(n)} ADK cases", imp["seconds"], "s", "<= 2.5 s, <= 2x floor", imp["ratio"]))
    figures.append(Figure(f"import {_size(n)} ADK cases, peak RSS", imp["peak_rss_mb"], "MB", "<= 200 MB"))

    n = sizes["engine"]
    say(f"engine benchmark ({n} cases x 6 evaluators, 2 workers)...")
    eng = run_engine(n)
    figures.append(Figure(f"engine {_size(n)} x 6 evaluators, 2 workers", eng["seconds"], "s",
                          "<= 1.2x floor", eng["ratio"]))
    if postgres:
        say(f"engine benchmark on PostgreSQL ({n} cases x 6 evaluators, 2 workers)...")
        with scratch_database(postgres) as url:
            eng = run_engine(n, url)
        figures.append(Figure(f"engine {_size(n)} x 6 evaluators, 2 workers, PostgreSQL", eng["seconds"], "s",
                              "<= 6 s", eng["ratio"]))

    n = sizes["results_import"]
    say(f"results import benchmark ({n}-case DeepEval test run)...")
    res = results_import_bench.measure(n, sizes["import_runs"], echo=False)
    figures.append(Figure(f"results import {_size(n)} DeepEval cases", res["seconds"], "s", "<= 5 s", res["ratio"]))

    n = sizes["otlp_requests"]
    say(f"OTLP ingest benchmark ({n} exports of 512 spans over HTTP, 4 clients)...")
    otlp = run_otlp(n)
    # The ratio: the receiver's in-process work floor (decode + rows + inserts) over HTTP's rate.
    figures.append(Figure("OTLP ingest, spans/s (SQLite)", otlp["spans_per_second"], "/s", ">= 2,000/s",
                          otlp["ratio"]))
    figures.append(Figure("OTLP ingest, p99 of a 512-span export", otlp["p99_ms"] / 1000, "ms", ""))

    n = sizes["deletion"]
    say(f"deletion benchmark (a {n}-case run)...")
    gone = run_deletion(n)
    figures.append(Figure(f"delete a {_size(n)}-case run", gone["seconds"], "s", "<= 3x floor", gone["ratio"]))
    figures.append(Figure(f"delete a {_size(n)}-case run, longest DELETE", gone["longest_statement_seconds"], "ms",
                          "< the floor's one lock"))
    n = sizes["review"]
    say(f"team review benchmark ({n} cases, a tenth regressed)...")
    rev = run_review(n)
    figures.append(Figure(f"bulk triage of {_size(rev['regressions'])} regressions (select all)", rev["bulk_seconds"],
                          "s", "<= 10x floor", rev["bulk_ratio"]))
    figures.append(Figure(f"review report, {_size(rev['regressions'])} decisions", rev["report_ms"] / 1000, "ms",
                          "", rev["report_ratio"]))
    n = sizes["causes"]
    say(f"causes benchmark ({n} cases, grouped at completion)...")
    grouped = run_causes(n)
    # The ratio: to the completion's own comparison of the same runs (the floor it comes on top of).
    figures.append(Figure(f"causes of a {_size(n)}-case run", grouped["seconds"], "s", "<= 1 s", grouped["ratio"]))
    say("notifications benchmark (10 rules on a finished run; 1,000 deliveries drained by a qcluster)...")
    note = run_bench("notify_bench.py", "--rules", "10", "--deliveries", "1000", "--repeat", "5", scratch=True)
    figures += [Figure("completion with 10 notification rules, added", note["added_ms"] / 1000, "ms", "<= 50 ms",
                       note["with_rules_ms"] / note["floor_ms"]),
                Figure("notification deliveries drained, 2 workers", note["per_second"], "/s", ">= 100/s",
                       note["ratio"])]
    say("a receiver's 400 MB answer and gzip bomb, the worker's memory...")
    answer = run_bench("notify_answer_bench.py")
    worst = max(answer["flood"]["growth_mb"], answer["bomb"]["growth_mb"])
    figures.append(Figure("notification answer of 400 MB / gzip bomb, RSS added", answer["added_mb"], "MB",
                          "<= 32 MB", worst / max(answer["floor"]["growth_mb"], 1.0)))
    n = sizes["wide_csv_rows"]
    say(f"wide CSV import ({n} rows x 1,000 columns)...")
    wide = wide_csv_bench.measure(n)
    figures.append(Figure(f"import a wide CSV, {_size(n)} x 1,000, peak RSS growth", wide["peak_growth_mb"], "MB",
                          "<= 160 MB at 5k rows", wide["peak_growth_mb"] / max(wide["floor_peak_growth_mb"], 1.0)))
    figures.append(Figure(f"import a wide CSV, {_size(n)} x 1,000", wide["seconds"], "s", "",
                          wide["seconds"] / wide["floor_seconds"]))

    say("scoring untrusted outputs, worst cases ...")
    sc = scoring_bench.measure(quick=sizes is QUICK)
    figures.append(Figure("JSON similarity, a 10,000-char leaf pair", sc["similarity_10k_s"], "ms", "< 50 ms",
                          sc["similarity_10k_s"] / sc["similarity_typical_s"]))
    figures.append(Figure("ANY_ORDER alignment, 500 calls", sc["any_order_500_s"], "s", "< 1 s",
                          sc["any_order_500_s"] / sc["any_order_typical_s"]))
    say("members' patterns and schemas on hostile answers ...")
    pat = run_bench("patterns_bench.py", *(("--quick",) if sizes is QUICK else ()))
    figures.append(Figure("regex_match, a typical pattern (RE2 with re's meaning)", pat["regex_typical_bounded_s"],
                          "ms", "~ re's cost", pat["regex_typical_bounded_s"] / pat["regex_typical_re_s"]))
    figures.append(Figure("regex_match (a+)+$ on 100k characters", pat["regex_hostile_bounded_100k_s"], "ms",
                          "linear (re: 9.8 s on 25)"))
    figures.append(Figure("a backtracking-only pattern, stopped at its bound", pat["regex_backtracking_to_bound_s"],
                          "s", "<= 0.5 s bound + a process"))
    figures.append(Figure("json_schema, a typical document", pat["schema_typical_bounded_s"], "ms", "",
                          pat["schema_typical_bounded_s"] / pat["schema_typical_jsonschema_s"]))
    figures.append(Figure("$defs doubling 19 times, refused when saved", pat["schema_doubling_refused_s"], "ms",
                          "was 13.8 s to validate"))
    n = sizes["otlp_refusal_spans"]
    say(f"OTLP refusal benchmark (one export of {n} spans over the budget)...")
    refusal = run_bench("otlp_refusal_bench.py", "--spans", str(n))
    figures.append(Figure(f"OTLP refusal of {_size(n)} spans", refusal["seconds"], "s",
                          "decode only (<= 2x floor)", refusal["ratio"]))

    say("monitors benchmark (ingest with monitors, scoring, the monitor and trace pages as traces grow)...")
    mon = run_bench("monitors_bench.py", *(("--requests", "10", "--traces", "2000", "--pages", "1000,10000")
                                           if sizes is QUICK else ()))
    figures.append(Figure("ingest with 3 monitors, x without", mon["ingest_ratio"], "x", "<= 1.2x"))
    figures.append(Figure("monitor scoring, deterministic", mon["scoring_per_s"], "/s", ">= 2,000/s",
                          mon["scoring_ratio"]))
    page, worst = max(mon["page_growth"].items(), key=lambda kv: kv[1])  # 15 monitor and trace pages
    figures.append(Figure(f"monitor and trace pages, worst growth per 10x stored traces ({page})", worst, "x",
                          "<= 1.5x (1M: bench/monitors_bench.py --pages 10000,1000000)"))
    n = sizes["memory_cases"]
    say(f"memory benchmark (a ~50 MB eval set upload, a {n}-case outputs upload and run)...")
    mem = run_bench("memory_bench.py", "--evalset-cases", str(sizes["memory_evalset_cases"]), "--cases", str(n),
                    scratch=True)
    figures.append(Figure(f"gunicorn worker, {mem['evalset_mb']:.0f} MB eval set upload, peak RSS",
                          mem["evalset_peak_mb"], "MB", "< 400 MB", mem["evalset_peak_mb"] / mem["web_floor_mb"]))
    figures.append(Figure(f"gunicorn worker, {_size(n)}-case outputs upload, peak RSS", mem["outputs_peak_mb"], "MB",
                          "< 400 MB", mem["outputs_peak_mb"] / mem["web_floor_mb"]))
    figures.append(Figure(f"qcluster evaluating a {_size(n)}-case run, peak RSS", mem["run_peak_mb"], "MB",
                          "< 400 MB", mem["run_peak_mb"] / mem["cluster_floor_mb"]))
    n = sizes["sweep_traces"]
    say(f"monitors' pending sweep benchmark ({n} stored traces)...")
    sweep = run_bench("monitor_sweep_bench.py", "--traces", str(n), "--lost", "1000", scratch=True)
    figures.append(Figure(f"pending sweep, idle, {_size(n)} stored traces, a minute of looks",
                          sweep["idle_per_minute_ms"] / 1000, "ms", "< 50 ms a minute",
                          sweep["idle_call_ms"] / sweep["floor_count_ms"]))
    figures.append(Figure("a lost task's 1k traces scored by the sweep", sweep["sweep_seconds"], "s",
                          "about the task's time", sweep["sweep_ratio"]))
    n = sizes["fairness_cases"]
    say(f"queue fairness benchmark ({n}-case run behind a 24-batch agent run)...")
    fair = run_bench("fairness_bench.py", "--cases", str(n))
    figures.append(Figure(f"{_size(n)}-case run behind a long run, x its solo time", fair["ratio"], "x", "<= 2x"))
    n = sizes["judge_cases"]  # issue 42: judged criteria against a judge answering in 50 ms
    say(f"judge benchmark ({n} cases x 3 DeepEval metrics, 50 ms a call, 8 in flight)...")
    judged = run_bench("judge_bench.py", "--cases", str(n))
    figures.append(Figure(f"{_size(n)} cases x 3 judged metrics ({judged['calls']} calls of 50 ms)",
                          judged["seconds"], "s", "<= 1.2x ideal (calls x latency / 8)", judged["ratio"]))
    say("Inspect AI .eval log read as results (2,000 zstd samples)...")
    log = run_bench("inspect_log_bench.py", "--samples", "2000")
    figures.append(Figure("read a 2k-sample Inspect .eval log", log["seconds"], "s", "<= 3x floor", log["ratio"]))
    n = 10 * sizes["review"]  # issue 34: the sign-in log, 100k events (5k quick)
    say(f"sign-in log benchmark ({n} events)...")
    log = run_bench("signins_bench.py", "--events", str(n), scratch=True)
    figures.append(Figure(f"sign-in log page over {_size(n)} events", log["first_page_ms"] / 1000, "ms",
                          "<= 3x floor", log["ratio"]))
    n = sizes["import"]  # issue 33: a promptfoo config of as many tests as the ADK import's cases
    say(f"promptfoo benchmark ({n}-test promptfooconfig.yaml, its promptfoo_* criteria)...")
    pf = run_bench("promptfoo_bench.py", "--tests", str(n), scratch=True)
    figures.append(Figure(f"import a {_size(n)}-test promptfoo config", pf["import_seconds"], "s", "<= 4x floor",
                          pf["import_ratio"]))
    figures.append(Figure(f"promptfoo_* criteria, {_size(n)} outputs x 4", pf["scoring_seconds"], "s",
                          "<= 3x floor", pf["scoring_ratio"]))
    n = sizes["model_loop_cases"]  # issue 43: the model target's chat loop
    say(f"model target loop ({n} cases, 3 model calls each, against a zero-latency scripted model)...")
    loop = run_bench("model_loop_bench.py", "--cases", str(n))
    figures.append(Figure("model target loop overhead per model call", loop["overhead_ms_per_call"] / 1000, "ms",
                          "< 2 ms", loop["ratio"]))
    # issue 38: every upload path's memory per MB it reads, on ordinary files and on hostile ones.
    say("upload memory benchmark (every upload path; the hostile files of tests/data/fuzz/uploads)...")
    up = run_bench("upload_memory_bench.py", *(("--quick",) if sizes is QUICK else ()))
    figures.append(Figure(f"upload memory, worst path per MB read ({up['worst_slope_of']})", up["worst_slope"], "x",
                          "<= 4x", up["worst_slope"] / max(up["floor_slope"], 1e-9)))
    figures.append(Figure("upload memory, paths and formats within 4x", up["within_4x"], "score",
                          f"{up['paths']} of {up['paths']}"))
    figures.append(Figure("hostile uploads refused (API and CLI, every path)", up["refused"], "score",
                          f"{up['hostile_count']} of {up['hostile_count']}"))
    figures.append(Figure("hostile uploads, largest worker growth", up["worst_hostile_mb"], "MB",
                          "bounded by the expansion limits"))
    if postgres:
        say("recovery benchmark on PostgreSQL (database drop, killed worker)...")
        with scratch_database(postgres) as url:
            rec = run_bench("recovery_bench.py", "--lease", str(sizes["recovery_lease"]), database_url=url)
        figures.append(Figure("resume after a database drop, PostgreSQL", rec["drop_seconds"], "s",
                              "seconds, not the lease"))
        figures.append(Figure(f"resume after a killed worker, lease {rec['lease']} s", rec["kill_seconds"], "s",
                              "<= lease + a tick", rec["kill_seconds"] / rec["lease"]))

    say(f"growth benchmark ({', '.join(_size(s) for s in sizes['growth'])} cases)...")
    grown = growth.measure(sizes["growth"], sizes["repeat"], echo=False)
    say("growth benchmark done")
    print(growth.table(grown))
    small, large = sorted(grown)[-2:]
    for stage in growth.STAGES:
        page = stage in growth.PAGES
        target = {"compare cold": "<= 1 s", "compare cached": "<= 50 ms"}.get(stage, "")
        value = grown[large][stage]
        figures.append(Figure(f"{stage} at {_size(large)}", value, "ms" if value < 1 else "s", target))
        factor = (grown[large][stage] / grown[small][stage]) ** (1 / math.log10(large / small))
        figures.append(Figure(f"{stage} growth per 10x ({_size(small)}->{_size(large)})", factor, "x",
                              "<= 1.5x" if page else "~10x (linear)"))
    return figures


def docs_figures() -> dict[str, str]:
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        return {}
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)]
    out = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] not in ("figure", "") and not set(cells[0]) <= {"-", ":"}:
            out[cells[0]] = cells[1]
    return out


def _number(text: str) -> float | None:
    """A table cell's figure in its base unit: "82.7 ms" and "0.0827 s" are the same number
    (a figure that fell under a second is written in ms, so the change must not compare 82.7
    with 2.38)."""
    match = re.match(r"[0-9.]+", text)
    if not match:
        return None
    return float(match.group()) / 1000 if text.strip().endswith(" ms") else float(match.group())


def render(figures: list[Figure], documented: dict[str, str]) -> str:
    rows = [("figure", "now", "target", "floor ratio", "docs", "change")]
    for f in figures:
        before = documented.get(f.name, "")
        old = _number(before)
        now = _number(f.text())
        change = f"{(now / old - 1) * 100:+.0f}%" if old and now is not None else ""
        rows.append((f.name, f.text(), f.target, f"{f.ratio:.2f}x" if f.ratio else "", before or "-", change))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def update_docs(figures: list[Figure]) -> None:
    text = DOCS.read_text()
    stamp = time.strftime("%Y-%m-%d")
    command = "python bench/all.py" + (" --postgres ..." if any("PostgreSQL" in f.name for f in figures) else "")
    lines = [BEGIN, f"Latest full run (`{command}`, {stamp}; SQLite unless named, shared 2-core machine):", "",
             "| figure | value | target | floor ratio |", "|---|---|---|---|"]
    lines += [f"| {f.name} | {f.text()} | {f.target} | {f'{f.ratio:.2f}x' if f.ratio else ''} |" for f in figures]
    lines.append(END)
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        raise SystemExit(f"{DOCS.relative_to(REPO)} has no {BEGIN} ... {END} block to update")
    DOCS.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, about 7 minutes on 2 cores")
    parser.add_argument("--update-docs", action="store_true",
                        help="write the figures into docs/benchmarks.md (full run)")
    parser.add_argument("--postgres", metavar="URL", help="also run the engine on PostgreSQL, in a scratch database "
                        "made on this server (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
    parser.add_argument("--lighthouse", action="store_true", help="also Lighthouse on the demo's five pages (slow; "
                        "needs `npm ci` in bench/lighthouse and Chromium)")
    args = parser.parse_args()
    if args.quick and args.update_docs:
        parser.error("docs/benchmarks.md holds the full run's figures: --update-docs needs the full sizes")
    started = time.perf_counter()
    with scratch.migrated_template():  # one migrated SQLite database, copied for each benchmark
        figures = collect(QUICK if args.quick else FULL, args.postgres)
    if args.lighthouse:
        print("Lighthouse on the demo (home, a run, compare, a drill-down, the trend; phone and desktop)...",
              flush=True)
        figures += run_lighthouse()
    print()
    print(render(figures, docs_figures()))
    print(f"\n{'quick' if args.quick else 'full'} run in {time.perf_counter() - started:.0f} s"
          + ("; quick sizes have no documented figures to compare with" if args.quick else ""))
    if args.update_docs:
        update_docs(figures)
        print("docs/benchmarks.md updated")


if __name__ == "__main__":
    main()
