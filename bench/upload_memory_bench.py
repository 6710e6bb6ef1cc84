"""Upload memory (issue 38): the peak memory of every upload path on ordinary files of a few
sizes, beside a floor measured in the same run (the file's bytes read once), and on the hostile
files of tests/data/fuzz/uploads/ (small files that expand), which must be refused in bounded
memory.

    python bench/upload_memory_bench.py [--quick] [--json] [--only TEXT]

`--only TEXT` measures only the ordinary files whose path or format holds TEXT (`--only DeepEval`:
the DeepEval results imports), and none of the hostile files.

The web paths are measured on a real server (gunicorn, one worker, one thread, on an embedded
database of its own): for each upload, a worker that has answered /healthz has its peak RSS
reset (/proc/PID/clear_refs), the upload is sent, and the worker's peak RSS (VmHWM) minus its
RSS before is the upload's growth; the worker is then replaced, so the next upload starts from
a fresh process. The CLI paths run `manage.py import_evalset`, `import_results` and `eval
--outputs` in a child process measured the same way. The floor is a child process reading the
file once (about 1x its size).

Target: every path's growth within 4x the bytes it reads plus a constant: the table gives
`growth - 4 x size` per upload, which must not grow with the size (the bytes read are the file's,
or for a zip and an Inspect `.eval`, what its members inflate to, itself limited by
EVALSITE_MAX_UNPACKED_MB). A DeepEval test run is imported once, unmeasured, before it is
measured (`Kind.rerun`): a run's completion compares it with the eval set's previous run, and
without that import the first size would be the only one with nothing to compare with (the
comparison's fixed cost, numpy and the statistics loaded, counted as growth per MB). With it,
each measured import is a re-import, compared with a run of its own size. Each hostile file
must be answered 400 `too_expanded` or `invalid_json`/`invalid_yaml`, its growth bounded by the
expansion limit (well under it here).
"""

from __future__ import annotations

import argparse
import base64
import http.cookiejar
import io
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "data" / "fuzz" / "uploads"))

import import_bench  # noqa: E402
import inspect_log_bench  # noqa: E402
import recipes  # noqa: E402
import results_import_bench  # noqa: E402
import scratch  # noqa: E402

MB = 1 << 20
USER, PASSWORD = "bench", "bench-pass-123"
OUTPUT_CASES = 40_000  # the eval set the outputs are for (ids out_00000 ...)


# --- Ordinary files ----------------------------------------------------------------------------


def adk(size: int) -> bytes:
    cases = max(1, size // 2500)
    return json.dumps(import_bench.generate(cases), indent=1).encode()


def _padding(r: random.Random, words: int) -> str:
    return " ".join(r.choice(["weather", "flight", "order", "refund", "forecast", "city", "tomorrow", "jacket"])
                    for _ in range(words))


def plain_jsonl(size: int) -> bytes:
    r = random.Random(3)
    rows = max(1, size // 700)
    return "".join(json.dumps({"input": f"q{n} {_padding(r, 40)}", "expected_output": _padding(r, 40),
                               "metadata": {"n": n, "tags": ["bench"]}}) + "\n" for n in range(rows)).encode()


def plain_csv(size: int) -> bytes:
    r = random.Random(5)
    rows = max(1, size // 600)
    return ("input,expected_output\n" + "".join(f"q{n} {_padding(r, 40)},{_padding(r, 40)}\n"
                                                for n in range(rows))).encode()


def promptfoo_yaml(size: int) -> bytes:
    r = random.Random(7)
    tests = max(1, size // 450)
    lines = ["description: bench", "prompts: ['Answer: {{question}}']", "providers: [echo]", "tests:"]
    for n in range(tests):
        lines += [f"  - description: case {n}", f"    vars: {{question: 'q{n} {_padding(r, 25)}'}}",
                  "    assert:", f"      - {{type: icontains, value: '{_padding(r, 4)}'}}",
                  "      - {type: not-contains, value: error}"]
    return ("\n".join(lines) + "\n").encode()


def inspect_eval(size: int) -> bytes:
    """A log whose members inflate to about `size` (~30 KB a sample, ~1 KB zipped)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.eval"
        inspect_log_bench.write_log(path, max(1, size // 30_500))
        return path.read_bytes()


def zipped_adk(size: int) -> bytes:
    """An ADK eval set of about `size`, zipped (it deflates about 5 to 1)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("suite/bench.evalset.json", adk(size))
    return buffer.getvalue()


def deepeval_results(size: int) -> bytes:
    return json.dumps(results_import_bench.generate(max(1, size // 2600))).encode()


def outputs_json(size: int) -> bytes:
    r = random.Random(11)
    rows = min(OUTPUT_CASES, max(1, size // 1100))
    return json.dumps([{"eval_id": f"out_{n:05d}", "turns": [{
        "final_response": f"It is sunny in city {n}. {_padding(r, 60)}",
        "tool_calls": [{"name": "get_weather", "args": {"city": f"City {n}", "units": "metric"}}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12}}], "latency_seconds": 0.5}
        for n in range(rows)]).encode()


def outputs_evalset() -> bytes:
    return "".join(json.dumps({"eval_id": f"out_{n:05d}", "input": f"weather {n}"}) + "\n"
                   for n in range(OUTPUT_CASES)).encode()


def unpacked(data: bytes) -> int:
    """What the readers see: a zip's members inflated (an `.eval` is one), else the file."""
    if data[:4] != b"PK\x03\x04":
        return len(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return sum(i.file_size for i in zf.infolist())


@dataclass(frozen=True)
class Kind:
    name: str  # "evalsets", "results" or "outputs"
    fmt: str
    file: str
    make: Callable[[int], bytes]
    # Imported once unmeasured before each size is measured, so that every measured import has
    # an earlier run of the same size to compare with (see the docstring).
    rerun: bool = False


ORDINARY = [
    Kind("evalsets", "ADK JSON", "bench.evalset.json", adk),
    Kind("evalsets", "JSONL", "bench.jsonl", plain_jsonl),
    Kind("evalsets", "CSV", "bench.csv", plain_csv),
    Kind("evalsets", "promptfoo YAML", "promptfooconfig.yaml", promptfoo_yaml),
    Kind("evalsets", "Inspect .eval", "bench.eval", inspect_eval),
    Kind("evalsets", "zip of ADK JSON", "bench.zip", zipped_adk),
    Kind("results", "DeepEval JSON", "latest_test_run.json", deepeval_results, rerun=True),
    Kind("results", "Inspect .eval", "bench.eval", inspect_eval),
    Kind("outputs", "outputs JSON", "outputs.json", outputs_json),
]

# The hostile files, and the paths that take each: refused on all of them.
HOSTILE = {
    "attachments.eval": ("evalsets", "results", "outputs"),
    "attachments-log.json": ("evalsets", "results", "outputs"),
    "members-zstd.eval": ("evalsets", "results", "outputs"),
    "members-deflate.eval": ("evalsets", "results"),
    "members-deflate.zip": ("evalsets", "outputs"),
    "aliases.promptfooconfig.yaml": ("evalsets",),
    "template-repeats.promptfooconfig.yaml": ("evalsets",),
    "default-test.promptfooconfig.yaml": ("evalsets",),
    "tests-file-repeats.zip": ("evalsets",),
    "bigint.eval": ("evalsets", "results", "outputs"),
}


# --- Measuring ---------------------------------------------------------------------------------


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} for {pid}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SETUP = r"""
import os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django; django.setup()
import scratch; scratch.migrate()
from django.contrib.auth.models import User
from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import Membership, Project
user = User.objects.create_superuser(sys.argv[1], "", sys.argv[2])
project = Project.objects.create(slug="bench", name="bench")
Membership.objects.create(project=project, user=user, role="admin")
[outcome] = evalset_import(project=project, files=[SourceFile("outputs-cases.jsonl", open(sys.argv[3], "rb").read())])
print(outcome.evalset.pk)
"""


class Server:
    """gunicorn with one worker and one thread, on a data directory of its own."""

    def __init__(self, data_dir: Path, evalset_file: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
        env["EVALSITE_DATA_DIR"] = str(data_dir)
        self.env = env
        done = subprocess.run([sys.executable, "-c", SETUP, USER, PASSWORD, str(evalset_file)], cwd=REPO, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"setup failed:\n{done.stderr[-3000:]}")
        self.evalset = int(done.stdout.strip().splitlines()[-1])
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "evalsite.wsgi:application", "--bind", f"127.0.0.1:{self.port}",
             "--workers", "1", "--threads", "1", "--timeout", "600", "--no-control-socket"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self.auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.worker = self._ready()

    def _ready(self, old: int | None = None) -> int:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{(self.proc.stderr.read() if self.proc.stderr else b'')!r}")
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
            workers = [int(c) for c in children if int(c) != old]
            if workers:
                try:
                    with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as response:
                        if response.status == 200:
                            return workers[0]
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.2)
        raise RuntimeError("the worker did not come up")

    def measure(self, request: urllib.request.Request) -> tuple[int, dict, int]:
        """(status, JSON body or {}, the worker's peak growth in bytes) of one request, in a
        worker that has served only /healthz; the worker is replaced after."""
        pid = self.worker
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        before = _status(pid, "VmRSS")
        try:
            with urllib.request.urlopen(request, timeout=900) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        grown = _status(pid, "VmHWM") - before
        os.kill(pid, signal.SIGKILL)
        self.worker = self._ready(old=pid)
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"html": raw.decode(errors="replace")}
        return status, body if isinstance(body, dict) else {}, grown

    def api(self, kind: str, name: str, data: bytes) -> tuple[int, dict, int]:
        fields = {"project": "bench"}
        if kind == "evalsets":
            path, part = "/api/v1/evalsets/", "file"
        elif kind == "results":
            path, part = "/api/v1/runs/import/", "file"
        else:
            path, part, fields = "/api/v1/runs/", "outputs_file", {"evalset": str(self.evalset)}
        body, content_type = _multipart(fields, part, name, data)
        request = urllib.request.Request(self.url + path, data=body, method="POST",
                                         headers={"Content-Type": content_type, "Authorization": self.auth})
        return self.measure(request)

    def page(self, name: str, data: bytes) -> tuple[int, dict, int]:
        """The upload page, signed in (its CSRF token from the form)."""
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        login = opener.open(f"{self.url}/accounts/login/").read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login)
        assert token, "no CSRF token on the login page"
        opener.open(urllib.request.Request(f"{self.url}/accounts/login/", data=urllib.parse.urlencode(
            {"username": USER, "password": PASSWORD, "csrfmiddlewaretoken": token.group(1)}).encode()))
        form = opener.open(f"{self.url}/evalsets/upload/").read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token, "no CSRF token on the upload page"
        body, content_type = _multipart({"csrfmiddlewaretoken": token.group(1), "format": ""}, "files", name, data)
        cookies = "; ".join(f"{c.name}={c.value}" for c in jar)
        request = urllib.request.Request(f"{self.url}/evalsets/upload/", data=body, method="POST", headers={
            "Content-Type": content_type, "Cookie": cookies, "Referer": f"{self.url}/evalsets/upload/"})
        return self.measure(request)

    def close(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _multipart(fields: dict[str, str], part: str, name: str, data: bytes) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    head = "".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                   for k, v in fields.items())
    body = (head + f"--{boundary}\r\nContent-Disposition: form-data; name=\"{part}\"; filename=\"{name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


CLI = r"""
import io, json, os, sys
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django; django.setup()
from django.core.management import call_command
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
kind, path, evalset = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "floor":
    open("/proc/self/clear_refs", "w").write("5"); before = status("VmRSS")
    data = open(path, "rb").read()
    print(json.dumps({"code": 0, "grown": status("VmHWM") - before})); sys.exit(0)
from evaluations.management.commands import eval as _e, import_evalset as _i, import_results as _r  # noqa: F401
err = io.StringIO()
open("/proc/self/clear_refs", "w").write("5"); before = status("VmRSS")
code = 0
try:
    if kind == "evalsets":
        call_command("import_evalset", path, "--project", "bench", stdout=io.StringIO(), stderr=err)
    elif kind == "results":
        call_command("import_results", path, "--project", "bench", stdout=io.StringIO(), stderr=err)
    else:
        # `manage.py eval --outputs` up to the run it creates (what it does next is the engine's
        # evaluation, measured by bench/engine_bench.py): the same calls, in the same order.
        from evaluations.interop import EvalSetImportError, files_from_paths
        from evaluations.interop.outputs import read_output_rows
        from evaluations.models import EvalSet, Run
        from evaluations.runs.services import run_create
        version = EvalSet.objects.get(eval_set_id=evalset).latest_version
        try:
            outputs = read_output_rows(files_from_paths([path]))
            run_create(project=version.evalset.project, version=version, target_kind=Run.TargetKind.UPLOADED,
                       outputs=outputs, enqueue=False)
        except EvalSetImportError as exc:
            err.write(f"error ({exc.code}): {exc.summary()}")
            code = 2
except SystemExit as exc:
    code = int(exc.code or 0)
print(json.dumps({"code": code, "grown": status("VmHWM") - before, "err": err.getvalue()[-400:]}))
"""


def cli(server: Server, kind: str, name: str, data: bytes, tmp: Path) -> tuple[int, str, int]:
    path = tmp / name
    path.write_bytes(data)
    done = subprocess.run([sys.executable, "-c", CLI, kind, str(path), "outputs-cases"], cwd=REPO, env=server.env,
                          capture_output=True, text=True)
    path.unlink()
    if done.returncode:
        raise RuntimeError(f"the CLI child failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return out["code"], out.get("err", ""), out["grown"]


# --- The run -----------------------------------------------------------------------------------


def measure(sizes: list[int], echo: bool = True, only: str = "") -> dict:
    rows: list[dict] = []
    hostile: list[dict] = []

    def say(text: str) -> None:
        if echo:
            print(text, flush=True)

    with tempfile.TemporaryDirectory(prefix="evalsite-upload-memory-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "data").mkdir()
        cases = tmp / "outputs-cases.jsonl"
        cases.write_bytes(outputs_evalset())
        scratch.seed(tmp / "data")
        server = Server(tmp / "data", cases)
        try:
            for kind in ORDINARY:
                if only and only.lower() not in f"{kind.name} {kind.fmt}".lower():
                    continue
                for size in sizes:
                    data = kind.make(size)
                    path = tmp / kind.file
                    path.write_bytes(data)
                    floor = cli(server, "floor", kind.file, data, tmp)[2]
                    if kind.rerun:
                        code, err, _ = cli(server, kind.name, kind.file, data, tmp)
                        if code:
                            raise RuntimeError(f"the unmeasured import of {kind.fmt} failed: {err}")
                    paths = [("API", lambda d=data, k=kind: server.api(k.name, k.file, d))]
                    if kind.name == "evalsets":
                        paths.append(("upload page", lambda d=data, k=kind: server.page(k.file, d)))
                    paths.append(("CLI", lambda d=data, k=kind: cli(server, k.name, k.file, d, tmp)))
                    for via, call in paths:
                        status, _, grown = call()
                        ok = status in (200, 201, 0)
                        row = {"path": f"{kind.name} {via}", "format": kind.fmt, "file_mb": len(data) / MB,
                               "read_mb": unpacked(data) / MB, "grown_mb": grown / MB, "floor_mb": floor / MB,
                               "ok": ok}
                        row["over_4x_mb"] = row["grown_mb"] - 4 * row["read_mb"]
                        rows.append(row)
                        say(f"{row['path']:<22} {kind.fmt:<16} {row['file_mb']:6.1f} MB (reads {row['read_mb']:6.1f})"
                            f": grew {row['grown_mb']:6.1f} MB, 4x + {row['over_4x_mb']:6.1f} MB; floor "
                            f"{row['floor_mb']:.1f} MB{'' if ok else f'  REFUSED ({status})'}")
            for name, kinds in {} if only else HOSTILE.items():
                data = recipes.RECIPES[name]()
                for kind in kinds:
                    for via in ("API", "CLI"):
                        if via == "API":
                            status, body, grown = server.api(kind, name, data)
                            code = body.get("code", "")
                        else:
                            status, err, grown = cli(server, kind, name, data, tmp)
                            found = re.search(r"error \((\w+)\)", err)
                            code = found.group(1) if found else err.strip()[-80:]
                        refused = status == 400 if via == "API" else status != 0
                        hostile.append({"file": name, "file_kb": len(data) / 1024, "path": f"{kind} {via}",
                                        "status": status, "code": code, "grown_mb": grown / MB, "refused": refused})
                        say(f"hostile {name:<40} {len(data) / 1024:8.1f} KB {kind} {via}: {status} {code}, grew "
                            f"{grown / MB:.1f} MB")
        finally:
            server.close()
    if not rows:
        raise SystemExit(f"no ordinary file matches --only {only!r}")
    slopes = _slopes(rows)
    if echo:
        print("\nper MB read, between the smallest and the largest file (target <= 4; the floor, the file read "
              "once, is ~1):")
        for (path, fmt), (slope, constant, floor) in sorted(slopes.items(), key=lambda kv: -kv[1][0]):
            print(f"  {path:<22} {fmt:<16} {slope:5.2f}x + {constant:5.1f} MB   (floor {floor:.2f}x)")
    worst = max(slopes.items(), key=lambda kv: kv[1][0])
    return {"rows": rows, "hostile": hostile, "slopes": {f"{p} / {f}": s[0] for (p, f), s in slopes.items()},
            "worst_slope": worst[1][0], "worst_slope_of": f"{worst[0][0]} / {worst[0][1]}",
            "within_4x": sum(s[0] <= 4 for s in slopes.values()), "paths": len(slopes),
            "all_accepted": all(r["ok"] for r in rows), "all_refused": all(h["refused"] for h in hostile),
            "refused": sum(h["refused"] for h in hostile), "hostile_count": len(hostile),
            "worst_hostile_mb": max((h["grown_mb"] for h in hostile), default=0.0),
            "floor_slope": max(s[2] for s in slopes.values())}


def _slopes(rows: list[dict]) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(growth per MB read, the constant left at the smallest file, the floor's per MB) of each
    path and format, between its smallest and largest file (of those it took)."""
    out = {}
    for key in {(r["path"], r["format"]) for r in rows}:
        mine = sorted((r for r in rows if (r["path"], r["format"]) == key and r["ok"]), key=lambda r: r["read_mb"])
        if len(mine) < 2:
            continue
        small, large = mine[0], mine[-1]
        span = large["read_mb"] - small["read_mb"]
        slope = (large["grown_mb"] - small["grown_mb"]) / span if span else 0.0
        floor = (large["floor_mb"] - small["floor_mb"]) / (large["file_mb"] - small["file_mb"] or 1)
        out[key] = (slope, small["grown_mb"] - slope * small["read_mb"], floor)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 and 4 MB files (else 2, 8 and 32 MB)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", default="", metavar="TEXT",
                        help="only the ordinary files whose path or format holds TEXT (DeepEval...); no hostile files")
    args = parser.parse_args()
    sizes = [1 * MB, 4 * MB] if args.quick else [2 * MB, 8 * MB, 32 * MB]
    result = measure(sizes, echo=not args.json, only=args.only)
    if args.json:
        print(json.dumps(result))
        return
    print(f"\nordinary files: {'all accepted' if result['all_accepted'] else 'SOME REFUSED'}; "
          f"{result['within_4x']} of {result['paths']} paths and formats within 4x the bytes they read; the worst "
          f"{result['worst_slope']:.2f}x ({result['worst_slope_of']})")
    if result["hostile"]:
        print(f"hostile files: {'all refused' if result['all_refused'] else 'SOME ACCEPTED'}; the largest growth "
              f"{result['worst_hostile_mb']:.1f} MB")


if __name__ == "__main__":
    main()
