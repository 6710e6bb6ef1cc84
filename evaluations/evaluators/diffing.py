"""Tool-call trajectory alignment and argument diffs.

`align(expected, actual, match_type, rules)` pairs each expected tool call with the actual
call that answers it and says how they differ. The review pages draw the side-by-side diff
from the rows; the trajectory evaluators score from the counts.

Row kinds:

- `matched`: same name, and the arguments agree under the rules;
- `args_differ`: same name, different arguments (`arg_diffs` says where);
- `missing`: an expected call nothing answered;
- `unexpected`: an actual call nothing expected.

Match types (AgentFlow's `MatchType`):

- `EXACT` and `IN_ORDER` keep order: the rows are a longest-common-subsequence alignment
  that pairs as many name-and-args matches as possible, then as many name-only matches.
  They differ in scoring only: under EXACT an unexpected call is a fault.
- `ANY_ORDER` pairs regardless of order: a maximum matching of name-and-args matches, then
  of name-only matches among the rest. Rows follow the expected order; unexpected calls last.

Every tie is broken by position, so the same input always gives the same rows.

Argument rules (`ArgRules`): `mode` is `exact` (the argument objects must agree), `subset`
(every expected key must agree; keys only the actual call has are allowed, at any depth) or
`ignore` (names only). Per-path overrides loosen single arguments: `ignore`, `regex` (the
actual value must match the pattern in full), numeric tolerance (`abs_tol`, `rel_tol`, as
`math.isclose`) and `case_insensitive`. Paths look like `filters.dates[1]`; `[*]` matches any
index and `tool_name:path` limits an override to one tool. An override applies to its whole
subtree.

The hot path is the common case of an agent doing what was expected: when the calls agree
position by position with plain `==` on the arguments, the rows are built directly, with
no alignment table and no diff.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from evaluations.patterns import PatternBoundExceeded, compile_bounded
from evaluations.schemas.evalset import MatchType, ToolCall

MATCHED = "matched"
ARGS_DIFFER = "args_differ"
MISSING = "missing"
UNEXPECTED = "unexpected"
ROW_KINDS = (MATCHED, ARGS_DIFFER, MISSING, UNEXPECTED)

ADDED = "added"  # the actual call has an argument the expected one does not
REMOVED = "removed"  # the expected argument is absent from the actual call
CHANGED = "changed"

ArgsMode = Literal["exact", "subset", "ignore"]

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-]+")
_INDEX = re.compile(r"\[\d+\]")


# --- Rules ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArgRule:
    """How one argument (and everything under it) is compared."""

    ignore: bool = False
    regex: str | None = None
    abs_tol: float | None = None
    rel_tol: float | None = None
    case_insensitive: bool = False
    # A pattern that needs backtracking and runs out of its bound (evaluations.patterns): the
    # evaluator raises, so the score is an error; pages and causes read it as a disagreement.
    raise_on_bound: bool = False

    def values_agree(self, expected: Any, actual: Any) -> bool:
        """Whether two leaf values agree under this rule."""
        if self.regex is not None:
            text = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False, sort_keys=True)
            try:  # the actual value is the agent's: RE2, else bounded backtracking
                return compile_bounded(self.regex).fullmatch(text) is not None
            except PatternBoundExceeded:
                if self.raise_on_bound:
                    raise
                return False
        if (self.abs_tol is not None or self.rel_tol is not None) and _is_number(expected) and _is_number(actual):
            return math.isclose(expected, actual, rel_tol=self.rel_tol or 0.0, abs_tol=self.abs_tol or 0.0)
        if self.case_insensitive and isinstance(expected, str) and isinstance(actual, str):
            return expected.casefold() == actual.casefold()
        return bool(expected == actual)


_DEFAULT_RULE = ArgRule()


@dataclass(frozen=True)
class ArgRules:
    mode: ArgsMode = "exact"
    overrides: Mapping[str, ArgRule] = field(default_factory=dict)
    # Derived in __post_init__. A regex override can reject an actual value equal to the
    # expected one (the expected value is not a pattern), so only without one does `==` on
    # the argument objects prove a match.
    equality_proves_match: bool = field(init=False, repr=False, compare=False)
    _wildcards: bool = field(init=False, repr=False, compare=False)
    _plain: bool = field(init=False, repr=False, compare=False)  # exact, no overrides: `==` decides

    def __post_init__(self) -> None:
        if self.mode not in ("exact", "subset", "ignore"):
            raise ValueError(f"args mode must be exact, subset or ignore, not {self.mode!r}")
        for rule in self.overrides.values():
            if rule.regex is not None:
                compile_bounded(rule.regex)  # a bad pattern fails here, not in the middle of a run
        object.__setattr__(self, "equality_proves_match", all(r.regex is None for r in self.overrides.values()))
        object.__setattr__(self, "_wildcards", any("[*]" in key for key in self.overrides))
        object.__setattr__(self, "_plain", self.mode == "exact" and not self.overrides)

    def args_agree(self, tool: str, expected: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
        if self.mode == "ignore" or (self.equality_proves_match and expected == actual):
            return True
        return not self._plain and not diff_args(expected, actual, self, tool)

    def rule_for(self, tool: str, path: str) -> ArgRule | None:
        """The override for `path` in a call of `tool`: `tool:path` first, then `path`, then
        the same with indices as `[*]`."""
        overrides = self.overrides
        if not overrides:
            return None
        rule = overrides.get(f"{tool}:{path}") or overrides.get(path)
        if rule is None and self._wildcards:
            general = _INDEX.sub("[*]", path)
            rule = overrides.get(f"{tool}:{general}") or overrides.get(general)
        return rule

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "overrides": {
                path: {k: v for k, v in (("ignore", r.ignore), ("regex", r.regex), ("abs_tol", r.abs_tol),
                                         ("rel_tol", r.rel_tol), ("case_insensitive", r.case_insensitive))
                       if v is not None and v is not False}
                for path, r in self.overrides.items()
            },
        }


EXACT_ARGS = ArgRules()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- Argument diffs -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArgDiff:
    path: str
    kind: str  # added / removed / changed
    expected: Any = None
    actual: Any = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "kind": self.kind}
        if self.kind != ADDED:
            out["expected"] = self.expected
        if self.kind != REMOVED:
            out["actual"] = self.actual
        return out


def child_path(parent: str, key: str | int) -> str:
    """`filters` + `dates` -> `filters.dates`; + 1 -> `filters.dates[1]`; odd keys are quoted."""
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if key.isidentifier() or _PLAIN_KEY.fullmatch(key):
        return f"{parent}.{key}" if parent else key
    return f"{parent}[{json.dumps(key, ensure_ascii=False)}]"


def diff_args(expected: Mapping[str, Any], actual: Mapping[str, Any], rules: ArgRules = EXACT_ARGS,
              tool: str = "") -> list[ArgDiff]:
    """Where two argument objects disagree under `rules`, descending into nested JSON.
    An empty list means they agree."""
    if rules.mode == "ignore" or (rules.equality_proves_match and expected == actual):
        return []
    out: list[ArgDiff] = []
    _diff(expected, actual, "", None, rules, tool, rules.equality_proves_match, out)
    return out


def _diff(expected: Any, actual: Any, path: str, inherited: ArgRule | None, rules: ArgRules, tool: str,
          prune: bool, out: list[ArgDiff]) -> None:
    # `prune`: equal values cannot disagree, so equal subtrees are skipped before their paths
    # are even built; most of a near-miss call is equal to what was expected.
    rule = (rules.rule_for(tool, path) if path else None) or inherited
    if rule is not None:
        if rule.ignore:
            return
        if rule.regex is not None:  # a pattern judges the value at its path as a whole
            if not rule.values_agree(expected, actual):
                out.append(ArgDiff(path, CHANGED, expected=expected, actual=actual))
            return
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key, value in expected.items():
            if key in actual:
                other = actual[key]
                if not (prune and value == other):
                    _diff(value, other, child_path(path, key), rule, rules, tool, prune, out)
            else:
                sub = child_path(path, key)
                if not _ignored(sub, rule, rules, tool):
                    out.append(ArgDiff(sub, REMOVED, expected=value))
        if rules.mode != "subset":
            for key, value in actual.items():
                if key not in expected:
                    sub = child_path(path, key)
                    if not _ignored(sub, rule, rules, tool):
                        out.append(ArgDiff(sub, ADDED, actual=value))
        return
    if isinstance(expected, list) and isinstance(actual, list):
        common = min(len(expected), len(actual))
        for index in range(common):
            value, other = expected[index], actual[index]
            if not (prune and value == other):
                _diff(value, other, child_path(path, index), rule, rules, tool, prune, out)
        for index in range(common, len(expected)):
            sub = child_path(path, index)
            if not _ignored(sub, rule, rules, tool):
                out.append(ArgDiff(sub, REMOVED, expected=expected[index]))
        for index in range(common, len(actual)):
            sub = child_path(path, index)
            if not _ignored(sub, rule, rules, tool):
                out.append(ArgDiff(sub, ADDED, actual=actual[index]))
        return
    if not (rule or _DEFAULT_RULE).values_agree(expected, actual):
        out.append(ArgDiff(path, CHANGED, expected=expected, actual=actual))


def _ignored(path: str, inherited: ArgRule | None, rules: ArgRules, tool: str) -> bool:
    rule = rules.rule_for(tool, path) or inherited
    return rule is not None and rule.ignore


# --- Alignment ------------------------------------------------------------------------------


@dataclass(slots=True)
class AlignmentRow:
    kind: str
    expected_index: int | None = None
    actual_index: int | None = None
    expected: ToolCall | None = None
    actual: ToolCall | None = None
    arg_diffs: Sequence[ArgDiff] = ()

    def as_dict(self, expected_calls: Sequence[dict[str, Any]] | None = None,
                actual_calls: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """`expected_calls` / `actual_calls`: `call_dict` of each call of the lists the rows were
        aligned from, when the caller has them already (its justification lists them too)."""
        expected, actual = self.expected, self.actual
        return {
            "kind": self.kind,
            "expected_index": self.expected_index,
            "actual_index": self.actual_index,
            "expected": None if expected is None else (
                expected_calls[self.expected_index] if expected_calls is not None and self.expected_index is not None
                else call_dict(expected)),
            "actual": None if actual is None else (
                actual_calls[self.actual_index] if actual_calls is not None and self.actual_index is not None
                else call_dict(actual)),
            "arg_diffs": [d.as_dict() for d in self.arg_diffs],
        }


_CALL_EXTRAS = ("call_id", "result", "error", "latency_seconds", "node", "simulated")


def call_dict(call: ToolCall) -> dict[str, Any]:
    """A tool call as JSON: name, args, and whichever of id, result, error, latency and node
    it has (an `OutputToolCall` has the last three)."""
    out: dict[str, Any] = {"name": call.name, "args": call.args}
    fields = call.__dict__  # a pydantic model's field values; getattr() on an absent one is slow
    for name in _CALL_EXTRAS:
        value = fields.get(name)
        if value is not None:
            out[name] = value
    return out


def _call_dict(call: ToolCall | None) -> dict[str, Any] | None:
    return None if call is None else call_dict(call)


@dataclass
class Alignment:
    match_type: MatchType
    rows: list[AlignmentRow]
    expected_count: int
    actual_count: int
    matched: int = -1  # counted from the rows unless the caller knows it

    def __post_init__(self) -> None:
        if self.matched < 0:
            self.matched = self.count(MATCHED)

    def count(self, kind: str) -> int:
        return sum(1 for row in self.rows if row.kind == kind)

    @property
    def complete(self) -> bool:
        """Every expected call matched, and under EXACT nothing else was called."""
        matched = self.matched
        if self.match_type == MatchType.EXACT:
            return matched == self.expected_count == self.actual_count
        return matched == self.expected_count

    def partial_score(self) -> float:
        """Matched calls over max(expected, actual) under EXACT (an extra call costs as much
        as a missing one), over the expected calls otherwise (extra calls are allowed);
        1.0 when there is nothing to match."""
        denominator = (max(self.expected_count, self.actual_count) if self.match_type == MatchType.EXACT
                       else self.expected_count)
        return self.matched / denominator if denominator else 1.0

    def as_dict(self, expected_calls: Sequence[dict[str, Any]] | None = None,
                actual_calls: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The alignment as JSON. `expected_calls` / `actual_calls`: `call_dict` of each call
        of the expected and actual lists it was aligned from, when the caller has them: each
        row then shares its call's dict instead of building it again (the text is the same)."""
        counts = dict.fromkeys(ROW_KINDS, 0)
        for row in self.rows:
            counts[row.kind] += 1
        return {
            "match_type": self.match_type.value,
            "counts": counts,
            "rows": [row.as_dict(expected_calls, actual_calls) for row in self.rows],
        }


def align(expected: Sequence[ToolCall], actual: Sequence[ToolCall], match_type: MatchType = MatchType.EXACT,
          rules: ArgRules = EXACT_ARGS) -> Alignment:
    """Pair expected with actual tool calls (see the module docstring)."""
    n, m = len(expected), len(actual)
    if n == m and _agree_in_place(expected, actual, rules):
        rows = [AlignmentRow(MATCHED, i, i, expected[i], actual[i]) for i in range(n)]
        return Alignment(match_type, rows, n, m, n)
    if match_type == MatchType.ANY_ORDER:
        return Alignment(match_type, _align_any_order(expected, actual, rules), n, m)
    return Alignment(match_type, _align_in_order(expected, actual, rules), n, m)


def _agree_in_place(expected: Sequence[ToolCall], actual: Sequence[ToolCall], rules: ArgRules) -> bool:
    for e, a in zip(expected, actual, strict=True):
        if e.name != a.name or not rules.args_agree(e.name, e.args, a.args):
            return False
    return True


def _weights(expected: Sequence[ToolCall], actual: Sequence[ToolCall], rules: ArgRules,
             full: int) -> list[list[int]]:
    """weights[i][j]: `full` when the calls match, 1 when only their names do, else 0."""
    return [[(full if rules.args_agree(e.name, e.args, a.args) else 1) if e.name == a.name else 0 for a in actual]
            for e in expected]


def _paired(expected: Sequence[ToolCall], actual: Sequence[ToolCall], i: int, j: int, full: bool,
            rules: ArgRules) -> AlignmentRow:
    if full:
        return AlignmentRow(MATCHED, i, j, expected[i], actual[j])
    e = expected[i]
    return AlignmentRow(ARGS_DIFFER, i, j, e, actual[j], diff_args(e.args, actual[j].args, rules, e.name))


def _align_in_order(expected: Sequence[ToolCall], actual: Sequence[ToolCall], rules: ArgRules) -> list[AlignmentRow]:
    """Weighted LCS: a full match weighs more than every name-only match together, so the
    alignment has as many full matches as any order-keeping one can, then the most name matches.
    Matching leading and trailing calls are paired first: an optimal alignment always can."""
    n, m = len(expected), len(actual)
    head = 0
    while head < n and head < m and expected[head].name == actual[head].name and rules.args_agree(
            expected[head].name, expected[head].args, actual[head].args):
        head += 1
    tail = 0
    while tail < n - head and tail < m - head and expected[n - 1 - tail].name == actual[m - 1 - tail].name \
            and rules.args_agree(expected[n - 1 - tail].name, expected[n - 1 - tail].args, actual[m - 1 - tail].args):
        tail += 1
    rows = [AlignmentRow(MATCHED, k, k, expected[k], actual[k]) for k in range(head)]
    mid_e, mid_a = expected[head:n - tail], actual[head:m - tail]
    if len(mid_e) == 1 and len(mid_a) == 1:
        # One call each left, and they do not match (else the head would have taken them): what
        # the table below gives, without building it (the commonest near miss: one call's args).
        e, a = mid_e[0], mid_a[0]
        if e.name == a.name:
            rows.append(AlignmentRow(ARGS_DIFFER, head, head, e, a, diff_args(e.args, a.args, rules, e.name)))
        else:
            rows += [AlignmentRow(MISSING, head, None, e, None), AlignmentRow(UNEXPECTED, None, head, None, a)]
    else:
        rows.extend(_lcs_rows(mid_e, mid_a, rules, head))
    rows.extend(AlignmentRow(MATCHED, n - tail + k, m - tail + k, expected[n - tail + k], actual[m - tail + k])
                for k in range(tail))
    return rows


def _lcs_rows(expected: Sequence[ToolCall], actual: Sequence[ToolCall], rules: ArgRules,
              offset: int) -> list[AlignmentRow]:
    n, m = len(expected), len(actual)
    full = min(n, m) + 1
    weights = _weights(expected, actual, rules, full)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        above, here, row_weights = table[i - 1], table[i], weights[i - 1]
        for j in range(1, m + 1):
            best = above[j] if above[j] > here[j - 1] else here[j - 1]
            w = row_weights[j - 1]
            if w and above[j - 1] + w > best:
                best = above[j - 1] + w
            here[j] = best

    rows: list[AlignmentRow] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0:
            w = weights[i - 1][j - 1]
            if w and table[i][j] == table[i - 1][j - 1] + w:
                row = _paired(expected, actual, i - 1, j - 1, w == full, rules)
                row.expected_index, row.actual_index = offset + i - 1, offset + j - 1
                rows.append(row)
                i, j = i - 1, j - 1
                continue
        # Walking backwards, take the unexpected call first so that, read forwards, a
        # missing call comes before the unexpected one that replaced it.
        if j > 0 and (i == 0 or table[i][j] == table[i][j - 1]):
            rows.append(AlignmentRow(UNEXPECTED, None, offset + j - 1, None, actual[j - 1]))
            j -= 1
        else:
            rows.append(AlignmentRow(MISSING, offset + i - 1, None, expected[i - 1], None))
            i -= 1
    rows.reverse()
    return rows


def _align_any_order(expected: Sequence[ToolCall], actual: Sequence[ToolCall], rules: ArgRules) -> list[AlignmentRow]:
    n, m = len(expected), len(actual)
    weights = _weights(expected, actual, rules, 2)
    # Maximum matching on full matches first (argument rules such as tolerances need not be
    # transitive, so first-come pairing could leave a pairing on the table), then on names.
    owner = _max_matching(n, m, lambda i, j: weights[i][j] == 2, {})
    owner = _max_matching(n, m, lambda i, j: weights[i][j] > 0, owner)
    partner = {i: j for j, i in owner.items()}
    rows: list[AlignmentRow] = []
    for i in range(n):
        j = partner.get(i)
        rows.append(_paired(expected, actual, i, j, weights[i][j] == 2, rules) if j is not None
                    else AlignmentRow(MISSING, i, None, expected[i], None))
    rows.extend(AlignmentRow(UNEXPECTED, None, j, None, actual[j]) for j in range(m) if j not in owner)
    return rows


# The augmenting-path search's budget, in edge checks: far above any real trajectory (500
# calls each way with every pair a candidate is ~250,000 per expected call at worst), and the
# bound on what a hostile output can make one alignment cost.
MATCHING_WORK_CAP = 2_000_000


def _max_matching(n: int, m: int, edge: Callable[[int, int], bool], fixed: dict[int, int],
                  work_cap: int = MATCHING_WORK_CAP) -> dict[int, int]:
    """Kuhn's augmenting paths, expected calls in order, actual calls by position; pairs in
    `fixed` (actual -> expected) are kept. Returns actual index -> expected index.

    Iterative (an explicit stack walks the same depth-first search the recursive form did, so
    the pairs are the same): a chain of a thousand displaced calls cannot exhaust Python's
    stack. After `work_cap` edge checks the search stops, and the expected calls still to
    place take the first free actual call they match: a valid pairing, maximal if not maximum.
    """
    owner = dict(fixed)
    locked = set(fixed)
    fixed_expected = set(fixed.values())
    work = 0

    def augment(root: int) -> bool:
        nonlocal work
        seen: set[int] = set()
        stack = [[root, 0]]  # (expected call, the next actual call to try), one per level
        path: list[int] = []  # the actual call each level moved on through
        while stack:
            frame = stack[-1]
            i, j = frame
            while j < m:
                if j not in seen and j not in locked:
                    work += 1
                    if work > work_cap:
                        return False  # nothing was moved: the pairing so far stands
                    if edge(i, j):
                        break
                j += 1
            if j == m:
                stack.pop()
                if path:
                    path.pop()
                continue
            seen.add(j)
            frame[1] = j + 1
            if j not in owner:
                owner[j] = i
                for (up, _), through in zip(reversed(stack[:-1]), reversed(path), strict=True):
                    owner[through] = up
                return True
            path.append(j)
            stack.append([owner[j], 0])
        return False

    for i in range(n):
        if i in fixed_expected:
            continue
        if work <= work_cap:
            augment(i)
        if work > work_cap:
            taken = set(owner)
            free = next((j for j in range(m) if j not in taken and edge(i, j)), None)
            if free is not None:
                owner[free] = i
    return owner
