"""Regular expressions written by users, run on untrusted text (agents' outputs, traces) in
bounded time.

Python's `re` backtracks: `(a+)+$` on 25 characters of output took 9.8 s of a queue worker.
`compile_bounded(pattern, flags)` reads the pattern with Python's own parser (so it means
what it meant under `re`, flags, `(?x)` and all) and, where every piece of it is regular,
runs it with RE2 (`google-re2`), whose matching is linear in the text. The translation keeps
`re`'s meaning exactly:

- every character class, `.`, `\\d` `\\w` `\\s` (Unicode or ASCII, as the flags say) and every
  case-insensitive literal becomes the explicit set of code points that Python's `re` matches,
  computed from `re` itself, so neither RE2's Unicode tables nor its case folding are used;
- `$` without MULTILINE (end, or before a final newline) has no RE2 form: it becomes `\\z`
  for texts that do not end with a newline; `\\Z` is `\\z`; `^` and `$` with MULTILINE are
  RE2's `(?m:^)` and `(?m:$)`;
- `\\b` is RE2's ASCII `\\b`: the same as `re`'s under ASCII, and under Unicode for ASCII texts;
- lone surrogates (promptfoo's UTF-16 code units) are swapped with plane-15 code points, which
  RE2's UTF-8 can carry, on both sides.

What RE2 cannot express (backreferences, lookaround, atomic groups, possessive repeats,
conditionals, repeats over 1,000, and the text-dependent cases above) runs on Python's `re`
itself, in a helper process (one per evalsite process, started when first needed): at most
`FALLBACK_SECONDS` per match on at most `FALLBACK_MAX_CHARS` characters, the process killed
and started afresh when a match runs past it. Past either bound `PatternBoundExceeded` is
raised and the caller records it as the score's error. A thread running `re` cannot be
stopped, and a signal reaches only the main thread; a process can be killed. (The `regex`
module's `timeout` was measured too: its `\\w` and `\\b` follow Unicode's word definition,
combining marks included, so scores would change.)
"""

from __future__ import annotations

import _sre
import array
import atexit
import functools
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from re import _casefix as casefix  # type: ignore[attr-defined]
from re import _compiler as sre_compile  # type: ignore[attr-defined]
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any, Literal

import re2

FALLBACK_SECONDS = 0.5  # of one backtracking match, wall time
FALLBACK_MAX_CHARS = 1_000_000  # of text a backtracking pattern is run on
HELPER_MEMORY = 1 << 30  # the backtracking process's address space, bytes
HELPER_START_SECONDS = 10.0  # for the helper process to start (not counted in a match's time)
RE2_MAX_MEM = 32 << 20  # per compiled pattern; a program larger than this falls back

MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_SWAP_BASE = 0xF0000  # plane 15 (private use): where surrogates go for RE2, and back
_SWAP_END = _SWAP_BASE + _SURROGATES[1] - _SURROGATES[0]
_HAS_SURROGATE = re.compile("[\ud800-\udfff]")
_HAS_SWAP_TARGET = re.compile(f"[{chr(_SWAP_BASE)}-{chr(_SWAP_END)}]")
_SWAP = {**{c: c - _SURROGATES[0] + _SWAP_BASE for c in range(_SURROGATES[0], _SURROGATES[1] + 1)},
         **{c: c - _SWAP_BASE + _SURROGATES[0] for c in range(_SWAP_BASE, _SWAP_END + 1)}}

Engine = Literal["re2", "backtracking"]
Intervals = tuple[tuple[int, int], ...]


class PatternBoundExceeded(Exception):
    """Matching a pattern RE2 cannot run went past evalsite's bound (time or text length)."""


@dataclass(frozen=True, slots=True)
class Found:
    """A match: where it is, what it matched (group 0) and its groups (None where a group
    took no part), numbered as `re` numbers them."""

    start: int
    end: int
    text: str
    groups: tuple[str | None, ...] = ()

    def group(self, number: int = 0) -> str | None:
        return self.text if number == 0 else self.groups[number - 1]


class _NotRegular(Exception):
    """A piece of the pattern RE2 has no equivalent for."""


# --- Sets of code points, as Python's `re` has them ----------------------------------------------


def _normalise(ranges: Iterable[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def _complement(ranges: Intervals) -> Intervals:
    out, start = [], 0
    for lo, hi in ranges:
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def _every_code_point() -> str:
    """A text of every code point, in order, built from their UTF-32 encoding: 4 MB, where
    joining a million one-character strings held 80 MB at once."""
    codes = array.array("I" if array.array("I").itemsize == 4 else "L", range(MAX_CODE_POINT + 1))
    return str(memoryview(codes).cast("B"), f"utf-32-{sys.byteorder[0]}e", "surrogatepass")


@functools.cache
def _categories() -> dict[tuple[str, bool], Intervals]:
    """The code points `\\d`, `\\s`, `\\w` and their negations match, ASCII or Unicode, as
    `re` itself finds them in a text of every code point (once per process: 0.3 s)."""
    everything = _every_code_point()
    return {(escape, ascii_only): tuple((m.start(), m.end() - 1) for m in re.finditer(
                f"[{escape}]+", everything, re.ASCII if ascii_only else 0))
            for escape in (r"\d", r"\D", r"\s", r"\S", r"\w", r"\W") for ascii_only in (False, True)}


def _category(escape: str, ascii_only: bool) -> Intervals:
    return _categories()[escape, ascii_only]


_CATEGORY_ESCAPES = {
    sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\D",
    sre.CATEGORY_SPACE: r"\s", sre.CATEGORY_NOT_SPACE: r"\S",
    sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\W",
}


@functools.cache
def _case_candidates(ascii_only: bool) -> tuple[int, ...]:
    """Every code point whose match can change under IGNORECASE: the cased ones, what they
    lowercase to, and `re`'s extra equivalences (dotless i, long s, the Kelvin sign, ...).
    Any other character matches a class or literal under IGNORECASE exactly when it does
    without it (the tests check every code point)."""
    if ascii_only:
        return tuple(range(ord("A"), ord("Z") + 1)) + tuple(range(ord("a"), ord("z") + 1))
    cased = [c for c in range(MAX_CODE_POINT + 1) if _sre.unicode_iscased(c)]
    extra = {c for key, values in casefix._EXTRA_CASES.items() for c in (key, *values)}
    return tuple(sorted({*cased, *(_sre.unicode_tolower(c) for c in cased), *extra}))


def _set_without_case(op: Any, av: Any, flags: int) -> Intervals:
    if op is sre.LITERAL:
        return ((av, av),)
    if op is sre.NOT_LITERAL:
        return _complement(((av, av),))
    if op is sre.ANY:
        return ((0, MAX_CODE_POINT),) if flags & sre.SRE_FLAG_DOTALL else _complement(((10, 10),))
    negated = bool(av) and av[0][0] is sre.NEGATE
    members: list[tuple[int, int]] = []
    for item_op, item_av in av[1 if negated else 0:]:
        if item_op is sre.LITERAL:
            members.append((item_av, item_av))
        elif item_op is sre.RANGE:
            members.append(item_av)
        elif item_op is sre.CATEGORY and item_av in _CATEGORY_ESCAPES:
            members.extend(_category(_CATEGORY_ESCAPES[item_av], bool(flags & sre.SRE_FLAG_ASCII)))
        else:
            raise _NotRegular(f"class member {item_op}")
    ranges = _normalise(members)
    return _complement(ranges) if negated else ranges


def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


@functools.lru_cache(maxsize=4096)
def _char_set(op: Any, av: Any, flags: int) -> Intervals:
    """The code points one single-character item (a literal, a class, `.`) matches under
    `flags`, exactly as `re` matches them."""
    plain = _set_without_case(op, av, flags)
    if not flags & sre.SRE_FLAG_IGNORECASE or op is sre.ANY:
        return plain
    ascii_only = bool(flags & sre.SRE_FLAG_ASCII)
    state = sre_parse.State()
    state.flags = flags
    item = sre_compile.compile(sre_parse.SubPattern(state, [(op, list(av) if isinstance(av, tuple) else av)]),
                               flags)
    candidates = _case_candidates(ascii_only)
    # Outside the candidates the set is `plain`; on them, whatever `re` says.
    outside = _subtract(plain, _normalise((c, c) for c in candidates))
    return _normalise([*outside, *((c, c) for c in candidates if item.fullmatch(chr(c)))])


def _subtract(ranges: Intervals, removed: Intervals) -> Intervals:
    return _intersect(ranges, _complement(removed))


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


# --- The translation -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Set:
    ranges: Intervals


@dataclass(frozen=True)
class _Translation:
    pieces: tuple[str | _Set, ...]
    needs_ascii_text: bool  # a Unicode `\b` / `\B`: RE2's is ASCII
    needs_no_final_newline: bool  # a `$` without MULTILINE
    # No group inside a repeat: where one is, `re` and RE2 can keep different iterations in it
    # (`re` keeps an empty last one), though the match itself is the same.
    groups_exact: bool

    def render(self, swapped: bool) -> str:
        return "".join(p if isinstance(p, str) else _render_set(p.ranges, swapped) for p in self.pieces)


def _render_set(ranges: Intervals, swapped: bool) -> str:
    surrogates = (_SURROGATES,)
    if swapped:  # the text's surrogates are in plane 15 now, and it has no plane-15 characters of its own
        moved = [(lo - _SURROGATES[0] + _SWAP_BASE, hi - _SURROGATES[0] + _SWAP_BASE)
                 for lo, hi in _intersect(ranges, surrogates)]
        ranges = _normalise([*_subtract(_subtract(ranges, surrogates), ((_SWAP_BASE, _SWAP_END),)), *moved])
    else:  # a text without surrogates: they never match, and UTF-8 cannot say them
        ranges = _subtract(ranges, surrogates)
    if not ranges:
        return r"[^\x00-\x{10FFFF}]"
    if ranges == ((0, MAX_CODE_POINT),):
        return r"(?s:.)"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0])
    return "[" + "".join(_char(lo) if lo == hi else f"{_char(lo)}-{_char(hi)}" for lo, hi in ranges) + "]"


def _char(code: int) -> str:
    if code < 128 and chr(code).isalnum():
        return chr(code)
    return f"\\x{{{code:X}}}"


class _Translator:
    def __init__(self) -> None:
        self.pieces: list[str | _Set] = []
        self.needs_ascii_text = False
        self.needs_no_final_newline = False
        self.groups_exact = True
        self._repeats = 0

    def emit(self, items: Sequence[tuple[Any, Any]], flags: int) -> None:
        out = self.pieces
        for op, av in items:
            if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
                out.append(_Set(_char_set(op, _hashable(av), flags & _SET_FLAGS)))
            elif op is sre.AT:
                out.append(self.at(av, flags))
            elif op is sre.BRANCH:
                out.append("(?:")
                for index, alternative in enumerate(av[1]):
                    if index:
                        out.append("|")
                    self.emit(alternative, flags)
                out.append(")")
            elif op is sre.SUBPATTERN:
                group, add, remove, inner = av
                if group is not None and self._repeats:
                    self.groups_exact = False
                if add & _TYPE_FLAGS:  # `(?a:...)` leaves Unicode, as `re` combines scoped flags
                    flags &= ~_TYPE_FLAGS
                out.append("(?:" if group is None else "(")  # groups numbered by their "(" in both
                self.emit(inner, (flags | add) & ~remove)
                out.append(")")
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
                low, high, inner = av
                out.append("(?:")
                self._repeats += high is sre.MAXREPEAT or high > 1
                self.emit(inner, flags)
                self._repeats -= high is sre.MAXREPEAT or high > 1
                out.append(")")
                out.append(f"{{{low},}}" if high is sre.MAXREPEAT else f"{{{low},{high}}}")
                if op is sre.MIN_REPEAT:
                    out.append("?")
            elif op is sre.ASSERT_NOT and not av[1]:  # `(?!)`: never
                out.append(_Set(()))
            elif op is sre.ASSERT and not av[1]:  # `(?=)`: always
                continue
            else:
                raise _NotRegular(str(op))

    def at(self, code: Any, flags: int) -> str:
        multiline = flags & sre.SRE_FLAG_MULTILINE
        if code is sre.AT_BEGINNING:
            return "(?m:^)" if multiline else r"\A"
        if code is sre.AT_BEGINNING_STRING:
            return r"\A"
        if code is sre.AT_END:
            if multiline:
                return "(?m:$)"
            self.needs_no_final_newline = True
            return r"\z"
        if code is sre.AT_END_STRING:
            return r"\z"
        if code in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY):
            if not flags & sre.SRE_FLAG_ASCII:
                self.needs_ascii_text = True
            return r"\b" if code is sre.AT_BOUNDARY else r"\B"
        raise _NotRegular(str(code))


_TYPE_FLAGS = sre.SRE_FLAG_ASCII | sre.SRE_FLAG_LOCALE | sre.SRE_FLAG_UNICODE
_SET_FLAGS = sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_DOTALL | sre.SRE_FLAG_ASCII | sre.SRE_FLAG_UNICODE


def _translate(compiled: re.Pattern[str]) -> _Translation | None:
    """RE2's form of a pattern `re` compiled, or None when it has none."""
    parsed = sre_parse.parse(compiled.pattern, compiled.flags)
    translator = _Translator()
    try:
        translator.emit(list(parsed), parsed.state.flags)
    except (_NotRegular, RecursionError):
        return None
    return _Translation(tuple(translator.pieces), translator.needs_ascii_text, translator.needs_no_final_newline,
                        translator.groups_exact)


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False
    return options


# --- Python's `re` where RE2 cannot go: in a process that can be stopped ----------------------------

# The helper: Python's own `re` (isolated: no site, no project), a request per line, its address
# space capped so a backtracking stack cannot eat the machine.
_HELPER = """
import json, re, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
stdin, cache = sys.stdin.buffer, {}
sys.stdout.write("ready\\n")
sys.stdout.flush()
for line in stdin:
    flags, full, pattern_bytes, text_bytes = json.loads(line)
    pattern = stdin.read(pattern_bytes).decode("utf-8", "surrogatepass")
    text = stdin.read(text_bytes).decode("utf-8", "surrogatepass")
    try:
        if len(cache) > 256:
            cache.clear()
        compiled = cache.get((pattern, flags)) or cache.setdefault((pattern, flags), re.compile(pattern, flags))
        found = (compiled.fullmatch if full else compiled.search)(text)
        answer = [found.span(i) for i in range(compiled.groups + 1)] if found else None
    except (MemoryError, RecursionError) as exc:
        answer = type(exc).__name__
    sys.stdout.write(json.dumps(answer) + "\\n")
    sys.stdout.flush()
""".replace("MEMORY", str(HELPER_MEMORY))


class _Helper:
    """One `re` process per evalsite process, started when first needed, killed when a match
    runs past `FALLBACK_SECONDS` (and started again for the next)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def match(self, pattern: str, flags: int, text: str, full: bool) -> list[tuple[int, int]] | None:
        """The spans of group 0 and of each group, or None when there is no match."""
        # The texts as UTF-8 that keeps lone surrogates (promptfoo's UTF-16 code units) as they are.
        pattern_bytes, text_bytes = (t.encode("utf-8", "surrogatepass") for t in (pattern, text))
        request = b"".join([json.dumps([flags, full, len(pattern_bytes), len(text_bytes)]).encode() + b"\n",
                            pattern_bytes, text_bytes])
        with self._lock:
            for attempt in (1, 2):
                process = self._started()
                try:
                    assert process.stdin is not None
                    process.stdin.write(request)
                    process.stdin.flush()
                except (BrokenPipeError, OSError):
                    self._stop()  # it died since the last request: once more with a new one
                    if attempt == 2:
                        raise PatternBoundExceeded("the pattern could not be run: its helper process "
                                                   "does not start") from None
                    continue
                line = self._answer(process, FALLBACK_SECONDS)
                if line is None:
                    self._stop()
                    raise PatternBoundExceeded(
                        f"the pattern needs backtracking (RE2 cannot run it on this text) and did not finish "
                        f"within {FALLBACK_SECONDS} s; a pattern without backreferences or lookaround runs in "
                        f"linear time")
                answer = json.loads(line)
                if isinstance(answer, str):
                    raise PatternBoundExceeded(f"the pattern needs backtracking and ran out of memory ({answer})")
                return None if answer is None else [(a, b) for a, b in answer]
        raise AssertionError("unreachable")

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, close_fds=True)
            # Its start-up is not the pattern's time: the bound begins once it says it is ready.
            if self._answer(self._process, HELPER_START_SECONDS) != b"ready\n":
                self._stop()
                raise PatternBoundExceeded("the pattern needs backtracking, and its helper process did not start")
        return self._process

    @staticmethod
    def _answer(process: subprocess.Popen[bytes], seconds: float) -> bytes | None:
        """One line of the helper's answer, or None when it does not come within `seconds`."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        deadline = time.monotonic() + seconds
        chunks: list[bytes] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None  # it died (its memory cap)
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                return b"".join(chunks)

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            for pipe in (self._process.stdin, self._process.stdout):
                if pipe is not None:
                    pipe.close()
            self._process = None

    def close(self) -> None:
        with self._lock:
            self._stop()


_helper = _Helper()
atexit.register(_helper.close)


# --- Bounded patterns ----------------------------------------------------------------------------


class BoundedPattern:
    """A user's pattern, compiled once: `search` and `fullmatch` as `re` has them, through RE2
    where it can say the pattern for this text, else through `re` in the helper process within
    the bounds. With `groups`, each match's groups are `re`'s too (a pattern with a group
    inside a repeat then takes the helper); without, `Found.groups` may differ from them."""

    def __init__(self, pattern: str, flags: int = 0, groups: bool = False) -> None:
        self.compiled = re.compile(pattern, flags)  # `re`'s errors, as before
        self.pattern = pattern
        self.flags = flags
        translation = _translate(self.compiled)
        self._translation = None if translation is None or (groups and not translation.groups_exact) else translation
        self._re2: dict[bool, Any] = {}

    @property
    def regular(self) -> bool:
        """Whether RE2 runs this pattern (on texts it has no condition on)."""
        return self._translation is not None and self._program(False) is not None

    def engine_for(self, text: str) -> Engine:
        return "re2" if self._plan(text) is not None else "backtracking"

    def search(self, text: str) -> Found | None:
        return self._run(text, full=False)

    def fullmatch(self, text: str) -> Found | None:
        return self._run(text, full=True)

    def _program(self, swapped: bool) -> Any:
        if swapped not in self._re2:
            assert self._translation is not None
            try:
                self._re2[swapped] = re2.compile(self._translation.render(swapped), _re2_options())
            except re2.error:  # too big (a repeat past 1,000, a program past RE2_MAX_MEM)
                self._re2[swapped] = None
        return self._re2[swapped]

    def _plan(self, text: str) -> tuple[Any, bool] | None:
        """(the RE2 program, whether the text's surrogates are swapped), or None."""
        t = self._translation
        if t is None:
            return None
        ascii_text = text.isascii()
        if t.needs_ascii_text and not ascii_text:
            return None
        if t.needs_no_final_newline and text.endswith("\n"):
            return None
        swapped = not ascii_text and _HAS_SURROGATE.search(text) is not None
        if swapped and _HAS_SWAP_TARGET.search(text) is not None:
            return None
        program = self._program(swapped)
        return None if program is None else (program, swapped)

    def _run(self, text: str, *, full: bool) -> Found | None:
        plan = self._plan(text)
        if plan is not None:
            program, swapped = plan
            subject = text.translate(_SWAP) if swapped else text
            match = program.fullmatch(subject) if full else program.search(subject)
            if match is None:
                return None
            return _found(text, [match.span(i) for i in range(self.compiled.groups + 1)])
        if len(text) > FALLBACK_MAX_CHARS:
            raise PatternBoundExceeded(
                f"the pattern needs backtracking (RE2 cannot run it on this text), which evalsite runs on at most "
                f"{FALLBACK_MAX_CHARS:,} characters; this text has {len(text):,}")
        spans = _helper.match(self.pattern, self.compiled.flags, text, full)
        return None if spans is None else _found(text, spans)


def _found(text: str, spans: Sequence[tuple[int, int]]) -> Found:
    (start, end), groups = spans[0], spans[1:]
    return Found(start, end, text[start:end], tuple(None if a < 0 else text[a:b] for a, b in groups))


@functools.lru_cache(maxsize=256)
def compile_bounded(pattern: str, flags: int = 0, groups: bool = False) -> BoundedPattern:
    """The bounded form of `re.compile(pattern, flags)`; raises `re.error` as it does.
    `groups`: the caller reads the groups of a match, not only where it is."""
    return BoundedPattern(pattern, flags, groups)
