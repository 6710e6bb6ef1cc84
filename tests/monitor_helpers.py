"""Traces of a live agent for the monitors' tests: OTLP requests built with the proto
classes (as an exporter sends them), and a monitor spec."""

from __future__ import annotations

import json
import os
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.otlp_helpers import request_of, span

T0 = 1_700_000_000_000_000_000


def agent_trace(answer: str, *, tool_error: str = "", session: str = "", user: str = "", env: str = "prod",
                seconds: float = 1.0, tokens: int = 100, retries: int = 0, service: str = "travel-agent",
                root: str = "agent", start: int = T0, question: str = "") -> ExportTraceServiceRequest:
    """One request with one trace: a root agent span answering `answer`, an LLM call with
    `tokens` tokens, a tool call (failed with `tool_error`), retried `retries` times; the root
    span was asked `question` (`input.value`) when one is given."""
    trace_id = os.urandom(16)
    counter = iter(range(1, 1000))

    def new_id() -> bytes:
        return trace_id[:4] + next(counter).to_bytes(4, "big")

    root_id = new_id()
    end = start + int(seconds * 1e9)
    spans = [span(trace_id, new_id(), root_id, "llm", start + 10, start + 20,
                  {"openinference.span.kind": "LLM", "llm.token_count.total": tokens,
                   "llm.token_count.prompt": tokens // 2, "llm.token_count.completion": tokens - tokens // 2})]
    for n in range(retries + 1):
        spans.append(span(trace_id, new_id(), root_id, "tool lookup", start + 100 + n * 10, start + 105 + n * 10,
                          {"openinference.span.kind": "TOOL", "tool.name": "lookup",
                           "input.value": json.dumps({"city": "Paris"}), "output.value": "ok"},
                          error=tool_error))
    attrs: dict[str, Any] = {"openinference.span.kind": "AGENT", "output.value": answer}
    if question:
        attrs["input.value"] = question
    if session:
        attrs["session.id"] = session
    if user:
        attrs["enduser.id"] = user
    spans.append(span(trace_id, root_id, b"", root, start, end, attrs))
    return request_of(spans, {"service.name": service, "deployment.environment": env})


def spec(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "answers",
        "criteria": {
            "mentions_paris": {"evaluator": "contains", "options": {"substrings": ["Paris"]}},
            "json": {"evaluator": "json_valid"},
            "tools_ok": {"evaluator": "tool_errors"},
            "fast": {"evaluator": "latency_seconds", "threshold": 5},
        },
    }
    return {**base, **overrides}
