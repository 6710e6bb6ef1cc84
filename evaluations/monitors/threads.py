"""A thread read as a conversation: each of its traces (by start) a turn, with the user's
input and the agent's answer from the root span, the tool calls, and the criteria monitors
failed on it. A bounded page of turns, a fixed number of queries."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from evaluations.models import MonitorScore, Span, Trace, TraceThread

MAX_TEXT = 4000


@dataclass
class Turn:
    trace_pk: int
    trace_id: str
    name: str
    start_ns: int | None
    end_ns: int | None
    errors: int
    user: str = ""
    answer: str = ""
    tools: list[tuple[str, str]] = field(default_factory=list)  # (name, status)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (monitor, criterion)

    @property
    def seconds(self) -> float | None:
        return (self.end_ns - self.start_ns) / 1e9 if self.start_ns and self.end_ns else None


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _input_of(attributes: dict[str, Any]) -> str:
    for key in ("input.value", "gen_ai.prompt", "llm.input_messages"):
        if attributes.get(key):
            return _text(attributes[key])
    return ""


def thread_turns(thread: TraceThread, *, offset: int, limit: int) -> list[Turn]:
    traces = list(Trace.objects.filter(project_id=thread.project_id, received=True, thread_id=thread.thread_id)
                  .order_by("start_ns", "pk").values_list("pk", "trace_id", "name", "start_ns", "end_ns",
                                                          "error_count")[offset:offset + limit])
    turns = {t[0]: Turn(*t) for t in traces}
    if not turns:
        return []
    spans = Span.objects.filter(trace_id__in=list(turns)).filter(kind__in=["TOOL", "AGENT", "CHAIN", "INTERNAL",
                                                                           "SERVER"])
    for trace_pk, parent, kind, name, status, attributes in spans.order_by("trace_id", "start_ns").values_list(
            "trace_id", "parent_span_id", "kind", "name", "status", "attributes")[:limit * 50]:
        turn = turns[trace_pk]
        attributes = attributes or {}
        if not parent:
            turn.user = _input_of(attributes)
            turn.answer = _text(attributes.get("output.value", ""))
        elif kind == "TOOL":
            turn.tools.append((str(attributes.get("tool.name") or attributes.get("gen_ai.tool.name") or name), status))
    failed: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for trace_pk, monitor, criterion in MonitorScore.objects.filter(
            result__trace_id__in=list(turns), passed=False).values_list(
            "result__trace_id", "result__monitor__name", "criterion")[:limit * 20]:
        failed[trace_pk].append((monitor, criterion))
    for pk, items in failed.items():
        turns[pk].failed = items
    return list(turns.values())


@dataclass
class Failing:
    criterion: str
    value: float | None
    detail: dict[str, Any]

    @property
    def detail_json(self) -> str:
        import json

        return json.dumps(self.detail, indent=1, ensure_ascii=False, default=str)[:MAX_TEXT]


@dataclass
class Verdict:
    monitor_id: int
    monitor: Any
    version: int
    passed: bool
    failing: list[Failing]


def trace_verdicts(trace_pk: int, limit: int = 20) -> list[Verdict]:
    """What the monitors found on one trace (newest version first), with the failed
    criteria's details: two queries."""
    from evaluations.models import MonitorResult

    results = list(MonitorResult.objects.filter(trace_id=trace_pk).select_related("monitor")
                   .order_by("monitor__name", "-version")[:limit])
    failing: dict[int, list[Failing]] = defaultdict(list)
    for result_id, criterion, value, detail in MonitorScore.objects.filter(
            result__in=[r.pk for r in results], passed=False).order_by("criterion").values_list(
            "result_id", "criterion", "value", "detail"):
        failing[result_id].append(Failing(criterion, value, detail or {}))
    return [Verdict(r.monitor_id, r.monitor, r.version, r.passed, failing.get(r.pk, [])) for r in results]
