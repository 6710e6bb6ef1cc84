"""The OTLP/HTTP trace receiver's work: a request body in, spans stored per trace.

`decode()` reads an `ExportTraceServiceRequest` (opentelemetry-proto's generated classes:
binary protobuf, or OTLP/JSON through protobuf's JSON mapping, after turning OTLP/JSON's
hex ids into the mapping's base64), within the size limits: the body as sent and, for
`Content-Encoding: gzip`, the body inflated (a bomb stops at the limit, never in memory).
It returns `Batch`: one `TraceRows` per trace id, spans as rows ready to insert.

`traces_store()` writes a batch in one transaction, idempotently (an exporter retries a
batch it got no answer for): a trace is one row per project and trace id, a span one row
per trace and span id, and inserting either again changes nothing. A trace's aggregates
(span and error counts, start, end, its root's name, `complete` once its root span has
arrived) are written with it, and recomputed from its stored spans when spans of it came
in an earlier request. Traces that name a run (`evalsite.run_id` / `evalsite.eval_id`,
see `runs.py`) are handed to `runs.traces_attach` in the same transaction.
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
from django.db import connection, transaction
from django.utils import timezone
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from openinference.semconv.trace import SpanAttributes
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from evaluations import safejson
from evaluations.models import Project, Span, Trace
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


def _json(text: str) -> str:
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
                    _json(dumps(attrs)),
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
                    if trace.run_ref is None and source.get(RUN_ID) not in (None, ""):
                        trace.run_ref = source[RUN_ID]
                    if not trace.eval_id and source.get(EVAL_ID) not in (None, ""):
                        trace.eval_id = _clean(str(source[EVAL_ID]))[:255]
                    if trace.iteration is None and source.get(ITERATION) not in (None, ""):
                        trace.iteration = source[ITERATION]
    return Batch(traces, count)


# --- Storing ---------------------------------------------------------------------------------------


@dataclass
class Stored:
    """What a request stored: trace pks by trace id, and what the exporter is told of the
    spans that were not taken (OTLP's partial success)."""

    trace_pks: dict[str, int]
    accepted_spans: int
    rejected_spans: int = 0
    messages: list[str] = field(default_factory=list)


def _insert_sql(
    model: Any, columns: list[str], count: int, *, json_columns: frozenset[str] = frozenset(), returning: str = ""
) -> str:
    jsonb = "::jsonb" if connection.vendor == "postgresql" else ""
    one = "(" + ", ".join(f"%s{jsonb}" if c in json_columns else "%s" for c in columns) + ")"
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    sql = f"INSERT INTO {model._meta.db_table} ({names}) VALUES {', '.join([one] * count)} ON CONFLICT DO NOTHING"  # noqa: S608
    return sql + (f" RETURNING {returning}" if returning else "")


_TRACE_COLUMNS = [
    "project_id",
    "trace_id",
    "thread_id",
    "name",
    "start_ns",
    "end_ns",
    "received",
    "received_at",
    "service_name",
    "eval_id",
    "span_count",
    "error_count",
    "complete",
    "resource",
]


def traces_store(*, project: Project, batch: Batch) -> Stored:
    """Store a batch's traces and spans (see the module doc); one transaction with what the
    runs do with the traces that name them."""
    from evaluations.ingest.runs import check_run_refs, traces_attach

    refs = check_run_refs(project=project, batch=batch)  # refuses another project's run: nothing stored
    stored = Stored(trace_pks={}, accepted_spans=0)
    for trace_hex, reason in refs.rejected.items():
        rows = batch.traces.pop(trace_hex)
        stored.rejected_spans += len(rows.spans)
        stored.messages.append(reason)
    if not batch.traces:
        return stored
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with transaction.atomic():
        new = _insert_traces(project, batch, now)
        stored.trace_pks.update(new)
        again = [t for t in batch.traces if t not in new]
        if again:
            stored.trace_pks.update(_existing(project, again, batch))
        _insert_spans(batch, stored.trace_pks)
        if again:
            _recount([stored.trace_pks[t] for t in again])
        stored.accepted_spans = sum(len(t.spans) for t in batch.traces.values())
        stored.messages += traces_attach(
            project=project, batch=batch, trace_pks=stored.trace_pks, refs=refs, earlier=again
        )
    return stored


def _insert_traces(project: Project, batch: Batch, now: Any) -> dict[str, int]:
    rows = []
    for t in batch.traces.values():
        rows.append(
            (
                project.pk,
                t.trace_id,
                t.thread_id,
                (t.root_name or "")[:255],
                t.start_ns,
                t.end_ns,
                True,
                now,
                t.service_name,
                t.eval_id,
                len(t.spans),
                t.errors,
                t.root_name is not None,
                _json(json.dumps(t.resource, default=str)),
            )
        )
    out: dict[str, int] = {}
    per = max(1, 900 // len(_TRACE_COLUMNS))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cursor.execute(
                _insert_sql(
                    Trace, _TRACE_COLUMNS, len(chunk), json_columns=frozenset({"resource"}), returning="id, trace_id"
                ),
                [v for row in chunk for v in row],
            )
            out.update((trace_id, pk) for pk, trace_id in cursor.fetchall())
    return out


def _existing(project: Project, trace_ids: list[str], batch: Batch) -> dict[str, int]:
    """Traces some of whose spans came before (or came at once in another request): their
    pks, and what this request adds to them where they had nothing."""
    found = dict(
        Trace.objects.filter(project=project, received=True, trace_id__in=trace_ids).values_list("trace_id", "pk")
    )
    table = Trace._meta.db_table
    with connection.cursor() as cursor:
        for trace_id, pk in found.items():
            t = batch.traces[trace_id]
            cursor.execute(
                f"UPDATE {table} SET thread_id = CASE WHEN thread_id = '' THEN %s ELSE thread_id END, "  # noqa: S608
                "service_name = CASE WHEN service_name = '' THEN %s ELSE service_name END, "
                "eval_id = CASE WHEN eval_id = '' THEN %s ELSE eval_id END WHERE id = %s",
                [t.thread_id, t.service_name, t.eval_id, pk],
            )
    return found


def _insert_spans(batch: Batch, trace_pks: dict[str, int]) -> None:
    columns = ["trace_id", *SPAN_COLUMNS]
    rows = [(trace_pks[t.trace_id], *row) for t in batch.traces.values() for row in t.spans.values()]
    per = max(1, 900 // len(columns))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            cursor.execute(
                _insert_sql(Span, columns, len(chunk), json_columns=frozenset({"attributes"})),
                [v for row in chunk for v in row],
            )


def _recount(pks: list[int]) -> None:
    """A trace's aggregates from its stored spans (spans of it arrived in several requests)."""
    trace, span = Trace._meta.db_table, Span._meta.db_table
    of = f"FROM {span} s WHERE s.trace_id = {trace}.id"
    root = f"{of} AND s.parent_span_id = ''"
    marks = ", ".join(["%s"] * len(pks))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {trace} SET span_count = (SELECT COUNT(*) {of}), "  # noqa: S608 - names from the models
            f"error_count = (SELECT COUNT(*) {of} AND s.status = 'ERROR'), "
            f"start_ns = (SELECT MIN(s.start_ns) {of}), end_ns = (SELECT MAX(s.end_ns) {of}), "
            f"complete = EXISTS (SELECT 1 {root}), "
            f"name = COALESCE((SELECT s.name {root} ORDER BY s.start_ns LIMIT 1), name) "
            f"WHERE id IN ({marks})",
            pks,
        )
