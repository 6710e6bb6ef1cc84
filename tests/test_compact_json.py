"""`safejson.compact_encoder`: the standard library's compact text to the byte (a case's
canonical columns are hashed, and migration 0010 hashed them with `json.JSONEncoder`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaluations.safejson import compact_encoder

VALUES: list[Any] = [
    {"b": 1, "a": [1.5, None, True, False, "é\x00\"\\\n\t\u2028😀"], "c": {"z": {}, "y": []}},
    {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "tiny": 1e-07, "big": 1e16, "neg0": -0.0},
    {"int": 2**80, "neg": -(2**70)},
    {3: "int keys", 1: "become strings", 2.5: "float keys too"},
    [0.1, 0.2 + 0.1, 1 / 3, 123456789.123456789],
    "a lone string with \x7f and \U0010ffff",
    12, 1.25, None, True, [], {},
]


@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("value", VALUES)
def test_the_same_text_as_the_standard_encoder(value: Any, sort_keys: bool) -> None:
    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
    assert compact_encoder(sort_keys=sort_keys)(value) == standard.encode(value)


def test_a_cycle_is_the_standard_error() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        compact_encoder()(loop)


def test_what_json_cannot_write_is_the_standard_error() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        compact_encoder()({"when": object()})
