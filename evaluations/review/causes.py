"""Why a run failed, grouped: a cause signature per failing (case, criterion), and the run's
causes with how many cases each hit.

A signature is read from what is already stored, by the criterion's family:

- trajectory criteria: the step-aligned tool-call diff (`evaluators.diffing.align`, as the
  comparison's findings read it): `missing search_flights`, `unexpected cancel_order`,
  `search_flights.date differs (format: date)` (the kind of change: value, type, format,
  missing or added key), `order differs: a, b` (the same call missing here and unexpected
  there);
- answer criteria (output checks, judges): `empty answer`, `refusal`, `answer differs`
  with the score's similarity band, read from the first turn the criterion failed (the
  example names it: "turn 4: I'm sorry ...");
- performance criteria: `latency_seconds over limit`;
- a result with no answer to judge: `timeout`, `agent error: HTTP 503`,
  `agent error: ValueError`, `no output`.

A criterion fails a case where its conversation-level score failed, as the case's status
counts it. A criterion that could not be scored (not runnable here, or its evaluator raised)
is not a cause: it is the run's notice (`runs.summary.criterion_notices`), and the case is
"not fully scored" rather than failed.

Signatures name tools, argument paths and kinds, never the values, and messages have their
volatile parts (ids, numbers, dates, quoted values) normalised, so near-identical failures
fold together; each cause keeps its first case (by eval_id) as a readable example, values
and all.

`causes_store` groups a finished run's failures and keeps them (`CauseSet`, a `RunCause`
per cause, a `ResultCause` per failing (result, criterion)), when the run completes
(`review.completion`) or on the first read of an older run (`run_causes`). A comparison's
causes are its two runs' causes side by side (`compared_causes`): each cause of the candidate
is new, grown, shrunk or unchanged against the baseline's, and the baseline's that the
candidate no longer has are gone.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NamedTuple, cast

import orjson
from django.db import connection, transaction
from django.db.models import QuerySet, Subquery, TextField
from django.db.models.functions import Cast
from django.utils import timezone
from pydantic import ValidationError

from evaluations.bulk import insert_rows
from evaluations.evaluators.base import aligned_turns, get_evaluator_class, text_of
from evaluations.evaluators.diffing import ADDED, ARGS_DIFFER, CHANGED, MISSING, REMOVED, UNEXPECTED, ArgRules, align
from evaluations.messages import MESSAGE_CHARS as MESSAGE_CHARS
from evaluations.messages import first_line as first_line
from evaluations.messages import normalise as normalise
from evaluations.models import CaseResult, CauseSet, ResultCause, Run, RunCause, Score
from evaluations.review.findings import call_text, value_text
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import EvalConfig, MatchType, ToolCall
from evaluations.schemas.outputs import AgentOutput

# Bump when signatures change: a run's stored causes of an older version are grouped again.
CAUSES_VERSION = 2  # 2: criteria that could not be scored are notices, not causes; failing turns named
SIGNATURE_CHARS = 500
EXAMPLE_CHARS = 500
SHOWN = 20  # causes a page lists; the rest are counted

# Kinds, one word each: what the table's badge says and the API reports.
MISSING_TOOL = "missing_tool"
UNEXPECTED_TOOL = "unexpected_tool"
ARGUMENT = "argument"
ORDER = "order"
ANSWER = "answer"
EMPTY_ANSWER = "empty_answer"
REFUSAL = "refusal"
TIMEOUT = "timeout"
AGENT_ERROR = "agent_error"
EVALUATOR_ERROR = "evaluator_error"
NOT_RUNNABLE = "not_runnable"
NO_OUTPUT = "no_output"
LIMIT = "limit"
OTHER = "other"

# Comparison states of a cause.
NEW, GROWN, SHRUNK, SAME, GONE = "new", "grown", "shrunk", "same", "gone"

# Criterion families (an evaluator's `group`).
TRAJECTORY, PERFORMANCE = "trajectory", "performance"

_SPACES = re.compile(r"\s+")
_TIMEOUT = re.compile(r"time[ds]?[\s_-]*out|deadline exceeded", re.I)
_HTTP = re.compile(r"\b(?:HTTP|status(?: code)?)\D{0,3}([1-5]\d\d)\b", re.I)
_CLASS = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Timeout))\b")
_REFUSAL = re.compile(r"\b(?:I\s+(?:can(?:no|')t|am\s+(?:unable|not\s+able)|won't)|I'm\s+(?:unable|not\s+able)"
                      r"|I(?:'m|\s+am)\s+sorry|as an AI)\b", re.I)
_INDEX = re.compile(r"\[\d+\]")
_DATE_LIKE = re.compile(r"^(?=.*\d)[\w ,./:+-]{6,40}$")
_NUMBER_TEXT = re.compile(r"^[-+]?[$€£]?\s*[\d,.\s']+\s*%?$")
_DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%m/%d/%Y", "%d/%m/%Y", "%d.%m.%Y", "%m-%d-%Y", "%d-%m-%Y", "%Y%m%d",
                 "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y", "%B %d %Y", "%b %d %Y", "%m/%d/%y", "%d/%m/%y")


# --- Signatures (pure) --------------------------------------------------------------------


class Part(NamedTuple):
    """One thing that went wrong: `signature` folds (no values), `example` shows them. (Tuples:
    a 100,000-case run makes tens of thousands, and a frozen dataclass costs twice as much to
    make.)"""

    signature: str
    kind: str
    example: str


@functools.lru_cache(maxsize=4096)
def error_part(status: str, error: str) -> Part:
    """Why a result has no answer to judge: its status and its error message."""
    shown = first_line(error)
    if status == CaseResult.Status.NOT_RUNNABLE:
        return Part(f"not runnable: {normalise(error)}" if error.strip() else "not runnable", NOT_RUNNABLE, shown)
    if status == CaseResult.Status.MISSING:
        return Part("no output", NO_OUTPUT, shown or "no output uploaded for this case")
    if _TIMEOUT.search(error or ""):
        return Part("timeout", TIMEOUT, shown)
    code = _HTTP.search(error or "")
    if code:
        return Part(f"agent error: HTTP {code.group(1)}", AGENT_ERROR, shown)
    named = _CLASS.match(error or "")
    if named:
        return Part(f"agent error: {named.group(1).rsplit('.', 1)[-1]}", AGENT_ERROR, shown)
    return Part(f"agent error: {normalise(error)}" if error.strip() else "agent error", AGENT_ERROR,
                shown or "the agent failed without a message")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


@functools.lru_cache(maxsize=4096)
def _dates(text: str) -> frozenset[date]:
    text = text.strip()
    if not _DATE_LIKE.match(text):  # most values are not dates: skip sixteen strptime calls
        return frozenset()
    found: set[date] = set()
    with contextlib.suppress(ValueError):
        found.add(datetime.fromisoformat(text.replace("Z", "+00:00")).date())
    for pattern in _DATE_FORMATS:
        try:
            found.add(datetime.strptime(text, pattern).date())
        except ValueError:
            continue
    return frozenset(found)


def _number(text: str) -> float | None:
    if not _NUMBER_TEXT.match(text.strip()):
        return None
    digits = re.sub(r"[^\d.,\-+]", "", text)
    # "1,234.5" and "1.234,5" both: the last separator is the decimal one when it has 1-2 digits after it
    last = max(digits.rfind(","), digits.rfind("."))
    if last >= 0 and 0 < len(digits) - last - 1 <= 2:
        whole, fraction = re.sub(r"[.,]", "", digits[:last]), digits[last + 1:]
        digits = f"{whole}.{fraction}"
    else:
        digits = re.sub(r"[.,]", "", digits)
    try:
        value = float(digits)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def change_kind(expected: Any, actual: Any) -> str:
    """How an argument's value changed: `type` (5 → "5"), `format: date` (2024-05-01 →
    05/01/2024), `format: number` (1200 → "1,200.00"), `format: case or spacing`, or `value`."""
    if isinstance(expected, str) and isinstance(actual, str):
        if _SPACES.sub(" ", expected).strip().casefold() == _SPACES.sub(" ", actual).strip().casefold():
            return "format: case or spacing"
        before = _dates(expected)
        if before and before & _dates(actual):
            return "format: date"
        x, y = _number(expected), _number(actual)
        if x is not None and x == y:
            return "format: number"
        return "value"
    if _json_type(expected) != _json_type(actual):
        return "type"
    return "value"


def _path(path: str) -> str:
    return _INDEX.sub("[*]", path)


def tool_parts(case: NativeCase, output: AgentOutput, match_type: MatchType = MatchType.IN_ORDER,
               rules: ArgRules | None = None) -> list[Part]:
    """What the step-aligned tool-call diff says went wrong, turn by turn (a turn the output
    lacks counts as one that called no tools, as the trajectory criteria score it)."""
    parts: list[Part] = []
    kwargs = {"rules": rules} if rules is not None else {}
    for invocation, turn in aligned_turns(case, output):
        rows = align(invocation.expected_tool_trajectory, turn.tool_calls if turn is not None else [],
                     match_type, **kwargs).rows
        missing = [row.expected for row in rows if row.kind == MISSING and row.expected is not None]
        unexpected = [row.actual for row in rows if row.kind == UNEXPECTED and row.actual is not None]
        swapped = _swapped(missing, unexpected)
        if swapped:
            names = ", ".join(dict.fromkeys(call.name for call in swapped))
            parts.append(Part(f"order differs: {names}", ORDER,
                              f"order differs: {', '.join(call_text(c) for c in swapped)}"))
        for row in rows:
            if row.kind == MISSING and row.expected is not None and row.expected not in swapped:
                parts.append(Part(f"missing {row.expected.name}", MISSING_TOOL, f"missing {call_text(row.expected)}"))
            elif row.kind == UNEXPECTED and row.actual is not None and not _taken(row.actual, swapped):
                parts.append(Part(f"unexpected {row.actual.name}", UNEXPECTED_TOOL,
                                  f"unexpected {call_text(row.actual)}"))
            elif row.kind == ARGS_DIFFER and row.expected is not None:
                tool = row.expected.name
                for diff in row.arg_diffs:
                    path = _path(diff.path)
                    if diff.kind == REMOVED:
                        parts.append(Part(f"{tool}.{path} missing key", ARGUMENT,
                                          f"{tool}: {diff.path} missing (was {_short(diff.expected)})"))
                    elif diff.kind == ADDED:
                        parts.append(Part(f"{tool}.{path} unexpected key", ARGUMENT,
                                          f"{tool}: {diff.path} added ={_short(diff.actual)}"))
                    elif diff.kind == CHANGED:
                        kind = change_kind(diff.expected, diff.actual)
                        parts.append(Part(f"{tool}.{path} differs ({kind})", ARGUMENT,
                                          f"{tool}: {diff.path} {_short(diff.expected)}→{_short(diff.actual)}"))
    return parts


def _swapped(missing: list[ToolCall], unexpected: list[ToolCall]) -> list[ToolCall]:
    """The missing calls that were made after all, elsewhere in the turn (same name and
    arguments): the order differs, nothing is absent."""
    pool = list(unexpected)
    out = []
    for call in missing:
        for index, other in enumerate(pool):
            if other.name == call.name and other.args == call.args:
                out.append(call)
                del pool[index]
                break
    return out


def _taken(call: ToolCall, swapped: list[ToolCall]) -> bool:
    return any(call.name == other.name and call.args == other.args for other in swapped)


def _short(value: Any) -> str:
    return value_text(value)


def answer_part(case: NativeCase | None, output: AgentOutput | None, score: float | None,
                turn: int | None = None) -> Part:
    """What is wrong with the final answer a criterion failed: empty, a refusal, or how far
    it is from what was expected (the score's band). With `turn` (0-based), that turn's answer,
    and the example names it ("turn 4: ..."); else the last answer given."""
    turns = output.turns if output else []
    if turn is not None and 0 <= turn < len(turns):
        answer = text_of(turns[turn].final_response).strip()
    else:
        texts = [text_of(t.final_response).strip() for t in turns]
        answer = next((t for t in reversed(texts) if t), "")
    where = f"turn {turn + 1}: " if turn is not None else ""
    if not answer:
        return Part("empty answer", EMPTY_ANSWER, f"{where}the agent's final answer is empty")
    example = where + (answer if len(answer) <= 120 else answer[:119] + "…")
    if _REFUSAL.search(answer):
        return Part("refusal", REFUSAL, example)
    if score is not None and math.isfinite(score) and 0 < score < 1:
        band = min(3, int(score * 4))
        low, high = band / 4, (band + 1) / 4
        return Part(f"answer differs (similarity {low:g} to {high:g})", ANSWER, example)
    return Part("answer differs", ANSWER, example)


def signature_of(parts: Sequence[Part]) -> Part:
    """One signature for a (case, criterion) from its parts: the distinct ones in order; its
    kind is the first part's."""
    seen: dict[str, Part] = {}
    for part in parts:
        seen.setdefault(part.signature, part)
    chosen = list(seen.values())
    signature = "; ".join(p.signature for p in chosen)
    example = "; ".join(p.example for p in chosen)
    return Part(_cut(signature, SIGNATURE_CHARS), chosen[0].kind, _cut(example, EXAMPLE_CHARS))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


class Failure(NamedTuple):
    """A failing (result, criterion) and its signature."""

    result_pk: int
    eval_id: str
    criterion: str
    part: Part


@dataclass
class Cause:
    signature: str
    kind: str
    cases: int
    criteria: list[str]
    example_eval_id: str
    example_result_id: int | None
    example: str
    failures: list[Failure] = field(default_factory=list)


def group(failures: Iterable[Failure]) -> list[Cause]:
    """Failures folded by signature: most cases first (then by signature), each with the
    criteria it failed and its first case by eval_id (then result) as the example."""
    with _collector_paused():
        return _group(failures)


def _group(failures: Iterable[Failure]) -> list[Cause]:
    by_signature: dict[str, list[Failure]] = defaultdict(list)
    for failure in failures:
        by_signature[failure.part.signature].append(failure)
    causes = []
    for signature, found in by_signature.items():
        example = min(found, key=lambda f: (f.eval_id, f.result_pk, f.criterion))
        causes.append(Cause(signature, example.part.kind, len({f.eval_id for f in found}),
                            sorted({f.criterion for f in found if f.criterion}), example.eval_id,
                            example.result_pk, example.part.example, found))
    causes.sort(key=lambda c: (-c.cases, c.signature))
    return causes


# --- Reading a run's failures -------------------------------------------------------------


# A case without a verdict (not runnable, not fully scored) has no cause: the notices say why.
_SETTLED_FAILING = (CaseResult.Status.FAILED, CaseResult.Status.ERROR, CaseResult.Status.MISSING)


def criterion_families(config: dict[str, Any]) -> dict[str, str]:
    """Criterion name -> its evaluator's group (trajectory, output, llm_judge, performance, ...)."""
    try:
        parsed = EvalConfig.model_validate(config or {})
    except ValidationError:
        return {}
    out = {}
    for name, criterion in parsed.criteria.items():
        try:
            out[name] = get_evaluator_class(criterion.evaluator or name).group
        except KeyError:
            out[name] = "output"
    return out


def run_failures(run: Run) -> list[Failure]:
    """Every failing (result, criterion) of a run with its signature: two queries (the failing
    scores, through their partial index; the results that failed or errored with their cases
    and outputs, as JSON text). A criterion fails a case where its conversation-level score
    failed (what the case's status counts); its failing turns, if it scored turns, say which
    answer to read. A criterion that could not be scored (not runnable, an evaluator error) is
    no cause: the run's notices say it once. A case's conversation is parsed only where a
    trajectory criterion failed, the agent's tool calls only there too, and messages are
    normalised once each."""
    from evaluations.review.selectors import trajectory_settings

    families = criterion_families(run.config)
    match_type, rules = trajectory_settings(run.config)
    with _collector_paused():
        # (result, criterion) -> [conversation score, failing turn indices, their scores]
        scores: dict[int, dict[str, list[Any]]] = defaultdict(dict)
        for result_id, criterion, level, turn, score in _tuples(
                Score.objects.filter(Score.NOT_PASSED, run=run).filter(passed=False, error="")
                .order_by("result_id", "criterion", "applies_to", "turn_index")
                .values_list("result_id", "criterion", "applies_to", "turn_index", "score")):
            entry = scores[result_id].setdefault(criterion, [_NO_SCORE, [], []])
            if level == Score.Level.CONVERSATION and turn == -1:
                entry[0] = score
            elif level == Score.Level.INTERACTION:
                entry[1].append(turn)
                entry[2].append(score)
        failures: list[Failure] = []
        cases: dict[int, NativeCase | None] = {}
        # The JSON columns as text, parsed here with orjson: Django's converters (json.loads per
        # value) were a third of the grouping.
        rows = _tuples(CaseResult.objects.filter(run=run, status__in=_SETTLED_FAILING)
                       .annotate(output_text=Cast("output", TextField()),
                                 conversation_text=Cast("case__conversation", TextField()))
                       .values_list("pk", "status", "error", "output_text", "case_id", "case__eval_id",
                                    "conversation_text"))
        for pk, status, error, output_text, case_id, eval_id, conversation_text in rows:
            if status != CaseResult.Status.FAILED:
                failures.append(Failure(pk, eval_id, "", error_part(status, error or "")))
                continue
            failing = {criterion: entry for criterion, entry in scores.get(pk, {}).items()
                       if entry[0] is not _NO_SCORE}
            if not failing:
                failures.append(Failure(pk, eval_id, "", Part("failed", OTHER, first_line(error) or "failed")))
                continue
            raw = _parsed(output_text)
            output: AgentOutput | None = None
            answers: AgentOutput | None = None
            tools: Part | None = None
            for criterion, (score, turns, turn_scores) in failing.items():
                family = families.get(criterion, "output")
                if family == PERFORMANCE:
                    part = Part(f"{criterion} over limit", LIMIT, f"{criterion} {score:g}" if score is not None
                                else f"{criterion} over its limit")
                elif family == TRAJECTORY:
                    if tools is None:
                        if case_id not in cases:
                            cases[case_id] = _case({"eval_id": eval_id,
                                                    "conversation": _parsed(conversation_text) or []})
                        case = cases[case_id]
                        output = output or _output(raw)
                        found = tool_parts(case, output, match_type, rules) if case and output else []
                        tools = signature_of(found) if found else _ALIGNED
                    part = tools if tools is not _ALIGNED else Part(f"{criterion} failed", OTHER,
                                                                    f"{criterion} failed; the tool calls align")
                else:
                    if answers is None:
                        answers = output or _output(raw, with_calls=False)
                    if turns:  # the first turn this criterion failed: its answer, and named
                        part = answer_part(None, answers, turn_scores[0], turn=turns[0])
                    else:
                        part = answer_part(None, answers, score)
                failures.append(Failure(pk, eval_id, criterion, part))
    return failures


_NO_SCORE = object()  # no failing conversation-level score: the criterion did not fail the case


def _tuples(query: QuerySet[Any, Any], chunk: int = 5000) -> Iterator[tuple[Any, ...]]:
    """A `values_list` query's rows as the database driver gives them, a chunk at a time:
    its columns here are text, numbers and ids, which need none of the per-value converters
    Django would run on 100,000 rows."""
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        while found := cursor.fetchmany(chunk):
            yield from found


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a run's rows are read: they are tuples,
    lists and dicts freed by reference counting, and the collections that 100,000 of them
    would set off (each walking every object of the process) were a fifth of the grouping."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_ALIGNED = Part("", OTHER, "")  # the tool calls align: the part names the criterion


# Stored outputs and cases were validated when they were written; what the signatures read of
# them (turn ids, tool calls, final answers) is taken as plain tuples rather than validated
# again into pydantic models, which cost most of the grouping at 100,000 cases (even
# `model_construct`, which inspects every default). Anything of another shape is validated,
# and left out (no tool diff, no answer) if it is not valid.


class _Call(NamedTuple):
    name: str
    args: dict[str, Any]


class _Turn(NamedTuple):
    invocation_id: str | None
    final_response: Any
    tool_calls: list[_Call]


class _Output(NamedTuple):
    turns: list[_Turn]


class _Invocation(NamedTuple):
    invocation_id: str
    expected_tool_trajectory: list[_Call]


class _Case(NamedTuple):
    conversation: list[_Invocation]


def _parsed(text: str | None) -> Any:
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # e.g. an integer past 64 bits: the standard library reads it
        return json.loads(text)


def _calls(raw: Any) -> list[_Call]:
    return [_Call(str(c["name"]), c["args"] if isinstance(c.get("args"), dict) else {}) for c in raw or ()]


def _output(raw: Any, *, with_calls: bool = True) -> AgentOutput | None:
    """The output as plain tuples; without its tool calls where only the answers are read."""
    if raw is None:
        return None
    try:
        light = _Output([_Turn(turn.get("invocation_id"), turn.get("final_response"),
                               _calls(turn.get("tool_calls")) if with_calls else [])
                         for turn in raw.get("turns") or ()])
        return cast(AgentOutput, light)
    except (AttributeError, KeyError, TypeError):
        try:
            return AgentOutput.model_validate(raw)
        except (ValidationError, ValueError):
            return None


def _case(values: dict[str, Any]) -> NativeCase | None:
    try:
        light = _Case([_Invocation(str(inv["invocation_id"]), _calls(inv.get("expected_tool_trajectory")))
                       for inv in values.get("conversation") or ()])
        return cast(NativeCase, light)
    except (AttributeError, KeyError, TypeError):
        try:
            return NativeCase.model_validate(values)
        except (ValidationError, ValueError):
            return None


# --- Stored ---------------------------------------------------------------------------------


def causes_store(*, run: Run, causes: list[Cause] | None = None) -> CauseSet:
    """Keep a finished run's failures grouped by cause (`causes`, grouped beforehand, or
    grouped now), replacing what was kept."""
    if causes is None:
        causes = group(run_failures(run))
    failing = len({f.eval_id for c in causes for f in c.failures})
    with transaction.atomic(), _collector_paused():
        CauseSet.objects.filter(run=run).delete()
        cause_set = CauseSet.objects.create(run=run, version=CAUSES_VERSION, run_finished_at=run.finished_at,
                                            computed_at=timezone.now(), failing_cases=failing)
        made = RunCause.objects.bulk_create([
            RunCause(cause_set=cause_set, rank=rank, signature=c.signature, kind=c.kind, cases=c.cases,
                     criteria=c.criteria, example_eval_id=c.example_eval_id, example_result_id=c.example_result_id,
                     example=c.example)
            for rank, c in enumerate(causes)])
        ids = {c.signature: m.pk for c, m in zip(causes, made, strict=True)}
        if any(i is None for i in ids.values()):  # a backend that does not return ids
            ids = dict(RunCause.objects.filter(cause_set=cause_set).values_list("signature", "pk"))
        insert_rows(ResultCause, ["cause_id", "result_id", "eval_id", "criterion"],
                    [(ids[c.signature], f.result_pk, f.eval_id, f.criterion) for c in causes for f in c.failures])
    return cause_set


def _current(run: Run) -> CauseSet | None:
    found = CauseSet.objects.filter(run=run).first()
    if found is not None and found.version == CAUSES_VERSION and found.run_finished_at == run.finished_at:
        return found
    return None


def cause_set_for(run: Run) -> CauseSet | None:
    """A finished run's kept causes, grouped now if they were not (or are out of date); None
    while the run is still going (its failures are still arriving)."""
    if not run.is_finished:
        return None
    found = _current(run)
    return found if found is not None else causes_store(run=run)


# --- What pages, the API and the CLI show ------------------------------------------------


@dataclass(frozen=True)
class CauseRow:
    pk: int | None  # the RunCause a filter names (the baseline's, for a gone cause)
    signature: str
    kind: str
    cases: int
    share: float  # of the run's failing cases
    criteria: tuple[str, ...]
    example_eval_id: str
    example_result_id: int | None
    example: str
    run_pk: int  # whose example it is
    state: str = ""  # on a comparison: new, grown, shrunk, same, gone
    baseline_cases: int | None = None

    @property
    def share_text(self) -> str:
        return f"{self.share:.0%}"

    @property
    def change_text(self) -> str:
        if self.state in (NEW, GONE):
            return self.state
        if self.baseline_cases is None:
            return ""
        return f"{self.state} (was {self.baseline_cases:,})" if self.state in (GROWN, SHRUNK) else "unchanged"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.pk, "signature": self.signature, "kind": self.kind, "cases": self.cases,
                               "share": round(self.share, 4), "criteria": list(self.criteria),
                               "example": {"eval_id": self.example_eval_id, "result_id": self.example_result_id,
                                           "run_id": self.run_pk, "detail": self.example}}
        if self.state:
            out["change"] = self.state
            out["baseline_cases"] = self.baseline_cases
        return out


@dataclass(frozen=True)
class RunCauses:
    run_pk: int
    failing_cases: int
    rows: list[CauseRow]  # the first SHOWN (or `limit`)
    total: int  # causes in all

    @property
    def more(self) -> int:
        return self.total - len(self.rows)


def _rows(cause_set: CauseSet, run_pk: int, limit: int | None) -> tuple[list[CauseRow], int]:
    found = RunCause.objects.filter(cause_set=cause_set).order_by("rank")
    listed = list(found[:limit] if limit is not None else found)
    total = len(listed) if limit is None or len(listed) < limit else found.count()
    failing = cause_set.failing_cases or 1
    return [CauseRow(c.pk, c.signature, c.kind, c.cases, c.cases / failing, tuple(c.criteria), c.example_eval_id,
                     c.example_result_id, c.example, run_pk) for c in listed], total


def run_causes(run: Run, *, limit: int | None = SHOWN) -> RunCauses | None:
    """A finished run's causes, most cases first: two queries once they are kept."""
    cause_set = cause_set_for(run)
    if cause_set is None:
        return None
    rows, total = _rows(cause_set, run.pk, limit)
    return RunCauses(run.pk, cause_set.failing_cases, rows, total)


def compared_causes(*, baseline: Run, candidate: Run, limit: int | None = SHOWN) -> RunCauses | None:
    """The candidate's causes, each marked new / grown / shrunk / same against the baseline's,
    then the baseline's causes the candidate no longer has (gone); None unless both are
    finished. A few queries whatever the runs' size (the causes, not the cases, are read)."""
    after, before = cause_set_for(candidate), cause_set_for(baseline)
    if after is None or before is None:
        return None
    rows, total = _rows(after, candidate.pk, limit)
    was = dict(RunCause.objects.filter(cause_set=before, signature__in=[r.signature for r in rows])
               .values_list("signature", "cases"))
    marked = []
    for row in rows:
        old = was.get(row.signature)
        state = NEW if old is None else GROWN if row.cases > old else SHRUNK if row.cases < old else SAME
        marked.append(_replace(row, state=state, baseline_cases=old))
    gone = (RunCause.objects.filter(cause_set=before)
            .exclude(signature__in=Subquery(RunCause.objects.filter(cause_set=after).values("signature")))
            .order_by("rank"))
    gone_rows = list(gone[:limit] if limit is not None else gone)
    marked += [CauseRow(c.pk, c.signature, c.kind, 0, 0.0, tuple(c.criteria), c.example_eval_id,
                        c.example_result_id, c.example, baseline.pk, GONE, c.cases) for c in gone_rows]
    gone_total = len(gone_rows) if limit is None or len(gone_rows) < limit else gone.count()
    return RunCauses(candidate.pk, after.failing_cases, marked, total + gone_total)


def _replace(row: CauseRow, **changes: Any) -> CauseRow:
    from dataclasses import replace

    return replace(row, **changes)


def cause_of(*, run_pks: Sequence[int], cause_pk: int | None) -> RunCause | None:
    """The cause a `?cause=` filter names, if it is one of these runs' (else None: the filter
    is dropped, as an unknown status is)."""
    if cause_pk is None:
        return None
    return (RunCause.objects.filter(pk=cause_pk, cause_set__run_id__in=list(run_pks))
            .only("pk", "signature", "cause_set_id").first())


def eval_ids_of(cause: RunCause) -> Any:
    """The eval ids a cause hit, as a subquery (filters a cases table in the database)."""
    return ResultCause.objects.filter(cause=cause).values("eval_id")


def new_causes_line(*, baseline: Run, candidate: Run) -> tuple[int, str]:
    """(how many, "2 new causes vs #40"): the activity feed's words for a finished run."""
    compared = compared_causes(baseline=baseline, candidate=candidate, limit=None)
    count = sum(1 for row in compared.rows if row.state == NEW) if compared else 0
    return count, f"{count} new cause{'' if count == 1 else 's'} vs #{baseline.pk}"



def with_causes_column(rows: Iterable[list[Any]], run: Run) -> Iterable[list[Any]]:
    """A CSV's rows (a header, then a row per case with its eval_id first) with a last column:
    the run's causes of that case ("missing x | timeout"). One query for the whole run."""
    cause_set = cause_set_for(run)
    by_case: dict[str, list[str]] = defaultdict(list)
    if cause_set is not None:
        for eval_id, signature in (ResultCause.objects.filter(cause__cause_set=cause_set)
                                   .order_by("eval_id", "cause__rank").values_list("eval_id", "cause__signature")):
            by_case[eval_id].append(signature)
    iterator = iter(rows)
    header = next(iterator, None)
    if header is None:
        return
    yield [*header, "causes"]
    for row in iterator:
        yield [*row, " | ".join(dict.fromkeys(by_case.get(str(row[0]), ())))]


# --- Across runs: N-way and the trend -------------------------------------------------------


@dataclass(frozen=True)
class AcrossRow:
    signature: str
    kind: str
    cases: tuple[int | None, ...]  # per run, in the runs' order: None where the run does not have it

    @property
    def runs_with(self) -> int:
        return sum(1 for n in self.cases if n)


def causes_across(runs: Sequence[Run], *, limit: int = SHOWN) -> tuple[list[AcrossRow], int]:
    """The causes of 2-8 finished runs side by side: which runs each appears in and how many
    cases it hit in each, most cases in all first; and how many causes there are in all. The
    runs' causes are grouped first if they were not (as on their own pages)."""
    sets = {run.pk: cause_set_for(run) for run in runs}
    position = {pk: i for i, pk in enumerate(sets)}
    found: dict[str, list[Any]] = {}
    for run_id, signature, kind, cases in (RunCause.objects.filter(
            cause_set_id__in=[s.pk for s in sets.values() if s is not None])
            .values_list("cause_set_id", "signature", "kind", "cases")):
        row = found.setdefault(signature, [kind, [None] * len(sets)])
        row[1][position[run_id]] = cases
    ranked = sorted(found.items(), key=lambda item: (-sum(n or 0 for n in item[1][1]), item[0]))
    return [AcrossRow(signature, kind, tuple(counts)) for signature, (kind, counts) in ranked[:limit]], len(found)


@dataclass(frozen=True)
class SinceRow:
    signature: str
    kind: str
    cases: int  # in the latest run
    since: int  # the first run of the unbroken streak of runs that have it, up to the latest
    runs: int  # how many runs of the streak

    @property
    def text(self) -> str:
        return f"{self.signature} since #{self.since}"


def causes_since(runs: Sequence[Run], *, limit: int = SHOWN) -> tuple[str, list[SinceRow]]:
    """When each cause of the latest run (of `runs`, oldest first) first appeared on its
    branch: walking back over the branch's runs while they have it ("missing search_flights
    since #41"). A run whose causes were never grouped (finished before causes existed) is
    passed over rather than grouped here: the trend reads 30 runs. (branch, rows)."""
    if not runs:
        return "", []
    latest = runs[-1]
    branch_runs = [run for run in runs if run.branch == latest.branch]
    if not latest.is_finished:
        return latest.branch, []
    # One query for which of the branch's runs are grouped (the latest grouped now if not).
    grouped = {run_id: finished for run_id, finished in CauseSet.objects.filter(
        run_id__in=[r.pk for r in branch_runs], version=CAUSES_VERSION).values_list("run_id", "run_finished_at")}
    if latest.pk not in grouped or grouped[latest.pk] != latest.finished_at:
        causes_store(run=latest)
        grouped[latest.pk] = latest.finished_at
    mine = list(RunCause.objects.filter(cause_set_id=latest.pk).order_by("rank")
                .values_list("signature", "kind", "cases")[:limit])
    having: dict[str, set[int]] = defaultdict(set)
    for run_id, signature in RunCause.objects.filter(
            cause_set_id__in=list(grouped), signature__in=[s for s, _, _ in mine]).values_list("cause_set_id",
                                                                                             "signature"):
        having[signature].add(run_id)
    rows = []
    for signature, kind, cases in mine:
        since, streak = latest.pk, 0
        for run in reversed(branch_runs):
            if run.pk not in grouped:
                continue
            if run.pk not in having[signature]:
                break
            since, streak = run.pk, streak + 1
        rows.append(SinceRow(signature, kind, cases, since, streak))
    return latest.branch, rows
