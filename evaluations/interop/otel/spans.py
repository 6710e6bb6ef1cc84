"""OpenTelemetry traces of agent runs: OTLP JSON in, spans, span trees and what they show.

An agent instrumented with OpenTelemetry exports its spans as OTLP JSON
(`{"resourceSpans": [{"resource": ..., "scopeSpans": [{"scope": ..., "spans": [...]}]}]}`;
the protobuf field names `resource_spans`, `scope_spans`, ... and the older
`instrumentationLibrarySpans` are read too). `parse_otlp()` turns that into `Span` models,
`span_forest()` into trees, and `derive()` reads off what the evaluators need. Two attribute
vocabularies are understood:

- OpenInference (Arize): `openinference.span.kind` = TOOL / LLM / AGENT / CHAIN, with
  `tool.name`, `tool.id`, `input.value`, `output.value`, `llm.model_name`,
  `llm.token_count.prompt|completion|total`, `llm.cost.total`, `agent.name`,
  `graph.node.name`, `session.id`.
- OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` = execute_tool /
  chat / text_completion / generate_content / invoke_agent / create_agent / invoke_workflow,
  with `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`,
  `gen_ai.tool.call.result`, `gen_ai.agent.name`, `gen_ai.request.model`,
  `gen_ai.response.model`, `gen_ai.usage.input_tokens|output_tokens` (and the older
  `prompt_tokens|completion_tokens`), `gen_ai.conversation.id`.

Derivation rules (`derive()`), over the spans of a trace or of one turn, in tree order
(depth first, siblings by start time):

- a TOOL span (`openinference.span.kind` = TOOL or `gen_ai.operation.name` = execute_tool)
  is a tool call: name, arguments (a JSON object string is parsed; anything else becomes
  `{"input": value}`), result (parsed when JSON), call id, the span's duration as its
  latency, the span's error status as its error, and the nearest enclosing agent node;
- an AGENT or CHAIN span (OpenInference) or an invoke_agent / create_agent /
  invoke_workflow span (GenAI) is a NODE step of the trajectory; each TOOL span is a TOOL
  step; steps carry the start time and, in metadata, the span id and latency;
- an LLM span (OpenInference LLM, GenAI chat / text_completion / generate_content) is an LLM
  call with its model and token usage. Usage totals add up the LLM spans only; only when no
  LLM span reports usage are the outermost agent spans' totals used (GenAI allows usage on
  invoke_agent spans too, and summing both would count every token twice);
- the thread (Confident AI's grouping of traces into a conversation) is the first
  `session.id` or `gen_ai.conversation.id` found on a span or on its resource.

Turn boundaries (`turn_spans()`, used by `apply_trace()`): one root span per turn, in start
order, as frameworks that trace each request as its own trace produce. A single root that
wraps the whole conversation is unwrapped into its children when the output has several
turns. See `apply_trace()` for what happens when the counts still differ.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes, ToolCallAttributes
from pydantic import BaseModel, ConfigDict, Field

from evaluations import safejson
from evaluations.converters import whole_number
from evaluations.schemas.evalset import StepType, TrajectoryStep
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput, Usage

PathPart = str | int

MAX_TRACE_PROBLEMS = 50

_SPAN_KINDS = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
_STATUS_CODES = ["UNSET", "OK", "ERROR"]

# OpenInference's span kinds (its own constants, so the strings cannot drift from it).
TOOL = OpenInferenceSpanKindValues.TOOL.value
LLM = OpenInferenceSpanKindValues.LLM.value
AGENT = OpenInferenceSpanKindValues.AGENT.value
CHAIN = OpenInferenceSpanKindValues.CHAIN.value
NODE_CATEGORIES = (AGENT, CHAIN)

_GENAI_OPERATIONS = {
    "execute_tool": TOOL,
    "chat": LLM,
    "text_completion": LLM,
    "generate_content": LLM,
    "invoke_agent": AGENT,
    "create_agent": AGENT,
    "invoke_workflow": CHAIN,
}
_HEX = re.compile(r"^[0-9a-fA-F]+$")


class TraceError(ValueError):
    """An OTLP document that cannot be read; `problems` are (path, message) pairs, the path
    as parts from the document's root (e.g. `("resourceSpans", 0, "scopeSpans", 0, ...)`)."""

    def __init__(self, problems: list[tuple[tuple[PathPart, ...], str]]):
        self.problems = problems
        first = problems[0] if problems else ((), "invalid trace")
        super().__init__(f"{_format_path(first[0]) or 'trace'}: {first[1]}")


class SpanEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    time_unix_nano: int | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)


class Span(BaseModel):
    """One OTLP span, with attributes decoded from OTLP's key/value lists into plain values."""

    model_config = ConfigDict(extra="forbid")
    trace_id: str
    span_id: str
    parent_span_id: str | None = None
    name: str = ""
    kind: str = "INTERNAL"  # UNSPECIFIED, INTERNAL, SERVER, CLIENT, PRODUCER, CONSUMER
    start_time_unix_nano: int
    end_time_unix_nano: int | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    status_code: str = "UNSET"  # UNSET, OK, ERROR
    status_message: str = ""
    events: list[SpanEvent] = Field(default_factory=list)
    resource: dict[str, Any] = Field(default_factory=dict)
    scope: str = ""

    @property
    def start_seconds(self) -> float:
        return self.start_time_unix_nano / 1e9

    @property
    def duration_seconds(self) -> float | None:
        if self.end_time_unix_nano is None or self.end_time_unix_nano < self.start_time_unix_nano:
            return None
        return (self.end_time_unix_nano - self.start_time_unix_nano) / 1e9

    @property
    def category(self) -> str | None:
        """TOOL, LLM, AGENT, CHAIN, or None for spans of no interest here."""
        kind = self.attributes.get(SpanAttributes.OPENINFERENCE_SPAN_KIND)
        if isinstance(kind, str) and kind.upper() in (TOOL, LLM, AGENT, CHAIN):
            return kind.upper()
        operation = self.attributes.get("gen_ai.operation.name")
        if isinstance(operation, str):
            return _GENAI_OPERATIONS.get(operation)
        return None

    def error(self) -> str | None:
        """Why the span failed, or None when its status is not ERROR."""
        if self.status_code != "ERROR":
            return None
        if self.status_message:
            return self.status_message
        for event in self.events:
            if event.name == "exception":
                message = event.attributes.get("exception.message") or event.attributes.get("exception.type")
                if message:
                    return str(message)
        return str(self.attributes.get("error.type") or "error")


@dataclass
class SpanNode:
    span: Span
    children: list[SpanNode] = field(default_factory=list)

    def walk(self) -> Iterator[tuple[SpanNode, list[SpanNode]]]:
        """Depth first, children by start time: (node, its ancestors, nearest last)."""
        stack: list[tuple[SpanNode, list[SpanNode]]] = [(self, [])]
        while stack:
            node, ancestors = stack.pop()
            yield node, ancestors
            for child in reversed(node.children):
                stack.append((child, [*ancestors, node]))


@dataclass
class LlmCall:
    span_id: str
    name: str
    model: str | None
    usage: Usage
    latency_seconds: float | None
    node: str | None = None
    error: str | None = None


@dataclass
class Derived:
    """What a set of span trees shows: see the module docstring for the rules."""

    tool_calls: list[OutputToolCall] = field(default_factory=list)
    steps: list[TrajectoryStep] = field(default_factory=list)
    llm_calls: list[LlmCall] = field(default_factory=list)
    usage: Usage | None = None
    latency_seconds: float | None = None
    thread_id: str | None = None


@dataclass
class TraceSummary:
    trace_id: str
    roots: list[SpanNode]
    derived: Derived
    start_seconds: float

    @property
    def thread_id(self) -> str | None:
        return self.derived.thread_id


# --- Reading OTLP JSON ------------------------------------------------------------------------


def _format_path(parts: Sequence[PathPart]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _key(obj: dict[str, Any], *names: str) -> str | None:
    """The first of `names` (camelCase and snake_case spellings) present in `obj`."""
    return next((name for name in names if name in obj), None)


def _any_value(value: Any) -> Any:
    """A plain value from an OTLP AnyValue (`{"stringValue": "x"}`); plain values pass."""
    if not isinstance(value, dict):
        return value
    if not value:
        return None
    for key in ("stringValue", "string_value"):
        if key in value:
            return value[key]
    for key in ("boolValue", "bool_value"):
        if key in value:
            return bool(value[key])
    for key in ("intValue", "int_value"):
        if key in value:  # int64 is a JSON string in OTLP JSON
            try:
                return int(value[key])
            except (TypeError, ValueError):
                return value[key]
    for key in ("doubleValue", "double_value"):
        if key in value:
            try:
                return float(value[key])
            except (TypeError, ValueError):
                return value[key]
    for key in ("arrayValue", "array_value"):
        if key in value:
            items = (value[key] or {}).get("values") or []
            return [_any_value(item) for item in items]
    for key in ("kvlistValue", "kvlist_value"):
        if key in value:
            return _attributes((value[key] or {}).get("values") or [])
    for key in ("bytesValue", "bytes_value"):
        if key in value:
            return value[key]
    return value


def _attributes(raw: Any) -> dict[str, Any]:
    """OTLP's `[{"key": k, "value": AnyValue}]`, or an already plain `{k: v}` object."""
    if isinstance(raw, dict):
        return {str(k): _any_value(v) for k, v in raw.items()}
    out: dict[str, Any] = {}
    for item in raw or []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = _any_value(item.get("value"))
    return out


def _span_id(value: Any, length: int) -> str | None:
    """A lowercase hex id. OTLP JSON writes ids as hex; protobuf's own JSON mapping writes
    them as base64, which some exporters emit, so that is converted."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) == length and _HEX.match(value):
        return value.lower()
    try:
        decoded = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value  # some other id scheme: kept as it is, only equality matters
    if len(decoded) * 2 == length:
        return decoded.hex()
    return value


def _nanos(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return whole_number(value, maximum=2**64 - 1)  # OTLP/JSON writes a fixed64 as a string
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _enum(value: Any, names: list[str], prefix: str) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    if isinstance(value, str):
        name = value.upper().removeprefix(prefix)
        if name in names:
            return name
    return None


def parse_otlp(doc: Any) -> list[Span]:
    """Every span of an OTLP JSON document; raises `TraceError` listing what is wrong."""
    problems: list[tuple[tuple[PathPart, ...], str]] = []
    spans: list[Span] = []
    if not isinstance(doc, dict):
        raise TraceError([((), "a trace must be an OTLP JSON object with `resourceSpans`")])
    rs_key = _key(doc, "resourceSpans", "resource_spans")
    if rs_key is None or not isinstance(doc[rs_key], list):
        raise TraceError([((), "a trace must be an OTLP JSON object with a `resourceSpans` list")])
    seen: dict[tuple[str, str], tuple[PathPart, ...]] = {}
    for r_index, resource_spans in enumerate(doc[rs_key]):
        r_path: tuple[PathPart, ...] = (rs_key, r_index)
        if not isinstance(resource_spans, dict):
            problems.append((r_path, "must be an object"))
            continue
        resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
        ss_key = _key(resource_spans, "scopeSpans", "scope_spans", "instrumentationLibrarySpans",
                      "instrumentation_library_spans")
        scope_list = resource_spans.get(ss_key, []) if ss_key else []
        if not isinstance(scope_list, list):
            problems.append(((*r_path, ss_key or "scopeSpans"), "must be a list"))
            continue
        for s_index, scope_spans in enumerate(scope_list):
            s_path: tuple[PathPart, ...] = (*r_path, ss_key or "scopeSpans", s_index)
            if not isinstance(scope_spans, dict):
                problems.append((s_path, "must be an object"))
                continue
            scope = scope_spans.get("scope") or scope_spans.get("instrumentationLibrary") or {}
            scope_name = scope.get("name", "") if isinstance(scope, dict) else ""
            raw_spans = scope_spans.get("spans", [])
            if not isinstance(raw_spans, list):
                problems.append(((*s_path, "spans"), "must be a list"))
                continue
            for index, raw in enumerate(raw_spans):
                path: tuple[PathPart, ...] = (*s_path, "spans", index)
                span = _span(raw, path, resource, str(scope_name or ""), problems)
                if span is None:
                    continue
                first = seen.setdefault((span.trace_id, span.span_id), path)
                if first != path:
                    problems.append((path, f"duplicate span id {span.span_id} (also at {_format_path(first)})"))
                    continue
                spans.append(span)
        if len(problems) >= MAX_TRACE_PROBLEMS:
            break
    if problems:
        raise TraceError(problems[:MAX_TRACE_PROBLEMS])
    return spans


def _span(raw: Any, path: tuple[PathPart, ...], resource: dict[str, Any], scope: str,
          problems: list[tuple[tuple[PathPart, ...], str]]) -> Span | None:
    if not isinstance(raw, dict):
        problems.append((path, "a span must be an object"))
        return None
    before = len(problems)
    trace_key = _key(raw, "traceId", "trace_id") or "traceId"
    span_key = _key(raw, "spanId", "span_id") or "spanId"
    start_key = _key(raw, "startTimeUnixNano", "start_time_unix_nano") or "startTimeUnixNano"
    end_key = _key(raw, "endTimeUnixNano", "end_time_unix_nano") or "endTimeUnixNano"
    parent_key = _key(raw, "parentSpanId", "parent_span_id") or "parentSpanId"
    trace_id = _span_id(raw.get(trace_key), 32)
    span_id = _span_id(raw.get(span_key), 16)
    start = _nanos(raw.get(start_key))
    end = _nanos(raw.get(end_key)) if raw.get(end_key) not in (None, "", 0, "0") else None
    if trace_id is None:
        problems.append(((*path, trace_key), "required: the span's trace id (hex)"))
    if span_id is None:
        problems.append(((*path, span_key), "required: the span's id (hex)"))
    if start is None:
        problems.append(((*path, start_key), "required: the start time in nanoseconds since the epoch"))
    if raw.get(end_key) not in (None, "", 0, "0") and end is None:
        problems.append(((*path, end_key), "must be nanoseconds since the epoch"))
    if len(problems) > before or trace_id is None or span_id is None or start is None:
        return None
    parent = _span_id(raw.get(parent_key), 16)
    if parent is not None and set(parent) == {"0"}:
        parent = None
    status: dict[str, Any] = raw["status"] if isinstance(raw.get("status"), dict) else {}
    events = []
    for event in raw.get("events") or []:
        if isinstance(event, dict):
            events.append(SpanEvent(
                name=str(event.get("name", "")),
                time_unix_nano=_nanos(event.get("timeUnixNano", event.get("time_unix_nano"))),
                attributes=_attributes(event.get("attributes")),
            ))
    name = raw.get("name")
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name if isinstance(name, str) else "",
        kind=_enum(raw.get("kind"), _SPAN_KINDS, "SPAN_KIND_") or "INTERNAL",
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=_attributes(raw.get("attributes")),
        status_code=_enum(status.get("code"), _STATUS_CODES, "STATUS_CODE_") or "UNSET",
        status_message=str(status.get("message") or ""),
        events=events,
        resource=resource,
        scope=scope,
    )


# --- Trees ------------------------------------------------------------------------------------


def span_forest(spans: Sequence[Span]) -> list[SpanNode]:
    """The root span trees of every trace, by start time. A span whose parent is not in the
    document (an exporter that dropped it, a remote parent) counts as a root."""
    nodes = {(s.trace_id, s.span_id): SpanNode(s) for s in spans}
    roots: list[SpanNode] = []
    for (trace_id, _), node in nodes.items():
        parent_id = node.span.parent_span_id
        parent = nodes.get((trace_id, parent_id)) if parent_id else None
        if parent is None or parent is node:
            roots.append(node)
        else:
            parent.children.append(node)
    for node in nodes.values():
        node.children.sort(key=lambda n: n.span.start_time_unix_nano)
    roots.sort(key=lambda n: n.span.start_time_unix_nano)
    # A parent cycle leaves spans reachable from no root; they become roots of their own.
    reached = {id(n) for root in roots for n, _ in root.walk()}
    for node in nodes.values():
        if id(node) not in reached:
            for parent in nodes.values():
                if node in parent.children:
                    parent.children.remove(node)
            roots.append(node)
            reached |= {id(n) for n, _ in node.walk()}
    roots.sort(key=lambda n: n.span.start_time_unix_nano)
    return roots


# --- Reading spans ----------------------------------------------------------------------------


def _loads(value: Any) -> Any:
    """A JSON value from a string attribute when it holds JSON; otherwise the value itself."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null") or _looks_numeric(text):
            try:
                return safejson.loads(text)
            except ValueError:
                return value
    return value


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return whole_number(value, maximum=2**63 - 1)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _first(attrs: dict[str, Any], *keys: str) -> Any:
    return next((attrs[k] for k in keys if attrs.get(k) not in (None, "")), None)


def node_name(span: Span) -> str:
    name = _first(span.attributes, "gen_ai.agent.name", SpanAttributes.AGENT_NAME, SpanAttributes.GRAPH_NODE_NAME,
                  SpanAttributes.GRAPH_NODE_ID)
    if isinstance(name, str) and name:
        return name
    for prefix in ("invoke_agent ", "create_agent ", "invoke_workflow "):
        if span.name.startswith(prefix):
            return span.name[len(prefix):]
    return span.name


def tool_call(span: Span, node: str | None = None) -> OutputToolCall:
    attrs = span.attributes
    name = _first(attrs, "gen_ai.tool.name", SpanAttributes.TOOL_NAME)
    if not isinstance(name, str) or not name:
        name = span.name.removeprefix("execute_tool ").strip() or "tool"
    raw_args = _first(attrs, "gen_ai.tool.call.arguments", SpanAttributes.INPUT_VALUE)
    args = _loads(raw_args)
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        args = {"input": args}
    result = _loads(_first(attrs, "gen_ai.tool.call.result", SpanAttributes.OUTPUT_VALUE))
    call_id = _first(attrs, "gen_ai.tool.call.id", SpanAttributes.TOOL_ID, ToolCallAttributes.TOOL_CALL_ID)
    return OutputToolCall(
        name=name,
        args=args,
        call_id=str(call_id) if call_id is not None else None,
        result=result,
        error=span.error(),
        latency_seconds=span.duration_seconds,
        node=node,
    )


def span_usage(span: Span) -> Usage | None:
    attrs = span.attributes
    usage = Usage(
        prompt_tokens=_int(_first(attrs, SpanAttributes.LLM_TOKEN_COUNT_PROMPT, "gen_ai.usage.input_tokens",
                                  "gen_ai.usage.prompt_tokens")),
        completion_tokens=_int(_first(attrs, SpanAttributes.LLM_TOKEN_COUNT_COMPLETION, "gen_ai.usage.output_tokens",
                                      "gen_ai.usage.completion_tokens")),
        total_tokens=_int(_first(attrs, SpanAttributes.LLM_TOKEN_COUNT_TOTAL, "gen_ai.usage.total_tokens")),
        cost_usd=_float(_first(attrs, SpanAttributes.LLM_COST_TOTAL, "gen_ai.usage.cost")),
    )
    if usage == Usage():
        return None
    return usage


def add_usage(items: Sequence[Usage]) -> Usage | None:
    if not items:
        return None
    total = Usage()
    for usage in items:
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(usage, name)
            if value is not None:
                setattr(total, name, (getattr(total, name) or 0) + value)
        # A span without its own total still adds its prompt and completion tokens to it.
        if usage.total() is not None:
            total.total_tokens = (total.total_tokens or 0) + (usage.total() or 0)
        if usage.cost_usd is not None:
            total.cost_usd = (total.cost_usd or 0.0) + usage.cost_usd
    return total


def thread_id(span: Span) -> str | None:
    for attrs in (span.attributes, span.resource):
        value = _first(attrs, SpanAttributes.SESSION_ID, "gen_ai.conversation.id")
        if value is not None:
            return str(value)
    return None


def final_text(span: Span) -> Any | None:
    """What a turn's root span answered: `output.value` (OpenInference), or the text parts of
    the last message in `gen_ai.output.messages` (GenAI)."""
    attrs = span.attributes
    if attrs.get(SpanAttributes.OUTPUT_VALUE) not in (None, ""):
        return attrs[SpanAttributes.OUTPUT_VALUE]
    messages = _loads(attrs.get("gen_ai.output.messages"))
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        parts = messages[-1].get("parts") or []
        texts = [p["content"] for p in parts
                 if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)]
        if texts:
            return "\n".join(texts)
    return None


def input_text(span: Span) -> Any | None:
    """What a turn's root span was asked: `input.value` (OpenInference), or the text parts of
    the last user message in `gen_ai.input.messages` (GenAI)."""
    attrs = span.attributes
    if attrs.get(SpanAttributes.INPUT_VALUE) not in (None, ""):
        return attrs[SpanAttributes.INPUT_VALUE]
    messages = _loads(attrs.get("gen_ai.input.messages"))
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                parts = message.get("parts") or []
                texts = [p["content"] for p in parts
                         if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)]
                if texts:
                    return "\n".join(texts)
    return None


def derive(roots: Sequence[SpanNode]) -> Derived:
    """Tool calls, trajectory steps, LLM calls, usage, latency and thread of these trees."""
    out = Derived()
    agent_usage: list[Usage] = []
    for root in roots:
        for node, ancestors in root.walk():
            span = node.span
            category = span.category
            enclosing = next((a for a in reversed(ancestors) if a.span.category in NODE_CATEGORIES), None)
            enclosing_name = node_name(enclosing.span) if enclosing else None
            if out.thread_id is None:
                out.thread_id = thread_id(span)
            meta: dict[str, Any] = {"span_id": span.span_id, "latency_seconds": span.duration_seconds}
            if span.error():
                meta["error"] = span.error()
            if category == TOOL:
                call = tool_call(span, enclosing_name)
                out.tool_calls.append(call)
                out.steps.append(TrajectoryStep(step_type=StepType.TOOL, name=call.name, args=call.args,
                                                timestamp=span.start_seconds, metadata=meta))
            elif category in NODE_CATEGORIES:
                out.steps.append(TrajectoryStep(step_type=StepType.NODE, name=node_name(span),
                                                timestamp=span.start_seconds, metadata=meta))
                usage = span_usage(span)
                # Only the outermost agent's totals: an inner agent's are inside it already.
                if usage is not None and category == AGENT and not any(
                    a.span.category == AGENT and span_usage(a.span) for a in ancestors
                ):
                    agent_usage.append(usage)
            elif category == LLM:
                model = _first(span.attributes, SpanAttributes.LLM_MODEL_NAME, "gen_ai.response.model",
                               "gen_ai.request.model")
                out.llm_calls.append(LlmCall(
                    span_id=span.span_id,
                    name=span.name,
                    model=str(model) if model is not None else None,
                    usage=span_usage(span) or Usage(),
                    latency_seconds=span.duration_seconds,
                    node=enclosing_name,
                    error=span.error(),
                ))
    llm_usage = [c.usage for c in out.llm_calls if c.usage != Usage()]
    out.usage = add_usage(llm_usage) if llm_usage else add_usage(agent_usage)
    starts = [r.span.start_time_unix_nano for r in roots]
    ends = [r.span.end_time_unix_nano for r in roots if r.span.end_time_unix_nano is not None]
    if starts and ends and len(ends) == len(starts):
        out.latency_seconds = max(0, max(ends) - min(starts)) / 1e9
    return out


def summarize(doc: Any) -> list[TraceSummary]:
    """One summary per trace of an OTLP document, by start time."""
    by_trace: dict[str, list[SpanNode]] = {}
    for root in span_forest(parse_otlp(doc)):
        by_trace.setdefault(root.span.trace_id, []).append(root)
    summaries = [
        TraceSummary(trace_id=trace_id, roots=roots, derived=derive(roots),
                     start_seconds=min(r.span.start_seconds for r in roots))
        for trace_id, roots in by_trace.items()
    ]
    return sorted(summaries, key=lambda s: s.start_seconds)


def group_by_thread(summaries: Sequence[TraceSummary]) -> dict[str | None, list[TraceSummary]]:
    """Traces grouped into threads (conversations) by `session.id` / `gen_ai.conversation.id`,
    as Confident AI groups them; traces without one are under None. Each thread's traces keep
    start order."""
    threads: dict[str | None, list[TraceSummary]] = {}
    for summary in sorted(summaries, key=lambda s: s.start_seconds):
        threads.setdefault(summary.thread_id, []).append(summary)
    return threads


# --- Filling an output from its trace ---------------------------------------------------------


def turn_spans(roots: Sequence[SpanNode], turn_count: int) -> list[SpanNode]:
    """The span trees that stand for turns: the roots by start time; a lone root with
    children is unwrapped (repeatedly) while the output has more turns than that."""
    spans = list(roots)
    while turn_count > 1 and len(spans) == 1 and spans[0].children:
        spans = list(spans[0].children)
    return spans


def apply_trace(output: AgentOutput) -> AgentOutput:
    """The output with what its `trace` shows filled in where the agent reported nothing.

    - Tool calls: only when no turn carries any (the agent's own report wins); usage: only
      when no turn carries any; a turn's latency and final response only where missing.
    - Turns: when the output has none, one turn per turn span (see `turn_spans`). When its
      turn count equals the number of turn spans, turn k takes the k-th; when it has a single
      turn, that turn takes all spans. Otherwise the turns are left alone and
      `metadata["trace_warning"]` says why.
    - `trajectory`: every NODE and TOOL step of the trace, when the output has none.
    - `metadata["thread_id"]`: the trace's session / conversation id, when it has one.

    Returns a new output; the argument is not changed. A trace that cannot be read leaves the
    output as it was, with `metadata["trace_error"]` (uploads are checked on ingest, so this
    only happens to outputs built elsewhere). Safe to apply twice.
    """
    if output.trace is None:
        return output
    result = output.model_copy(deep=True)
    try:
        roots = span_forest(parse_otlp(output.trace))
    except TraceError as exc:
        result.metadata["trace_error"] = str(exc)
        return result
    return _apply_roots(result, roots)


def apply_spans(output: AgentOutput, spans: Sequence[Span]) -> AgentOutput:
    """`apply_trace` for spans already read (a trace received on /v1/traces): the same
    rules, the output's `trace` left as it is."""
    return _apply_roots(output.model_copy(deep=True), span_forest(spans))


def _apply_roots(result: AgentOutput, roots: list[SpanNode]) -> AgentOutput:
    if not roots:
        return result
    whole = derive(roots)
    if not result.trajectory:
        result.trajectory = whole.steps
    if whole.thread_id is not None:
        result.metadata.setdefault("thread_id", whole.thread_id)

    groups: list[list[SpanNode]]
    if not result.turns:
        groups = [[node] for node in turn_spans(roots, 0)]
        result.turns = [TurnOutput() for _ in groups]
    elif len(result.turns) == 1:
        groups = [list(roots)]
    else:
        spans = turn_spans(roots, len(result.turns))
        if len(spans) != len(result.turns):
            result.metadata["trace_warning"] = (
                f"the trace has {len(spans)} turn span(s) (root spans) for {len(result.turns)} turns; "
                "tool calls and usage were not taken from it"
            )
            return result
        groups = [[node] for node in spans]

    fill_calls = not any(turn.tool_calls for turn in result.turns)
    fill_usage = all(turn.usage is None for turn in result.turns)
    for turn, group in zip(result.turns, groups, strict=True):
        derived = derive(group)
        if fill_calls:
            turn.tool_calls = derived.tool_calls
        if fill_usage:
            turn.usage = derived.usage
        if turn.latency_seconds is None:
            turn.latency_seconds = derived.latency_seconds
        if turn.final_response is None and len(group) == 1:
            turn.final_response = final_text(group[0].span)
    return result
