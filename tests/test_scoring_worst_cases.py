"""Agents' outputs are untrusted, so scoring one must not cost seconds or crash: UiPath JSON
similarity's edit distance (evaluators/output.py, rapidfuzz in C) and ANY_ORDER's maximum
matching (evaluators/diffing.py, iterative with a work cap), each checked against the pure
Python form it replaced on generated inputs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from evaluations.evaluators import diffing, output
from evaluations.evaluators.diffing import _max_matching
from evaluations.evaluators.output import json_similarity, levenshtein

# --- The edit distance ------------------------------------------------------------------------


def reference_levenshtein(source: str, target: str) -> int:
    """The pure-Python dynamic programme evalsite used before (and UiPath's `_levenshtein` is)."""
    if not source:
        return len(target)
    if not target:
        return len(source)
    previous = list(range(len(target) + 1))
    for i, s_char in enumerate(source, 1):
        current = [i]
        for j, t_char in enumerate(target, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (s_char != t_char)))
        previous = current
    return previous[-1]


# Any code point, lone surrogates included (JSON can carry "\ud800"), and a small alphabet so
# that the strings share runs and the distance is not simply the longer length.
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=40)
close_text = st.text(st.sampled_from("ab東京🙂\u0301\ud800 "), max_size=40)


@settings(max_examples=400, deadline=None)
@given(pair=st.tuples(any_text, any_text) | st.tuples(close_text, close_text))
def test_the_distance_is_the_same_integer_as_the_pure_python_one(pair: tuple[str, str]) -> None:
    source, target = pair
    assert levenshtein(source, target) == reference_levenshtein(source, target)
    assert levenshtein(target, source) == levenshtein(source, target)


@settings(max_examples=100, deadline=None)
@given(edit=st.tuples(close_text, st.integers(0, 40), close_text))
def test_an_edited_copy_is_as_far_as_the_pure_python_one_says(edit: tuple[str, int, str]) -> None:
    base, cut, insert = edit
    edited = base[:cut] + insert + base[cut + len(insert) // 2:]
    assert levenshtein(base, edited) == reference_levenshtein(base, edited)


def _python_lines_in(module: Any, work: Callable[[], object]) -> int:
    """How many lines of `module` ran during `work`: the work done in Python, not the time."""
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename != module.__file__:
            return None
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def test_long_untrusted_strings_cost_no_python_loop_per_character_pair() -> None:
    expected, actual = "a" * 400 + "東京" * 50, "b" * 400 + "東京" * 60
    lines = _python_lines_in(output, lambda: json_similarity({"v": expected}, {"v": actual}))
    assert lines < 200, lines  # the pure loop ran ~250,000 lines here
    score = json_similarity({"v": expected}, {"v": actual})[0]
    assert score == 1 - reference_levenshtein(expected, actual) / len(actual)


# --- The maximum matching ----------------------------------------------------------------------


def reference_matching(n: int, m: int, edge: Callable[[int, int], bool], fixed: dict[int, int]) -> dict[int, int]:
    """The recursive Kuhn evalsite used before (RecursionError past ~1,000 displaced calls)."""
    owner = dict(fixed)
    locked = set(fixed)
    fixed_expected = set(fixed.values())

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(m):
            if j in seen or j in locked or not edge(i, j):
                continue
            seen.add(j)
            if j not in owner or augment(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(n):
        if i not in fixed_expected:
            augment(i, set())
    return owner


@st.composite
def graphs(draw: Any) -> tuple[int, int, set[tuple[int, int]], dict[int, int]]:
    n, m = draw(st.integers(0, 8)), draw(st.integers(0, 8))
    pairs = [(i, j) for i in range(n) for j in range(m)]
    edges = set(draw(st.lists(st.sampled_from(pairs), unique=True))) if pairs else set()
    fixed: dict[int, int] = {}
    for i, j in sorted(edges):
        if j not in fixed and i not in fixed.values() and draw(st.integers(0, 4)) == 0:
            fixed[j] = i
    return n, m, edges, fixed


@settings(max_examples=600, deadline=None)
@given(graph=graphs())
def test_the_iterative_matching_pairs_exactly_as_the_recursive_one(
        graph: tuple[int, int, set[tuple[int, int]], dict[int, int]]) -> None:
    n, m, edges, fixed = graph
    edge = lambda i, j: (i, j) in edges  # noqa: E731
    assert _max_matching(n, m, edge, fixed) == reference_matching(n, m, edge, fixed)


def _chain(n: int) -> Callable[[int, int], bool]:
    """Expected i < n-1 matches actual i and i+1; the last expected call matches actual 0 only,
    so placing it displaces every earlier pair in turn: an augmenting path n calls long."""
    return lambda i, j: j == 0 if i == n - 1 else j in (i, i + 1)


def test_a_chain_of_displaced_calls_longer_than_the_stack_is_matched_in_full() -> None:
    n = 1_200  # the recursive form raised RecursionError from ~1,000 (and took seconds)
    owner = _max_matching(n, n, _chain(n), {})
    assert len(owner) == n  # a perfect matching: the last call took actual 0, every other moved up
    assert owner[0] == n - 1 and all(owner[i + 1] == i for i in range(n - 1))


def test_the_matching_stops_at_its_work_cap_with_a_valid_pairing() -> None:
    n = 400
    checks = 0

    def edge(i: int, j: int) -> bool:
        nonlocal checks
        checks += 1
        return (i + j) % 3 != 0  # dense, so every search walks far

    owner = _max_matching(n, n, edge, {}, work_cap=5_000)
    assert checks <= 5_000 + n * n  # the capped search, then one greedy pass at most
    assert len(set(owner.values())) == len(owner)  # each expected call paired once
    assert all(edge(i, j) for j, i in owner.items())
    assert len(owner) >= n // 2  # greedy pairing is maximal: at least half of a maximum


def test_the_cap_is_far_above_what_real_trajectories_need() -> None:
    n = 60
    full = lambda i, j: True  # noqa: E731
    assert len(_max_matching(n, n, full, {})) == n
    assert diffing.MATCHING_WORK_CAP >= 1_000_000
