"""The Google ADK reader: the current EvalSet (snake_case and camelCase), the two older list
formats, test_config.json, detection against the native reader, and located problems.

Parsing tests call the reader directly, the way `read_upload` does (companions split off by
`is_companion`, eval sets picked by `sniff`); the last tests go through `read_upload` and
`evalset_import` with every reader in place.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluations.evalsets.services import evalset_import
from evaluations.interop import EvalSetImportError, SourceFile, files_from_paths, read_upload
from evaluations.interop.adk.convert import AdkConverter
from evaluations.interop.adk.evalset import reader
from evaluations.interop.agentflow.evalset import reader as native_reader
from evaluations.interop.base import CaseSink, ParsedEvalSet
from evaluations.models import EvalCase, EvalSetVersion, Project
from evaluations.schemas.evalset import EvalCase as NativeEvalCase
from evaluations.schemas.evalset import MatchType, ToolCall
from evaluations.schemas.text import nul_free
from tests.conftest import DATA, REALWORLD

FIXTURES = DATA / "adk"
ADK = REALWORLD / "google-adk"


def folder_files(folder: Path) -> list[SourceFile]:
    """Every JSON file under `folder`, named by its path relative to it (as a folder upload)."""
    return [SourceFile(p.relative_to(folder).as_posix(), p.read_bytes()) for p in sorted(folder.rglob("*.json"))]


def parse_in(folder: Path, name: str) -> ParsedEvalSet:
    """Parse one eval set of a folder upload, with the folder's companions beside it."""
    files = folder_files(folder)
    companions = [f for f in files if reader.is_companion(f)]
    [target] = [f for f in files if f.name == name]
    assert reader.sniff(target) is None
    return reader.parse(target, companions)


def parse_doc(doc: Any, name: str = "inline.evalset.json") -> ParsedEvalSet:
    return reader.parse(SourceFile(name, json.dumps(doc, indent=2).encode()), [])


def problems_of(doc: Any | str, name: str = "inline.evalset.json") -> list[dict[str, Any]]:
    text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
    with pytest.raises(EvalSetImportError) as caught:
        reader.parse(SourceFile(name, text.encode()), [])
    assert caught.value.code == "schema"
    return [p.as_dict() for p in caught.value.problems]


def line_of(text: str, snippet: str) -> int:
    return text[: text.index(snippet)].count("\n") + 1


def user_turn(text: str, **extra: Any) -> dict[str, Any]:
    return {"user_content": {"role": "user", "parts": [{"text": text}]}, **extra}


class TestRealWorldFiles:
    def test_it_reads_the_ecommerce_eval_set_with_four_turns_and_seven_tool_calls(self) -> None:
        parsed = parse_in(ADK, "ecommerce_customer_service_agent/order_query.test.json")
        evalset = parsed.evalset
        assert (parsed.format, parsed.variant) == ("adk", "adk-evalset")
        assert evalset.eval_set_id == "a1157c01-851f-48a8-b956-83cf7f463510"
        assert evalset.description == ""  # null in the file
        assert evalset.metadata == {"creation_timestamp": 1747341706.6242158}
        [case] = evalset.eval_cases
        assert case.eval_id == "tests/integration/fixture/ecommerce_customer_service_agent/order_query.test.json"
        assert case.session_input is None
        assert [i.invocation_id for i in case.conversation] == [
            "38d54523-d789-4873-8cc0-d38826c7feb4",
            "916393ab-0bce-4cb0-98de-6573d4e8e25c",
            "511b23d9-56f9-423b-9c31-7626f3411c32",
            "dcdf4b6d-96dd-4602-8c14-0563c6f6b5d0",
        ]
        assert [i.user_content.content for i in case.conversation] == [
            "Send an email to user user_a whose email address is alice@example.com",
            "Can you tell me the status of my order with ID 1?",
            "Cancel all pending order for the user with user id user_a",
            "What orders have I placed under the username user_b?",
        ]
        assert case.conversation[0].expected_tool_trajectory == [
            ToolCall(name="send_email", args={"email": "alice@example.com", "user_id": "user_a"})
        ]
        assert [(t.name, t.args) for t in case.conversation[2].expected_tool_trajectory] == [
            ("get_order_ids_for_user", {"user_id": "user_a"}),
            ("get_order_status", {"order_id": "1"}),
            ("get_order_status", {"order_id": "4"}),
            ("cancel_order", {"order_id": "4"}),
        ]
        assert sum(len(i.expected_tool_trajectory) for i in case.conversation) == 7
        final = case.conversation[1].expected_final_response
        assert final is not None
        assert (final.role, final.content) == ("assistant", "Your order with ID 1 is FINISHED.")
        assert case.conversation[3].metadata == {"creation_timestamp": 1747341706.624196}

    def test_it_takes_the_thresholds_from_the_test_config_beside_the_file(self) -> None:
        parsed = parse_in(ADK, "ecommerce_customer_service_agent/order_query.test.json")
        assert [c.name for c in parsed.companions_used] == ["ecommerce_customer_service_agent/test_config.json"]
        config = parsed.default_config
        assert config is not None
        assert {name: c.threshold for name, c in config.criteria.items()} == {
            "tool_trajectory_avg_score": 0.7,
            "response_match_score": 0.5,
        }
        assert config.criteria["tool_trajectory_avg_score"].evaluator == "tool_trajectory_avg_score"
        assert config.criteria["tool_trajectory_avg_score"].match_type is MatchType.EXACT

    def test_each_eval_set_gets_only_the_test_config_of_its_own_folder(self) -> None:
        hello = parse_in(ADK, "hello_world_agent/roll_die.test.json").default_config
        assert hello is not None
        assert hello.criteria["tool_trajectory_avg_score"].threshold == 1.0
        assert hello.criteria["response_match_score"].threshold == 0.5
        trip = parse_in(ADK, "trip_planner_agent/trip_inquiry.test.json")
        assert trip.default_config is None
        assert trip.companions_used == []

    def test_it_leaves_the_expected_response_unset_when_adk_wrote_a_null_text(self) -> None:
        [case] = parse_in(ADK, "hello_world_agent/roll_die.test.json").evalset.eval_cases
        assert [i.user_content.get_text() for i in case.conversation] == [
            "Hi who are you?", "What can you do?", "Can you roll a die with 6 sides",
        ]
        assert [len(i.expected_tool_trajectory) for i in case.conversation] == [0, 0, 1]
        last = case.conversation[2]
        assert last.expected_tool_trajectory == [ToolCall(name="roll_die", args={"sides": 6})]
        assert last.expected_final_response is None
        first = case.conversation[0].expected_final_response
        assert first is not None
        assert first.content.startswith("I am a data processing agent.")
        assert case.metadata == {"creation_timestamp": 1747341775.8937826}

    def test_it_reads_the_oldest_bare_list_as_one_case_named_after_the_file(self) -> None:
        parsed = parse_in(ADK, "trip_planner_agent/trip_inquiry.test.json")
        assert parsed.variant == "adk-oldest-list"
        assert (parsed.evalset.eval_set_id, parsed.evalset.name) == ("trip_inquiry", "trip_inquiry")
        [case] = parsed.evalset.eval_cases
        assert case.eval_id == "trip_inquiry"
        assert [i.invocation_id for i in case.conversation] == ["turn_1", "turn_2"]
        assert case.conversation[0].user_content.content == "Hi, who are you? What can you do?"
        assert case.conversation[0].expected_tool_trajectory == []
        assert case.conversation[1].expected_tool_trajectory == [
            ToolCall(name="transfer_to_agent", args={"agent_name": "indentify_agent"})
        ]
        final = case.conversation[1].expected_final_response
        assert final is not None
        assert final.content.startswith("Okay, I can help you analyze London and Paris")

    def test_it_reads_a_scenario_case_and_a_case_of_user_turns_only(self) -> None:
        parsed = parse_in(ADK, "live_non_blocking_tool_agent/live_non_blocking_tool_agent.evalset.json")
        scenario_case, scripted = parsed.evalset.eval_cases
        assert scenario_case.eval_id == "background_task_scenario"
        assert scenario_case.conversation == []
        scenario = scenario_case.conversation_scenario
        assert scenario is not None
        assert scenario.starting_prompt == "Hi, can you kick off a long background task for me?"
        assert scenario.conversation_plan.startswith("Ask the agent to start a slow background task")
        assert scenario.user_persona == "NOVICE"
        assert scripted.eval_id == "background_task_scripted"
        assert scripted.conversation_scenario is None
        assert [(i.invocation_id, i.user_content.content) for i in scripted.conversation] == [
            ("turn_1", "Please start a slow background task to index my documents."),
            ("turn_2", "While that runs, what is two plus two?"),
        ]
        assert all(i.expected_final_response is None and not i.expected_tool_trajectory for i in scripted.conversation)
        for case in (scenario_case, scripted):
            assert case.session_input is not None
            assert case.session_input.config == {"app_name": "live_non_blocking_tool_agent", "user_id": "test_user_id"}
            assert case.session_input.initial_state == {}

    def test_every_real_eval_set_file_is_detected_and_no_test_config_is(self) -> None:
        files = folder_files(ADK)
        taken = sorted(f.name for f in files if reader.sniff(f) is None)
        assert taken == [
            "ecommerce_customer_service_agent/order_query.test.json",
            "hello_world_agent/roll_die.test.json",
            "live_non_blocking_tool_agent/live_non_blocking_tool_agent.evalset.json",
            "trip_planner_agent/trip_inquiry.test.json",
        ]
        assert sorted(f.name for f in files if reader.is_companion(f)) == [
            "ecommerce_customer_service_agent/test_config.json",
            "hello_world_agent/test_config.json",
        ]

    def test_the_native_reader_refuses_every_real_adk_file(self) -> None:
        for f in folder_files(ADK):
            assert native_reader.sniff(f) is not None, f.name


class TestCamelCase:
    @pytest.fixture
    def parsed(self) -> ParsedEvalSet:
        return parse_in(FIXTURES, "camel_case.evalset.json")

    def test_it_reads_camel_case_cases_and_invocations(self, parsed: ParsedEvalSet) -> None:
        assert parsed.variant == "adk-evalset"
        booking, weekend = parsed.evalset.eval_cases
        assert (booking.eval_id, weekend.eval_id) == ("book_flight", "plan_weekend")
        first, second = booking.conversation
        assert first.invocation_id == "e-1"
        assert second.invocation_id == "turn_2"  # no invocationId in the file
        assert first.user_content.content == "Book me a flight to Lisbon on May 2."
        assert first.expected_final_response is not None
        assert first.expected_final_response.content == "Booked: TP 1351 to Lisbon on May 2.\nYour reference is X7K2Q."
        assert [t.name for t in first.expected_tool_trajectory] == ["search_flights", "book_flight"]

    def test_it_attaches_each_tool_response_to_the_call_with_its_id(self, parsed: ParsedEvalSet) -> None:
        search, book = parsed.evalset.eval_cases[0].conversation[0].expected_tool_trajectory
        assert search == ToolCall(name="search_flights", args={"destination": "LIS", "date": "2026-05-02"},
                                  call_id="fc-1", result={"flights": ["TP1351", "FR8123"]})
        assert book == ToolCall(name="book_flight", args={"flight": "TP1351"}, call_id="fc-2",
                                result={"status": "confirmed", "pnr": "X7K2Q"})

    def test_it_keeps_intermediate_responses_with_their_author(self, parsed: ParsedEvalSet) -> None:
        [response] = parsed.evalset.eval_cases[0].conversation[0].expected_intermediate_responses
        assert (response.role, response.content, response.metadata) == (
            "assistant", "Two flights found.", {"author": "flight_finder"}
        )

    def test_it_keeps_non_text_parts_as_structured_content(self, parsed: ParsedEvalSet) -> None:
        user = parsed.evalset.eval_cases[0].conversation[1].user_content
        assert user.content == [
            {"text": "And a hotel near the river, like this one?"},
            {"inline_data": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
        ]
        assert user.get_text() == "And a hotel near the river, like this one?"

    def test_it_maps_the_session_input_to_config_state_and_thread(self, parsed: ParsedEvalSet) -> None:
        session = parsed.evalset.eval_cases[0].session_input
        assert session is not None
        assert session.config == {"app_name": "travel_agent", "user_id": "user_42"}
        assert session.initial_state == {"tier": "gold"}
        assert session.thread_id == "s-fixed"

    def test_it_keeps_timestamps_app_details_and_other_fields_in_metadata(self, parsed: ParsedEvalSet) -> None:
        booking = parsed.evalset.eval_cases[0]
        assert booking.metadata == {"creation_timestamp": 1750000000.0, "final_session_state": {"booked": True}}
        metadata = booking.conversation[0].metadata
        assert metadata["creation_timestamp"] == 1750000000.5
        assert metadata["app_details"] == {
            "agentDetails": {"travel_agent": {"name": "travel_agent", "instructions": "Book trips."}}
        }

    def test_it_converts_rubrics_and_keeps_their_types(self, parsed: ParsedEvalSet) -> None:
        booking, weekend = parsed.evalset.eval_cases
        [rubric] = booking.conversation[0].rubrics
        assert (rubric.name, rubric.description) == ("states_reference", "The reply gives the booking reference.")
        assert booking.conversation[0].metadata["rubric_types"] == {"states_reference": "FINAL_RESPONSE_QUALITY"}
        [case_rubric] = weekend.rubrics
        assert (case_rubric.name, case_rubric.description, case_rubric.scoring_guide) == (
            "two_nights", "The agent plans exactly two nights.", "1 when the plan covers two nights, else 0."
        )

    def test_it_reads_a_camel_case_scenario_and_keeps_its_extra_fields(self, parsed: ParsedEvalSet) -> None:
        weekend = parsed.evalset.eval_cases[1]
        assert weekend.conversation == []
        scenario = weekend.conversation_scenario
        assert scenario is not None
        assert scenario.starting_prompt == "I want a weekend in Porto."
        assert scenario.conversation_plan == "Ask for a two-night plan, then accept the first hotel offered."
        assert scenario.user_persona == {"id": "busy_traveller", "description": "Terse, in a hurry."}
        assert scenario.metadata == {"locale": "pt-PT"}


class TestInvocationEvents:
    @pytest.fixture
    def invocation(self) -> Any:
        [case] = parse_in(FIXTURES, "invocation_events.evalset.json").evalset.eval_cases
        [invocation] = case.conversation
        return invocation

    def test_it_takes_tool_calls_and_their_results_from_the_events(self, invocation: Any) -> None:
        assert invocation.expected_tool_trajectory == [
            ToolCall(name="get_weather", args={"city": "Oslo"}, call_id="c-1", result={"temp_c": 4, "sky": "rain"}),
            ToolCall(name="get_weather", args={"city": "Bergen"}, call_id="c-2",
                     result={"temp_c": 6, "sky": "cloudy"}),
        ]

    def test_event_text_becomes_an_intermediate_response_and_usage_goes_to_metadata(self, invocation: Any) -> None:
        [response] = invocation.expected_intermediate_responses
        assert (response.content, response.metadata) == ("Checking both forecasts.", {"author": "weather_agent"})
        assert invocation.metadata["invocation_events"] == [
            {"author": "weather_agent", "model_version": "gemini-2.5-flash",
             "usage_metadata": {"prompt_token_count": 120, "candidates_token_count": 12}}
        ]
        assert invocation.expected_final_response.content == "Oslo: 4°C and rain. Bergen: 6°C and cloudy."


class TestToolResponsesWithoutIds:
    def test_they_go_to_the_next_call_of_the_same_tool_and_leftovers_to_metadata(self) -> None:
        [case] = parse_in(FIXTURES / "with_config", "checkout.evalset.json").evalset.eval_cases
        [invocation] = case.conversation
        assert [(t.name, t.call_id, t.result) for t in invocation.expected_tool_trajectory] == [
            ("get_cart", None, {"total": 42.0}),
            ("charge_card", None, {"ok": True}),
        ]
        assert invocation.metadata["tool_responses"] == [{"name": "send_receipt", "response": {"sent": True}}]


class TestLegacyList:
    @pytest.fixture
    def parsed(self) -> ParsedEvalSet:
        return parse_in(FIXTURES, "legacy_list.test.json")

    def test_each_item_is_a_case_named_by_its_name(self, parsed: ParsedEvalSet) -> None:
        assert parsed.variant == "adk-legacy-list"
        assert parsed.evalset.eval_set_id == "legacy_list"
        assert [c.eval_id for c in parsed.evalset.eval_cases] == ["roll_17_sided_dice_twice", "check_prime"]

    def test_its_turns_carry_queries_tools_agent_responses_and_references(self, parsed: ParsedEvalSet) -> None:
        first, second = parsed.evalset.eval_cases[0].conversation
        assert (first.invocation_id, first.user_content.content) == ("turn_1", "What can you do?")
        assert first.expected_tool_trajectory == []
        assert second.expected_tool_trajectory == [ToolCall(name="roll_die", args={"sides": 17})] * 2
        [agent_says] = second.expected_intermediate_responses
        assert (agent_says.content, agent_says.metadata) == ("Rolling twice now.", {"author": "dice_agent"})
        assert second.expected_final_response is not None
        assert second.expected_final_response.content == "I rolled a 17 sided die twice: 13 and 4.\n"

    def test_the_initial_session_becomes_the_session_input_unless_empty(self, parsed: ParsedEvalSet) -> None:
        dice, prime = parsed.evalset.eval_cases
        assert dice.session_input is not None
        assert dice.session_input.config == {"app_name": "hello_world", "user_id": "user"}
        assert dice.session_input.initial_state == {"rolls": []}
        assert prime.session_input is None

    def test_a_mocked_tool_output_becomes_the_calls_result(self, parsed: ParsedEvalSet) -> None:
        [turn] = parsed.evalset.eval_cases[1].conversation
        assert turn.expected_tool_trajectory == [ToolCall(name="check_prime", args={"nums": [7]}, result="7 is prime")]


class TestTestConfig:
    @pytest.fixture
    def parsed(self) -> ParsedEvalSet:
        return parse_in(FIXTURES / "with_config", "checkout.evalset.json")

    def test_number_criteria_are_thresholds_named_after_the_adk_metric(self, parsed: ParsedEvalSet) -> None:
        config = parsed.default_config
        assert config is not None
        assert list(config.criteria) == [
            "tool_trajectory_avg_score", "response_match_score", "final_response_match_v2",
            "rubric_based_final_response_quality_v1", "hallucinations_v1", "apology_count",
        ]
        assert all(name == c.evaluator for name, c in config.criteria.items())
        assert config.criteria["response_match_score"].threshold == 0.6
        assert config.criteria["response_match_score"].options == {}

    def test_criterion_objects_keep_match_type_judge_and_other_settings(self, parsed: ParsedEvalSet) -> None:
        criteria = parsed.default_config.criteria  # type: ignore[union-attr]
        trajectory = criteria["tool_trajectory_avg_score"]
        assert (trajectory.threshold, trajectory.match_type) == (0.9, MatchType.IN_ORDER)
        judge = criteria["final_response_match_v2"]
        assert (judge.threshold, judge.judge_model) == (0.5, "gemini-2.5-pro")
        assert judge.options == {"judge_model_options": {"judge_model": "gemini-2.5-pro", "num_samples": 3}}
        assert criteria["hallucinations_v1"].options == {"evaluate_intermediate_nl_responses": True}
        assert criteria["apology_count"].options == {
            "custom_metric": {"code_config": {"name": "checks.apology_count"}, "description": "Counts the apologies."}
        }

    def test_criterion_rubrics_become_native_rubrics(self, parsed: ParsedEvalSet) -> None:
        rubric_based = parsed.default_config.criteria["rubric_based_final_response_quality_v1"]  # type: ignore[union-attr]
        [rubric] = rubric_based.rubrics
        assert (rubric.name, rubric.description) == ("polite", "The reply is polite.")
        assert rubric_based.options == {
            "judge_model_options": {"num_samples": 1},
            "rubric_types": {"polite": "FINAL_RESPONSE_QUALITY"},
        }

    def test_the_user_simulator_config_keeps_model_turn_limit_and_instructions(self, parsed: ParsedEvalSet) -> None:
        simulator = parsed.default_config.user_simulator_config  # type: ignore[union-attr]
        assert simulator is not None
        assert (simulator.model, simulator.max_turns) == ("gemini-2.5-flash", 12)
        assert simulator.options == {
            "custom_instructions": "Stay terse. {{ stop_signal }} {{ conversation_plan }} {{ conversation_history }}"
        }

    @pytest.mark.parametrize(("given", "expected"), [
        (0, MatchType.EXACT), (1, MatchType.IN_ORDER), (2, MatchType.ANY_ORDER), ("any-order", MatchType.ANY_ORDER),
    ])
    def test_match_types_may_be_adk_enum_numbers_or_loose_names(self, given: Any, expected: MatchType) -> None:
        config = SourceFile("test_config.json", json.dumps(
            {"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "matchType": given}}}
        ).encode())
        evalset = SourceFile("a.evalset.json", (FIXTURES / "invocation_events.evalset.json").read_bytes())
        parsed = reader.parse(evalset, [config])
        assert parsed.default_config.criteria["tool_trajectory_avg_score"].match_type is expected  # type: ignore[union-attr]

    def test_bad_criteria_are_reported_in_the_config_file_with_their_lines(self) -> None:
        text = (
            '{\n'
            '  "criteria": {\n'
            '    "tool_trajectory_avg_score": {"threshold": "high", "match_type": "SOMETIMES"},\n'
            '    "response_match_score": [0.5],\n'
            '    "safety_v1": {"judge_model_options": {}}\n'
            '  }\n'
            '}\n'
        )
        config = SourceFile("agent/test_config.json", text.encode())
        evalset = SourceFile("agent/a.evalset.json", (FIXTURES / "invocation_events.evalset.json").read_bytes())
        with pytest.raises(EvalSetImportError) as caught:
            reader.parse(evalset, [config])
        assert [(p.file, p.path, p.line, p.message) for p in caught.value.problems] == [
            ("agent/test_config.json", "criteria.tool_trajectory_avg_score.threshold", 3,
             "threshold must be a number, not a string"),
            ("agent/test_config.json", "criteria.tool_trajectory_avg_score.match_type", 3,
             "match_type must be one of EXACT, IN_ORDER, ANY_ORDER (or 0, 1, 2), not 'SOMETIMES'"),
            ("agent/test_config.json", "criteria.response_match_score", 4,
             "a criterion must be a threshold number or an object, not a list"),
            ("agent/test_config.json", "criteria.safety_v1.threshold", 5, "required field is missing"),
        ]

    def test_a_test_config_in_another_folder_is_not_used(self) -> None:
        config = SourceFile("other/test_config.json", b'{"criteria": {"response_match_score": 0.9}}')
        evalset = SourceFile("agent/a.evalset.json", (FIXTURES / "invocation_events.evalset.json").read_bytes())
        parsed = reader.parse(evalset, [config])
        assert (parsed.default_config, parsed.companions_used) == (None, [])

    def test_only_a_test_config_json_with_criteria_is_a_companion(self) -> None:
        assert reader.is_companion(SourceFile("x/test_config.json", b'{"criteria": {}}'))
        assert not reader.is_companion(SourceFile("x/test_config.json", b'{"user_simulator_config": {}}'))
        assert not reader.is_companion(SourceFile("x/eval_config.json", b'{"criteria": {}}'))
        assert not reader.is_companion(SourceFile("x/test_config.json", b"[1, 2]"))


class TestProblems:
    def test_every_problem_is_reported_with_its_path_case_and_line(self) -> None:
        text = (FIXTURES / "broken.evalset.json").read_text()
        problems = problems_of(text, "broken.evalset.json")
        assert [(p["case"], p["path"], p["line"], p["message"]) for p in problems] == [
            ("missing_user", "eval_cases[1].conversation[1].user_content", line_of(text, '"invocation_id": "m-2"') - 1,
             "required field is missing"),
            ("wrong_types", "eval_cases[2].conversation[0].user_content.parts", line_of(text, '"parts": "Look up'),
             "parts must be a list, not a string"),
            ("wrong_types", "eval_cases[2].conversation[0].intermediate_data.tool_uses[0].args",
             line_of(text, '["order", 7]'), "args must be an object, not a list"),
            ("wrong_types", "eval_cases[2].conversation[0].intermediate_data.tool_uses[1].name",
             line_of(text, '{"args": {"order": 7}}'), "required field is missing"),
            ("wrong_types", "eval_cases[2].session_input.state", line_of(text, '"state": "logged in"'),
             "state must be an object, not a string"),
            ("#5", "eval_cases[4].eval_id", line_of(text, '"text": 42') - 2, "required field is missing"),
            ("#5", "eval_cases[4].conversation[0].user_content.parts[0].text", line_of(text, '"text": 42'),
             "text must be a string, not a number"),
        ]
        assert {p["file"] for p in problems} == {"broken.evalset.json"}

    def test_camel_case_problems_name_the_key_as_the_file_spells_it(self) -> None:
        doc = {"eval_set_id": "s", "eval_cases": [{"evalId": "c", "conversation": [
            {"finalResponse": {"parts": []}},
            {"userContent": "Hello"},
        ]}]}
        text = json.dumps(doc, indent=2)
        missing, wrong = problems_of(text)
        assert (missing["case"], missing["path"], missing["line"]) == (
            "c", "eval_cases[0].conversation[0].user_content", line_of(text, '"finalResponse"') - 1
        )
        assert (wrong["case"], wrong["path"], wrong["line"]) == (
            "c", "eval_cases[0].conversation[1].userContent", line_of(text, '"userContent"')
        )
        assert wrong["message"] == "must be an object with `role` and `parts`, not a string"

    def test_wrong_top_level_types_are_all_reported(self) -> None:
        problems = problems_of({"eval_set_id": 7, "name": ["x"], "eval_cases": {"a": 1}})
        assert [(p["path"], p["message"]) for p in problems] == [
            ("eval_set_id", "eval_set_id must be a string, not a number"),
            ("name", "name must be a string, not a list"),
            ("eval_cases", "eval_cases must be a list, not an object"),
        ]

    def test_a_case_needs_a_conversation_or_a_scenario(self) -> None:
        [problem] = problems_of({"eval_set_id": "s", "eval_cases": [{"eval_id": "empty", "session_input": None}]})
        assert (problem["case"], problem["path"]) == ("empty", "eval_cases[0]")
        assert "`conversation`" in problem["message"]

    def test_a_scenario_without_a_plan_or_a_string_eval_id_is_refused(self) -> None:
        doc = {"eval_set_id": "s", "eval_cases": [{"eval_id": 12, "conversation_scenario": {"starting_prompt": "Hi"}}]}
        assert [(p["case"], p["path"], p["message"]) for p in problems_of(doc)] == [
            ("#1", "eval_cases[0].eval_id", "eval_id must be a non-empty string, not 12"),
            ("#1", "eval_cases[0].conversation_scenario.conversation_plan", "required field is missing"),
        ]

    def test_malformed_tool_data_and_intermediate_responses_are_reported(self) -> None:
        doc = {"eval_set_id": "s", "eval_cases": [{"eval_id": "c", "conversation": [user_turn("q", intermediate_data={
            "tool_uses": ["lookup"],
            "tool_responses": [{"id": 3, "response": {}}],
            "intermediate_responses": [["agent"], [7, []]],
        })]}]}
        prefix = "eval_cases[0].conversation[0].intermediate_data."
        assert [(p["path"], p["message"]) for p in problems_of(doc)] == [
            (prefix + "tool_uses[0]", "a tool call must be an object, not a string"),
            (prefix + "tool_responses[0].id", "id must be a string, not a number"),
            (prefix + "intermediate_responses[0]", "an intermediate response must be an [author, parts] pair"),
            (prefix + "intermediate_responses[1][0]", "the author must be a string, not a number"),
        ]

    def test_problems_inside_invocation_events_point_at_their_part(self) -> None:
        doc = {"eval_set_id": "s", "eval_cases": [{"eval_id": "c", "conversation": [user_turn("q", intermediate_data={
            "invocation_events": [
                {"author": "agent", "content": {"parts": [{"function_call": {"name": "f", "args": {}}}, {"text": 5}]}},
                {"content": {"parts": [{"function_call": {"args": {}}}]}},
            ],
        })]}]}
        prefix = "eval_cases[0].conversation[0].intermediate_data.invocation_events"
        assert [(p["path"], p["message"]) for p in problems_of(doc)] == [
            (prefix + "[0].content.parts[1].text", "text must be a string, not a number"),
            (prefix + "[1].author", "required field is missing"),
            (prefix + "[1].content.parts[0].function_call.name", "required field is missing"),
        ]

    def test_legacy_turns_without_a_query_are_reported_with_their_case(self) -> None:
        text = json.dumps([{"name": "dice", "data": [{"query": "Roll"}, {"reference": "4"}]}], indent=2)
        [problem] = problems_of(text, "old.test.json")
        assert (problem["case"], problem["path"], problem["message"]) == (
            "dice", "[0].data[1].query", "required field is missing"
        )
        assert problem["line"] == line_of(text, '"reference": "4"') - 1

    def test_an_oldest_list_with_a_bad_tool_use_is_reported_against_the_file_case(self) -> None:
        doc = [{"query": "Hi", "expected_tool_use": [{"tool_input": {}}], "reference": "Hello"}]
        [problem] = problems_of(doc, "trip.test.json")
        assert (problem["case"], problem["path"]) == ("trip", "[0].expected_tool_use[0].tool_name")

    def test_a_large_broken_file_counts_every_problem_and_locates_the_reported_ones(self) -> None:
        doc = {"eval_set_id": "s", "eval_cases": [{"eval_id": f"c{i}", "conversation": [{}]} for i in range(500)]}
        with pytest.raises(EvalSetImportError) as caught:
            parse_doc(doc)
        assert caught.value.total == 500
        assert len(caught.value.problems) == 20
        assert all(p.line is not None for p in caught.value.problems)
        assert caught.value.problems[19].case == "c19"


class TestDetection:
    NATIVE = {
        "eval_set_id": "native",
        "eval_cases": [{"eval_id": "a", "conversation": [{
            "invocation_id": "turn_1",
            "user_content": {"role": "user", "content": "What's the weather in Tokyo?"},
            "expected_tool_trajectory": [{"name": "get_weather", "args": {"city": "Tokyo"}}],
        }]}],
    }

    def test_a_native_file_is_left_to_the_native_reader(self) -> None:
        native = SourceFile("w.evalset.json", json.dumps(self.NATIVE).encode())
        assert native_reader.sniff(native) is None
        assert "AgentFlow" in (reader.sniff(native) or "")

    def test_a_native_file_with_only_user_content_is_refused_too(self) -> None:
        doc = {"eval_set_id": "n", "eval_cases": [{"eval_id": "a", "conversation": [
            {"invocation_id": "t", "user_content": {"role": "user", "content": "Hi"}}]}]}
        assert "`content`" in (reader.sniff(SourceFile("n.evalset.json", json.dumps(doc).encode())) or "")

    def test_adk_fixtures_are_taken_whatever_their_spelling(self) -> None:
        for f in folder_files(FIXTURES):
            if f.basename == "test_config.json":
                continue
            assert reader.sniff(f) is None, f.name

    def test_an_empty_adk_eval_set_is_recognised_by_its_timestamp(self) -> None:
        doc = {"eval_set_id": "new", "name": "new", "eval_cases": [], "creation_timestamp": 1.5}
        assert reader.sniff(SourceFile("new.evalset.json", json.dumps(doc).encode())) is None

    @pytest.mark.parametrize(("name", "data", "reason"), [
        ("goldens.json", b'[{"input": "Hi", "expected_output": "Hello"}]', "a list, but not of ADK cases"),
        ("cases.jsonl", b'{"query": "Hi", "reference": "Hello"}\n', "not a .json file"),
        ("test_config.json", b'{"criteria": {"response_match_score": 0.5}}', "no top-level eval_set_id"),
        ("broken.json", b'{"eval_set_id": ', "not valid JSON"),
        ("ambiguous.json", b'{"eval_set_id": "x", "eval_cases": [{"eval_id": "a", "conversation": []}]}',
         "nothing ADK-specific"),
        ("number.json", b"42", "neither an EvalSet object nor a list"),
    ])
    def test_other_files_are_refused_with_a_reason(self, name: str, data: bytes, reason: str) -> None:
        why = reader.sniff(SourceFile(name, data))
        assert why is not None
        assert reason in why


class TestParsing:
    def test_parsing_the_same_file_twice_gives_the_same_eval_set(self) -> None:
        f = SourceFile("camel.evalset.json", (FIXTURES / "camel_case.evalset.json").read_bytes())
        assert reader.parse(f, []).evalset == reader.parse(f, []).evalset

    def test_an_empty_list_is_not_an_eval_set(self) -> None:
        [problem] = problems_of([], "empty.test.json")
        assert problem["path"] is None
        assert "list eval set" in problem["message"]


class TestImport:
    def test_read_upload_finds_each_real_eval_set_and_its_config(self) -> None:
        parsed = {p.source.name: p for p in read_upload(files_from_paths([ADK]))}
        assert {name: (p.format, p.variant) for name, p in parsed.items()} == {
            "ecommerce_customer_service_agent/order_query.test.json": ("adk", "adk-evalset"),
            "hello_world_agent/roll_die.test.json": ("adk", "adk-evalset"),
            "live_non_blocking_tool_agent/live_non_blocking_tool_agent.evalset.json": ("adk", "adk-evalset"),
            "trip_planner_agent/trip_inquiry.test.json": ("adk", "adk-oldest-list"),
        }
        config = parsed["hello_world_agent/roll_die.test.json"].default_config
        assert config is not None
        assert config.criteria["tool_trajectory_avg_score"].threshold == 1.0

    @pytest.mark.django_db
    def test_evalset_import_stores_cases_turns_tool_calls_and_the_default_config(self, acme: Project) -> None:
        [outcome] = evalset_import(project=acme, files=files_from_paths([ADK / "ecommerce_customer_service_agent"]))
        version = EvalSetVersion.objects.get(pk=outcome.version.pk)
        assert (version.source_format, version.source_variant) == ("adk", "adk-evalset")
        assert (version.case_count, version.turn_count, version.tool_call_count) == (1, 4, 7)
        assert version.default_config["criteria"]["tool_trajectory_avg_score"]["threshold"] == 0.7
        assert version.default_config["criteria"]["response_match_score"]["evaluator"] == "response_match_score"
        assert version.source.filename == "order_query.test.zip"  # the eval set and its test_config.json
        case = EvalCase.objects.get(version=version)
        assert case.search_text == "Send an email to user user_a whose email address is alice@example.com"
        assert case.conversation[2]["expected_tool_trajectory"][3] == {
            "name": "cancel_order", "args": {"order_id": "4"}, "call_id": None, "result": None,
        }

    @pytest.mark.django_db
    def test_importing_the_same_adk_file_again_makes_no_new_version(self, acme: Project) -> None:
        files = files_from_paths([ADK / "live_non_blocking_tool_agent"])
        [first] = evalset_import(project=acme, files=files)
        [again] = evalset_import(project=acme, files=files_from_paths([ADK / "live_non_blocking_tool_agent"]))
        assert (first.created, again.created) == (True, False)
        assert again.version.pk == first.version.pk
        assert EvalCase.objects.filter(version=first.version).count() == 2


# --- Large files: the outline reads the first cases and skips to the members after the list --


def _many_cases(count: int) -> list[dict[str, Any]]:
    return [{"eval_id": f"c{i}", "conversation": [{"invocation_id": "t1", "user_content": {
        "parts": [{"text": f"question {i} with ] and }} and \\\" inside"}], "role": "user"}}]} for i in range(count)]


def test_a_file_with_sorted_keys_is_read_whole_past_its_first_cases() -> None:
    """eval_set_id and name come after eval_cases (sorted keys); 120 cases, more than the
    outline reads, with brackets and escaped quotes in their text."""
    doc = {"eval_set_id": "sorted_set", "name": "Sorted", "creation_timestamp": 1.5, "eval_cases": _many_cases(120)}
    data = json.dumps(doc, indent=1, sort_keys=True).encode()
    assert data.index(b'"eval_cases"') < data.index(b'"eval_set_id"')
    [parsed] = read_upload([SourceFile("sorted.evalset.json", data)])
    assert (parsed.format, parsed.evalset.eval_set_id, parsed.evalset.name) == ("adk", "sorted_set", "Sorted")
    assert [c.eval_id for c in parsed.evalset.eval_cases] == [f"c{i}" for i in range(120)]
    assert parsed.evalset.eval_cases[119].conversation[0].user_content.get_text() == (
        'question 119 with ] and } and \\" inside')


@pytest.mark.parametrize("damage", ["case", "between", "tail"])
def test_a_syntax_error_past_the_first_cases_is_located(damage: str) -> None:
    doc = {"eval_set_id": "broken", "eval_cases": _many_cases(120), "name": "after"}
    text = json.dumps(doc, indent=2)
    if damage == "case":
        text = text.replace('"eval_id": "c100",', '"eval_id": "c100"')  # a missing comma
        snippet = '"eval_id": "c100"'
    elif damage == "between":
        at = text.index('"eval_id": "c100"')
        comma = text.rindex("},", 0, at)
        text = text[:comma] + "}" + text[comma + 2:]  # no comma between two cases
        snippet = '"eval_id": "c100"'
    else:
        text = text.replace('"name": "after"', '"name": "after",')  # a trailing comma
        snippet = '"name": "after",'
    with pytest.raises(EvalSetImportError) as caught:
        read_upload([SourceFile("broken.evalset.json", text.encode())])
    assert caught.value.code == "invalid_json"
    [problem] = caught.value.problems
    assert problem.line is not None and abs(problem.line - line_of(text, snippet)) <= 1


def _items(file: SourceFile) -> list[Any]:
    assert isinstance(file.json_outline, dict)
    return list(file.iter_json_items("eval_cases"))


def test_the_case_list_is_read_case_by_case_from_the_depth_checks_offsets() -> None:
    """Past the outline, each case is parsed on its own from where the depth check saw it
    start and end; containers before the list (nested too) and brackets in strings do not
    shift them. The cases are exactly the document's."""
    cases = _many_cases(130)
    doc = {"metadata": {"runs": [{"a": [1, {"b": "]"}]}, {"c": "{"}]}, "eval_set_id": "spans",
           "tags": [["x"]], "eval_cases": cases, "after": {"k": [{}]}}
    file = SourceFile("spans.evalset.json", json.dumps(doc, indent=1).encode())
    assert _items(file) == cases
    assert len(file.__dict__["_item_spans"]["eval_cases"]) == 130
    [parsed] = read_upload([SourceFile("spans.evalset.json", file.data)])
    assert [c.eval_id for c in parsed.evalset.eval_cases] == [f"c{i}" for i in range(130)]
    assert parsed.evalset.metadata["after"] == {"k": [{}]}


@pytest.mark.parametrize("odd", [5, "text", None])
def test_a_case_list_holding_a_non_object_past_the_outline_is_reported(odd: Any) -> None:
    """An item that is not a container leaves no offsets: the list is streamed instead, and
    the item is reported where it is, as before."""
    doc = {"eval_set_id": "odd", "eval_cases": [*_many_cases(100), odd, *_many_cases(3)]}
    file = SourceFile("odd.evalset.json", json.dumps(doc, indent=1).encode())
    items = _items(file)
    assert "eval_cases" not in file.__dict__["_item_spans"]
    assert items[100] == odd and len(items) == 104
    with pytest.raises(EvalSetImportError) as caught:
        read_upload([SourceFile("odd.evalset.json", file.data)])
    [problem] = caught.value.problems
    assert problem.path == "eval_cases[100]" and "a case must be an object" in problem.message


def test_a_file_with_more_containers_than_worth_keeping_offsets_for_is_streamed() -> None:
    """Hundreds of thousands of small objects beside the cases: the depth check keeps no
    offsets for them (their memory), and the cases are streamed and read as before."""
    from evaluations import safejson

    filler = [{}] * (safejson.MAX_ITEM_BOUNDS // 2 + 1)
    doc = {"eval_set_id": "filled", "filler": filler, "eval_cases": _many_cases(60)}
    data = json.dumps(doc, separators=(",", ":")).encode()
    items: list[int] = []
    safejson.check_depth(data, items=items)
    assert items == []
    file = SourceFile("filled.evalset.json", data)
    assert _items(file) == _many_cases(60)
    assert "eval_cases" not in file.__dict__["_item_spans"]
    small: list[int] = []
    safejson.check_depth(json.dumps({"eval_cases": _many_cases(60)}).encode(), items=small)
    assert len(small) == 120


def test_an_integer_beyond_64_bits_in_the_first_cases_does_not_parse_the_file_whole() -> None:
    """ijson's C backend refuses such an integer (valid JSON): the outline is read by its
    pure-Python backend instead, and the cases past it still one at a time, with the value
    exact."""
    cases = _many_cases(120)
    cases[3]["metadata_id"] = 2**70
    cases[100]["metadata_id"] = -(2**65)
    file = SourceFile("big.evalset.json", json.dumps({"eval_set_id": "big", "eval_cases": cases}).encode())
    items = _items(file)
    assert "json" not in file.__dict__ and len(file.__dict__["_item_spans"]["eval_cases"]) == 120
    assert items == cases and items[3]["metadata_id"] == 2**70
    [parsed] = read_upload([SourceFile("big.evalset.json", file.data)])
    assert parsed.evalset.eval_cases[100].metadata["metadata_id"] == -(2**65)


def test_a_streamed_case_list_takes_what_json_takes_past_where_ijson_stops() -> None:
    """A list streamed by ijson (it holds a non-object) with an integer beyond 64 bits after
    the outline: every item comes back once, in order, the integer exact (not a false
    `invalid_json`)."""
    doc = {"eval_set_id": "odd", "eval_cases": [*_many_cases(60), 7, {"eval_id": "big", "n": 2**70}, *_many_cases(2)]}
    file = SourceFile("odd.evalset.json", json.dumps(doc).encode())
    items = _items(file)
    assert "eval_cases" not in file.__dict__["_item_spans"]
    assert items == doc["eval_cases"]


class _DumpCheckingSink(CaseSink):
    """Records, for each case the reader hands over with its dict, that the dict is the
    model's dump (the import writes its columns from the dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.checked: list[tuple[str, bool]] = []

    def keep(self, position: int, case: NativeEvalCase, dumped: dict[str, Any] | None = None) -> None:
        super().keep(position, case, dumped)
        if dumped is not None:
            self.checked.append((case.eval_id, dumped == case.model_dump(mode="json")))


@pytest.mark.parametrize("folder", [FIXTURES, ADK], ids=["fixtures", "google-adk"])
def test_each_converted_case_is_its_models_dump(folder: Path) -> None:
    """Every ADK eval set of the tests (scripted and scenario cases, rubrics, tool responses,
    invocation events, camelCase): the converter's dict equals `model_dump(mode="json")` of
    the validated case, field for field and default for default."""
    files = folder_files(folder)
    companions = [f for f in files if reader.is_companion(f)]
    evalsets = [f for f in files if f not in companions and reader.sniff(f) is None]
    checked = []
    for file in evalsets:
        if file.name.startswith("broken") or not isinstance(file.json_outline, dict):
            continue  # broken on purpose; the list formats hand over models only
        sink = _DumpCheckingSink()
        with nul_free([file.data]):
            reader.parse(file, companions, sink=sink)
        assert sink.checked, file.name
        checked += sink.checked
    assert checked and all(same for _, same in checked), [eval_id for eval_id, same in checked if not same]


def test_a_case_with_a_nul_is_dumped_from_its_model() -> None:
    """With a NUL in the file the model's strings differ from the dict's: no dict is handed over."""
    doc = {"eval_set_id": "s", "eval_cases": [{"eval_id": "a\u0000b", "conversation": [
        {"user_content": {"parts": [{"text": "hi"}], "role": "user"}}]}]}
    file = SourceFile("nul.evalset.json", json.dumps(doc).encode())
    sink = _DumpCheckingSink()
    with nul_free([file.data]):
        reader.parse(file, [], sink=sink)
    assert sink.checked == [] and sink.cases[0].eval_id == "a\ufffdb"


# --- The conversion's contract: a case it accepts is one the native model accepts unchanged --
# (the import builds no model for a converted case; see `CaseSink.add_dump`)

_text = st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=6)
_scalar = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False),
                    _text)
_any = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(_text, inner, max_size=3)), max_leaves=5)


def _adk_case(well_formed: bool) -> st.SearchStrategy[dict[str, Any]]:
    """ADK cases: with `well_formed`, every field of the type ADK writes; otherwise any field
    may hold any JSON value instead."""

    def of(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return strategy if well_formed else st.one_of(strategy, _any)

    name = _text.filter(bool)
    part = of(st.one_of(st.fixed_dictionaries({"text": of(_text)}),
                        st.fixed_dictionaries({"text": st.none(), "thought": of(st.booleans())}),
                        st.fixed_dictionaries({"inline_data": of(st.dictionaries(_text, _text, max_size=2))})))
    content = of(st.fixed_dictionaries({}, optional={"role": of(st.sampled_from(["user", "model", "tool"])),
                                                     "parts": of(st.lists(part, max_size=3))}))
    call = of(st.fixed_dictionaries({"name": of(name)}, optional={
        "args": of(st.dictionaries(_text, _any, max_size=3)), "id": of(st.one_of(st.none(), _text))}))
    response = of(st.fixed_dictionaries({}, optional={"id": of(_text), "name": of(_text), "response": _any}))
    event = of(st.fixed_dictionaries({"author": of(_text)}, optional={"content": of(st.fixed_dictionaries(
        {"parts": of(st.lists(st.one_of(part, st.fixed_dictionaries({"function_call": call}),
                                        st.fixed_dictionaries({"function_response": response})), max_size=3))}))}))
    data = of(st.one_of(
        st.fixed_dictionaries({}, optional={
            "tool_uses": of(st.lists(call, max_size=3)), "tool_responses": of(st.lists(response, max_size=2)),
            "intermediate_responses": of(st.lists(st.tuples(of(_text), of(st.lists(part, max_size=2))).map(list),
                                                  max_size=2))}),
        st.fixed_dictionaries({"invocation_events": of(st.lists(event, max_size=3))})))
    rubric = of(st.fixed_dictionaries({"rubric_id": of(name), "rubric_content": of(st.fixed_dictionaries(
        {"text_property": of(_text)}))}, optional={"description": of(_text), "type": of(_text)}))
    invocation = of(st.fixed_dictionaries({"user_content": content}, optional={
        "invocation_id": of(_text), "final_response": of(st.one_of(st.none(), content)), "intermediate_data": data,
        "rubrics": of(st.lists(rubric, max_size=2)), "creation_timestamp": of(st.floats(0, 2e9)), "app_details": _any}))
    session = of(st.fixed_dictionaries({}, optional={"app_name": of(_text), "user_id": of(_text),
                                                     "session_id": of(_text), "state": of(st.dictionaries(_text, _any))}))
    scenario = of(st.fixed_dictionaries({"starting_prompt": of(_text), "conversation_plan": of(_text)},
                                        optional={"user_persona": _any, "extra": _any}))
    case = st.fixed_dictionaries({"eval_id": of(name), "conversation": of(st.lists(invocation, max_size=3))}, optional={
        "name": of(_text), "session_input": session,
        "conversation_scenario": scenario, "rubrics": of(st.lists(rubric, max_size=2)),
        "creation_timestamp": of(st.floats(0, 2e9)), "final_session_state": _any})
    return st.tuples(case, st.booleans()).map(lambda pair: _camel_keys(pair[0]) if pair[1] else pair[0])


def _camel_keys(value: Any) -> Any:
    """The ADK web UI's spelling: every snake_case key in camelCase."""
    if isinstance(value, dict):
        return {re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def _converted(raw: Any) -> tuple[dict[str, Any] | None, list[Any]]:
    converter = AdkConverter(SourceFile("generated.evalset.json", b"{}"))
    return converter.case(raw, ("eval_cases", 0), 0), converter.errors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_adk_case(well_formed=True))
def test_a_well_formed_case_converts_to_a_native_models_exact_dump(raw: dict[str, Any]) -> None:
    case, errors = _converted(raw)
    assert case is not None and not errors, errors
    assert NativeEvalCase.model_validate(case).model_dump(mode="json") == case


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_adk_case(well_formed=False))
def test_any_case_the_conversion_accepts_the_native_model_accepts_unchanged(raw: dict[str, Any]) -> None:
    """Wrong types anywhere: the conversion either reports a problem or makes a dict the native
    model validates without a change (a refusal here would raise ValidationError)."""
    case, errors = _converted(raw)
    if case is not None and not errors:
        assert NativeEvalCase.model_validate(case).model_dump(mode="json") == case
    else:
        assert errors
