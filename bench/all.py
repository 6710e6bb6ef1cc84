"""Every benchmark, one table: so a change that slows evalsite down shows.

    python bench/all.py                  # full sizes (10k import and engine; growth 1k/10k/100k)
    python bench/all.py --quick          # small sizes, about 2 minutes (CI runs this)
    python bench/all.py --update-readme  # full sizes, then write the figures into README.md
    python bench/all.py --postgres postgres://postgres@127.0.0.1:5432/postgres   # + the engine on PostgreSQL

Each row: the figure, its target, its ratio to the floor measured in the same run (import
and engine), the figure in README.md (the table between the `bench-figures` markers, which
holds the latest full run), and the change from it. Quick sizes have no README figure. It
prints; timings never fail it. It exits non-zero only when a benchmark crashes.
All on SQLite (the embedded default): DATABASE_URL and REDIS_URL are ignored. With
`--postgres URL` (a server it may create a database on), the engine benchmark also runs on
PostgreSQL, in a scratch database created for it and dropped after.
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

README = REPO / "README.md"
BEGIN, END = "<!-- bench-figures:begin -->", "<!-- bench-figures:end -->"
FULL = {"import": 10_000, "import_runs": 3, "engine": 10_000, "growth": [1_000, 10_000, 100_000], "repeat": 5,
        "results_import": 10_000, "otlp_requests": 60}
QUICK = {"import": 1_000, "import_runs": 1, "engine": 1_000, "growth": [200, 2_000], "repeat": 3,
         "results_import": 1_000, "otlp_requests": 12}


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


def run_otlp(requests: int) -> dict:
    """In a child process: the benchmark sets Django up in its own process for its floor."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    done = subprocess.run([sys.executable, str(REPO / "bench" / "otlp_bench.py"), "--requests", str(requests),
                           "--json"], env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"otlp_bench failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def collect(sizes: dict, postgres: str | None = None) -> list[Figure]:
    figures: list[Figure] = []
    n = sizes["import"]
    print(f"import benchmark ({n} cases)...", flush=True)
    imp = import_bench.measure(n, sizes["import_runs"], echo=False)
    figures.append(Figure(f"import {_size(n)} ADK cases", imp["seconds"], "s", "<= 2.5 s, <= 2x floor", imp["ratio"]))
    figures.append(Figure(f"import {_size(n)} ADK cases, peak RSS", imp["peak_rss_mb"], "MB", "<= 200 MB"))

    n = sizes["engine"]
    print(f"engine benchmark ({n} cases x 6 evaluators, 2 workers)...", flush=True)
    eng = run_engine(n)
    figures.append(Figure(f"engine {_size(n)} x 6 evaluators, 2 workers", eng["seconds"], "s",
                          "<= 4 s, <= 2x floor", eng["ratio"]))
    if postgres:
        print(f"engine benchmark on PostgreSQL ({n} cases x 6 evaluators, 2 workers)...", flush=True)
        with scratch_database(postgres) as url:
            eng = run_engine(n, url)
        figures.append(Figure(f"engine {_size(n)} x 6 evaluators, 2 workers, PostgreSQL", eng["seconds"], "s",
                              "<= 6 s, <= 2x floor", eng["ratio"]))

    n = sizes["results_import"]
    print(f"results import benchmark ({n}-case DeepEval test run)...", flush=True)
    res = results_import_bench.measure(n, sizes["import_runs"], echo=False)
    figures.append(Figure(f"results import {_size(n)} DeepEval cases", res["seconds"], "s", "<= 5 s", res["ratio"]))

    n = sizes["otlp_requests"]
    print(f"OTLP ingest benchmark ({n} exports of 512 spans over HTTP, 4 clients)...", flush=True)
    otlp = run_otlp(n)
    # The ratio: the receiver's in-process work floor (decode + rows + inserts) over HTTP's rate.
    figures.append(Figure("OTLP ingest, spans/s (SQLite)", otlp["spans_per_second"], "/s", ">= 2,000/s",
                          otlp["ratio"]))
    figures.append(Figure("OTLP ingest, p99 of a 512-span export", otlp["p99_ms"] / 1000, "ms", ""))

    print(f"growth benchmark ({', '.join(_size(s) for s in sizes['growth'])} cases)...", flush=True)
    grown = growth.measure(sizes["growth"], sizes["repeat"], echo=False)
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


def readme_figures() -> dict[str, str]:
    text = README.read_text()
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


def render(figures: list[Figure], readme: dict[str, str]) -> str:
    rows = [("figure", "now", "target", "floor ratio", "README", "change")]
    for f in figures:
        before = readme.get(f.name, "")
        old = _number(before)
        now = _number(f.text())
        change = f"{(now / old - 1) * 100:+.0f}%" if old and now is not None else ""
        rows.append((f.name, f.text(), f.target, f"{f.ratio:.2f}x" if f.ratio else "", before or "-", change))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def update_readme(figures: list[Figure]) -> None:
    text = README.read_text()
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
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block to update")
    README.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, under 2 minutes")
    parser.add_argument("--update-readme", action="store_true", help="write the figures into README.md (full run)")
    parser.add_argument("--postgres", metavar="URL", help="also run the engine on PostgreSQL, in a scratch database "
                        "made on this server (e.g. postgres://postgres@127.0.0.1:5432/postgres)")
    args = parser.parse_args()
    if args.quick and args.update_readme:
        parser.error("the README holds the full run's figures: --update-readme needs the full sizes")
    started = time.perf_counter()
    figures = collect(QUICK if args.quick else FULL, args.postgres)
    print()
    print(render(figures, readme_figures()))
    print(f"\n{'quick' if args.quick else 'full'} run in {time.perf_counter() - started:.0f} s"
          + ("; quick sizes have no README figures to compare with" if args.quick else ""))
    if args.update_readme:
        update_readme(figures)
        print("README.md updated")


if __name__ == "__main__":
    main()
