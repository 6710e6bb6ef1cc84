"""Uploaded outputs: the outputs format (docs/runs.md, "Targets") as JSON, {"results"} and JSONL, ADK's own
result files, and what is wrong with bad ones (file, case, path, line).

tests/data/outputs/:
- travel_outputs.json / travel_results.json / travel_outputs.jsonl: the outputs format.
- travel_demo_travel_agent_1764000130.53.evalset_result.json: an ADK EvalSetResult as
  `adk eval` writes it (model_dump_json with indent; parts with their null fields); it holds
  weather_tokyo twice (`--num_runs 2`), the second run in the newer invocation-events shape.
- bad_outputs.json / bad_outputs.jsonl: one problem of each kind, at known lines.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from evaluations.interop.base import EvalSetImportError, SourceFile
from evaluations.interop.outputs import read_outputs
from evaluations.schemas.outputs import Usage

DATA = Path(__file__).resolve().parent / "data"
OUTPUTS = DATA / "outputs"
ADK_RESULT = "travel_demo_travel_agent_1764000130.53.evalset_result.json"


def source(name: str, data: bytes | None = None) -> SourceFile:
    return SourceFile(name, data if data is not None else (OUTPUTS / name).read_bytes())


def read_error(*files: SourceFile) -> EvalSetImportError:
    with pytest.raises(EvalSetImportError) as info:
        read_outputs(list(files))
    return info.value


class TestOutputsFormat:
    def test_a_json_list_is_read_as_it_is_written(self) -> None:
        tokyo, paris = read_outputs([source("travel_outputs.json")])
        assert (tokyo.eval_id, tokyo.iteration) == ("weather_tokyo", 0)
        (turn,) = tokyo.turns
        assert turn.final_response == "It is 22°C and clear in Tokyo."
        assert [(c.name, c.args, c.result, c.call_id) for c in turn.tool_calls] == [
            ("get_weather", {"city": "Tokyo"}, {"temp_c": 22}, "c1")]
        assert turn.usage == Usage(prompt_tokens=812, completion_tokens=64, cost_usd=0.0011)
        assert tokyo.trajectory[0].name == "planner"
        assert tokyo.metadata == {"model": "gpt-4o-mini"}
        assert [t.invocation_id for t in paris.turns] == ["turn_1", "turn_2"]

    def test_a_results_object_is_read_with_its_iterations(self) -> None:
        outputs = read_outputs([source("travel_results.json")])
        assert [(o.eval_id, o.iteration) for o in outputs] == [("order_status", 0), ("order_status", 1)]
        assert outputs[1].turns[0].final_response == "Order 1042 is on its way."

    def test_json_lines_are_read_skipping_blank_lines(self) -> None:
        outputs = read_outputs([source("travel_outputs.jsonl")])
        assert [(o.eval_id, o.iteration) for o in outputs] == [
            ("weather_tokyo", 0), ("weather_tokyo", 1), ("smalltalk_no_tools", 0)]
        assert outputs[1].turns[0].latency_seconds == 1.6

    def test_json_lines_in_a_file_named_json_are_read_as_lines(self) -> None:
        data = (OUTPUTS / "travel_outputs.jsonl").read_bytes()
        outputs = read_outputs([source("outputs.json", data)])
        assert len(outputs) == 3

    def test_several_files_and_a_zip_are_read_together(self) -> None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("ci/travel_results.json", (OUTPUTS / "travel_results.json").read_bytes())
        outputs = read_outputs([source("travel_outputs.json"), source("outputs.zip", buffer.getvalue())])
        assert [o.eval_id for o in outputs] == ["weather_tokyo", "weather_paris_followup", "order_status",
                                                "order_status"]

    def test_an_output_with_a_trace_gets_its_tool_calls_from_it(self) -> None:
        trace = json.loads((DATA / "traces" / "genai_cancel_order.json").read_text())
        row = {"eval_id": "order_cancel", "turns": [{"final_response": "Cancelled."}], "trace": trace}
        (output,) = read_outputs([source("traced.jsonl", json.dumps(row).encode())])
        assert [c.name for c in output.turns[0].tool_calls] == ["get_order", "cancel_order", "cancel_order"]
        assert output.turns[0].final_response == "Cancelled."
        assert output.metadata["thread_id"] == "conv_5j66UpCpwteGg4YSxUnt7lPY"


class TestADKResults:
    def test_actual_invocations_become_turns_with_tool_calls_and_results(self) -> None:
        outputs = read_outputs([source(ADK_RESULT)])
        assert [(o.eval_id, o.iteration) for o in outputs] == [
            ("weather_tokyo", 0), ("weather_paris_followup", 0), ("weather_tokyo", 1)]
        (turn,) = outputs[0].turns
        assert turn.final_response == "It is 22°C and clear in Tokyo right now."
        (call,) = turn.tool_calls
        assert (call.name, call.args) == ("get_weather", {"city": "Tokyo"})
        assert call.call_id == "adk-0f9b7c1e-2a34-4f5d-8e6a-1b2c3d4e5f60"
        assert call.result == {"result": {"city": "Tokyo", "temp_c": 22, "condition": "clear"}}

    def test_turns_take_the_expected_invocation_id_and_keep_adks_own(self) -> None:
        paris = read_outputs([source(ADK_RESULT)])[1]
        assert [t.invocation_id for t in paris.turns] == ["turn_1", "turn_2"]
        assert paris.turns[0].metadata["adk_invocation_id"] == "e-11111111-aaaa-4bbb-8ccc-000000000001"
        assert paris.turns[0].intermediate_responses == [
            {"role": "assistant", "content": "Looking up the weather.", "metadata": {"author": "router_agent"}}]
        assert [c.name for c in paris.turns[1].tool_calls] == ["get_weather"]

    def test_the_case_status_and_session_go_to_metadata(self) -> None:
        paris = read_outputs([source(ADK_RESULT)])[1]
        assert paris.metadata["final_eval_status"] == "FAILED"
        assert paris.metadata["eval_set_result_id"] == "travel_demo_travel_agent_1764000130.53"
        assert paris.metadata["session_id"].startswith("___eval___session___")

    def test_newer_invocation_events_give_calls_usage_and_duration(self) -> None:
        second_run = read_outputs([source(ADK_RESULT)])[2]
        (turn,) = second_run.turns
        assert [(c.name, c.call_id, c.result) for c in turn.tool_calls] == [
            ("get_weather", "adk-e1", {"result": {"temp_c": 22}})]
        assert turn.latency_seconds == 1.84
        assert turn.usage == Usage(prompt_tokens=310, completion_tokens=14, total_tokens=324)

    def test_the_older_double_encoded_file_is_read_too(self) -> None:
        compact = json.dumps(json.loads((OUTPUTS / ADK_RESULT).read_text()))
        outputs = read_outputs([source("old.evalset_result.json", json.dumps(compact).encode())])
        assert [o.eval_id for o in outputs] == ["weather_tokyo", "weather_paris_followup", "weather_tokyo"]

    def test_camel_case_results_from_the_web_ui_are_read(self) -> None:
        doc = {"evalSetResultId": "r1", "evalSetId": "s", "evalCaseResults": [{
            "evalId": "order_status", "finalEvalStatus": 1, "sessionId": "s1",
            "evalMetricResultPerInvocation": [{"actualInvocation": {
                "invocationId": "e-1", "userContent": {"role": "user", "parts": [{"text": "Where is order 1042?"}]},
                "finalResponse": {"role": "model", "parts": [{"text": "It shipped."}]},
                "intermediateData": {"toolUses": [{"id": "t1", "name": "get_order", "args": {"order_id": "1042"}}],
                                     "toolResponses": [{"id": "t1", "name": "get_order",
                                                        "response": {"status": "shipped"}}]},
            }}]}]}
        (output,) = read_outputs([source("camel.evalset_result.json", json.dumps(doc).encode())])
        assert output.turns[0].invocation_id == "e-1"  # no expected invocation to take the id from
        assert output.turns[0].final_response == "It shipped."
        assert output.turns[0].tool_calls[0].result == {"status": "shipped"}

    def test_a_case_without_per_invocation_results_is_read_from_its_session_events(self) -> None:
        def event(invocation: str, author: str, **part: Any) -> dict[str, Any]:
            return {"invocation_id": invocation, "author": author, "content": {"role": "model", "parts": [part]}}

        doc = {"eval_set_result_id": "r", "eval_set_id": "s", "eval_case_results": [{
            "eval_id": "flight_book_after_search", "final_eval_status": 3, "session_id": "s",
            "eval_metric_result_per_invocation": [],
            "session_details": {"id": "s", "events": [
                event("e-1", "user", text="Any flights from Madrid to Rome on 2026-12-12?"),
                event("e-1", "travel_agent", function_call={"id": "f1", "name": "search_flights",
                                                            "args": {"origin": "MAD", "destination": "FCO"}}),
                event("e-1", "travel_agent", function_response={"id": "f1", "name": "search_flights",
                                                                "response": {"flights": ["IB 3230"]}}),
                event("e-1", "travel_agent", text="IB 3230 leaves at 07:15."),
                event("e-2", "user", text="Book it for Ana Lopez."),
                event("e-2", "travel_agent", text="Booked."),
            ]}}]}
        (output,) = read_outputs([source("s.evalset_result.json", json.dumps(doc).encode())])
        assert [t.invocation_id for t in output.turns] == ["e-1", "e-2"]
        assert output.turns[0].final_response == "IB 3230 leaves at 07:15."
        assert output.turns[0].tool_calls[0].result == {"flights": ["IB 3230"]}
        assert output.turns[1].final_response == "Booked."
        assert output.metadata["final_eval_status"] == "NOT_EVALUATED"

    def test_an_adk_problem_is_reported_at_its_line(self) -> None:
        text = (OUTPUTS / ADK_RESULT).read_text()
        broken = text.replace('"name": "get_weather",\n', '"name": 7,\n', 1)
        assert broken != text
        error = read_error(source(ADK_RESULT, broken.encode()))
        assert error.code == "schema"
        (problem,) = error.problems
        assert problem.case == "weather_tokyo"
        assert problem.path is not None and problem.path.endswith("actual_invocation.intermediate_data.tool_responses[0].name")
        assert problem.line == text[: text.index('"name": "get_weather",\n')].count("\n") + 1


class TestBadOutputs:
    def test_every_json_problem_has_its_case_path_and_line(self) -> None:
        error = read_error(source("bad_outputs.json"))
        assert error.code == "schema"
        got = [(p.case, p.path, p.line, p.message) for p in error.problems]
        assert got == [
            ("weather_tokyo", "[0].turns[0].tool_call", 7, "unknown field (not part of the outputs format)"),
            ("order_status", "[1].latency_seconds", 13,
             "Input should be a valid number, unable to parse string as a number"),
            (None, "[2].eval_id", 16, "required field is missing"),
        ]
        assert all(p.file == "bad_outputs.json" for p in error.problems)

    def test_every_json_lines_problem_has_its_line(self) -> None:
        error = read_error(source("bad_outputs.jsonl"))
        got = [(p.line, p.case, p.path) for p in error.problems]
        assert got == [(2, "order_status", "turns[0].tool_calls[0].name"), (3, None, None), (4, "weather_tokyo", "eval_id")]
        assert error.problems[1].message.startswith("not valid JSON")
        assert error.problems[1].column == 39
        assert "bad_outputs.jsonl:1 has it too" in error.problems[2].message

    def test_the_same_case_and_iteration_twice_is_an_error_naming_both_places(self) -> None:
        error = read_error(source("travel_outputs.jsonl"), source("again.json", (OUTPUTS / "travel_outputs.json").read_bytes()))
        assert error.code == "duplicate_outputs"
        (problem,) = error.problems
        assert (problem.file, problem.case, problem.line) == ("again.json", "weather_tokyo", 3)
        assert "travel_outputs.jsonl:1 has it too" in problem.message

    def test_an_iteration_out_of_range_is_a_problem_at_its_line(self) -> None:
        """A stray iteration number would otherwise make a run of millions of results."""
        rows = [{"eval_id": "weather_tokyo", "iteration": 99}, {"eval_id": "weather_tokyo", "iteration": 100},
                {"eval_id": "order_status", "iteration": -1}]
        error = read_error(source("iterations.jsonl", "\n".join(json.dumps(r) for r in rows).encode()))
        assert error.code == "schema"
        got = [(p.file, p.line, p.case, p.path) for p in error.problems]
        assert got == [("iterations.jsonl", 2, "weather_tokyo", "iteration"),
                       ("iterations.jsonl", 3, "order_status", "iteration")]
        assert "less than 100" in error.problems[0].message
        assert "greater than or equal to 0" in error.problems[1].message

    def test_an_adk_result_with_more_runs_of_a_case_than_a_run_has_iterations_is_refused(self) -> None:
        doc = json.loads((OUTPUTS / ADK_RESULT).read_text())
        tokyo = next(c for c in doc["eval_case_results"] if c["eval_id"] == "weather_tokyo")
        doc["eval_case_results"] = [tokyo] * 101
        error = read_error(source("many_runs.evalset_result.json", json.dumps(doc).encode()))
        assert error.code == "schema"
        (problem,) = error.problems
        assert (problem.case, problem.path) == ("weather_tokyo", "eval_case_results[100].eval_id")
        assert "more than 100 results for this case" in problem.message

    def test_problems_are_capped_and_counted(self) -> None:
        rows = "\n".join(json.dumps({"eval_id": f"case_{n}", "latency_seconds": "slow"}) for n in range(30))
        error = read_error(source("many.jsonl", rows.encode()))
        assert len(error.problems) == 20
        assert error.total == 30
        assert "and 10 more problems" in error.summary()

    def test_a_broken_trace_is_reported_inside_the_output(self) -> None:
        row = {"eval_id": "c", "trace": {"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "no ids"}]}]}]}}
        error = read_error(source("t.jsonl", json.dumps(row).encode()))
        paths = {p.path for p in error.problems}
        assert "trace.resourceSpans[0].scopeSpans[0].spans[0].traceId" in paths
        assert all(p.line == 1 for p in error.problems)

    @pytest.mark.parametrize(
        ("name", "data", "code"),
        [
            ("empty.json", b"  \n", "empty"),
            ("broken.json", b'[{"eval_id": "a",\n  "turns": [}]', "invalid_json"),
            ("latin1.jsonl", '{"eval_id": "café"}'.encode("latin-1"), "encoding"),
            ("scalar.json", b"42", "schema"),
        ],
    )
    def test_unreadable_files_are_refused_with_a_stable_code(self, name: str, data: bytes, code: str) -> None:
        assert read_error(source(name, data)).code == code

    def test_an_empty_list_is_an_upload_of_no_outputs(self) -> None:
        assert read_outputs([source("none.json", b'{"results": []}')]) == []
        assert read_outputs([source("none.json", b"[]")]) == []

    def test_a_zip_without_outputs_files_is_refused(self) -> None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("README.txt", "no outputs here")
        assert read_error(source("outputs.zip", buffer.getvalue())).code == "empty"

    def test_invalid_json_says_where(self) -> None:
        error = read_error(source("broken.json", b'[{"eval_id": "a",\n  "turns": [}]'))
        assert (error.problems[0].line, error.problems[0].column) == (2, 13)
