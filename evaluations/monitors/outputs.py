"""A received trace (or a thread of them) as the `AgentOutput` the evaluators read, one query for
the spans of many traces. A trace is one turn, mapped span by span with the helpers a traces
run uses (`interop.otel.spans`: `tool_call`, `span_usage`, `final_text`): the root's answer,
every TOOL span as a tool call (in start order, its error from the span's status), token and
cost usage from the LLM spans (the root agent's own totals when no LLM span has any), the
root's duration as the latency, and its input as the turn's `user_content`. No trajectory or
span tree is built: reference-free criteria do not read them, and scoring stays at thousands of
traces a second."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from evaluations.interop.otel.otlp import STATUS_MESSAGE
from evaluations.interop.otel.spans import Span as SpanModel
from evaluations.interop.otel.spans import add_usage, final_text, input_text, span_usage, tool_call
from evaluations.models import Span
from evaluations.schemas.outputs import AgentOutput, TurnOutput

MAX_SPANS_PER_TRACE = 2000


def spans_of(trace_pks: Iterable[int], trace_ids: dict[int, str]) -> dict[int, list[SpanModel]]:
    out: dict[int, list[SpanModel]] = defaultdict(list)
    rows = Span.objects.filter(trace_id__in=list(trace_pks)).values_list(
        "trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status", "attributes"
    ).order_by("trace_id", "start_ns", "pk")
    for pk, span_id, parent, name, kind, start, end, status, attributes in rows.iterator(chunk_size=2000):
        if len(out[pk]) >= MAX_SPANS_PER_TRACE:
            continue
        attributes = dict(attributes or {})
        message = str(attributes.pop(STATUS_MESSAGE, "") or "")
        out[pk].append(SpanModel.model_construct(
            trace_id=trace_ids[pk], span_id=span_id, parent_span_id=parent or None, name=name, kind=kind,
            start_time_unix_nano=start or 0, end_time_unix_nano=end, attributes=attributes,
            status_code=status or "UNSET", status_message=message, events=[], resource={}, scope=""))
    return out


def root_attributes(spans: list[SpanModel]) -> dict[str, Any]:
    root = next((s for s in spans if not s.parent_span_id), None)
    return root.attributes if root is not None else {}


def trace_output(trace_id: str, spans: list[SpanModel]) -> AgentOutput:
    """One trace as one turn: its tool calls, usage, latency and the root's answer. Built
    without re-validation: every value comes from the span helpers' own models."""
    root = next((s for s in spans if not s.parent_span_id), None)
    calls = [tool_call(s) for s in spans if s.kind == "TOOL"]
    llm = [u for u in (span_usage(s) for s in spans if s.kind == "LLM") if u is not None]
    usage = add_usage(llm) if llm else (span_usage(root) if root is not None and root.kind == "AGENT" else None)
    turn = TurnOutput.model_construct(
        invocation_id=None, final_response=final_text(root) if root is not None else None, tool_calls=calls,
        intermediate_responses=[], latency_seconds=root.duration_seconds if root is not None else None,
        usage=usage, error=root.error() if root is not None else None, metadata=_asked(root))
    return AgentOutput.model_construct(eval_id=trace_id[:255], iteration=0, turns=[turn], **_defaults())


def _asked(root: SpanModel | None) -> dict[str, Any]:
    """The user's message, for the judged criteria that read it (answer relevancy...)."""
    asked = input_text(root) if root is not None else None
    return {"user_content": asked} if asked is not None else {}


def thread_output(thread_id: str, turns: list[AgentOutput]) -> AgentOutput:
    """A thread as a conversation: each of its traces (by start) one turn."""
    return AgentOutput.model_construct(eval_id=thread_id[:255] or "thread", iteration=0,
                                       turns=[t for output in turns for t in output.turns], **_defaults())


_OTHER_FIELDS = [(name, field.default_factory, field.default) for name, field in AgentOutput.model_fields.items()
                 if name not in {"eval_id", "iteration", "turns"}]


def _defaults() -> dict[str, Any]:
    """The output's other fields at their defaults (fresh lists and dicts for each output)."""
    return {name: factory() if factory is not None else default  # type: ignore[call-arg]
            for name, factory, default in _OTHER_FIELDS}
