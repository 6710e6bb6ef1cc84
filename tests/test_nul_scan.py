"""The NUL check scans an upload's raw bytes once; only text that may hold a NUL (a raw one or
the `\\u0000` escape) is walked string by string (evaluations.schemas.text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.interop.outputs import read_outputs
from evaluations.models import EvalCase, Project
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.outputs import AgentOutput
from evaluations.schemas.text import REPLACEMENT, fields_validator, may_hold_nul, nul_free, validate_json, without_nul


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


REPO_DATA = Path(__file__).parent / "data"


def _corpus() -> list[tuple[type[NativeCase] | type[AgentOutput], str]]:
    """Cases from every real-world eval set kept in the repository, and outputs from the
    outputs fixtures plus one with every field, each as JSON the way a run stores it
    (defaults left out) and in full."""
    from pydantic import BaseModel

    from evaluations.interop import EvalSetImportError, read_upload
    from evaluations.interop.outputs import read_outputs

    models: list[BaseModel] = []
    for path in sorted((REPO_DATA / "realworld").rglob("*.json")):
        try:
            parsed = read_upload([SourceFile(path.name, path.read_bytes())])
        except EvalSetImportError:  # evaluator configs and the like are not eval sets
            continue
        models += [case for p in parsed for case in p.evalset.eval_cases]
    for name in ("travel_outputs.json", "travel_outputs.jsonl"):
        models += read_outputs([SourceFile(name, (REPO_DATA / "outputs" / name).read_bytes())])
    models.append(AgentOutput.model_validate({
        "eval_id": "every-field", "iteration": 2, "latency_seconds": 1.5, "error": "boom",
        "metadata": {"nested": [1, 2.5, None, {"k": "v"}]}, "memory_increase_bytes": 7, "memory_peak_bytes": 9,
        "turns": [{"final_response": {"role": "model", "content": "hi \u00e9"},
                   "tool_calls": [{"name": "search", "args": {"q": "x"}, "error": "late", "latency_seconds": 0.25}],
                   "usage": {"prompt_tokens": 3, "completion_tokens": 4, "cost_usd": 0.01}}],
        "trajectory": [{"step_type": "NODE", "name": "planner"}]}))
    assert len(models) > 20 and {type(m) for m in models} == {NativeCase, AgentOutput}
    return [(type(m), text) for m in models
            for text in (m.model_dump_json(exclude_defaults=True), m.model_dump_json())]


def test_validate_json_makes_the_model_pydantic_makes_without_the_nul_hook() -> None:
    # The fast path is taken for both models: a pydantic whose schemas have another shape
    # fails here instead of silently falling back to the slower path.
    assert fields_validator(NativeCase) is not None and fields_validator(AgentOutput) is not None
    for model, text in _corpus():
        made, expected = validate_json(model, text), model.model_validate_json(text)
        assert type(made) is model
        assert made == expected
        assert made.model_fields_set == expected.model_fields_set
        assert made.model_dump(exclude_unset=True) == expected.model_dump(exclude_unset=True)
        assert made.model_dump_json() == expected.model_dump_json()


def test_validate_json_replaces_nuls_and_raises_what_pydantic_raises() -> None:
    made = validate_json(AgentOutput, '{"eval_id": "a\\u0000b", "metadata": {"k\\u0000": "v\\u0000"}}')
    assert made.eval_id == f"a{REPLACEMENT}b" and made.metadata == {f"k{REPLACEMENT}": f"v{REPLACEMENT}"}
    for bad in ('{"eval_id": "a", "bogus": 1}', '{"eval_id": 3}', "[1]", '{"eval_id": "a", "turns": [{"x": 1}]}',
                '{"eval_id": "a"'):
        with pytest.raises(ValidationError) as fast:
            validate_json(AgentOutput, bad)
        with pytest.raises(ValidationError) as slow:
            AgentOutput.model_validate_json(bad)
        assert fast.value.errors(include_url=False) == slow.value.errors(include_url=False)
        assert fast.value.title == slow.value.title == "AgentOutput"
