"""Scoring untrusted outputs, worst cases beside typical ones (issue 27): UiPath JSON
similarity's edit distance on long string leaves, and ANY_ORDER's tool-call matching on long
and adversarial trajectories. In-process, no database.

    python bench/scoring_bench.py [--quick] [--json]

Each worst case is printed with the typical case measured in the same run as its floor, and
the ratio. Targets: a 10,000-character leaf pair under 50 ms; a 500-call ANY_ORDER alignment
under 1 s; the adversarial matching stops at its work cap (evaluators/diffing.py).
Before this (pure-Python Levenshtein, recursive matching): 3,000-character leaves 2.0 s,
500 calls ~4 s, a 1,100-call displacement chain RecursionError.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluations.evaluators.diffing import _max_matching, align
from evaluations.evaluators.output import json_similarity
from evaluations.schemas.evalset import MatchType, ToolCall
from evaluations.schemas.outputs import OutputToolCall


def best(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def _text(n: int, seed: str) -> str:
    words = ["flight", "Tokyo", "東京", "passenger", "window", "🙂", "refund", "Lisbon"]
    out, i = [], 0
    while sum(len(w) + 1 for w in out) < n:
        out.append(words[(i * 7 + len(seed)) % len(words)] + seed[i % len(seed)])
        i += 1
    return " ".join(out)[:n]


def _calls(n: int, shift: int) -> tuple[list[ToolCall], list[OutputToolCall]]:
    expected = [ToolCall(name="search", args={"q": i}) for i in range(n)]
    actual = [OutputToolCall(name="search", args={"q": (i + shift) % (n + 1)}) for i in reversed(range(n))]
    return expected, actual


def _chain(n: int) -> Callable[[int, int], bool]:
    return lambda i, j: j == 0 if i == n - 1 else j in (i, i + 1)


def measure(quick: bool = False) -> dict[str, float]:
    runs = 3 if quick else 5
    typical_doc = {f"k{i}": _text(30, f"t{i}") for i in range(10)}
    typical_other = {f"k{i}": _text(32, f"u{i}") for i in range(10)}
    long_a, long_b = _text(10_000, "abc"), _text(10_000, "abd")
    mid_a, mid_b = _text(3_000, "abc"), _text(3_000, "xyz")
    small_e, small_a = _calls(4, 1)
    big_e, big_a = _calls(500, 1)
    chain = 1_200 if quick else 3_000
    return {
        "similarity_typical_s": best(lambda: json_similarity(typical_doc, typical_other), runs * 20),
        "similarity_3k_s": best(lambda: json_similarity({"v": mid_a}, {"v": mid_b}), runs),
        "similarity_10k_s": best(lambda: json_similarity({"v": long_a}, {"v": long_b}), runs),
        "any_order_typical_s": best(lambda: align(small_e, small_a, MatchType.ANY_ORDER), runs * 20),
        "any_order_500_s": best(lambda: align(big_e, big_a, MatchType.ANY_ORDER), runs),
        "chain_calls": chain,
        "chain_s": best(lambda: _max_matching(chain, chain, _chain(chain), {}), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    r = measure(args.quick)
    if args.json:
        print(json.dumps(r))
        return
    floor_s, floor_a = r["similarity_typical_s"], r["any_order_typical_s"]
    print(f"JSON similarity, 10 leaves of ~30 chars (typical, floor): {floor_s * 1000:.3f} ms")
    print(f"JSON similarity, one 3,000-char leaf pair:   {r['similarity_3k_s'] * 1000:.2f} ms "
          f"({r['similarity_3k_s'] / floor_s:.0f}x the floor; was 2.0 s)")
    print(f"JSON similarity, one 10,000-char leaf pair:  {r['similarity_10k_s'] * 1000:.2f} ms "
          f"({r['similarity_10k_s'] / floor_s:.0f}x the floor; target < 50 ms; was ~20 s)")
    print(f"ANY_ORDER, 4 calls (typical, floor):          {floor_a * 1000:.3f} ms")
    print(f"ANY_ORDER, 500 calls of one name:             {r['any_order_500_s']:.3f} s "
          f"({r['any_order_500_s'] / floor_a:.0f}x the floor; target < 1 s; was ~4 s)")
    print(f"matching, a {r['chain_calls']:.0f}-call displacement chain: {r['chain_s']:.3f} s "
          "(was RecursionError from ~1,100)")


if __name__ == "__main__":
    main()
