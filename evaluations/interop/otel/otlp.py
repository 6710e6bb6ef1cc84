"""OTLP/HTTP request bodies decoded into rows per trace (no database).

`parse_request()` reads an `ExportTraceServiceRequest` (opentelemetry-proto's generated classes:
binary protobuf, or OTLP/JSON through protobuf's JSON mapping, after turning OTLP/JSON's
hex ids into the mapping's base64), within the size limits: the body as sent and, for
`Content-Encoding: gzip`, the body inflated by `inflate()` (a bomb stops at the limit, never in
memory). `rows_of()` turns it into a `Batch`: one `TraceRows` per trace id, spans as rows ready
to insert. Storing them is `ingest/otlp.py`'s `traces_store`.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from openinference.semconv.trace import SpanAttributes
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from evaluations import safejson
from evaluations.schemas.text import NUL, REPLACEMENT

# The attributes that tie a trace to a case of a run (on its resource or on any of its spans).
RUN_ID = "evalsite.run_id"
EVAL_ID = "evalsite.eval_id"
ITERATION = "evalsite.iteration"

_KINDS = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"]
_STATUS = ["UNSET", "OK", "ERROR"]
_CATEGORIES = {"TOOL", "LLM", "AGENT", "CHAIN"}
_GENAI = {
    "execute_tool": "TOOL",
    "chat": "LLM",
    "text_completion": "LLM",
    "generate_content": "LLM",
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "invoke_workflow": "CHAIN",
}
_THREAD_KEYS = (SpanAttributes.SESSION_ID, "gen_ai.conversation.id")
END_USER_KEYS = ("enduser.id", SpanAttributes.USER_ID)
ENVIRONMENT_KEYS = ("deployment.environment.name", "deployment.environment")
STATUS_MESSAGE = "otel.status_message"  # a failed span's status message, kept with its attributes


class PayloadError(ValueError):
    """A request that cannot be read: a 400 saying why (the first problem, with its path)."""


class TooLarge(ValueError):
    """A body over the limits: a 413."""


# --- Reading the body ----------------------------------------------------------------------------


def max_body() -> int:
    return int(settings.EVALSITE_OTLP_MAX_BODY_BYTES)


def max_inflated() -> int:
    return int(settings.EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES)


def inflate(body: bytes, encoding: str) -> bytes:
    """The body as the exporter encoded it, inflated when gzip (or deflate), never past the
    decompressed limit: a small body that inflates without end is refused after the limit."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise PayloadError(f"Content-Encoding {encoding!r} is not supported: send gzip or none")
    limit = max_inflated()
    inflater = zlib.decompressobj(wbits=31 if encoding == "gzip" else 15)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise PayloadError(f"the body is not valid {encoding}: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise TooLarge(f"the body inflates past {limit} bytes (EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES)")
    if not inflater.eof:
        raise PayloadError(f"the {encoding} body is truncated")
    return out


def parse_request(data: bytes, content_type: str) -> ExportTraceServiceRequest:
    """An ExportTraceServiceRequest from binary protobuf or OTLP/JSON."""
    kind = content_type.split(";")[0].strip().lower()
    message = ExportTraceServiceRequest()
    if kind in ("application/x-protobuf", "application/protobuf"):
        try:
            message.ParseFromString(data)
        except DecodeError as exc:
            raise PayloadError(f"the body is not an OTLP ExportTraceServiceRequest in protobuf: {exc}") from None
        return message
    if kind == "application/json":
        try:
            doc = safejson.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PayloadError(f"the body is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise PayloadError("the body must be a JSON object with `resourceSpans`")
        _hex_ids_to_base64(doc)
        try:
            json_format.ParseDict(doc, message, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise PayloadError(f"the body is not an OTLP/JSON ExportTraceServiceRequest: {exc}") from None
        return message
    raise PayloadError(
        f"Content-Type {content_type!r} is not supported: send application/x-protobuf or application/json"
    )


def _hex_ids_to_base64(doc: dict[str, Any]) -> None:
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON mapping (which
    parses the rest) expects base64: convert them in place, naming the id that is not hex."""
    for r, resource_spans in enumerate(_list(doc, "resourceSpans", "resource_spans")):
        for s, scope_spans in enumerate(_list(resource_spans, "scopeSpans", "scope_spans")):
            for i, span in enumerate(_list(scope_spans, "spans")):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                _convert_ids(span, where)
                for k, link in enumerate(_list(span, "links")):
                    _convert_ids(link, f"{where}.links[{k}]")


def _list(obj: Any, *keys: str) -> list[Any]:
    if not isinstance(obj, dict):
        return []
    for key in keys:
        value = obj.get(key)
        if isinstance(value, list):
            return value
    return []


def _convert_ids(obj: Any, where: str) -> None:
    if not isinstance(obj, dict):
        return
    for key in ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"):
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            continue
        try:
            obj[key] = base64.b64encode(binascii.unhexlify(value)).decode()
        except (binascii.Error, ValueError):
            raise PayloadError(f"{where}.{key}: {value[:40]!r} is not a hex id (OTLP/JSON writes ids as hex)") from None


# --- Spans as rows ---------------------------------------------------------------------------------


def value_of(value: AnyValue) -> Any:
    """A plain value from an OTLP AnyValue."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [value_of(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    if which == "double_value" and not math.isfinite(value.double_value):
        return str(value.double_value)  # NaN and infinities are no JSON
    return getattr(value, which)


def attributes_of(items: Iterable[Any]) -> dict[str, Any]:
    return {item.key: value_of(item.value) for item in items}


@dataclass
class TraceRows:
    trace_id: str  # hex
    spans: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # span id -> row (see SPAN_COLUMNS)
    resource: dict[str, Any] = field(default_factory=dict)
    thread_id: str = ""
    service_name: str = ""
    run_ref: Any = None  # evalsite.run_id as sent
    eval_id: str = ""
    iteration: Any = None
    end_user: str = ""
    environment: str = ""
    root_name: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    errors: int = 0


# Span rows: (span_id, parent_span_id, name, kind, start_ns, end_ns, status, attributes JSON)
SPAN_COLUMNS = ["span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "status", "attributes"]


@dataclass
class Batch:
    traces: dict[str, TraceRows]
    span_count: int


def _hex(raw: bytes, size: int, where: str, name: str, *, required: bool = True) -> str:
    if not raw:
        if required:
            raise PayloadError(f"{where}.{name}: missing (a {size}-byte id)")
        return ""
    if len(raw) != size:
        raise PayloadError(f"{where}.{name}: {len(raw)} bytes, not {size}")
    if not any(raw):
        raise PayloadError(f"{where}.{name}: all zero, which OTLP reserves for no id")
    return raw.hex()


def _category(attrs: dict[str, Any], kind: int) -> str:
    """TOOL / LLM / AGENT / CHAIN (OpenInference, then GenAI), else the OpenTelemetry kind."""
    value = attrs.get(SpanAttributes.OPENINFERENCE_SPAN_KIND)
    if isinstance(value, str) and value.upper() in _CATEGORIES:
        return value.upper()
    operation = attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation in _GENAI:
        return _GENAI[operation]
    return _KINDS[kind] if 0 <= kind < len(_KINDS) else "INTERNAL"


def _clean(text: str) -> str:
    """PostgreSQL stores no NUL: replaced, as everywhere (evaluations/schemas/text.py)."""
    return text.replace(NUL, REPLACEMENT) if NUL in text else text


def nul_free_json(text: str) -> str:
    """Attributes as JSON text, with any NUL (escaped by the encoder) replaced."""
    return text.replace("\\u0000", "\\ufffd") if "\\u0000" in text else text


def rows_of(message: ExportTraceServiceRequest) -> Batch:
    """Every span of the request as rows, grouped by trace; raises PayloadError at the first
    span that cannot be stored (its path says where). Duplicates in one request count once."""
    traces: dict[str, TraceRows] = {}
    count = 0
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
    for r, resource_spans in enumerate(message.resource_spans):
        resource = attributes_of(resource_spans.resource.attributes)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                trace_hex = _hex(span.trace_id, 16, where, "traceId")
                span_hex = _hex(span.span_id, 8, where, "spanId")
                parent = _hex(span.parent_span_id, 8, where, "parentSpanId", required=False)
                attrs = attributes_of(span.attributes)
                status = _STATUS[span.status.code] if 0 <= span.status.code < 3 else "UNSET"
                if status == "ERROR":
                    message_text = span.status.message or next(
                        (
                            str(e_attrs.get("exception.message") or e_attrs.get("exception.type") or "")
                            for e_attrs in (attributes_of(e.attributes) for e in span.events if e.name == "exception")
                        ),
                        "",
                    )
                    if message_text:
                        attrs[STATUS_MESSAGE] = message_text
                trace = traces.get(trace_hex)
                if trace is None:
                    trace = traces[trace_hex] = TraceRows(trace_hex, resource=resource)
                    trace.service_name = _clean(str(resource.get("service.name") or ""))[:255]
                if span_hex in trace.spans:
                    continue
                start = span.start_time_unix_nano or None
                end = span.end_time_unix_nano or None
                name = _clean(span.name[:255])
                trace.spans[span_hex] = (
                    span_hex,
                    parent,
                    name,
                    _category(attrs, span.kind)[:32],
                    start,
                    end,
                    status,
                    nul_free_json(dumps(attrs)),
                )
                count += 1
                if status == "ERROR":
                    trace.errors += 1
                if not parent and trace.root_name is None:
                    trace.root_name = name
                if start is not None and (trace.start_ns is None or start < trace.start_ns):
                    trace.start_ns = start
                if end is not None and (trace.end_ns is None or end > trace.end_ns):
                    trace.end_ns = end
                for source in (attrs, resource):
                    if not trace.thread_id:
                        thread = next((str(source[k])[:200] for k in _THREAD_KEYS if source.get(k)), "")
                        trace.thread_id = _clean(thread)
                    if not trace.end_user:
                        trace.end_user = _clean(
                            next((str(source[k])[:200] for k in END_USER_KEYS if source.get(k)), "")
                        )
                    if not trace.environment:
                        trace.environment = _clean(
                            next((str(source[k])[:100] for k in ENVIRONMENT_KEYS if source.get(k)), "")
                        )
                    if trace.run_ref is None and source.get(RUN_ID) not in (None, ""):
                        trace.run_ref = source[RUN_ID]
                    if not trace.eval_id and source.get(EVAL_ID) not in (None, ""):
                        trace.eval_id = _clean(str(source[EVAL_ID]))[:255]
                    if trace.iteration is None and source.get(ITERATION) not in (None, ""):
                        trace.iteration = source[ITERATION]
    return Batch(traces, count)
