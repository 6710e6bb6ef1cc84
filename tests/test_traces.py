"""OTLP traces: spans, trees, and the tool calls, steps, usage and threads derived from them.

The fixtures in tests/data/traces/ are OTLP JSON as exporters write it: attributes as
key/value lists, int64 values as strings, span kinds as numbers or enum names.
- openinference_two_turns.json: a LangChain-style agent traced with OpenInference, one trace
  per turn, both traces in one session.
- genai_cancel_order.json: one invoke_agent trace in OTel GenAI conventions, with a tool call
  that fails and is retried.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from evaluations.interop.otel.spans import TraceError, apply_trace, group_by_thread, parse_otlp, span_forest, summarize
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput, Usage

TRACES = Path(__file__).resolve().parent / "data" / "traces"


def load(name: str) -> dict[str, Any]:
    return json.loads((TRACES / name).read_text())


@pytest.fixture
def openinference() -> dict[str, Any]:
    return load("openinference_two_turns.json")


@pytest.fixture
def genai() -> dict[str, Any]:
    return load("genai_cancel_order.json")


def span_dict(trace_id: str, span_id: str, parent: str, name: str, start_ms: int, end_ms: int,
              **attributes: Any) -> dict[str, Any]:
    return {
        "traceId": trace_id, "spanId": span_id, "parentSpanId": parent, "name": name, "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + start_ms * 1_000_000),
        "endTimeUnixNano": str(1_700_000_000_000_000_000 + end_ms * 1_000_000),
        "attributes": [{"key": k.replace("__", "."), "value": {"stringValue": v}} for k, v in attributes.items()],
    }


def otlp(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"scope": {"name": "t"},
                                                                                "spans": list(spans)}]}]}


class TestParsing:
    def test_it_decodes_otlp_attribute_values_into_plain_values(self, openinference: dict[str, Any]) -> None:
        spans = parse_otlp(openinference)
        llm = next(s for s in spans if s.span_id == "eee19b7ec3c1b175")
        assert llm.attributes["llm.token_count.prompt"] == 412  # intValue "412" in the file
        assert llm.attributes["llm.model_name"] == "gpt-4o-mini-2024-07-18"
        assert llm.kind == "CLIENT"
        assert llm.resource["service.name"] == "travel-agent"
        assert llm.scope == "openinference.instrumentation.langchain"

    def test_it_reads_span_kind_and_status_given_as_enum_names(self, genai: dict[str, Any]) -> None:
        spans = {s.span_id: s for s in parse_otlp(genai)}
        assert spans["b7ad6b7169203331"].kind == "INTERNAL"  # "SPAN_KIND_INTERNAL" in the file
        assert spans["b7ad6b7169203334"].status_code == "ERROR"
        assert spans["b7ad6b7169203334"].error() == "orders service timed out"
        assert spans["b7ad6b7169203333"].error() is None

    def test_an_empty_parent_id_makes_a_root(self, openinference: dict[str, Any]) -> None:
        roots = span_forest(parse_otlp(openinference))
        assert [r.span.span_id for r in roots] == ["eee19b7ec3c1b174", "aaa19b7ec3c1b101"]
        assert [c.span.name for c in roots[0].children] == ["ChatOpenAI", "get_weather", "ChatOpenAI"]

    def test_it_reads_protobuf_style_snake_case_and_base64_ids(self) -> None:
        doc = {"resource_spans": [{"scope_spans": [{"spans": [{
            "trace_id": "W47/95gDgQPSabYzgT/GDA==", "span_id": "7uGbfsPBsXQ=", "name": "x",
            "start_time_unix_nano": 5, "end_time_unix_nano": 7}]}]}]}
        (span,) = parse_otlp(doc)
        assert span.trace_id == "5b8efff798038103d269b633813fc60c"
        assert span.span_id == "eee19b7ec3c1b174"
        assert span.duration_seconds == pytest.approx(2e-9)

    def test_it_lists_every_broken_span_with_its_path(self) -> None:
        good = span_dict("a" * 32, "b" * 16, "", "root", 0, 10)
        no_id = span_dict("a" * 32, "", "", "x", 0, 1)
        no_start = span_dict("a" * 32, "c" * 16, "", "y", 0, 1)
        del no_start["startTimeUnixNano"]
        with pytest.raises(TraceError) as info:
            parse_otlp(otlp(good, no_id, no_start, dict(good)))
        paths = [path for path, _ in info.value.problems]
        assert ("resourceSpans", 0, "scopeSpans", 0, "spans", 1, "spanId") in paths
        assert ("resourceSpans", 0, "scopeSpans", 0, "spans", 2, "startTimeUnixNano") in paths
        duplicate = dict(info.value.problems)[("resourceSpans", 0, "scopeSpans", 0, "spans", 3)]
        assert "duplicate span id" in duplicate

    def test_a_document_without_resource_spans_is_refused(self) -> None:
        with pytest.raises(TraceError, match="resourceSpans"):
            parse_otlp({"spans": []})


class TestOpenInference:
    def test_tool_calls_come_in_order_with_arguments_results_and_latency(self, openinference: dict[str, Any]) -> None:
        first, second = summarize(openinference)
        (weather,) = first.derived.tool_calls
        assert (weather.name, weather.args, weather.call_id) == ("get_weather", {"city": "Paris"}, "call_Xq1")
        assert weather.result == {"city": "Paris", "temp_c": 16, "condition": "cloudy"}
        assert weather.latency_seconds == pytest.approx(0.25)
        assert weather.node == "travel_agent"
        (forecast,) = second.derived.tool_calls
        assert (forecast.name, forecast.args) == ("get_forecast", {"city": "Paris", "days": 1})
        assert forecast.node == "forecast_router"  # the nearest enclosing CHAIN, not the AGENT above it

    def test_agent_and_chain_spans_are_node_steps_between_the_tool_steps(self, openinference: dict[str, Any]) -> None:
        second = summarize(openinference)[1]
        steps = [(s.step_type.value, s.name) for s in second.derived.steps]
        assert steps == [("NODE", "travel_agent"), ("NODE", "forecast_router"), ("TOOL", "get_forecast")]
        assert second.derived.steps[2].args == {"city": "Paris", "days": 1}
        assert second.derived.steps[2].metadata["latency_seconds"] == pytest.approx(0.6)
        assert second.derived.steps[0].timestamp == pytest.approx(1764000005.0)

    def test_llm_calls_carry_their_model_and_token_counts(self, openinference: dict[str, Any]) -> None:
        first = summarize(openinference)[0]
        assert [(c.model, c.usage.prompt_tokens, c.usage.completion_tokens) for c in first.derived.llm_calls] == [
            ("gpt-4o-mini-2024-07-18", 412, 18), ("gpt-4o-mini-2024-07-18", 470, 14)]
        assert first.derived.usage == Usage(prompt_tokens=882, completion_tokens=32, total_tokens=914,
                                            cost_usd=0.0001)

    def test_traces_of_one_session_form_one_thread(self, openinference: dict[str, Any]) -> None:
        threads = group_by_thread(summarize(openinference))
        assert list(threads) == ["thread-7f3e2a10"]
        assert [s.trace_id for s in threads["thread-7f3e2a10"]] == [
            "5b8efff798038103d269b633813fc60c", "6c9f0008a9149214e37ac744924ad71d"]

    def test_traces_without_a_session_are_grouped_under_none(self) -> None:
        doc = otlp(span_dict("a" * 32, "b" * 16, "", "one", 0, 1),
                   span_dict("c" * 32, "d" * 16, "", "two", 5, 6, session__id="s-1"))
        threads = group_by_thread(summarize(doc))
        assert {k: [s.trace_id for s in v] for k, v in threads.items()} == {None: ["a" * 32], "s-1": ["c" * 32]}


class TestGenAI:
    def test_execute_tool_spans_are_tool_calls_and_a_failed_one_keeps_its_error(self, genai: dict[str, Any]) -> None:
        (trace,) = summarize(genai)
        calls = trace.derived.tool_calls
        assert [(c.name, c.call_id) for c in calls] == [
            ("get_order", "call_mszuSIzqtI65i1wAUOE8w5H4"), ("cancel_order", "call_Bz8Yq0"), ("cancel_order", "call_Bz8Yq1")]
        assert calls[0].args == {"order_id": "2001"}
        assert calls[0].result == {"status": "processing", "total_eur": 89.9}
        assert calls[1].error == "orders service timed out"
        assert calls[1].result is None
        assert calls[2].error is None
        assert {c.node for c in calls} == {"orders_assistant"}

    def test_usage_adds_up_the_chat_spans_and_not_the_agent_total_as_well(self, genai: dict[str, Any]) -> None:
        (trace,) = summarize(genai)
        # invoke_agent reports 2000/90 for the whole run; counting it too would double the tokens.
        assert trace.derived.usage == Usage(prompt_tokens=1312, completion_tokens=71, total_tokens=1383)
        assert [c.model for c in trace.derived.llm_calls] == ["gpt-4o-2024-08-06", "gpt-4o"]

    def test_the_agent_total_is_used_when_no_llm_span_reports_usage(self, genai: dict[str, Any]) -> None:
        for resource in genai["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if span["name"].startswith("chat"):
                        span["attributes"] = [a for a in span["attributes"] if not a["key"].startswith("gen_ai.usage")]
        (trace,) = summarize(genai)
        assert trace.derived.usage == Usage(prompt_tokens=2000, completion_tokens=90, total_tokens=2090)

    def test_the_conversation_id_is_the_thread(self, genai: dict[str, Any]) -> None:
        (trace,) = summarize(genai)
        assert trace.thread_id == "conv_5j66UpCpwteGg4YSxUnt7lPY"
        assert trace.derived.latency_seconds == pytest.approx(3.2)


class TestApplyTrace:
    def test_an_output_with_only_a_trace_gets_one_turn_per_root_span(self, openinference: dict[str, Any]) -> None:
        output = apply_trace(AgentOutput(eval_id="weather_paris_followup", trace=openinference))
        assert [t.final_response for t in output.turns] == [
            "It is 16°C and cloudy in Paris.", "Tomorrow Paris will be 18°C with light rain."]
        assert [[c.name for c in t.tool_calls] for t in output.turns] == [["get_weather"], ["get_forecast"]]
        assert [t.latency_seconds for t in output.turns] == [pytest.approx(1.42), pytest.approx(1.9)]
        assert output.turns[1].usage == Usage(prompt_tokens=520, completion_tokens=22, total_tokens=542)
        assert [s.name for s in output.trajectory] == [
            "travel_agent", "get_weather", "travel_agent", "forecast_router", "get_forecast"]
        assert output.metadata["thread_id"] == "thread-7f3e2a10"

    def test_turns_without_tool_calls_are_filled_by_position_and_keep_their_own_text(
        self, openinference: dict[str, Any]
    ) -> None:
        output = AgentOutput(eval_id="c", trace=openinference, turns=[
            TurnOutput(invocation_id="turn_1", final_response="Paris: 16°C", latency_seconds=2.0),
            TurnOutput(invocation_id="turn_2", final_response="Tomorrow: rain"),
        ])
        filled = apply_trace(output)
        assert [t.final_response for t in filled.turns] == ["Paris: 16°C", "Tomorrow: rain"]
        assert [t.tool_calls[0].name for t in filled.turns] == ["get_weather", "get_forecast"]
        assert filled.turns[0].latency_seconds == 2.0  # the agent's own figure wins
        assert output.turns[0].tool_calls == []  # the argument is left alone

    def test_tool_calls_the_agent_reported_are_not_replaced(self, openinference: dict[str, Any]) -> None:
        own = OutputToolCall(name="lookup", args={"q": "Paris"})
        output = AgentOutput(eval_id="c", trace=openinference, turns=[TurnOutput(tool_calls=[own]), TurnOutput()])
        filled = apply_trace(output)
        assert [[c.name for c in t.tool_calls] for t in filled.turns] == [["lookup"], []]
        assert filled.turns[1].usage is not None  # usage was missing everywhere, so it is filled

    def test_a_single_session_root_is_unwrapped_into_its_turns(self) -> None:
        t = "e" * 32
        doc = otlp(
            span_dict(t, "1" * 16, "", "conversation", 0, 100, openinference__span__kind="CHAIN"),
            span_dict(t, "2" * 16, "1" * 16, "turn one", 1, 40, openinference__span__kind="AGENT"),
            span_dict(t, "3" * 16, "2" * 16, "get_weather", 2, 10, openinference__span__kind="TOOL",
                      tool__name="get_weather", input__value='{"city": "Oslo"}'),
            span_dict(t, "4" * 16, "1" * 16, "turn two", 50, 90, openinference__span__kind="AGENT"),
            span_dict(t, "5" * 16, "4" * 16, "get_forecast", 51, 60, openinference__span__kind="TOOL",
                      tool__name="get_forecast", input__value='{"city": "Oslo", "days": 2}'),
        )
        output = apply_trace(AgentOutput(eval_id="c", trace=doc, turns=[TurnOutput(), TurnOutput()]))
        assert [[(c.name, c.args) for c in t.tool_calls] for t in output.turns] == [
            [("get_weather", {"city": "Oslo"})], [("get_forecast", {"city": "Oslo", "days": 2})]]

    def test_a_single_turn_takes_the_spans_of_every_root(self, openinference: dict[str, Any]) -> None:
        output = apply_trace(AgentOutput(eval_id="c", trace=openinference, turns=[TurnOutput(final_response="x")]))
        assert [c.name for c in output.turns[0].tool_calls] == ["get_weather", "get_forecast"]
        assert output.turns[0].usage is not None and output.turns[0].usage.prompt_tokens == 882 + 520

    def test_when_turns_and_root_spans_do_not_pair_up_it_says_so_and_guesses_nothing(
        self, openinference: dict[str, Any]
    ) -> None:
        output = apply_trace(AgentOutput(eval_id="c", trace=openinference,
                                         turns=[TurnOutput(), TurnOutput(), TurnOutput()]))
        assert all(t.tool_calls == [] for t in output.turns)
        assert "2 turn span(s)" in output.metadata["trace_warning"]
        assert len(output.trajectory) == 5  # the trajectory is the whole trace's, so it is still filled

    def test_applying_twice_changes_nothing_more(self, genai: dict[str, Any]) -> None:
        once = apply_trace(AgentOutput(eval_id="c", trace=genai))
        assert apply_trace(once) == once

    def test_an_unreadable_trace_is_noted_and_the_output_kept(self) -> None:
        output = AgentOutput(eval_id="c", trace={"resourceSpans": "nope"}, turns=[TurnOutput(final_response="hi")])
        result = apply_trace(output)
        assert result.turns == output.turns
        assert "resourceSpans" in result.metadata["trace_error"]

    def test_an_output_without_a_trace_comes_back_as_it_was(self) -> None:
        output = AgentOutput(eval_id="c", turns=[TurnOutput(final_response="hi")])
        assert apply_trace(output) is output

    def test_a_parent_cycle_does_not_hang_and_keeps_every_span(self, genai: dict[str, Any]) -> None:
        doc = copy.deepcopy(genai)
        spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
        spans[1]["parentSpanId"], spans[2]["parentSpanId"] = spans[2]["spanId"], spans[1]["spanId"]
        roots = span_forest(parse_otlp(doc))
        assert sum(1 for root in roots for _ in root.walk()) == len(spans)
