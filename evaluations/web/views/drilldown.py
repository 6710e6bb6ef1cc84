"""The case drill-down: one result of a run, turn by turn, diffed against what was expected
(and, with `?baseline=<run id>`, against what the baseline run did).

`/runs/<run_pk>/cases/<result_pk>/[?baseline=<id>&status=<filter>&q=<search>]`

- Responses: expected and actual final response with a word-level diff (`word_diff`).
- Tool calls: `evaluations.evaluators.diffing.align` under the run's own trajectory settings, drawn
  like a side-by-side code review (`diff_rows`): a missing call leaves a gap on the right,
  an unexpected one a gap on the left, and arguments that differ are expanded path by path
  (`arg_lines`), nested JSON only where it differs.
- Scores with their thresholds and justifications, the trajectory steps, and the span
  waterfall of an ingested trace.
- With a baseline (`?baseline=`, else the run's default baseline: every link that opens a
  case, from the run page, a cause's example, the trend or the queue, lands on the same page):
  the case's comparison status, the baseline's calls aligned with the candidate's, the triage
  panel, and previous / next links (keys k / j) through the comparison's filtered list of
  cases, so a reviewer walks the regressions without losing the filters.

Everything shown is untrusted text: templates escape it, diffs are segments of plain text
that the template wraps in <ins>/<del>.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from evaluations.converters import parse_id
from evaluations.evalsets.selectors import pretty_json
from evaluations.evaluators.base import aligned_turns, text_of
from evaluations.evaluators.diffing import (
    ARGS_DIFFER,
    MATCHED,
    MISSING,
    UNEXPECTED,
    AlignmentRow,
    ArgRules,
    align,
    child_path,
)
from evaluations.models import CaseResult, EvalCase, Run, Score, Span, Trace
from evaluations.review import comparison
from evaluations.review.baselines import baseline_choice
from evaluations.review.drilldown import (
    CLOSE_ENOUGH,
    JudgedSteps,
    Repeat,
    Row,
    judged_steps,
    justification_rows,
    repeats_of,
    result_output,
    shared_fraction,
    turn_pairs,
)
from evaluations.review.selectors import Walk, run_label, trajectory_settings
from evaluations.runs.engine import native_case
from evaluations.runs.simulation import LABELS as SIMULATION_LABELS
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import Invocation, MatchType, ToolCall
from evaluations.schemas.outputs import AgentOutput, TurnOutput
from evaluations.web.charts import to_html
from evaluations.web.charts.trace import WaterfallSpan, waterfall
from evaluations.web.views.common import can_upload, enter_project
from evaluations.web.views.compare import CASES_PER_PAGE, FILTERS, runs_visible_to
from evaluations.web.views.grade_panel import panel_context as grades_panel_context
from evaluations.web.views.triage import panel_context

# Beyond these sizes a diff would cost more than it shows: both texts are shown whole instead.
MAX_DIFF_TOKENS = 4000
MAX_CHAR_DIFF = 400
SIMILAR = 0.7  # below this similarity a changed value is marked whole, not letter by letter
LONG_ARG_CHARS = 240  # an argument value longer than this is collapsed behind "show all"
MAX_SPANS = 400


# --- Text diffs ---------------------------------------------------------------------------

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")


@dataclass(frozen=True)
class Segment:
    kind: str  # equal / del / ins
    text: str


def _segments(before: list[str], after: list[str]) -> list[Segment]:
    out: list[Segment] = []

    def add(kind: str, text: str) -> None:
        if not text:
            return
        if out and out[-1].kind == kind:
            out[-1] = Segment(kind, out[-1].text + text)
        else:
            out.append(Segment(kind, text))

    matcher = SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            add("equal", "".join(before[i1:i2]))
        else:
            add("del", "".join(before[i1:i2]))
            add("ins", "".join(after[j1:j2]))
    return out


def word_diff(before: str, after: str) -> list[Segment] | None:
    """The edit from `before` to `after` word by word (whitespace and punctuation are tokens
    of their own); None when the texts are too long to diff."""
    a, b = _WORDS.findall(before), _WORDS.findall(after)
    if len(a) > MAX_DIFF_TOKENS or len(b) > MAX_DIFF_TOKENS:
        return None
    return _segments(a, b)


def char_diff(before: str, after: str) -> tuple[list[Segment], list[Segment]]:
    """Two sides of a short value's character diff: what was removed on the left, what was
    added on the right ("2026-12-05" -> "2026-12-06" marks just the last digit). Values that
    share little ("Tokyo" -> "Kyoto") are marked whole: a few common letters mean nothing."""
    whole = [Segment("del", before)], [Segment("ins", after)]
    if len(before) > MAX_CHAR_DIFF or len(after) > MAX_CHAR_DIFF:
        return whole
    matcher = SequenceMatcher(None, before, after, autojunk=False)
    if matcher.ratio() < SIMILAR:
        return whole
    segments = _segments(list(before), list(after))
    return ([s for s in segments if s.kind != "ins"], [s for s in segments if s.kind != "del"])


# --- Tool-call diffs ----------------------------------------------------------------------


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class ArgLine:
    """One argument (or one level of a nested one) of a pair of calls, side by side."""

    depth: int
    key: str
    left: str | None  # JSON text; None when that side lacks the argument
    right: str | None
    kind: str  # same / changed / added / removed / nested
    left_segments: list[Segment] = field(default_factory=list)
    right_segments: list[Segment] = field(default_factory=list)

    @property
    def long(self) -> bool:
        return len(self.left or "") > LONG_ARG_CHARS or len(self.right or "") > LONG_ARG_CHARS

    @property
    def indent(self) -> str:
        return f"{self.depth * 1.2:.1f}rem"


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, dict):
        return key in container
    return isinstance(container, list) and isinstance(key, int) and key < len(container)


def arg_lines(expected: Any, actual: Any, diffs: list[dict[str, Any]] | None = None, *, path: str = "",
              depth: int = 0) -> list[ArgLine]:
    """The arguments of two calls as aligned lines. Where `diffs` (ArgDiff dicts) mark a path
    as changed, added or removed, that line says so and the changed part is marked; a nested
    object is opened only when something inside it differs, else shown on one line."""
    by_path = {d["path"]: d for d in diffs or []}
    left: Any
    right: Any
    if isinstance(expected, dict) or isinstance(actual, dict):
        left = expected if isinstance(expected, dict) else {}
        right = actual if isinstance(actual, dict) else {}
        keys: list[Any] = list(left) + [k for k in right if k not in left]
    else:
        left = expected if isinstance(expected, list) else []
        right = actual if isinstance(actual, list) else []
        keys = list(range(max(len(left), len(right))))
    lines: list[ArgLine] = []
    for key in keys:
        sub = child_path(path, key)
        label = f"[{key}]" if isinstance(key, int) else str(key)
        in_left, in_right = _has(left, key), _has(right, key)
        e = left[key] if in_left else None
        a = right[key] if in_right else None
        diff = by_path.get(sub)
        if diff is not None:
            kind = diff["kind"]
            line = ArgLine(depth, label, compact(e) if in_left else None, compact(a) if in_right else None, kind)
            if kind == "changed" and line.left is not None and line.right is not None:
                line_left, line_right = char_diff(line.left, line.right)
                line = ArgLine(depth, label, line.left, line.right, kind, line_left, line_right)
            lines.append(line)
        elif (in_left and in_right and type(e) is type(a) and isinstance(e, (dict, list))
              and any(p.startswith(sub + ".") or p.startswith(sub + "[") for p in by_path)):
            opener = "{…}" if isinstance(e, dict) else "[…]"
            lines.append(ArgLine(depth, label, opener, opener, "nested"))
            lines.extend(arg_lines(e, a, diffs, path=sub, depth=depth + 1))
        else:
            lines.append(ArgLine(depth, label, compact(e) if in_left else None, compact(a) if in_right else None,
                                 "same"))
    return lines


@dataclass(frozen=True)
class CallSide:
    name: str
    result_json: str | None
    error: str | None
    latency: float | None
    simulated: str | None = None  # the model target: where evalsite's simulated result came from

    @property
    def simulated_label(self) -> str:
        return SIMULATION_LABELS.get(self.simulated or "", self.simulated or "")


@dataclass(frozen=True)
class DiffRow:
    kind: str  # matched / args_differ / missing / unexpected
    left: CallSide | None
    right: CallSide | None
    args: list[ArgLine]
    anchor: str = ""  # the row's id in the page, for the summary's jump links
    paths: tuple[str, ...] = ()  # the argument paths that differ

    @property
    def name(self) -> str:
        side = self.left or self.right
        return side.name if side is not None else ""

    @property
    def label(self) -> str:
        return {MATCHED: "matched", ARGS_DIFFER: "arguments differ", MISSING: "missing",
                UNEXPECTED: "unexpected"}[self.kind]

    @property
    def icon(self) -> str:
        return {MATCHED: "=", ARGS_DIFFER: "≠", MISSING: comparison.MINUS, UNEXPECTED: "+"}[self.kind]


def _side(call: ToolCall | None) -> CallSide | None:
    if call is None:
        return None
    fields = call.__dict__
    return CallSide(call.name, None if call.result is None else pretty_json(call.result), fields.get("error"),
                    fields.get("latency_seconds"), fields.get("simulated"))


def diff_rows(rows: list[AlignmentRow], anchor: str = "") -> list[DiffRow]:
    """The rows drawn; with `anchor`, each row gets the id `<anchor>-call-<n>`."""
    out = []
    for number, row in enumerate(rows, start=1):
        e, a = row.expected, row.actual
        diffs = [d.as_dict() for d in row.arg_diffs]
        args = arg_lines(e.args if e else {}, a.args if a else {}, diffs)
        out.append(DiffRow(row.kind, _side(e), _side(a), args, f"{anchor}-call-{number}" if anchor else "",
                           tuple(d.path for d in row.arg_diffs)))
    return out


@dataclass(frozen=True)
class Difference:
    """One line of the drill-down's summary: what differs, and where on the page."""

    turn: int
    text: str  # "1 missing call: get_weather", "`city` differs"
    anchor: str

    @property
    def code(self) -> str:
        """The argument path the text names in backticks, if any (shown as code)."""
        return self.text[1:self.text.index("`", 1)] if self.text.startswith("`") else ""

    @property
    def rest(self) -> str:
        return self.text[len(self.code) + 2:] if self.code else self.text


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def differences(turn: TurnView) -> list[Difference]:
    """What differs in one turn, in the order the page shows it."""
    anchor = f"turn-{turn.number}"
    if turn.turn_missing:
        return [Difference(turn.number, "no actual turn", anchor)]
    found = []
    if turn.error:
        found.append(Difference(turn.number, "the turn errored", anchor))
    for kind, word in ((MISSING, "missing call"), (UNEXPECTED, "unexpected call")):
        rows = [row for row in turn.tool_rows if row.kind == kind]
        if rows:
            names = ", ".join(dict.fromkeys(row.name for row in rows))
            found.append(Difference(turn.number, f"{_plural(len(rows), word)}: {names}", rows[0].anchor))
    for row in turn.tool_rows:
        if row.kind == ARGS_DIFFER:
            for path in row.paths or ("arguments",):
                found.append(Difference(turn.number, f"`{path}` differs in {row.name}", row.anchor))
    if turn.expected_response is not None and turn.response_differs:
        found.append(Difference(turn.number, "the final response differs", f"{anchor}-response"))
    return found




# --- The page -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TurnScore:
    criterion: str
    score: float | None
    passed: bool | None


@dataclass
class TurnView:
    number: int
    invocation_id: str
    user_text: str | None
    expected_response: str | None
    actual_response: str | None
    response_diff: list[Segment] | None
    diff_too_long: bool
    tool_rows: list[DiffRow]
    counts: dict[str, int]
    turn_missing: bool
    error: str | None
    latency: float | None
    baseline_rows: list[DiffRow] | None = None
    baseline_response: str | None = None
    scores: list[TurnScore] = field(default_factory=list)
    side_by_side: bool = False  # the responses share too little for a word diff to help

    baseline_as_expected: bool = False  # the baseline made the expected calls: its table would repeat this one

    @property
    def baseline_all_matched(self) -> bool:
        """The baseline's calls all match this run's (or neither made one): nothing to look at
        unless asked."""
        return self.baseline_rows is not None and all(row.kind == MATCHED for row in self.baseline_rows)

    @property
    def calls_folded(self) -> int:
        """How many calls matched: drawn folded."""
        return sum(1 for row in self.tool_rows if row.kind == MATCHED)

    @property
    def response_differs(self) -> bool:
        if self.actual_response is None:
            return True
        return (self.expected_response or "").strip() != self.actual_response.strip()

    @property
    def response_changed(self) -> bool:
        return any(s.kind != "equal" for s in self.response_diff or [])

    @property
    def diff_long(self) -> bool:
        return len(self.expected_response or "") + len(self.actual_response or "") > 1600


@dataclass(frozen=True)
class ScoreView:
    criterion: str
    level: str
    score: float | None
    raw_value: float | None
    passed: bool | None
    threshold: str
    error: str
    justification_json: str | None
    justification: list[Row] = field(default_factory=list)
    judged: JudgedSteps | None = None  # a DeepEval judged metric's reason and steps


@dataclass(frozen=True)
class StepView:
    number: int
    step_type: str
    name: str
    args_json: str | None
    offset: float | None  # seconds since the first timed step


@dataclass(frozen=True)
class TraceView:
    trace_id: str
    thread_id: str
    name: str
    span_count: int
    chart_html: str
    shown: int


@dataclass(frozen=True)
class Stepper:
    position: int  # 1-based within the filtered list, 0 when the case is not in it
    total: int
    status_label: str
    previous_url: str | None
    next_url: str | None
    back_url: str


@dataclass
class DrillPage:
    run: Run
    run_label: str
    result: CaseResult
    case: NativeCase
    output_error: str | None
    turns: list[TurnView]
    scores: list[ScoreView]
    steps: list[StepView]
    traces: list[TraceView]
    match_type: str
    args_mode: str
    baseline: Run | None = None
    baseline_label: str = ""
    baseline_result: CaseResult | None = None
    baseline_url: str | None = None
    status: comparison.StatusStyle | None = None
    stepper: Stepper | None = None
    case_url: str = ""
    repeats: list[Repeat] = field(default_factory=list)

    @property
    def differences(self) -> list[Difference]:
        """The summary at the top: every difference of every turn, with its jump link."""
        return [found for turn in self.turns for found in differences(turn)]


def _message_text(message: Any) -> str | None:
    return None if message is None else message.get_text()


def _baseline_turns(case: NativeCase, output: AgentOutput | None) -> dict[str, TurnOutput | None]:
    if output is None:
        return {}
    return {inv.invocation_id: turn for inv, turn in aligned_turns(case, output)}


def _threshold_text(threshold: Any) -> str:
    if not isinstance(threshold, dict):
        return ""
    parts = []
    if threshold.get("lower_limit") is not None:
        parts.append(f"≥ {threshold['lower_limit']:g}")
    if threshold.get("upper_limit") is not None:
        parts.append(f"≤ {threshold['upper_limit']:g}")
    return " and ".join(parts)


def _level(score: Score) -> str:
    if score.applies_to == Score.Level.INTERACTION:
        return f"turn {score.turn_index + 1}"
    if score.applies_to == Score.Level.NODE:
        return f"node {score.node_name}"
    return "conversation"


def _traces(result: CaseResult) -> list[TraceView]:
    traces = list(Trace.objects.filter(result=result).order_by("start_ns", "pk"))
    if not traces:
        return []
    spans: dict[int, list[WaterfallSpan]] = {t.pk: [] for t in traces}
    for trace_id, span_id, parent, name, kind, start, end, status in (
        Span.objects.filter(trace__in=traces).order_by("start_ns", "pk")
        .values_list("trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status")
    ):
        spans[trace_id].append(WaterfallSpan(span_id, parent, name, kind, start, end, status))
    views = []
    for trace in traces:
        shown = spans[trace.pk][:MAX_SPANS]
        views.append(TraceView(trace.trace_id, trace.thread_id, trace.name, len(spans[trace.pk]),
                               to_html(waterfall(shown)) if shown else "", len(shown)))
    return views


def turn_view(index: int, invocation: Invocation | None, turn: TurnOutput | None, match_type: MatchType,
              rules: ArgRules, scores: list[TurnScore] | None = None, *, anchors: bool = True,
              diff_responses: bool = True) -> TurnView:
    """One turn as the drill-down (and the grading queue) shows it: the user's message, the
    expected and actual final responses with their word diff, and the step-aligned calls.
    `anchors=False` leaves the calls without ids (a page showing several cases' turns);
    `diff_responses=False` skips the word diff (a page that shows the two responses whole)."""
    expected_calls = invocation.expected_tool_trajectory if invocation else []
    actual_calls = turn.tool_calls if turn else []
    alignment = align(expected_calls, actual_calls, match_type, rules)
    expected_text = (_message_text(invocation.expected_final_response) if invocation else None)
    actual_text = text_of(turn.final_response) if turn is not None and turn.final_response is not None else None
    both = diff_responses and expected_text is not None and actual_text is not None
    diff = word_diff(expected_text or "", actual_text or "") if both else None
    side_by_side = diff is not None and shared_fraction(diff) < CLOSE_ENOUGH
    if side_by_side:
        diff = None
    return TurnView(
        number=index + 1,
        invocation_id=invocation.invocation_id if invocation else (turn.invocation_id or "" if turn else ""),
        user_text=invocation.user_content.get_text() if invocation else None,
        expected_response=expected_text,
        actual_response=actual_text,
        response_diff=diff,
        diff_too_long=diff is None and not side_by_side and both,
        side_by_side=side_by_side,
        tool_rows=diff_rows(alignment.rows, f"turn-{index + 1}" if anchors else ""),
        counts={kind: alignment.count(kind) for kind in (MATCHED, ARGS_DIFFER, MISSING, UNEXPECTED)},
        turn_missing=invocation is not None and turn is None,
        error=turn.error if turn else None,
        latency=turn.latency_seconds if turn else None,
        scores=scores or [],
    )


def drill_page(*, run: Run, result: CaseResult, baseline: Run | None, baseline_result: CaseResult | None) -> DrillPage:
    case = native_case(result.case)
    output, output_error = result_output(result)
    match_type, rules = trajectory_settings(run.config)
    base_case = native_case(baseline_result.case) if baseline_result is not None else None
    base_output = result_output(baseline_result)[0] if baseline_result is not None else None
    base_turns = _baseline_turns(base_case, base_output) if base_case is not None else {}
    base_by_position = list(base_turns.values())

    scores = list(Score.objects.filter(result=result).order_by("turn_index", "criterion", "node_name"))
    turn_scores: dict[int, list[TurnScore]] = {}
    for s in scores:
        if s.applies_to == Score.Level.INTERACTION:
            turn_scores.setdefault(s.turn_index, []).append(TurnScore(s.criterion, s.score, s.passed))

    turns = []
    for index, (invocation, turn) in enumerate(turn_pairs(case, output)):
        view = turn_view(index, invocation, turn, match_type, rules, turn_scores.get(index, []))
        expected_calls = invocation.expected_tool_trajectory if invocation else []
        actual_calls = turn.tool_calls if turn else []
        if baseline_result is not None:
            base_turn = (base_turns.get(invocation.invocation_id) if invocation else None)
            if base_turn is None and invocation is None and index < len(base_by_position):
                base_turn = base_by_position[index]
            base_calls = base_turn.tool_calls if base_turn else []
            view.baseline_rows = diff_rows(align(base_calls, actual_calls, match_type, rules).rows)
            # Where the baseline did what was expected, its table would only repeat the one above.
            view.baseline_as_expected = all(row.kind == MATCHED for row in
                                            align(expected_calls, base_calls, match_type, rules).rows)
            if base_turn is not None and base_turn.final_response is not None:
                view.baseline_response = text_of(base_turn.final_response)
        turns.append(view)

    trajectory = output.trajectory if output else []
    first = next((step.timestamp for step in trajectory if step.timestamp is not None), None)
    steps = [StepView(i, step.step_type.value, step.name, compact(step.args) if step.args else None,
                      None if step.timestamp is None or first is None else step.timestamp - first)
             for i, step in enumerate(trajectory, start=1)]
    return DrillPage(
        run=run, run_label=run_label(run), result=result, case=case, output_error=output_error, turns=turns,
        scores=[ScoreView(s.criterion, _level(s), s.score, s.raw_value, s.passed, _threshold_text(s.threshold),
                          s.error, pretty_json(s.justification) if s.justification else None,
                          justification_rows(s.justification) if s.justification else [],
                          judged_steps(s.justification) if isinstance(s.justification, dict) else None)
                for s in sorted(scores, key=lambda s: (s.applies_to != Score.Level.CONVERSATION, s.turn_index,
                                                       s.criterion, s.node_name))],
        steps=steps, traces=_traces(result), match_type=match_type.value, args_mode=rules.mode,
        baseline=baseline, baseline_label=run_label(baseline) if baseline else "", baseline_result=baseline_result,
        baseline_url=reverse("run_case", args=[baseline.pk, baseline_result.pk])
        if baseline is not None and baseline_result is not None else None,
        case_url=reverse("case_detail", args=[result.case_id]),
        repeats=repeats_of(result),
    )


def stepper(source: comparison.CaseSource, walk: Walk, eval_id: str,
            run: Run) -> tuple[comparison.StatusStyle | None, Stepper]:
    """Where the case sits in the comparison's filtered list, and its neighbours that the
    candidate has (a removed case has no candidate result to open)."""
    found = source.neighbours(eval_id, walk.status, walk.q)
    query = walk.query()

    def url(result_pk: int | None) -> str | None:
        return None if result_pk is None else reverse("run_case", args=[run.pk, result_pk]) + query

    page = (found.index // CASES_PER_PAGE + 1) if found.index is not None else 1
    label = "case" if walk.status == "all" else comparison.STATUSES[walk.status].label
    return (comparison.STATUSES[found.status] if found.status else None,
            Stepper(found.index + 1 if found.index is not None else 0, found.total, label, url(found.previous),
                    url(found.next), walk.compare_url(page)))


@login_required
@require_GET
def run_case(request: HttpRequest, run_pk: int, result_pk: int) -> HttpResponse:
    run = get_object_or_404(runs_visible_to(request.user).select_related("project", "evalset_version__evalset"),
                            pk=run_pk)
    result = get_object_or_404(CaseResult.objects.select_related("case"), pk=result_pk, run=run)
    enter_project(request, run.project)
    baseline = baseline_result = None
    baseline_id = parse_id(request.GET.get("baseline"))
    if request.GET.get("baseline") and baseline_id is None:
        raise Http404("no such run")
    named = baseline_id is not None
    if baseline_id is None:
        # One drill-down whichever link opened it (the run page, a cause's example, the trend):
        # the comparison it belongs to is the run's default baseline when none is named.
        choice = baseline_choice(run)
        if choice is not None and choice.run.is_finished:
            baseline_id = choice.run.pk
    if baseline_id is not None and baseline_id != run.pk:
        baseline = get_object_or_404(runs_visible_to(request.user).select_related("evalset_version"), pk=baseline_id,
                                     project=run.project)
        # The case's row in the baseline's version first (its (version, eval_id) index), then
        # its results by the (run, case) index: not a walk over every result of the baseline.
        case_ids = EvalCase.objects.in_version_by_eval_id(baseline.evalset_version, result.case.eval_id)
        candidates = list(CaseResult.objects.filter(run=baseline, case_id__in=case_ids.values("pk"))
                          .select_related("case").order_by("iteration"))
        baseline_result = next((r for r in candidates if r.iteration == result.iteration),
                               candidates[0] if candidates else None)
    page = drill_page(run=run, result=result, baseline=baseline, baseline_result=baseline_result)
    triage_panel: dict[str, Any] | None = None
    if baseline is not None:
        source = comparison.comparison_source(baseline=baseline, candidate=run)
        # a named comparison walks its filter (regressions first by default); the default one,
        # reached from anywhere, walks every case in the comparison's order
        status = request.GET.get("status") or (comparison.default_filter(source.head["counts"]) if named else "all")
        walk = Walk(baseline.pk, run.pk, status if status in FILTERS else "all", request.GET.get("q", "").strip())
        page.status, page.stepper = stepper(source, walk, result.case.eval_id, run)
        # The case's triage in this comparison: read by everyone, changed by members.
        triage_panel = panel_context(user=request.user, project=run.project, candidate=run, result=result,
                                     baseline=baseline)
    grades_panel = grades_panel_context(user=request.user, run=run, result=result)
    # Members and admins may promote the result into a case (the triage panel knows the role).
    can_curate = triage_panel["can_triage"] if triage_panel else can_upload(request.user, run.project)
    return render(request, "evaluations/compare/drilldown.html",
                  {"page": page, "triage_panel": triage_panel, "grades_panel": grades_panel,
                   "can_curate": can_curate})
