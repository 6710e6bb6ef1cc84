"""A received trace worth promoting: an agent answering a user, calling a tool with arguments,
its text holding markup (span content is untrusted)."""

from __future__ import annotations

import json
import os
from typing import Any

from django.test import Client

from evaluations.models import Trace
from tests.otlp_helpers import T0, post, request_of, span

QUESTION = "Weather in <b>Paris</b> & Rome?"
ANSWER = "It is <script>alert(1)</script> sunny"


def send_agent_trace(token: str, *, genai: bool = False, name: str = "weather-agent") -> Trace:
    """One trace: an AGENT root with the user's input and the final answer, an LLM span, and a
    TOOL span with its arguments (OpenInference attributes, or GenAI's with `genai`)."""
    trace_id, root, llm, tool = os.urandom(16), os.urandom(8), os.urandom(8), os.urandom(8)
    if genai:
        root_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "system", "parts": [{"type": "text", "content": "be nice"}]},
                    {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
                ]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
            ),
        }
        llm_attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x"}
        tool_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": json.dumps({"city": "Paris", "unit": "C"}),
        }
    else:
        root_attrs = {"openinference.span.kind": "AGENT", "input.value": QUESTION, "output.value": ANSWER}
        llm_attrs = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-x"}
        tool_attrs = {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "input.value": json.dumps({"city": "Paris", "unit": "C"}),
            "output.value": '{"temp": 21}',
        }
    spans = [
        span(trace_id, root, b"", name, T0, T0 + 9_000_000, root_attrs),
        span(trace_id, llm, root, "llm", T0 + 1, T0 + 2_000_000, llm_attrs),
        span(trace_id, tool, root, "get_weather", T0 + 3_000_000, T0 + 4_000_000, tool_attrs),
    ]
    assert post(Client(), request_of(spans, resource={"service.name": "weather"}), token).status_code == 200
    return Trace.objects.get(trace_id=trace_id.hex(), received=True)
