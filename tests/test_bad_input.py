"""The bad-input catalogue, at all three ways in: the upload page, the API and the CLI.

Each bad upload must give a clear message that says what is wrong and where, and must write
nothing at all.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from evaluations.models import EvalCase, EvalSet, EvalSetSource, EvalSetVersion


def _native(cases: list[dict]) -> bytes:
    return json.dumps({"eval_set_id": "bad", "eval_cases": cases}, indent=2).encode()


def _case(eval_id: str, **extra: object) -> dict:
    return {
        "eval_id": eval_id,
        "conversation": [{"invocation_id": "t1", "user_content": {"role": "user", "content": "hi"}, **extra}],
    }


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _lying_zip(inflated: int = 20_000_000, claimed: int = 1000) -> bytes:
    """A zip whose one deflate entry claims `claimed` bytes but inflates to `inflated` (its
    header patched after writing, as an attacker would)."""
    data = bytearray(_zip({"big.evalset.json": b" " * inflated}))
    local = data.index(b"PK\x03\x04")
    data[local + 22:local + 26] = claimed.to_bytes(4, "little")
    central = data.index(b"PK\x01\x02")
    data[central + 24:central + 28] = claimed.to_bytes(4, "little")
    return bytes(data)


def _bad_crc_zip() -> bytes:
    data = bytearray(_zip({"a.evalset.json": _native([_case("a")])}))
    for sig, offset in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
        at = data.index(sig) + offset
        data[at:at + 4] = b"\x00\x00\x00\x00"
    return bytes(data)


DEEP = 100_000


@dataclass
class Bad:
    id: str
    files: list[tuple[str, bytes]]
    code: str
    says: list[str]  # fragments the message must contain


CATALOGUE = [
    Bad("not_json", [("broken.json", b'{"eval_set_id": "x",\n  "eval_cases": [\n    {"eval_id": }\n]}')],
        "invalid_json", ["broken.json:3:17", "not valid JSON"]),
    Bad("unknown_format", [("mystery.json", b'{"hello": "world"}')],
        "unknown_format", ["tried: native, adk, uipath, deepeval, inspect, promptfoo, plain", "not Google ADK eval set"]),
    Bad("schema_errors", [("s.evalset.json", _native([
        _case("ok"),
        {"eval_id": "no_user", "conversation": [{"invocation_id": "t1"}]},
        _case("typo", expected_tool_trajectry=[]),
        {"eval_id": "bad_args", "conversation": [{"invocation_id": "t1", "user_content": {"role": "user", "content": "x"},
                                                   "expected_tool_trajectory": [{"name": "f", "args": "city=Paris"}]}]},
    ]))], "schema", [
        "case 'no_user', eval_cases[1].conversation[0].user_content: required field is missing",
        "case 'typo', eval_cases[2].conversation[0].expected_tool_trajectry: unknown field",
        "case 'bad_args', eval_cases[3].conversation[0].expected_tool_trajectory[0].args",
        "s.evalset.json:",
    ]),
    Bad("mixed_deepeval", [("goldens.json", json.dumps([
        {"input": "What is 2+2?", "expected_output": "4"},
        {"scenario": "User asks for help", "expected_outcome": "helped", "turns": []},
    ]).encode())], "mixed_turns", ["single-turn", "multi-turn"]),
    Bad("duplicate_ids", [("d.evalset.json", _native([_case("same"), _case("other"), _case("same")]))],
        "duplicate_ids", ["case 'same'", "duplicate eval_id: cases #1 and #3"]),
    Bad("empty_file", [("empty.json", b"")], "empty", ["empty.json", "empty"]),
    Bad("wrong_encoding", [("latin1.csv", "input,expected_output\ncaf\u00e9,ol\u00e9\n".encode("latin-1"))],
        "encoding", ["latin1.csv:2:4", "not UTF-8"]),
    Bad("zip_slip", [("evil.zip", _zip({"../../etc/evil.json": b"{}", "ok.evalset.json": _native([_case("a")])}))],
        "unsafe_zip", ["evil.zip", "../../etc/evil.json", "outside the archive"]),
    # Hostile files (issue 22): each a 400 that says why, never a 500 or unbounded memory.
    Bad("deep_json", [("deep.json", b"[" * DEEP + b"]" * DEEP)],
        "invalid_json", ["deep.json:1:65", "nested more than 64 levels deep"]),
    Bad("deep_json_in_a_case", [("deep.evalset.json", _native([_case("a")]).replace(
        b'"content": "hi"', b'"content": ' + b'{"a": ' * DEEP + b"1" + b"}" * DEEP))],
        "invalid_json", ["deep.evalset.json:", "nested more than 64 levels deep"]),
    Bad("deep_jsonl", [("deep.jsonl", b'{"input": "a", "expected_output": "b"}\n' + b"[" * DEEP + b"]" * DEEP)],
        "schema", ["deep.jsonl:2:65", "nested more than 64 levels deep"]),
    Bad("deep_json_in_a_csv_cell", [("goldens.csv", b'input,expected_output,tools_called\nq,a,"'
                                     + b"[" * 10_000 + b"]" * 10_000 + b'"\n')],
        "schema", ["goldens.csv", "nested more than 64 levels deep"]),
    Bad("lying_zip", [("liar.zip", _lying_zip())],
        "invalid_zip", ["liar.zip/big.evalset.json", "cannot be read"]),
    Bad("bad_crc_zip", [("crc.zip", _bad_crc_zip())],
        "invalid_zip", ["crc.zip/a.evalset.json", "Bad CRC-32"]),
    Bad("truncated_zip", [("cut.zip", _zip({"a.evalset.json": _native([_case("a")])})[:60])],
        "invalid_zip", ["cut.zip", "not a valid zip archive"]),
    Bad("wide_csv", [("wide.csv", b",".join(b"c%d" % i for i in range(5000)) + b"\n" + b"x," * 4999 + b"x\n")],
        "invalid_csv", ["wide.csv:1", "5,000 columns (at most 1,000)"]),
    Bad("huge_csv_field", [("huge.csv", b"input,expected_output\n" + b"x" * 200_000 + b",y\n")],
        "invalid_csv", ["huge.csv", "field larger than field limit"]),
]


@pytest.fixture
def small_limit(settings):  # type: ignore[no-untyped-def]
    settings.EVALSITE_MAX_UPLOAD_BYTES = 1000
    return settings


def _nothing_written() -> None:
    assert EvalSet.objects.count() == 0
    assert EvalSetVersion.objects.count() == 0
    assert EvalCase.objects.count() == 0
    assert EvalSetSource.objects.count() == 0


# --- API --------------------------------------------------------------------------------------


def _api_upload(client: Client, files: list[tuple[str, bytes]]) -> tuple[int, dict]:
    response = client.post(
        "/api/v1/evalsets/",
        {"project": "acme", "file": [SimpleUploadedFile(name, data) for name, data in files]},
    )
    return response.status_code, response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("bad", CATALOGUE, ids=[b.id for b in CATALOGUE])
def test_the_api_answers_400_with_the_error_shape_and_writes_nothing(alice_client: Client, bad: Bad) -> None:
    status, body = _api_upload(alice_client, bad.files)
    assert status == 400
    assert body["code"] == bad.code
    for fragment in bad.says:
        assert fragment in body["message"] or any(fragment in _problem_line(p) for p in body["problems"]), (
            fragment, body)
    _nothing_written()


def _problem_line(p: dict) -> str:
    where = p["file"] or ""
    if p["line"] is not None:
        where += f":{p['line']}" + (f":{p['column']}" if p["column"] is not None else "")
    bits = [where] if where else []
    if p["case"] is not None:
        bits.append(f"case {p['case']!r}")
    if p["path"]:
        bits.append(p["path"])
    return ", ".join(bits) + ": " + p["message"]


@pytest.mark.django_db
def test_the_api_refuses_a_file_over_the_size_limit_with_413(alice_client: Client, small_limit: object) -> None:
    status, body = _api_upload(alice_client, [("big.evalset.json", _native([_case(f"c{i}") for i in range(30)]))])
    assert status == 413
    assert body["code"] == "too_large"
    assert "over the upload limit of 1,000 bytes" in body["message"]
    _nothing_written()


@pytest.mark.django_db
def test_the_api_refuses_a_zip_that_unpacks_past_the_limit(alice_client: Client, small_limit: object) -> None:
    bomb = _zip({"a.evalset.json": b" " * 50_000 + _native([_case("a")])})
    assert len(bomb) < 1000
    status, body = _api_upload(alice_client, [("bomb.zip", bomb)])
    # The file is within the limit; what it unpacks to is not: a 400 naming that limit.
    assert status == 400 and body["code"] == "too_expanded"
    assert body["problems"][0]["file"] == "bomb.zip" and "EVALSITE_MAX_UNPACKED_MB" in body["message"]
    _nothing_written()


@pytest.mark.django_db
def test_schema_errors_are_capped_at_a_readable_number_but_counted(alice_client: Client) -> None:
    cases = [{"eval_id": f"c{i}", "conversation": [{"invocation_id": "t"}]} for i in range(60)]
    status, body = _api_upload(alice_client, [("many.evalset.json", _native(cases))])
    assert status == 400
    assert body["problem_count"] == 60
    assert len(body["problems"]) == 20
    assert "... and 40 more problems" in body["message"]


@pytest.mark.django_db
def test_one_bad_file_in_a_multi_file_upload_writes_nothing(alice_client: Client) -> None:
    status, body = _api_upload(alice_client, [
        ("good.evalset.json", _native([_case("a")]).replace(b'"bad"', b'"good"')),
        ("dupe.evalset.json", _native([_case("x"), _case("x")])),
    ])
    assert status == 400
    assert body["code"] == "duplicate_ids"
    _nothing_written()


# --- CLI --------------------------------------------------------------------------------------


def _cli(paths: list[Path], capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = 0
    try:
        call_command("import_evalset", *[str(p) for p in paths], "--project", "acme", *extra)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.django_db
@pytest.mark.parametrize("bad", CATALOGUE, ids=[b.id for b in CATALOGUE])
def test_the_cli_exits_1_with_the_message_on_stderr_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: Bad
) -> None:
    paths = []
    for name, data in bad.files:
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    code, out, err = _cli(paths, capsys)
    assert code == 1
    assert f"error ({bad.code})" in err
    for fragment in bad.says:
        assert fragment in err, (fragment, err)
    assert "version" not in out
    _nothing_written()


@pytest.mark.django_db
def test_the_cli_refuses_a_file_over_the_size_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], small_limit: object
) -> None:
    path = tmp_path / "big.evalset.json"
    path.write_bytes(_native([_case(f"c{i}") for i in range(30)]))
    code, _, err = _cli([path], capsys)
    assert code == 1
    assert "error (too_large)" in err
    assert "big.evalset.json" in err
    _nothing_written()


@pytest.mark.django_db
def test_the_cli_reports_a_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli([tmp_path / "nope.json"], capsys)
    assert code == 1
    assert "no such file or folder" in err


# --- Upload page ------------------------------------------------------------------------------


def _page_upload(client: Client, files: list[tuple[str, bytes]]) -> tuple[int, str]:
    response = client.post("/evalsets/upload/", {"files": [SimpleUploadedFile(n, d) for n, d in files]})
    return response.status_code, response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("bad", CATALOGUE, ids=[b.id for b in CATALOGUE])
def test_the_upload_page_shows_the_problems_and_writes_nothing(alice_client: Client, bad: Bad) -> None:
    from django.utils.html import escape

    status, html = _page_upload(alice_client, bad.files)
    assert status == 400
    for fragment in bad.says:
        assert escape(fragment) in html, (fragment, html[:3000])
    _nothing_written()


@pytest.mark.django_db
def test_the_upload_page_refuses_a_file_over_the_size_limit(alice_client: Client, small_limit: object) -> None:
    status, html = _page_upload(alice_client, [("big.evalset.json", _native([_case(f"c{i}") for i in range(30)]))])
    assert status == 400
    assert "over the upload limit of 1,000 bytes" in html
    _nothing_written()

