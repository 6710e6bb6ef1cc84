"""Building OTLP requests with opentelemetry-proto's classes, as an exporter would send them:
the demo eval set's cases answered as traces (an AGENT root span per case, a CHAIN span per
turn, OpenInference TOOL spans for the tool calls), and plain traces of no case."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

from django.test import Client
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status as ProtoStatus

from tests.engine_helpers import perfect_outputs

T0 = 1_700_000_000_000_000_000


def kv(key: str, value: Any) -> KeyValue:
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def span(
    trace_id: bytes,
    span_id: bytes,
    parent: bytes,
    name: str,
    start: int,
    end: int,
    attributes: dict[str, Any],
    error: str = "",
) -> ProtoSpan:
    s = ProtoSpan(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        kind=ProtoSpan.SPAN_KIND_INTERNAL,
        attributes=[kv(k, v) for k, v in attributes.items()],
    )
    if error:
        s.status.CopyFrom(ProtoStatus(code=ProtoStatus.STATUS_CODE_ERROR, message=error))
    return s


def case_spans(
    output: dict[str, Any], trace_id: bytes, *, run_id: int | None, on_resource: bool = False, root_error: str = ""
) -> list[ProtoSpan]:
    """An agent's trace of one case answered as `output` (the outputs format) says."""
    counter = iter(range(1, 10_000))

    def new_id() -> bytes:
        return trace_id[:4] + next(counter).to_bytes(4, "big")

    root_id = new_id()
    spans: list[ProtoSpan] = []
    clock = T0
    turns = output["turns"]
    for turn in turns:
        turn_id = new_id()
        start = clock
        for call in turn.get("tool_calls", []):
            spans.append(
                span(
                    trace_id,
                    new_id(),
                    turn_id,
                    f"tool {call['name']}",
                    clock + 1000,
                    clock + 5000,
                    {
                        "openinference.span.kind": "TOOL",
                        "tool.name": call["name"],
                        "input.value": json.dumps(call.get("args", {})),
                        "output.value": "ok",
                    },
                )
            )
            clock += 10_000
        clock += 1_000_000
        spans.append(
            span(
                trace_id,
                turn_id,
                root_id,
                "turn",
                start,
                clock,
                {"openinference.span.kind": "CHAIN", "output.value": turn.get("final_response") or ""},
            )
        )
    root_attrs: dict[str, Any] = {"openinference.span.kind": "AGENT", "agent.name": "travel_agent"}
    if len(turns) == 1:
        root_attrs["output.value"] = turns[0].get("final_response") or ""
    if run_id is not None and not on_resource:
        root_attrs.update({"evalsite.run_id": run_id, "evalsite.eval_id": output["eval_id"]})
    spans.append(span(trace_id, root_id, b"", "agent", T0, clock + 1000, root_attrs, error=root_error))
    return spans


def request_of(spans: list[ProtoSpan], resource: dict[str, Any] | None = None) -> ExportTraceServiceRequest:
    resource_spans = ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])
    for key, value in {"service.name": "travel-agent", **(resource or {})}.items():
        resource_spans.resource.attributes.append(kv(key, value))
    return ExportTraceServiceRequest(resource_spans=[resource_spans])


def demo_requests(run_id: int | None, eval_ids: list[str] | None = None) -> list[ExportTraceServiceRequest]:
    """One request per case of the demo eval set, each its perfect answer as a trace."""
    out = []
    for number, output in enumerate(perfect_outputs()):
        if eval_ids is not None and output["eval_id"] not in eval_ids:
            continue
        trace_id = (number + 1).to_bytes(4, "big") + os.urandom(12)
        out.append(request_of(case_spans(output, trace_id, run_id=run_id)))
    return out


def post(
    client: Client,
    message: ExportTraceServiceRequest,
    token: str,
    *,
    as_json: bool = False,
    gzipped: bool = False,
    project: str = "",
) -> Any:
    if as_json:
        doc = json_format.MessageToDict(message)
        for resource_spans in doc.get("resourceSpans", []):  # OTLP/JSON: ids in hex
            for scope_spans in resource_spans.get("scopeSpans", []):
                for s in scope_spans.get("spans", []):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in s:
                            import base64

                            s[key] = base64.b64decode(s[key]).hex()
        body = json.dumps(doc).encode()
        content_type = "application/json"
    else:
        body = message.SerializeToString()
        content_type = "application/x-protobuf"
    headers: dict[str, str] = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    if gzipped:
        body = gzip.compress(body)
        headers["HTTP_CONTENT_ENCODING"] = "gzip"
    if project:
        headers["HTTP_X_EVALSITE_PROJECT"] = project
    return client.generic("POST", "/v1/traces", body, content_type=content_type, **headers)


def answer(response: Any) -> ExportTraceServiceResponse:
    message = ExportTraceServiceResponse()
    if response["Content-Type"].startswith("application/json"):
        json_format.Parse(response.content, message)
    else:
        message.ParseFromString(response.content)
    return message
