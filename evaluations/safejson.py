"""JSON from users, parsed within bounds.

Python's `json` recurses once per level of nesting: a document nested 100,000 levels deep
raises RecursionError (a 500), and one nested 900 levels deep parses but then overflows the
stack further on (pydantic, the JSON field's encoder, the pages that show it). Every JSON
text that comes from a user (an uploaded eval set or outputs file, an API body, a form field,
an agent's answer) is therefore measured first: `check_depth` finds its deepest nesting in
a few vectorised passes (numpy, no Python loop per character) and raises `TooDeep`, a
`json.JSONDecodeError` whose message says why and whose line and column point at the
bracket that went past the limit, so every caller that already reports invalid JSON with its
location reports this too.

An integer of more than `sys.get_int_max_str_digits()` digits (4,300 by default) is valid JSON
that Python will not turn into an `int`: `json` raises a bare ValueError with no position.
`loads` and `loads_exact` raise `TooLongNumber` instead, a `json.JSONDecodeError` pointing at
the number, so such a file is refused like any other unreadable one, with its line and column.

It also holds the encoder evalsite writes its own compact JSON with (`compact_encoder`):
the standard library's, without the costs of `JSONEncoder.encode` on every call; and, for
the import's hot path, `loads_exact` and `canonical_fast`: orjson where it gives exactly the
standard library's values and text, the standard library where it would not.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from json.encoder import c_encode_basestring, c_make_encoder  # type: ignore[attr-defined]
from typing import Any

import numpy as np
import orjson

MAX_DEPTH = 64  # arrays and objects inside each other; real eval sets stay under 15
MAX_ITEM_BOUNDS = 500_000  # the starts and ends of a 100,000-case eval set's cases, with room
_CHUNK = 1 << 18  # 256 KiB: the int64 work arrays of a chunk stay a few MB (peak RSS of an import)
_QUOTE, _BACKSLASH, _OPEN_ARRAY, _OPEN_OBJECT, _CLOSE_ARRAY, _CLOSE_OBJECT = (ord(c) for c in '"\\[{]}')


class TooDeep(json.JSONDecodeError):
    def __init__(self, doc: str, pos: int, limit: int):
        super().__init__(f"nested more than {limit} levels deep (evalsite reads at most {limit})", doc, pos)


class TooLongNumber(json.JSONDecodeError):
    def __init__(self, doc: str, pos: int, digits: int, limit: int):
        super().__init__(f"an integer of {digits:,} digits (evalsite reads integers of at most {limit:,} digits; "
                         "quote it to keep it as text)", doc, pos)


def describe(exc: json.JSONDecodeError) -> str:
    """What is wrong, for a person: "not valid JSON: ..." (an integer too long to read is valid
    JSON, and says so by itself)."""
    return exc.msg if isinstance(exc, TooLongNumber) else f"not valid JSON: {exc.msg}"


def max_int_digits() -> int:
    """The most digits Python turns into an int (`sys.set_int_max_str_digits`; 0: no limit)."""
    return sys.get_int_max_str_digits()


# A JSON string (skipped whole, so digits inside it do not count) or an integer: a run of digits
# not part of a fraction or an exponent.
_STRING_OR_INTEGER = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|(?<![0-9.eE+-])-?([0-9]+)(?![0-9.eE])')


def long_integer(data: bytes | str, limit: int | None = None) -> tuple[int, int] | None:
    """(character offset, digits) of the first integer in the JSON text `data` longer than
    `limit` digits (Python's own limit by default), or None. For the error path: a scan in
    Python's regex engine, at about 50 MB/s."""
    limit = max_int_digits() if limit is None else limit
    if not limit:
        return None
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if b"0" * (limit + 1) not in raw.translate(_DIGITS_TO_ZERO):
        return None
    for match in _STRING_OR_INTEGER.finditer(raw):
        digits = match.group(1)
        if digits is not None and len(digits) > limit:
            start = match.start()
            return len(raw[:start].decode("utf-8", "replace")), len(digits)
    return None


def _too_long(data: bytes | str, exc: ValueError) -> ValueError:
    """`TooLongNumber` for the ValueError `json` raised on `data`, when an integer past the
    limit is what it refused; else `exc` itself."""
    if isinstance(exc, json.JSONDecodeError):
        return exc
    found = long_integer(data)
    if found is None:
        return exc
    doc = data if isinstance(data, str) else data.decode("utf-8", "replace")
    return TooLongNumber(doc, found[0], found[1], max_int_digits())


def _json_loads(data: bytes | str, **kwargs: Any) -> Any:
    try:
        return json.loads(data, **kwargs)
    except ValueError as exc:
        raise _too_long(data, exc) from None


def deepest(data: bytes, limit: int = MAX_DEPTH, closes: list[int] | None = None,
            items: list[int] | None = None) -> tuple[int, int | None]:
    """(deepest nesting seen, byte offset where it first exceeded `limit`, or None).

    Brackets inside strings do not count; a quote after an odd run of backslashes does not
    end a string. With `closes`, the offset of every bracket that closes back to depth 1 is
    appended to it (where each container inside the top-level value ends). With `items`, the
    offset of every bracket that opens depth 3 or closes back to depth 2 (where each container
    inside those containers starts and ends: an eval set's cases), in order; or nothing when
    there are more than MAX_ITEM_BOUNDS of them (not worth their memory)."""
    depth = 0
    inside = 0  # 1 while a string is open at the chunk boundary
    best = 0
    for start in range(0, len(data), _CHUNK):
        arr = np.frombuffer(data, dtype=np.uint8, count=min(_CHUNK, len(data) - start), offset=start)
        quotes = arr == _QUOTE
        # A quote right after a backslash may be escaped: only those few are looked at, by
        # counting the run of backslashes before each (it may reach into earlier chunks).
        maybe = np.flatnonzero(quotes[1:] & (arr[:-1] == _BACKSLASH)) + 1
        if start and arr[0] == _QUOTE and data[start - 1] == _BACKSLASH:
            maybe = np.concatenate(([0], maybe))
        for at in maybe.tolist():
            i = start + at - 1
            while i >= 0 and data[i] == _BACKSLASH:
                i -= 1
            if (start + at - 1 - i) & 1:
                quotes[at] = False
        # Only the quotes and brackets matter: work on those few positions.
        opens = (arr == _OPEN_ARRAY) | (arr == _OPEN_OBJECT)
        shut = (arr == _CLOSE_ARRAY) | (arr == _CLOSE_OBJECT)
        where = np.flatnonzero(quotes | opens | shut)
        if not len(where):
            continue
        is_quote = quotes[where]
        # uint8 sums wrap, but keep their parity: all the string state needs.
        parity = (np.cumsum(is_quote.view(np.uint8), dtype=np.uint8) + np.uint8(inside)) & 1
        outside = (parity == 0) & ~is_quote
        is_close = shut[where]
        delta = opens[where].astype(np.int8) - is_close.astype(np.int8)
        delta[~outside] = 0
        levels = np.cumsum(delta, dtype=np.int32) + depth  # a chunk moves at most _CHUNK levels
        top = int(levels.max())
        if top > limit:
            return top, start + int(where[int(np.argmax(levels > limit))])
        if closes is not None:
            closes.extend((start + where[is_close & outside & (levels == 1)]).tolist())
        if items is not None:
            bounds = outside & np.where(is_close, levels == 2, levels == 3)
            items.extend((start + where[bounds]).tolist())
            if len(items) > MAX_ITEM_BOUNDS:  # a crafted file's millions of `{}`: not kept
                items.clear()
                items = None
        best = max(best, top)
        depth = int(levels[-1])
        inside = int(parity[-1])
    return best, None


def check_depth(data: bytes | str, limit: int = MAX_DEPTH, closes: list[int] | None = None,
                items: list[int] | None = None) -> None:
    """Raise TooDeep when `data` nests arrays and objects more than `limit` levels deep.

    With `closes` and `items` (bytes only), fill them as `deepest` does; they stay empty for a
    short document with too few brackets to be worth measuring."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    # Too few brackets to nest that deep: no need to look closer. (Counting them is two passes
    # over the text; a large one is measured at once.)
    if len(raw) <= _CHUNK and raw.count(b"[") + raw.count(b"{") <= limit:
        return
    _, where = deepest(raw, limit, closes, items)
    if where is not None:
        doc = data if isinstance(data, str) else data.decode("utf-8", "replace")
        # JSONDecodeError's position counts characters, not bytes.
        raise TooDeep(doc, len(raw[:where].decode("utf-8", "replace")), limit)


def loads(data: bytes | str, **kwargs: Any) -> Any:
    """`json.loads` for text from a user: TooDeep (a JSONDecodeError) past MAX_DEPTH, and
    TooLongNumber (another) for an integer Python will not read."""
    check_depth(data)
    try:
        return _json_loads(data, **kwargs)
    except RecursionError:  # pragma: no cover - check_depth refused it first
        raise TooDeep(data if isinstance(data, str) else "", 0, MAX_DEPTH) from None


def value_depth(value: Any) -> int:
    """How deep a parsed value nests (iteratively: a deep value cannot overflow the stack)."""
    deepest_seen = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            deepest_seen = max(deepest_seen, level)
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            deepest_seen = max(deepest_seen, level)
            stack.extend((v, level + 1) for v in item)
    return deepest_seen


def compact_encoder(*, sort_keys: bool = False) -> Callable[[Any], str]:
    """`json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=...).encode`,
    the same text to the byte, at about half the cost on the many small and mid-sized values
    evalsite writes (a score's justification, an eval case's columns): `encode` builds a new
    C encoder and a dict of the containers it has seen (to detect cycles) on every call; this
    builds the C encoder once and skips the cycle check, as the values written are trees
    parsed from JSON or made by evalsite. A cycle, or a Python without the C encoder, falls
    back to the standard path (and its ValueError)."""
    standard = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
    if c_make_encoder is None or c_encode_basestring is None:  # pragma: no cover - CPython has both
        return standard.encode
    fast = c_make_encoder(None, standard.default, c_encode_basestring, None, ":", ",", sort_keys, False, True)

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return c_encode_basestring(value)
        try:
            return "".join(fast(value, 0))
        except RecursionError:
            return standard.encode(value)

    return encode


# --- orjson where it is exactly the standard library -----------------------------------------
#
# orjson parses and writes JSON several times faster than `json`, and differs from it in only
# a few places, each checked for here (tests/test_safejson_exact.py holds the two to the same
# values and the same text on generated documents):
# - parsing, an integer beyond 64 bits becomes a float (-2**63 - 1 already does): a text
#   with a run of 19 or more digits is parsed by `json`;
# - parsing, NaN, Infinity, a number that overflows and a lone surrogate are refused: `json`
#   takes them (so a value from `loads_exact` with exact=True has only finite floats);
# - writing, NaN and infinities become null (no such float reaches `canonical_fast`), an
#   integer beyond 64 bits is refused, and a float below 1e-4 is spelled `1e-5` or `0.00001`
#   where Python writes `1e-05`: such text is written by `json` again.

_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_NUMBER = b"0" * 19
_canonical_standard = compact_encoder(sort_keys=True)


def loads_exact(data: bytes) -> tuple[Any, bool]:
    """(`json.loads(data)`, exact): exact when orjson parsed it, which then holds only finite
    floats and the integers `json` would give. Depth is the caller's to check; errors are
    `json`'s (a JSONDecodeError with its position; TooLongNumber for an integer Python will not
    read)."""
    if _LONG_NUMBER not in data.translate(_DIGITS_TO_ZERO):
        try:
            return orjson.loads(data), True
        except orjson.JSONDecodeError:
            pass
    return _json_loads(data), False


def canonical_fast(value: Any) -> str:
    """`compact_encoder(sort_keys=True)(value)`, the same text to the character, for a value
    with no NaN or infinity (one from `loads_exact` with exact=True, say)."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits, a lone surrogate
        return _canonical_standard(value)
    if b".0000" in out or _small_float_exponent(out):
        return _canonical_standard(value)
    return out.decode()


def _small_float_exponent(out: bytes) -> bool:
    """Whether `out` may hold a float orjson spells as `1e-9` (a digit, `e-`, a digit);
    the same in a string only costs the standard encoder."""
    at = out.find(b"e-")
    while at != -1:
        if at and out[at - 1 : at].isdigit() and out[at + 2 : at + 3].isdigit():
            return True
        at = out.find(b"e-", at + 2)
    return False


def dumps_fast(value: Any) -> str:
    """Compact JSON text of `value` that parses to what `compact_encoder()(value)`'s does (the
    text may spell a float differently: `0.00001` for `1e-05`), by orjson when that is exact: a
    text with a null in it is written again by `json` (orjson writes NaN and infinities as
    null, where `json` keeps them), and so is a value orjson refuses (an integer beyond 64
    bits, a key that is not a string). For JSON that is stored, not hashed: scores'
    justifications."""
    try:
        out = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        return _compact_standard(value)
    if b"null" in out:
        return _compact_standard(value)
    return out.decode()


_compact_standard = compact_encoder()
