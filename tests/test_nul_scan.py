"""The NUL check scans an upload's raw bytes once; only text that may hold a NUL (a raw one or
the `\\u0000` escape) is walked string by string (evaluations.schemas.text)."""

from __future__ import annotations

import json

import pytest

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.interop.outputs import read_outputs
from evaluations.models import EvalCase, Project
from evaluations.schemas.text import REPLACEMENT, may_hold_nul, nul_free, without_nul


def test_the_byte_scan_finds_raw_and_escaped_nuls_and_nothing_else() -> None:
    assert may_hold_nul(b'{"a": "x\\u0000y"}')
    assert may_hold_nul(json.dumps("x\x00").encode())
    assert may_hold_nul(b"a,b\nx\x00,y\n")
    assert may_hold_nul('{"a": "\\u0000"}') and may_hold_nul("raw \x00")
    assert not may_hold_nul(b'{"a": "\\u0001 u0000 \\\\n"}')
    assert not may_hold_nul("plain text")


def test_inside_a_clean_scan_the_walk_is_skipped_and_a_dirty_one_still_walks() -> None:
    dirty = {"k": ["x\x00"]}
    with nul_free([b'{"k": ["clean"]}']) as trusted:
        assert trusted
        assert without_nul(dirty) is dirty  # trusted: not walked
    with nul_free([b'{"k": ["x\\u0000"]}']) as trusted:
        assert not trusted
        assert without_nul(dirty) == {"k": [f"x{REPLACEMENT}"]}
    assert without_nul(dirty) == {"k": [f"x{REPLACEMENT}"]}  # outside: walked as always


@pytest.mark.django_db
def test_a_csv_with_a_raw_nul_byte_is_imported_with_it_replaced(acme: Project) -> None:
    data = b"input,expected_output\nhello\x00there,fine\nsecond,ok\n"
    [outcome] = evalset_import(project=acme, files=[SourceFile("nul.csv", data)])
    first = EvalCase.objects.filter(version=outcome.version).order_by("position").first()
    assert first is not None
    assert json.dumps(first.conversation, ensure_ascii=False).count(REPLACEMENT) == 1
    assert "\x00" not in json.dumps(first.conversation)


@pytest.mark.django_db
def test_a_nul_escaped_twice_inside_a_json_encoded_field_is_still_found(acme: Project) -> None:
    # DeepEval keeps multi-turn `turns` as a JSON-encoded string: the NUL is escaped twice
    turns = json.dumps([{"role": "user", "content": "hi\x00"}, {"role": "assistant", "content": "hello"}])
    data = json.dumps([{"scenario": "greet", "turns": turns, "expected_outcome": "a greeting"}]).encode()
    assert b"\\\\u0000" in data
    [outcome] = evalset_import(project=acme, files=[SourceFile("goldens.json", data)])
    text = json.dumps([c.conversation for c in EvalCase.objects.filter(version=outcome.version)], ensure_ascii=False)
    assert REPLACEMENT in text and "\\u0000" not in text


def test_outputs_files_are_scanned_once_each() -> None:
    clean = SourceFile("a.json", json.dumps([{"eval_id": "c1", "turns": [{"final_response": "ok"}]}]).encode())
    dirty = SourceFile("b.json", json.dumps([{"eval_id": "c2", "turns": [{"final_response": "bad\x00"}]}]).encode())
    outputs = read_outputs([clean, dirty])
    assert [o.turns[0].final_response for o in outputs] == ["ok", f"bad{REPLACEMENT}"]
