"""Users' regular expressions in bounded time (evaluations/patterns.py): RE2 gives the matches
Python's `re` gives, wherever RE2 runs the pattern, and what only backtracking can run stops
at its bound."""

from __future__ import annotations

import random
import re

import pytest

from evaluations import patterns
from evaluations.evaluators.promptfoo import js_regex
from evaluations.interop.promptfoo.js import utf16
from evaluations.patterns import PatternBoundExceeded, compile_bounded

TEXTS = [
    "", "a", "abc", "The weather in Paris is sunny", "the cat sat on the mat.\n", "line one\nline two\n\nend",
    "Zürich zürich café naïve", "İstanbul \u0131iIİ", "STRASSE straße ẞ", "Kelvin \u212a k K", "ΣΟΦΟΣ σοφος ς",
    "東京の天気 2024", "Погода ПАРИЖ", "١٢٣ ٤٥ digits", "tab\there\x0bvt\x1cfs\x1dgs\x1erus\x1fus",
    "\u00a0nbsp\u2028ls\u2029ps\u3000ideo", "e\u0301 combining", "😀 emoji \U0001d49cbc", "\r\nwindows\r\n",
    "x_y well-known don't 1.5 — !! ?", "$^()[]{}.*+?|\\/", "aaaaaaaaaaaaaaaaaaaa!", "2024-11-05T10:20:30Z",
    "user@example.com other@test.org", "ǅǆǄ ǈ \u017f µ \u039c \u03b9 ͅ ΐ", "ﬁne \uff12\uff10", "\U000f0001 private", "   \n",
]

ORDINARY = [
    r"\d+", r"^\w+", r"\w+$", r"\s", r"\S+\s\S+", r"^.$", r".", r"^$", r"[A-Z]", r"[^a-z\s]+", r"\bthe\b",
    r"Paris|東京", r"^[\s\S]*$", r"\d{4}", r"[\d.]+$", r"é", r"😀", r"^.{2}$", r"\W", r"[\w\s]+", r"\$", r"\.",
    r"(?:the|in)\s+\w+", r"^\s*$", r"\n", r"[\u00e0-\u00ff]", r"colou?r", r"a{2,3}?", r"(\w+)@(\w+)\.(com|org)",
    r"^(?P<year>\d{4})-(?P<month>\d\d)", r"[^\W\d_]+", r"\D+", r"(?i:ab)c", r"[]a]", r"[\]\\-]+",
    r"\x41\u00e9\U0001F600", r"\N{LATIN SMALL LETTER E WITH ACUTE}", r"(a|ab)(c|bcd)(d*)", r"(?:a*)*b", r"x*", r"",
    r"\b", r"\B\w", r"^", r"$", r"\Aabc\Z", r"\Z", r"(?i)paris", r"(?i)strasse", r"(?i)[a-z]+", r"(?i)istanbul",
    r"(?i)σοφος", r"(?i)k", r"(?i)[^k]+", r"(?i)ß", r"(?i)ǆ", r"(?i)µ", r"(?m)^\w+$", r"(?m)^$", r"(?s)a.*z",
    r"(?s).+", r"(?x) \d+ \s* # a comment", r"(?a)\w+", r"(?a)\d", r"(?a)\s+", r"(?a)\bcaf\b", r"(?ai)k",
    r"(?i)[\u0370-\u03ff]+", r"[^\d\s]+", r"(?m)\w+$", r"(a+)+$", r"(\w+\s?)*$", r"^(a|aa)+$", r"(.*a){8}",
    r"[\u0300-\u036f]", r"\u2028", r"(?a:\w)+\w", r"(?i)(?-i:a)b", r"a{0}", r"a{,2}b", r"(?:)", r"[😀-🙏]",
]


def _same(found: patterns.Found | None, expected: re.Match[str] | None, groups: bool = False) -> None:
    assert (found is None) == (expected is None)
    if found is not None and expected is not None:
        assert (found.start, found.end, found.text) == (expected.start(), expected.end(), expected.group(0))
        if groups:
            assert found.groups == expected.groups()


@pytest.mark.parametrize("pattern", ORDINARY)
def test_every_ordinary_pattern_matches_as_re_does(pattern: str) -> None:
    bounded, with_groups = compile_bounded(pattern), compile_bounded(pattern, groups=True)
    for text in TEXTS:
        _same(bounded.search(text), re.search(pattern, text))
        _same(bounded.fullmatch(text), re.fullmatch(pattern, text))
        if with_groups.regular:  # else the groups are `re`'s own, from the helper
            _same(with_groups.search(text), re.search(pattern, text), groups=True)


@pytest.mark.parametrize("flags", [re.IGNORECASE, re.MULTILINE, re.DOTALL, re.ASCII, re.IGNORECASE | re.ASCII,
                                   re.IGNORECASE | re.MULTILINE | re.DOTALL, re.VERBOSE])
def test_flags_given_as_arguments_mean_what_they_mean_to_re(flags: int) -> None:
    for pattern in ORDINARY:
        if flags & re.ASCII and "(?a" in pattern:
            continue
        bounded = compile_bounded(pattern, flags)
        for text in TEXTS:
            _same(bounded.search(text), re.search(pattern, text, flags))


def test_ordinary_patterns_run_on_re2() -> None:
    """Only what RE2 cannot say backtracks: the text conditions (a Unicode `\\b` on non-ASCII
    text, `$` before a final newline) and nothing else of the corpus."""
    for pattern in ORDINARY:
        bounded = compile_bounded(pattern)
        assert bounded.regular, pattern
        assert bounded.engine_for("plain ascii text") == "re2", pattern
    assert compile_bounded(r"\bthe\b").engine_for("the café") == "backtracking"
    assert compile_bounded(r"(?a)\bthe\b").engine_for("the café") == "re2"
    assert compile_bounded(r"end$").engine_for("the end\n") == "backtracking"
    assert compile_bounded(r"(?m)end$").engine_for("the end\n") == "re2"
    assert compile_bounded(r"end\Z").engine_for("the end\n") == "re2"
    # `re` keeps an empty last iteration in a repeated group, RE2 the last non-empty one: the
    # match is the same, and a caller that reads groups gets `re`'s.
    assert compile_bounded(r"(\S*)*").engine_for("ab") == "re2"
    assert compile_bounded(r"(\S*)*", groups=True).engine_for("ab") == "backtracking"
    assert compile_bounded(r"(\S*)*", groups=True).search("ab") == patterns.Found(0, 2, "ab", ("",))
    assert compile_bounded(r"(\w+)@(\w+)", groups=True).engine_for("a@b") == "re2"


@pytest.mark.parametrize("item", [r"\w", r"\W", r"\d", r"\s", r"\S", r".", r"(?s).", r"(?i)k", r"(?i)[a-z]",
                                  r"(?i)[^s]", r"(?i)\w", r"(?ai)k", r"(?i)i", r"[^\d\s]", r"(?a)\W"])
def test_a_single_character_item_matches_the_same_code_points(item: str) -> None:
    bounded = compile_bounded(item)
    python = re.compile(item)
    codes = [*range(0xD800), *range(0xE000, 0x10000), *range(0x10000, 0x110000, 61), 0xF0000, 0x10FFFF]
    wrong = [hex(c) for c in codes if (bounded.fullmatch(chr(c)) is None) != (python.fullmatch(chr(c)) is None)]
    assert wrong == [], (item, wrong[:20])
    for text in ("\ud800", "a\udfffb", "\ud83d\ude00"):  # lone surrogates: promptfoo's UTF-16 code units
        _same(bounded.search(text), python.search(text))


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    atoms = ["a", "b", "é", "K", "s", "ß", "\u0131", " ", r"\.", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", ".", "[a-c]",
             "[^ab]", r"[\w.]", r"[^\s]", "[é-ü]", r"\b", "^", "$", r"\A", r"\Z", "東", "😀", r"\n", "(?i:k)"]
    parts = []
    for _ in range(rng.randint(1, 4)):
        if depth < 2 and rng.random() < 0.25:
            inner = "|".join(_random_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3)))
            atom = rng.choice(["(", "(?:", f"(?P<g{rng.randint(0, 10**6)}>"]) + inner + ")"
        else:
            atom = rng.choice(atoms)
        if atom not in ("^", "$", r"\A", r"\Z", r"\b") and rng.random() < 0.4:
            atom += rng.choice(["*", "+", "?", "{2}", "{1,3}", "*?", "+?", "??", "{0,2}?"])
        parts.append(atom)
    return "".join(parts)


def test_random_patterns_from_ordinary_pieces_match_as_re_does() -> None:
    rng = random.Random(38)
    pool = "abKkséß \u0131İ.\n東😀\u017f1\t_"
    compared = 0
    for _ in range(600):
        pattern = _random_pattern(rng)
        flags = rng.choice([0, 0, re.I, re.M, re.S, re.A, re.I | re.A, re.I | re.M])
        try:
            python = re.compile(pattern, flags)
        except re.error:
            continue
        bounded, with_groups = compile_bounded(pattern, flags), compile_bounded(pattern, flags, groups=True)
        for _ in range(8):
            text = "".join(rng.choice(pool) for _ in range(rng.randint(0, 12)))
            _same(bounded.search(text), python.search(text))
            _same(bounded.fullmatch(text), python.fullmatch(text))
            _same(with_groups.search(text), python.search(text), groups=True)
            compared += 1
    assert compared > 3000


def test_promptfoo_regexes_match_as_their_python_translation_did() -> None:
    """The differential suite's JavaScript regexes, through js_regex, on UTF-16 code units."""
    regexes = [r"\d+", r"^\w+", r"\w+$", r"\s", r"\S+\s\S+", r"^.$", r".", r"^$", r"[A-Z]", r"[^a-z\s]+", r"\bthe\b",
               r"(?<d>\d)\k<d>", r"Paris|東京", r"^[\s\S]*$", r"\d{4}", r"[\d.]+$", r"\u6771", r"é", r"e\u0301", r"😀",
               r"^.{2}$", r"\W", r"[\w\s]+", r"\$", r"\.", r"a\/b", r"(?:the|in)\s+\w+", r"^\s*$", r"\n",
               r"[\u00e0-\u00ff]", r"[^\S]", r"[]", r"[^]", r"Z\u00fcrich"]
    for value in regexes:
        bounded = js_regex(utf16(value))
        python = re.compile(bounded.pattern, re.ASCII)
        for text in TEXTS:
            units = utf16(text)
            _same(bounded.search(units), python.search(units))
    assert js_regex(utf16(r"\d+")).engine_for(utf16("😀 42")) == "re2"  # surrogate pairs, swapped for RE2
    assert js_regex(utf16(r"(?<d>\d)\k<d>")).engine_for("11") == "backtracking"


def test_a_catastrophic_pattern_re2_can_say_is_linear() -> None:
    bounded = compile_bounded(r"(a+)+$")
    text = "a" * 50_000 + "!"  # `re` would need about 2^50,000 steps
    assert bounded.engine_for(text) == "re2"
    assert bounded.search(text) is None
    assert compile_bounded(r"^(\w+\s?)*$").fullmatch("word " * 10_000 + "!") is None


def test_a_catastrophic_pattern_only_backtracking_can_run_stops_at_its_bound() -> None:
    bounded = compile_bounded(r"^(?=(a|aa)+$)")  # lookahead: RE2 cannot say it
    assert not bounded.regular
    assert bounded.search("aaaa") is not None
    with pytest.raises(PatternBoundExceeded, match="did not finish within"):
        bounded.search("a" * 60 + "!")
    with pytest.raises(PatternBoundExceeded, match="at most 1,000,000 characters"):
        compile_bounded(r"(a)\1").search("x" * (patterns.FALLBACK_MAX_CHARS + 1))


def test_invalid_patterns_raise_re_errors_as_before() -> None:
    for pattern in ["(", "a{2,1}", r"\p{L}", "(?P<x>a)(?P<x>b)", "[b-a]"]:
        with pytest.raises(re.error):
            compile_bounded(pattern)


def test_the_text_of_every_code_point_is_every_code_point_in_order() -> None:
    # Built from UTF-32 (surrogates passed through) rather than joined one character at a time.
    everything = patterns._every_code_point()
    assert len(everything) == patterns.MAX_CODE_POINT + 1
    assert everything == "".join(map(chr, range(patterns.MAX_CODE_POINT + 1)))
