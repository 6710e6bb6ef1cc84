"""Hostile input beyond the eval-set catalogue (tests/test_bad_input.py): JSON bodies and
outputs nested past the limit, millions of tiny cases, and a zip whose header lies about
its size, sent to a real server in its own process whose memory is measured."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evaluations import safejson
from evaluations.evalsets.services import evalset_import
from evaluations.interop.base import EvalSetImportError, SourceFile
from evaluations.interop.outputs import read_outputs
from evaluations.models import EvalCase, EvalSet, EvalSetVersion, Project, Run
from evaluations.runs.exports import version_native_text
from tests.conftest import REPO
from tests.engine_helpers import import_demo, perfect_outputs

DEEP = 100_000


def _nest(depth: int, leaf: str = "1") -> str:
    return '{"a": ' * depth + leaf + "}" * depth


# --- The depth measure itself ---------------------------------------------------------------


def test_the_depth_measure_ignores_brackets_in_strings_and_escaped_quotes() -> None:
    assert safejson.deepest(b'[[["[[[\\"[[" ]]]') == (3, None)
    assert safejson.deepest(b'{"a": ["\\\\", {"b": "]]]]\\\\\\""}, [[]]]}') == (4, None)
    top, where = safejson.deepest(b"[" * 70 + b"]" * 70)
    assert (top, where) == (70, 64)


def test_the_depth_measure_is_right_across_chunk_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(safejson, "_CHUNK", 5)
    for value in (["a\\", {"[": ['"\\\\"', [[["x"]]]]}], [[[[[[]]]]]], {"k": '\\"]]]]]]"'}):
        text = json.dumps(value).encode()
        assert safejson.deepest(text, 1000)[0] == safejson.value_depth(value), text


def test_a_body_nested_100000_levels_is_refused_with_where_and_why() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        safejson.loads("[" * DEEP + "]" * DEEP)
    assert "nested more than 64 levels deep" in info.value.msg
    assert (info.value.lineno, info.value.colno) == (1, 65)
    assert safejson.loads(_nest(60)) is not None  # within the limit: read as before


# --- JSON from users: API bodies, forms, outputs --------------------------------------------


@pytest.mark.django_db
def test_the_api_answers_a_deep_json_body_with_400_saying_why(alice_client: Client, acme: Project) -> None:
    response = alice_client.post("/api/v1/runs/", data="[" * DEEP + "]" * DEEP, content_type="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "parse_error"
    assert "nested more than 64 levels deep" in body["message"]
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_outputs_with_deeply_nested_tool_arguments_are_refused_and_start_no_run(alice_client: Client,
                                                                                acme: Project) -> None:
    version = import_demo(acme)
    outputs = perfect_outputs()
    outputs[0]["turns"][0]["tool_calls"] = [{"name": "get_weather", "args": {"deep": "PLACEHOLDER"}}]
    text = json.dumps(outputs).replace('"PLACEHOLDER"', _nest(DEEP))
    response = alice_client.post("/api/v1/runs/", {
        "evalset": str(version.evalset_id), "outputs_file": SimpleUploadedFile("outputs.json", text.encode())})
    assert response.status_code == 400, response.content
    body = response.json()
    assert "nested more than 64 levels deep" in json.dumps(body)
    assert "outputs.json" in json.dumps(body)
    assert Run.objects.count() == 0


def test_reading_deep_outputs_says_the_file_line_and_why() -> None:
    text = '{"eval_id": "a", "turns": [{"final_response": "x"}]}\n' + _nest(DEEP) + "\n"
    with pytest.raises(EvalSetImportError) as info:
        read_outputs([SourceFile("outputs.jsonl", text.encode())])
    assert "outputs.jsonl:2" in info.value.summary()
    assert "nested more than 64 levels deep" in info.value.summary()


@pytest.mark.django_db
def test_the_demo_agent_answers_a_deep_body_with_400(alice_client: Client) -> None:
    response = alice_client.post("/demo/agent/", data="[" * DEEP + "]" * DEEP, content_type="application/json")
    assert response.status_code == 400


def _case_form(client: Client, case: EvalCase, **fields: str) -> Any:
    from django.urls import reverse

    original = client.get(reverse("case_edit", args=[case.pk])).context["fields"].original
    return client.post(reverse("case_edit", args=[case.pk]), {
        "base_version": "1", "original": original, "turn_count": "1", "eval_id": case.eval_id,
        "turn-0-user": "q", **fields})


@pytest.mark.django_db
@pytest.mark.parametrize("field,depth", [("metadata", 61), ("metadata", 100), ("metadata", 2_000),
                                         ("rubrics", DEEP), ("turn-0-tools", 59)])
def test_the_case_form_refuses_json_nested_past_the_api_limit_and_saves_nothing(alice_client: Client, acme: Project,
                                                                               field: str, depth: int) -> None:
    version = import_demo(acme)
    case = EvalCase.objects.in_version(version).first()
    assert case is not None
    response = _case_form(alice_client, case, **{field: _nest(depth)})
    assert response.status_code == 400
    text = response.content.decode()
    assert "levels deep at line 1, column" in text and "at most 64 levels" in text
    assert ("turn 1 · expected tool calls" if field == "turn-0-tools" else field) in text
    assert EvalSetVersion.objects.filter(evalset=version.evalset).count() == 1


@pytest.mark.django_db
def test_the_case_form_and_the_api_agree_on_the_deepest_metadata(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    case = EvalCase.objects.in_version(version).first()
    assert case is not None
    edits = f"/api/v1/evalsets/{version.evalset_id}/edits/"
    body = {"base_version": 1, "changes": [{"op": "put", "eval_id": case.eval_id,
                                            "case": {"eval_id": case.eval_id, "conversation": case.conversation,
                                                     "metadata": "PLACEHOLDER"}}]}
    too_deep = json.dumps(body).replace('"PLACEHOLDER"', _nest(61, '"x"'))
    assert alice_client.post(edits, too_deep, content_type="application/json").status_code == 400
    response = _case_form(alice_client, case, metadata=_nest(60, '"x"'))  # the deepest both accept
    assert response.status_code == 302, response.content.decode()[-2000:]
    v2 = EvalSetVersion.objects.get(evalset=version.evalset, number=2)
    again = evalset_import(project=acme, files=[SourceFile("again.evalset.json", version_native_text(v2).encode())])
    assert again[0].version.content_hash == v2.content_hash  # its native export reads back


# --- Millions of tiny cases --------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("name,body", [
    ("tiny.jsonl", "".join(json.dumps({"input": f"q{i}", "expected_output": "a"}) + "\n" for i in range(101))),
    ("tiny.csv", "input,expected_output\n" + "".join(f"q{i},a\n" for i in range(101))),
    ("tiny.evalset.json", json.dumps({"eval_set_id": "tiny", "eval_cases": [
        {"eval_id": f"c{i}", "conversation": [{"invocation_id": "t", "user_content": {"role": "user", "content": "hi"}}]}
        for i in range(101)]})),
])
def test_more_cases_than_the_limit_are_refused_and_nothing_is_written(alice_client: Client, settings: Any,
                                                                      name: str, body: str) -> None:
    settings.EVALSITE_MAX_CASES = 100
    response = alice_client.post("/api/v1/evalsets/", {"project": "acme",
                                                       "file": [SimpleUploadedFile(name, body.encode())]})
    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "too_many_cases"
    assert "more than 100 cases" in answer["message"] and answer["problems"][0]["file"] == name
    assert EvalSet.objects.count() == 0 and EvalCase.objects.count() == 0


@pytest.mark.django_db
def test_the_case_limit_leaves_a_file_at_the_limit_alone(alice_client: Client, settings: Any) -> None:
    settings.EVALSITE_MAX_CASES = 100
    body = "".join(json.dumps({"input": f"q{i}", "expected_output": "a"}) + "\n" for i in range(100))
    response = alice_client.post("/api/v1/evalsets/", {"project": "acme",
                                                       "file": [SimpleUploadedFile("ok.jsonl", body.encode())]})
    assert response.status_code == 201, response.content
    assert EvalCase.objects.count() == 100


# --- A zip whose header lies, against a real server ----------------------------------------


def _lying_zip(inflated: int, claimed: int = 1000) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("big.evalset.json", "w") as entry:
        block = b" " * (1 << 20)
        for _ in range(inflated // len(block)):
            entry.write(block)
    data = bytearray(buffer.getvalue())
    # Patch the sizes in the headers down to `claimed`, as an attacker would.
    local = data.index(b"PK\x03\x04")
    data[local + 22:local + 26] = claimed.to_bytes(4, "little")
    central = data.index(b"PK\x01\x02")
    data[central + 24:central + 28] = claimed.to_bytes(4, "little")
    return bytes(data)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


AUTH = "Basic " + base64.b64encode(b"root:root-pass-123").decode()


class Served:
    """`manage.py up` on an embedded data directory of its own, shared by the tests that measure
    what an upload costs a web worker: each upload goes to fresh workers (`fresh_workers`)."""

    def __init__(self, proc: subprocess.Popen[str], port: int, output: list[str]) -> None:
        self.proc, self.port, self.output = proc, port, output
        web = [c for c in psutil.Process(proc.pid).children(recursive=True) if "gunicorn" in " ".join(c.cmdline())]
        [self.master] = [p for p in web if p.ppid() not in {w.pid for w in web}]
        self.workers = self.master.children()

    def fresh_workers(self) -> dict[int, int]:
        """The web workers replaced by new ones that have served only /healthz (as
        bench/upload_memory_bench.py measures), their peak memory reset: the baseline of the next
        upload, whatever an earlier test's upload left in the old ones."""
        old = {w.pid for w in self.workers}
        for worker in self.workers:
            worker.kill()
        deadline = time.monotonic() + 120
        while True:
            assert time.monotonic() < deadline, "gunicorn did not replace its workers:\n" + "".join(self.output)
            self.workers = [w for w in self.master.children() if w.pid not in old]
            if self.workers:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5) as answer:
                        if answer.status == 200:
                            break
                except (urllib.error.URLError, OSError):
                    pass
            time.sleep(0.2)
        for worker in self.workers:
            Path(f"/proc/{worker.pid}/clear_refs").write_text("5")
        return {w.pid: _peak_rss(w.pid) for w in self.workers}

    def grown(self, before: dict[int, int]) -> int:
        return max(_peak_rss(w.pid) - before[w.pid] for w in self.workers)

    def upload(self, filename: str, content_type: str, data: bytes, timeout: float) -> Any:
        """POST the file to /api/v1/evalsets/ as a multipart upload; the HTTP response (or raises
        HTTPError for a 4xx). A dropped connection fails with what the server printed."""
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"project\"\r\n\r\ndefault\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
                f"Content-Type: {content_type}\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1/evalsets/", data=body, method="POST",
            headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "Authorization": AUTH})
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except ConnectionError as exc:  # say what the server said (seen once, on a loaded machine)
            raise AssertionError(f"the connection failed ({exc!r}); the server said:\n{''.join(self.output)}") from exc

    def evalsets(self) -> list[dict[str, Any]]:
        listing = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/v1/evalsets/?page_size=100",
                                         headers={"Authorization": AUTH})
        with urllib.request.urlopen(listing, timeout=30) as response:
            return list(json.loads(response.read())["results"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, embedded_data_dir: Any) -> Iterator[Served]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY",
                                                            "DJANGO_SETTINGS_MODULE"}}
    env.update({"EVALSITE_DATA_DIR": str(embedded_data_dir(tmp_path_factory.mktemp("served"))),
                "PYTHONUNBUFFERED": "1", "EVALSITE_ADMIN_USERNAME": "root", "EVALSITE_ADMIN_PASSWORD": "root-pass-123"})
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "manage.py", "up", "--port", str(port), "--web-workers", "1"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output: list[str] = []
    try:
        assert proc.stdout is not None
        while not any("Press Ctrl+C" in line for line in output):
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "".join(output)
            output.append(line)
        threading.Thread(target=lambda: output.extend(proc.stdout or []), daemon=True).start()
        yield Served(proc, port, output)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.slow
def test_a_zip_that_lies_about_its_size_is_400_with_bounded_memory_and_writes_nothing(served: Served) -> None:
    inflated = 400 * 1024 * 1024
    archive = _lying_zip(inflated)
    assert len(archive) < 2 * 1024 * 1024
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert zf.infolist()[0].file_size == 1000  # the lie zipfile believes
    kept = served.evalsets()
    before = served.fresh_workers()
    with pytest.raises(urllib.error.HTTPError) as info:
        served.upload("liar.zip", "application/zip", archive, timeout=120)
    answer = json.loads(info.value.read())
    assert info.value.code == 400, answer
    assert answer["code"] == "invalid_zip"
    assert answer["problems"][0]["file"] == "liar.zip/big.evalset.json"
    grown = served.grown(before)
    assert grown < 64 * 1024 * 1024, f"the worker's peak memory grew {grown / 2**20:.0f} MB"
    assert served.evalsets() == kept


def _wide_csv(rows: int, columns: int = 1000) -> bytes:
    """A CSV within every documented limit (1,000 columns, short fields), the shape that grew a
    worker by ~374 MB at 5,000 rows (10 MB) when the reader held every row as a dict."""
    header = "input," + ",".join(f"c{i}" for i in range(columns - 1))
    body = "".join(f"question {r}," + ",".join("x" for _ in range(columns - 1)) + "\n" for r in range(rows))
    return (header + "\n" + body).encode()


@pytest.mark.slow
def test_a_wide_csv_is_read_a_row_at_a_time_with_bounded_memory(served: Served) -> None:
    data = _wide_csv(5_000)
    assert len(data) > 10_000_000
    kept = {e["id"] for e in served.evalsets()}
    before = served.fresh_workers()
    with served.upload("wide.csv", "text/csv", data, timeout=600) as response:
        created = json.loads(response.read())
        assert response.status == 201, created
    grown = served.grown(before)
    print(f"wide CSV ({len(data) / 2**20:.1f} MB, 5,000 x 1,000): the worker's peak grew {grown / 2**20:.0f} MB")
    # The upload itself (10 MB, its text, the request body) is in it; the rows are not.
    assert grown < 160 * 1024 * 1024, f"the worker's peak memory grew {grown / 2**20:.0f} MB"
    [evalset] = [e for e in served.evalsets() if e["id"] not in kept]
    assert evalset["latest_version"]["case_count"] == 5_000, evalset


# --- The CLI (`manage.py eval`, local mode) ---------------------------------------------------


def _eval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    from django.core.management import call_command

    code = 0
    try:
        call_command("eval", *args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.django_db
def test_the_cli_refuses_deep_outputs_and_a_deep_config_saying_why(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from tests.engine_helpers import DEMO

    outputs = tmp_path / "outputs.json"
    outputs.write_text("[" * DEEP + "]" * DEEP)
    code, err = _eval(capsys, str(DEMO), "--outputs", str(outputs))
    assert code == 2 and "nested more than 64 levels deep" in err and "outputs.json" in err
    outputs.write_text(json.dumps(perfect_outputs()))
    config = tmp_path / "config.json"
    config.write_text(_nest(DEEP))
    code, err = _eval(capsys, str(DEMO), "--outputs", str(outputs), "--config", str(config))
    assert code == 2 and "nested too deeply" in err
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_cli_refuses_a_metadata_target(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.engine_helpers import DEMO

    code, err = _eval(capsys, str(DEMO), "--target", "http://169.254.169.254/latest/meta-data/")
    assert code == 2 and "the target URL is refused" in err and "metadata" in err
    assert Run.objects.count() == 0
