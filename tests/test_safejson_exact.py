"""orjson on the import's hot path gives exactly what the standard library gives: the same
values parsed (`loads_exact`) and the same canonical text written (`canonical_fast`), on
generated documents and on the numbers where the two libraries differ. A content hash built
from the text must not change with the library that wrote it."""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluations.evalsets.services import _CASE_JSON_COLUMNS, case_content_hash, evalset_import
from evaluations.interop import SourceFile, files_from_paths
from evaluations.interop.adk.convert import AdkConverter
from evaluations.models import EvalCase, Project
from evaluations.safejson import canonical_fast, compact_encoder, dumps_fast, loads_exact

standard = compact_encoder(sort_keys=True)

# Where orjson and json part ways: 64-bit edges, floats Python spells with an exponent, the
# smallest and largest doubles, negative zero, numbers that overflow, long mantissas.
EDGE_NUMBERS = [
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "123456789012345678901234567890", "-0", "-0.0", "0.0",
    "1e-05", "0.00001", "1.5e-7", "0.0001", "0.00012", "1e16", "1e+16", "12345678901234567.0", "1e22",
    "1.7976931348623157e308", "2.2250738585072014e-308", "4.9e-324", "1e-400", "1e400", "-1e400",
    "1.00000000000000000000000001", "0.1e1", "1E5", "3.141592653589793", "1747341706.62",
]


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN and an int never equal to a float."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("number", EDGE_NUMBERS)
def test_a_number_parses_and_writes_as_the_standard_library_does(number: str) -> None:
    text = f'{{"n": {number}, "in": [{number}], "s": "{number}"}}'.encode()
    value, exact = loads_exact(text)
    assert _same(value, json.loads(text))
    if exact:
        assert all(math.isfinite(v) for v in (value["n"], value["in"][0]) if isinstance(v, float))
        assert canonical_fast(value) == standard(value)
    if abs(float(number)) == math.inf:
        assert not exact  # orjson refuses it; json's infinity is kept


def test_nan_and_infinity_are_parsed_by_json_and_never_marked_exact() -> None:
    value, exact = loads_exact(b'{"a": NaN, "b": Infinity, "c": -Infinity}')
    assert not exact and math.isnan(value["a"]) and value["b"] == math.inf and value["c"] == -math.inf


def test_a_lone_surrogate_is_parsed_by_json_and_written_by_it() -> None:
    value, exact = loads_exact(b'{"k": "a\\ud800b"}')
    assert (value, exact) == ({"k": "a\ud800b"}, False)
    assert canonical_fast(value) == standard(value)


def test_a_float_orjson_spells_differently_in_a_string_only_costs_the_standard_encoder() -> None:
    value = {"id": "run-5e-7", "version": "v1.00001", "x": 1e-05, "y": [2.5e-09]}
    assert canonical_fast(value) == standard(value) == (
        '{"id":"run-5e-7","version":"v1.00001","x":1e-05,"y":[2.5e-09]}')


def _double(bits: int) -> float:
    return float(struct.unpack("d", struct.pack("Q", bits))[0])


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
_number = st.one_of(
    st.integers(), st.integers(-2**70, 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.integers(0, 2**64 - 1).map(_double).filter(math.isfinite),
    st.floats(-1e-3, 1e-3), st.floats(min_value=1e15, max_value=1e20), st.sampled_from([0.0, -0.0, 1e-05, 1e16]))
_value = st.recursive(st.one_of(st.none(), st.booleans(), _number, _text),
                      lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
                      max_leaves=12)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_value, indent=st.sampled_from([None, 2]))
def test_generated_documents_parse_and_write_as_the_standard_library_does(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent, ensure_ascii=bool(indent)).encode()
    parsed, _exact = loads_exact(text)
    assert _same(parsed, json.loads(text))
    assert canonical_fast(parsed) == standard(parsed)  # finite floats: exact or not, the same text


@pytest.mark.django_db
def test_an_imported_case_s_hash_is_the_one_the_standard_library_s_text_gives(tmp_path: Path) -> None:
    """A 60-case ADK eval set (read case by case past its outline) with the numbers where the
    two libraries differ, in arguments, state and metadata: every stored content hash is the
    one built from the standard encoder's text of the case (parsed by `json`, converted, and
    written by `compact_encoder`) and its whole name (the column keeps 255 characters),
    whatever the database does to numbers in JSON columns."""
    numbers = [json.loads(n) for n in EDGE_NUMBERS if "400" not in n]
    # The outline reads the first 50 cases with ijson; the long numbers go after them, where
    # each case is parsed on its own: by json when it holds a long number, by orjson otherwise.
    short = [n for n in numbers if not re.search(r"[0-9]{19}", json.dumps(n))]
    long = [n for n in numbers if n not in short]

    def case(i: int) -> dict[str, Any]:
        pool = short if i < 50 or i % 2 else long
        args = {"n": pool[(i + 2) % len(pool)], "tiny": 1e-9, "small": 0.00012, "text": f"q{i}"}
        if i >= 50 and not i % 2:
            args |= {"big": 2**70, "id": "9223372036854775807123"}
        return {"eval_id": f"c{i}", "name": "long name " * 40 if i in (3, 55) else f"case {i}",
                "creation_timestamp": pool[i % len(pool)],
                "session_input": {"app_name": "app", "user_id": "u", "state": {"n": pool[(i + 1) % len(pool)]}},
                "conversation": [{"invocation_id": "t1", "user_content": {"parts": [{"text": f"q{i}"}], "role": "user"},
                                  "intermediate_data": {"tool_uses": [{"name": "f", "args": args}]}}]}

    cases = [case(i) for i in range(60)]
    path = tmp_path / "numbers.evalset.json"
    path.write_text(json.dumps({"eval_set_id": "numbers", "eval_cases": cases}, indent=2))
    project = Project.objects.create(slug="p", name="P")
    [outcome] = evalset_import(project=project, files=files_from_paths([path]))
    stored = dict(EvalCase.objects.filter(version=outcome.version).values_list("eval_id", "content_hash"))
    converter = AdkConverter(SourceFile("numbers.evalset.json", b"{}"))
    expected = {}
    for index, raw in enumerate(json.loads(path.read_bytes())["eval_cases"]):
        dumped = converter.case(raw, ("eval_cases", index), index)
        assert dumped is not None and not converter.errors
        texts = [standard(dumped[column]) for column in _CASE_JSON_COLUMNS]
        expected[dumped["eval_id"]] = case_content_hash(dumped["eval_id"], dumped["name"], texts)
    assert stored == expected
    call = EvalCase.objects.get(version=outcome.version, eval_id="c50").conversation[0]["expected_tool_trajectory"][0]
    assert call["args"]["big"] == 2**70


_stored = st.recursive(st.one_of(st.none(), st.booleans(), _number, _text, st.sampled_from([math.nan, math.inf, -math.inf])),
                       lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(
                           st.one_of(_text, st.integers(-3, 3)), inner, max_size=4)), max_leaves=12)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_stored)
def test_stored_json_parses_to_what_the_standard_library_s_text_parses_to(value: Any) -> None:
    """NaN and infinities (which orjson writes as null), integer keys and integers beyond 64
    bits (which it refuses) included: a justification reads back the same either way."""
    assert _same(json.loads(dumps_fast(value)), json.loads(compact_encoder()(value)))


def test_stored_json_keeps_nan_as_the_standard_library_does() -> None:
    assert dumps_fast({"x": math.nan, "y": [math.inf]}) == '{"x":NaN,"y":[Infinity]}'
    assert dumps_fast({"x": 1e-05, "é": "✓"}) == '{"x":0.00001,"é":"✓"}'  # orjson's spelling, the same float


def test_every_character_is_escaped_as_the_standard_library_escapes_it() -> None:
    """Each code point but the surrogates, alone and as keys sorted against each other, by
    orjson itself (canonical_fast's fast path) and by canonical_fast."""
    characters = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    keys = {characters[i:i + 3]: i for i in range(0, len(characters), 997)}
    for value in (characters, keys):
        assert orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode() == standard(value)
        assert canonical_fast(value) == standard(value)


def test_a_sweep_of_doubles_is_written_as_the_standard_library_writes_it() -> None:
    """Every power of ten (and 1.5 and -2.5 times it) across the double range, and 200,000
    doubles from random bit patterns (seeded): each one's canonical text is the standard
    encoder's, and most of them took orjson's path."""
    import random

    r = random.Random(17)
    doubles = [m * 10.0 ** k for k in range(-323, 308) for m in (1.0, 1.5, -2.5)]
    doubles += [d for d in (_double(r.getrandbits(64)) for _ in range(200_000)) if math.isfinite(d)]
    fast = 0
    for value in doubles:
        text = standard(value)
        assert canonical_fast(value) == text, value
        fast += orjson.dumps(value).decode() == text
    assert fast > len(doubles) // 3
