"""Recipe: a Python agent instrumented with the OpenTelemetry SDK, sending its traces to evalsite.

evalsite creates a run whose target is "traces" (the new-run page, `POST /api/v1/runs/` with
`"target_kind": "traces"`, or `python manage.py traces_run EVALSET`); this script answers
each of the run's cases with the agent (here evalsite's demo travel agent), tracing it as
any instrumented agent would: a root AGENT span per case naming the case
(`evalsite.run_id`, `evalsite.eval_id`), a CHAIN span per turn, a TOOL span around each
tool call (OpenInference attribute names). The OTLP/HTTP exporter sends the spans to
`<server>/v1/traces` with the API token; when every case has its trace, evalsite scores the
run like any other, tool-call diffs and all.

    pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http openinference-semantic-conventions
    python docs/recipes/otel_agent.py --server http://127.0.0.1:8000 --token es_... --run 12

Nothing here is evalsite-specific but the two attributes: the same works from any language
or framework whose exporter speaks OTLP/HTTP (protobuf or JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode, Tracer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the demo agent, from this repository
from evaluations.demo.agent import TOOLS, respond

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND


def tracer_provider(server: str, token: str, *, project: str = "") -> TracerProvider:
    """Spans batched and exported to evalsite over OTLP/HTTP (protobuf)."""
    headers = {"Authorization": f"Bearer {token}"}
    if project:  # a token of someone in several projects says which
        headers["X-Evalsite-Project"] = project
    exporter = OTLPSpanExporter(endpoint=server.rstrip("/") + "/v1/traces", headers=headers)
    provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def traced_tools(tracer: Tracer) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """The agent's tools, each call in a TOOL span with its arguments and result."""

    def call_tool(name: str, args: dict[str, Any]) -> dict[str, Any]:
        attributes = {
            KIND: OpenInferenceSpanKindValues.TOOL.value,
            SpanAttributes.TOOL_NAME: name,
            SpanAttributes.INPUT_VALUE: json.dumps(args),
        }
        with tracer.start_as_current_span(f"tool {name}", attributes=attributes) as span:
            result = TOOLS[name](args)
            span.set_attribute(SpanAttributes.OUTPUT_VALUE, json.dumps(result))
            if "error" in result:
                span.set_status(Status(StatusCode.ERROR, result["error"]))
            return result

    return call_tool


def answer_case(
    tracer: Tracer, *, run_id: int, eval_id: str, turns: list[Any], metadata: dict[str, Any] | None = None
) -> None:
    """One case of the run: its turns answered by the agent, in one trace naming the case."""
    call_tool = traced_tools(tracer)
    history: list[dict[str, Any]] = []
    root_attributes = {
        KIND: OpenInferenceSpanKindValues.AGENT.value,
        SpanAttributes.AGENT_NAME: "travel_agent",
        "evalsite.run_id": run_id,
        "evalsite.eval_id": eval_id,
    }
    with tracer.start_as_current_span("travel_agent", attributes=root_attributes) as root:
        reply: dict[str, Any] = {}
        for index, user_content in enumerate(turns):
            with tracer.start_as_current_span(
                "turn",
                attributes={
                    KIND: OpenInferenceSpanKindValues.CHAIN.value,
                    SpanAttributes.INPUT_VALUE: str(user_content),
                },
            ) as turn:
                reply = respond(
                    {
                        "eval_id": eval_id,
                        "invocation_id": f"turn-{index + 1}",
                        "turn_index": index,
                        "user_content": user_content,
                        "history": history,
                        "metadata": metadata or {},
                    },
                    call_tool=call_tool,
                )
                turn.set_attribute(SpanAttributes.OUTPUT_VALUE, reply["final_response"])
            history += [
                {"role": "user", "content": user_content},
                {"role": "assistant", "content": reply["final_response"]},
            ]
        if len(turns) == 1:
            root.set_attribute(SpanAttributes.OUTPUT_VALUE, reply.get("final_response", ""))


def run_cases(server: str, token: str, run_id: int) -> Iterator[tuple[str, list[Any]]]:
    """The run's cases (eval id, the user's message per turn), read from evalsite's API."""

    def get(path: str) -> Any:
        request = urllib.request.Request(  # noqa: S310 - the server given
            server.rstrip("/") + path, headers={"Authorization": f"Token {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - the server given
            return json.load(response)

    run = get(f"/api/v1/runs/{run_id}/")
    path: str | None = f"/api/v1/evalsets/{run['evalset']}/versions/{run['evalset_version']}/cases/?limit=500"
    wanted = set(run.get("eval_ids") or [])
    while path:
        page = get(path)
        for case in page["results"]:
            if wanted and case["eval_id"] not in wanted:
                continue
            yield case["eval_id"], [_text(turn.get("user_content")) for turn in case.get("conversation") or []]
        path = page["next"].split(server.rstrip("/"), 1)[-1] if page.get("next") else None


def _text(content: Any) -> Any:
    """A message's text from evalsite's native content (`{"role": "user", "parts": [{"text": ...}]}`)."""
    if isinstance(content, dict) and isinstance(content.get("parts"), list):
        return "\n".join(p["text"] for p in content["parts"] if isinstance(p, dict) and isinstance(p.get("text"), str))
    return content


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True, help="evalsite's base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--token", required=True, help="an API token (Account page)")
    parser.add_argument("--run", type=int, required=True, help="the id of a run whose target is traces")
    parser.add_argument("--project", default="", help="the project's slug, for a token of several projects")
    parser.add_argument("--faults", default="", help="demo agent faults, e.g. wrong_argument (to see diffs)")
    args = parser.parse_args(argv)
    provider = tracer_provider(args.server, args.token, project=args.project)
    tracer = provider.get_tracer("travel-agent")
    metadata = {"faults": {**dict.fromkeys(args.faults.split(","), True), "rate": 0.5}} if args.faults else {}
    count = 0
    for eval_id, turns in run_cases(args.server, args.token, args.run):
        answer_case(tracer, run_id=args.run, eval_id=eval_id, turns=turns, metadata=metadata)
        count += 1
    provider.force_flush()
    provider.shutdown()
    print(f"sent {count} traces for run {args.run}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
