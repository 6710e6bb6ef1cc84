"""Trajectory-matching kernel benchmark: tool calls with arguments over synthetic cases, in-process.

    python bench/kernel_bench.py [--cases 100000] [--mismatch 0.2] [--runs 3] [--seed 7] [--evaluators]

Each case has 2-4 expected tool calls with realistic nested arguments (filters, date lists,
passenger objects); the actual calls equal them except in a `--mismatch` share of cases, which
drop a call, change a nested argument, swap two calls or add an extra call. Prints cases/s
(best of `--runs`) for:

- `match_trajectory` (IN_ORDER and EXACT): the native `trajectory_match` evaluator's core,
  alignment and argument diffs included;
- `adk_invocation_score` (EXACT): the per-invocation function of `tool_trajectory_avg_score`.

`--evaluators` also times the whole `score()` of both evaluators (one turn per case,
justifications built), for scale. Target (issue "Evaluation engine"): >= 100,000 cases/s for
the kernels.
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evaluations.evaluators.diffing import ArgRules
from evaluations.evaluators.trajectory import (
    AdkToolTrajectoryEvaluator,
    TrajectoryMatchEvaluator,
    adk_invocation_score,
    match_trajectory,
)
from evaluations.schemas.evalset import (
    CriterionConfig,
    EvalCase,
    Invocation,
    MatchType,
    MessageContent,
    ToolCall,
)
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput

CITIES = ["Tokyo", "Paris", "Lisbon", "Oslo", "Nairobi", "Lima", "Toronto", "Seoul", "Madrid", "Cairo"]


def _date(r: random.Random) -> str:
    return f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


TOOLS: dict[str, Callable[[random.Random], dict[str, object]]] = {
    "get_weather": lambda r: {"city": r.choice(CITIES), "units": r.choice(["metric", "imperial"])},
    "search_flights": lambda r: {
        "origin": r.choice(CITIES), "destination": r.choice(CITIES),
        "filters": {"dates": [_date(r), _date(r)], "max_stops": r.randint(0, 2),
                    "cabin": r.choice(["economy", "business"]),
                    "price": {"max": r.randint(200, 900), "currency": "EUR"}},
        "passengers": [{"type": "adult", "count": r.randint(1, 3)}, {"type": "child", "count": r.randint(0, 2)}],
    },
    "get_order": lambda r: {"order_id": str(r.randint(1000, 99999)), "include": ["items", "shipping"]},
    "cancel_order": lambda r: {"order_id": str(r.randint(1000, 99999)),
                               "reason": {"code": r.choice(["late", "damaged"]), "note": "customer request"}},
    "send_email": lambda r: {"to": f"user{r.randint(1, 999)}@example.com", "subject": "Your booking",
                             "body": "Hello, your booking is confirmed.", "cc": []},
}


def _mutate(r: random.Random, calls: list[dict[str, object]]) -> None:
    kind = r.choice(["drop", "arg", "swap", "extra"])
    if kind == "drop":
        calls.pop(r.randrange(len(calls)))
    elif kind == "swap":
        i = r.randrange(len(calls) - 1)
        calls[i], calls[i + 1] = calls[i + 1], calls[i]
    elif kind == "extra":
        name = r.choice(list(TOOLS))
        calls.insert(r.randrange(len(calls) + 1), {"name": name, "args": TOOLS[name](r)})
    else:
        call = calls[r.randrange(len(calls))]
        args = call["args"]
        assert isinstance(args, dict)
        filters = args.get("filters")
        if isinstance(filters, dict):
            filters["dates"][1] = _date(r)
        else:
            key = r.choice(list(args))
            args[key] = "changed"


def make_cases(count: int, mismatch: float, seed: int) -> list[tuple[list[ToolCall], list[OutputToolCall]]]:
    r = random.Random(seed)
    cases = []
    for _ in range(count):
        expected = []
        for _ in range(r.randint(2, 4)):
            name = r.choice(list(TOOLS))
            expected.append({"name": name, "args": TOOLS[name](r)})
        actual = copy.deepcopy(expected)
        if r.random() < mismatch:
            _mutate(r, actual)
        cases.append((
            [ToolCall(name=str(c["name"]), args=c["args"]) for c in expected],  # type: ignore[arg-type]
            [OutputToolCall(name=str(c["name"]), args=c["args"]) for c in actual],  # type: ignore[arg-type]
        ))
    return cases


def best_rate(label: str, runs: int, count: int, body: Callable[[], float]) -> None:
    best = min(_timed(body) for _ in range(runs))
    total = body()
    print(f"{label:<52} {count / best:>12,.0f} cases/s   ({best:.3f} s; mean score {total / count:.4f})")


def _timed(body: Callable[[], float]) -> float:
    start = time.perf_counter()
    body()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--mismatch", type=float, default=0.2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--evaluators", action="store_true", help="also time the evaluators' whole score()")
    options = parser.parse_args()

    started = time.perf_counter()
    cases = make_cases(options.cases, options.mismatch, options.seed)
    calls = sum(len(e) + len(a) for e, a in cases)
    print(f"{options.cases:,} cases, {calls:,} tool calls, ~{options.mismatch:.0%} with a mismatch "
          f"(built in {time.perf_counter() - started:.1f} s); Python {sys.version.split()[0]}")

    rules = ArgRules()

    def native(match_type: MatchType) -> Callable[[], float]:
        def body() -> float:
            return sum(match_trajectory(e, a, match_type, rules)[0] for e, a in cases)
        return body

    def adk() -> float:
        return sum(adk_invocation_score(a, e, MatchType.EXACT) for e, a in cases)

    best_rate("trajectory_match core (match_trajectory, IN_ORDER)", options.runs, options.cases,
              native(MatchType.IN_ORDER))
    best_rate("trajectory_match core (match_trajectory, EXACT)", options.runs, options.cases,
              native(MatchType.EXACT))
    best_rate("tool_trajectory_avg_score core (adk_invocation_score)", options.runs, options.cases, adk)

    if options.evaluators:
        question = MessageContent.user("q")
        wrapped = [
            (EvalCase(eval_id=str(i), conversation=[
                Invocation(invocation_id="t1", user_content=question, expected_tool_trajectory=e)]),
             AgentOutput(eval_id=str(i), turns=[TurnOutput(invocation_id="t1", tool_calls=a)]))
            for i, (e, a) in enumerate(cases)
        ]
        runs = [(TrajectoryMatchEvaluator(), CriterionConfig(match_type=MatchType.IN_ORDER)),
                (AdkToolTrajectoryEvaluator(), CriterionConfig(match_type=MatchType.EXACT))]
        for evaluator, config in runs:
            def body(evaluator: TrajectoryMatchEvaluator | AdkToolTrajectoryEvaluator = evaluator,
                     config: CriterionConfig = config) -> float:
                return sum(evaluator.score(c, o, config, "x")[-1].score or 0.0 for c, o in wrapped)
            best_rate(f"{evaluator.name} whole score(), {config.match_type.value}", 1, options.cases, body)


if __name__ == "__main__":
    main()
