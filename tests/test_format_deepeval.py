"""The DeepEval / Confident AI goldens reader: real files DeepEval wrote, and our edge cases."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from evaluations.evalsets.services import evalset_import
from evaluations.interop import EvalSetImportError, SourceFile, read_upload
from evaluations.interop.deepeval.evalset import derive_eval_ids, reader
from evaluations.interop.plain.evalset import reader as plain_reader
from evaluations.models import EvalCase as CaseRow
from evaluations.models import Project
from evaluations.schemas.evalset import EvalCase, ToolCall
from tests.conftest import DATA, source

HERE = DATA / "deepeval"
SINGLE_JSON = "deepeval/test_core_test_datasets_goldens.json"
SINGLE_CSV = "deepeval/test_core_test_datasets_goldens.csv"
CONVO_JSON = "deepeval/test_core_test_datasets_convo_goldens.json"
CONVO_CSV = "deepeval/test_core_test_datasets_convo_goldens.csv"


def _cases(path: Path) -> dict[str, EvalCase]:
    parsed = reader.parse(source(path), [])
    return {case.eval_id: case for case in parsed.evalset.eval_cases}


def _error(path: Path) -> EvalSetImportError:
    with pytest.raises(EvalSetImportError) as caught:
        reader.parse(source(path), [])
    return caught.value


# --- The real files ---------------------------------------------------------------------------


def test_it_reads_the_real_single_turn_json_goldens(realworld: Path) -> None:
    parsed = reader.parse(source(realworld / SINGLE_JSON), [])
    assert (parsed.format, parsed.variant) == ("deepeval", "deepeval-single-turn")
    assert parsed.evalset.eval_set_id == "test_core_test_datasets_goldens"
    cases = parsed.evalset.eval_cases
    assert [c.eval_id for c in cases] == [f"Name {n}" for n in range(1, 16)]
    first = cases[0]
    assert first.name == "Name 1"
    [turn] = first.conversation
    assert turn.invocation_id == "turn_1"
    assert turn.user_content.get_text() == "What is the tallest mountain in the world?"
    assert turn.expected_final_response is not None
    assert turn.expected_final_response.get_text() == "Mount Everest"
    assert turn.expected_tool_trajectory == []
    assert first.metadata == {
        "context": ["Geography", "Mountains"],
        "retrieval_context": ["Mountain heights list", "Moutain list"],
        "comments": "Comments 1",
        "actual_output": "Mount Everest",
    }


def test_two_goldens_with_the_same_input_keep_their_own_names_as_ids(realworld: Path) -> None:
    cases = _cases(realworld / SINGLE_JSON)
    assert cases["Name 10"].conversation[0].user_content.get_text() == "Who wrote 'Romeo and Juliet'?"
    assert cases["Name 15"].conversation[0].user_content.get_text() == "Who wrote 'Romeo and Juliet'?"


def test_it_reads_tools_with_camel_case_parameters_from_the_real_csv(realworld: Path) -> None:
    cases = _cases(realworld / SINGLE_CSV)
    translate = cases["Name 7"]
    assert translate.conversation[0].expected_tool_trajectory == [
        ToolCall(name="translator", args={"query": "Hello", "target_language": "Spanish"})
    ]
    assert translate.metadata["tools_called"] == [
        {"name": "translator", "args": {"query": "Hello", "target_language": "Spanish"}}
    ]
    assert translate.metadata["actual_output"] == "Hola"


def test_csv_list_cells_are_split_on_the_pipe(realworld: Path) -> None:
    cases = _cases(realworld / SINGLE_CSV)
    assert cases["Name 1"].metadata["context"] == ["Geography", "Mountains"]
    assert cases["Name 1"].metadata["retrieval_context"] == ["Mountain heights list", "Moutain list"]
    assert cases["Name 2"].metadata["retrieval_context"] == ["Basic arithmetic"]
    # A quoted cell with commas stays one value.
    speed = cases["Name 9"].conversation[0].expected_final_response
    assert speed is not None and speed.get_text() == "299,792,458 meters per second"
    # An empty source_file cell is no value at all.
    assert "source_file" not in cases["Name 1"].metadata


def test_the_json_and_csv_of_the_same_single_turn_goldens_agree(realworld: Path) -> None:
    from_json = _cases(realworld / SINGLE_JSON)
    from_csv = _cases(realworld / SINGLE_CSV)
    assert from_json.keys() == from_csv.keys()
    for eval_id, j in from_json.items():
        c = from_csv[eval_id]
        assert (j.name, j.conversation[0].user_content, j.conversation[0].expected_final_response) == (
            c.name, c.conversation[0].user_content, c.conversation[0].expected_final_response
        )
        # Only the CSV has tools; everything else the goldens hold is the same.
        assert j.metadata == {k: v for k, v in c.metadata.items() if k != "tools_called"}
        assert c.conversation[0].expected_tool_trajectory


def test_it_reads_multi_turn_goldens_whose_turns_are_a_json_encoded_string(realworld: Path) -> None:
    parsed = reader.parse(source(realworld / CONVO_JSON), [])
    assert parsed.variant == "deepeval-multi-turn"
    cases = {c.eval_id: c for c in parsed.evalset.eval_cases}
    assert len(cases) == 15
    paris = cases["Name 1"]
    assert paris.conversation_scenario is not None
    assert paris.conversation_scenario.conversation_plan == "User asks for weather forecast for Paris"
    assert paris.conversation_scenario.expected_outcome == "User receives accurate weather forecast"
    assert paris.conversation_scenario.user_persona == "User is planning a trip to Paris and wants to check the weather"
    assert paris.metadata == {"context": ["Weather", "Paris"], "comments": "Comment 1"}
    [turn] = paris.conversation
    assert turn.user_content.get_text() == "What's the weather like in Paris this weekend?"
    assert turn.expected_final_response is not None
    assert turn.expected_final_response.get_text() == "It's expected to be rainy with temperatures around 18°C."
    assert turn.metadata == {
        "retrieval_context": ["Weather API response"],
        "user_retrieval_context": ["Weather API docs", "Weather API reference"],
    }
    # An assistant turn whose retrieval_context is null leaves only the user's.
    japanese = cases["Name 3"].conversation[0]
    assert japanese.expected_final_response is not None
    assert japanese.expected_final_response.get_text() == "You can say 'ありがとう' (arigatou)."
    assert japanese.metadata == {"user_retrieval_context": ["Translation database"]}


def test_the_json_and_csv_of_the_same_multi_turn_goldens_are_the_same_cases(realworld: Path) -> None:
    from_json = reader.parse(source(realworld / CONVO_JSON), []).evalset.eval_cases
    from_csv = reader.parse(source(realworld / CONVO_CSV), []).evalset.eval_cases
    assert len(from_csv) == 15
    assert [c.model_dump() for c in from_csv] == [c.model_dump() for c in from_json]
    assert from_csv[10].metadata["context"] == ["Weather", "Weather Forecast"]


@pytest.mark.parametrize("name", [SINGLE_JSON, SINGLE_CSV, CONVO_JSON, CONVO_CSV])
def test_deepeval_takes_every_real_file_and_plain_refuses_it(realworld: Path, name: str) -> None:
    file = source(realworld / name)
    assert reader.sniff(file) is None
    if file.suffix == "csv":
        assert "DeepEval" in (plain_reader.sniff(file) or "")
    else:
        assert plain_reader.sniff(file) == "not a .jsonl or .csv file"


# --- Shapes DeepEval also writes ---------------------------------------------------------------


def test_turns_given_as_a_real_list_become_invocations() -> None:
    cases = _cases(HERE / "convo_turns_list.json")
    refund = cases["late refund"]
    first, second = refund.conversation
    assert [first.invocation_id, second.invocation_id] == ["turn_1", "turn_2"]
    assert first.user_content.get_text() == "My order 1042 arrived two weeks late. I want a refund."
    # Two assistant turns after one user turn: the last is final, the earlier intermediate.
    assert [m.get_text() for m in first.expected_intermediate_responses] == ["Let me look that order up."]
    assert first.expected_final_response is not None
    assert first.expected_final_response.get_text() == "Your refund of $25.00 has been issued."
    # Tools from both replies, camelCase and snake_case parameters alike, outputs as results.
    assert first.expected_tool_trajectory == [
        ToolCall(name="lookup_order", args={"order_id": 1042}, result={"status": "delivered", "days_late": 14}),
        ToolCall(name="issue_refund", args={"order_id": 1042, "amount": 25.0}),
    ]
    assert first.expected_intermediate_responses[0].metadata == {
        "tools_called_notes": [{"reasoning": "need the delivery record"}]
    }
    assert first.metadata == {"retrieval_context": ["Refund policy: late deliveries over 7 days are refunded"]}
    assert second.expected_final_response is not None
    assert second.expected_final_response.metadata == {"additional_metadata": {"tone": "friendly"}}
    # The assistant spoke first: no user turn to attach it to, so it is kept on the case.
    assert refund.metadata["opening_assistant_turns"] == [
        {"role": "assistant", "content": "Hi! How can I help you today?"}
    ]
    assert refund.metadata["additional_metadata"] == {"priority": "high"}
    assert refund.metadata["custom_column_key_values"] == {"owner": "support-team"}
    assert refund.conversation_scenario is not None
    assert refund.conversation_scenario.user_persona == "An annoyed but polite customer"


def test_a_scenario_without_turns_is_a_simulated_case_with_its_persona() -> None:
    rome = _cases(HERE / "convo_turns_list.json")["rome weekend"]
    assert rome.conversation == []
    assert rome.conversation_scenario is not None
    assert rome.conversation_scenario.conversation_plan == "A user asks the agent to plan a weekend in Rome"
    assert rome.conversation_scenario.user_persona == "A first-time visitor on a budget"
    assert rome.conversation_scenario.metadata == {
        "persona": {"name": "Dana", "characteristics": "A first-time visitor on a budget"}
    }
    assert rome.metadata == {}


def test_jsonl_goldens_split_their_joined_lists_and_get_positional_ids() -> None:
    parsed = reader.parse(source(HERE / "goldens.jsonl"), [])
    assert parsed.variant == "deepeval-single-turn"
    booking, cancel = parsed.evalset.eval_cases
    assert (booking.eval_id, cancel.eval_id) == ("golden-1", "golden-2")
    assert booking.metadata["context"] == ["Restaurants", "Booking"]
    assert booking.metadata["retrieval_context"] == ["Opening hours: 5pm-11pm", "Max party size: 8"]
    assert booking.metadata["tools_called"] == [
        {"name": "book_table", "args": {"party_size": 2, "time": "19:00"}, "result": "ok"}
    ]
    turn = booking.conversation[0]
    assert [t.name for t in turn.expected_tool_trajectory] == ["check_availability", "book_table"]
    assert turn.metadata == {"expected_tools_notes": [{}, {"description": "reserve a table"}]}
    assert cancel.conversation[0].expected_final_response is None
    assert cancel.conversation[0].expected_tool_trajectory == [ToolCall(name="cancel_booking")]
    assert cancel.metadata == {}


def test_a_confident_ai_export_with_camel_case_keys_and_ids_is_read() -> None:
    parsed = reader.parse(source(HERE / "confident_export.json"), [])
    parcel, address = parsed.evalset.eval_cases
    assert (parcel.eval_id, address.eval_id) == ("g_01", "g_02")
    turn = parcel.conversation[0]
    assert turn.expected_final_response is not None
    assert turn.expected_final_response.get_text() == "It is out for delivery."
    assert turn.expected_tool_trajectory == [ToolCall(name="track_parcel", args={"parcel": "P-9"})]
    assert parcel.metadata == {
        "retrieval_context": ["Tracking: out for delivery"],
        "additional_metadata": {"channel": "chat"},
        "source_file": "faq.md",
        "extra": {"finalized": True},
    }
    assert address.metadata == {"custom_column_key_values": {"owner": "ops"}}
    assert parsed.warnings == ["kept unknown DeepEval fields in each case's metadata.extra: finalized"]


def test_an_older_csv_with_tool_names_and_python_dict_metadata_is_read() -> None:
    [lisbon] = _cases(HERE / "legacy_goldens.csv").values()
    assert lisbon.eval_id == "lisbon"
    assert lisbon.conversation[0].expected_tool_trajectory == [
        ToolCall(name="search_flights"),
        ToolCall(name="rank_flights"),
    ]
    assert lisbon.metadata["tools_called"] == [{"name": "search_flights", "args": {}}]
    assert lisbon.metadata["additional_metadata"] == {"origin": "LHR"}
    assert lisbon.metadata["source_file"] == "routes.csv"
    assert lisbon.metadata["extra"] == {"notes": "checked by Ana"}


def test_eval_ids_fall_back_to_positions_when_names_repeat_and_never_collide() -> None:
    parsed = reader.parse(source(HERE / "duplicate_names.json"), [])
    ids = [c.eval_id for c in parsed.evalset.eval_cases]
    # "same" is shared, so both fall back; the third golden is literally named "golden-1".
    assert ids == ["golden-1-2", "golden-2", "golden-1", "golden-4"]
    assert [c.name for c in parsed.evalset.eval_cases] == ["same", "same", "golden-1", ""]


def test_derive_eval_ids_prefers_an_id_then_a_unique_name() -> None:
    assert derive_eval_ids([["a", "x"], [None, "y"], [None, None], ["a", "z"]], "golden") == [
        "x", "y", "golden-3", "z"
    ]


# --- Errors ------------------------------------------------------------------------------------


def test_a_json_file_mixing_single_and_multi_turn_goldens_says_which_are_which() -> None:
    error = _error(HERE / "mixed.json")
    assert error.code == "mixed_turns"
    summary, stray = error.problems
    assert "single-turn goldens (with `input`): golden #1, golden #3" in summary.message
    assert "multi-turn goldens (with `scenario` / `turns`): golden #2" in summary.message
    assert (stray.case, stray.path, stray.line) == ("joke", "[1].scenario", 3)


def test_a_csv_mixing_single_and_multi_turn_rows_names_the_rows() -> None:
    error = _error(HERE / "mixed.csv")
    assert error.code == "mixed_turns"
    assert "single-turn goldens (with `input`): line 2, line 5" in error.problems[0].message
    assert "multi-turn goldens (with `scenario` / `turns`): line 3, line 4" in error.problems[0].message
    assert [(p.case, p.line) for p in error.problems[1:]] == [("joke", 3), ("poem", 4)]


def test_a_confident_export_holding_both_kinds_of_goldens_is_mixed() -> None:
    data = b'{"goldens": [{"input": "Hi"}], "conversationalGoldens": [{"scenario": "Chat", "turns": []}]}'
    with pytest.raises(EvalSetImportError) as caught:
        reader.parse(SourceFile("both.json", data), [])
    assert caught.value.code == "mixed_turns"
    assert [(p.path, p.line) for p in caught.value.problems[1:]] == [("conversationalGoldens[0].scenario", 1)]


def test_every_problem_in_a_json_file_is_reported_with_its_location() -> None:
    error = _error(HERE / "bad_goldens.json")
    assert error.code == "schema"
    assert [(p.case, p.path, p.line) for p in error.problems] == [
        ("no input", "[0].input", 2),
        ("tool without name", "[1].expected_tools[0].name", 8),
        ("bad params and context", "[2].expected_tools[0].inputParameters", 13),
        ("bad params and context", "[2].context", 14),
    ]
    assert all(p.file == "bad_goldens.json" for p in error.problems)
    assert "required field is missing" in error.problems[0].message
    assert "must be an object of parameters" in error.problems[2].message


def test_csv_problems_give_the_physical_line_of_their_row() -> None:
    error = _error(HERE / "bad_goldens.csv")
    assert [(p.case, p.path, p.line) for p in error.problems] == [
        ("multi-line", "expected_tools", 2),
        ("missing input", "input", 5),
        ("metadata list", "additional_metadata", 6),
    ]
    assert error.problems[0].message.startswith("not valid JSON")
    assert error.problems[2].message == "must be an object, not a list"


def test_bad_turns_are_reported_inside_the_turn_list_and_the_encoded_string() -> None:
    error = _error(HERE / "bad_turns.json")
    assert [(p.case, p.path) for p in error.problems] == [
        ("broken roles", "[0].turns[0].role"),
        ("broken roles", "[0].turns[1].content"),
        ("broken json", "[1].turns"),
    ]
    assert "not 'system'" in error.problems[0].message
    assert error.problems[2].message.startswith("not valid JSON")
    assert error.problems[2].line == 12


def test_an_empty_list_of_goldens_is_an_empty_upload() -> None:
    with pytest.raises(EvalSetImportError) as caught:
        reader.parse(SourceFile("none.json", b"[]"), [])
    assert caught.value.code == "empty"


def test_a_json_object_that_is_not_a_goldens_wrapper_is_refused() -> None:
    assert reader.sniff(SourceFile("x.json", b'{"eval_set_id": "a", "eval_cases": []}')) is not None
    assert reader.sniff(SourceFile("x.json", b'[{"query": "hi"}]')) == "no golden has an `input` or a `scenario`"


# --- Through the upload and into the database ---------------------------------------------------


@pytest.mark.parametrize("name", [SINGLE_JSON, SINGLE_CSV, CONVO_JSON, CONVO_CSV])
def test_detection_picks_deepeval_for_every_real_file(realworld: Path, name: str) -> None:
    [parsed] = read_upload([source(realworld / name)])
    assert parsed.format == "deepeval"
    assert len(parsed.evalset.eval_cases) == 15


@pytest.mark.django_db
def test_importing_multi_turn_goldens_stores_their_scenarios(realworld: Path, acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[source(realworld / CONVO_CSV)])
    assert (outcome.format, outcome.variant, outcome.case_count) == ("deepeval", "deepeval-multi-turn", 15)
    assert outcome.version.turn_count == 15
    row = CaseRow.objects.get(version=outcome.version, eval_id="Name 4")
    assert row.conversation_scenario["conversation_plan"] == "User books a restaurant reservation"
    assert row.conversation_scenario["expected_outcome"] == "Reservation is confirmed"
    assert row.search_text == "Can you book a table for 2 at 7 PM tonight at Luigi's?"


@pytest.mark.django_db
def test_a_mixed_upload_writes_nothing(acme: Project) -> None:
    with pytest.raises(EvalSetImportError) as caught:
        evalset_import(project=acme, files=[source(HERE / "mixed.csv")])
    assert caught.value.code == "mixed_turns"
    assert not CaseRow.objects.exists()


@pytest.mark.django_db
def test_a_json_golden_found_wrong_is_said_before_the_case_limit_the_sink_keeps(acme: Project, settings) -> None:
    """The cases go to the import's sink as they are made; what the sink refuses is still said
    only when every golden is right, as when it had the finished list."""
    import json

    settings.EVALSITE_MAX_CASES = 3
    goldens = [{"input": f"q{i}", "expected_output": "a"} for i in range(5)]
    with pytest.raises(EvalSetImportError) as too_many:
        evalset_import(project=acme, files=[SourceFile("g.json", json.dumps(goldens).encode())], format="deepeval")
    assert too_many.value.code == "too_many_cases"
    goldens[4]["expected_output"] = {"not": "text"}
    with pytest.raises(EvalSetImportError) as wrong:
        evalset_import(project=acme, files=[SourceFile("g.json", json.dumps(goldens).encode())], format="deepeval")
    assert wrong.value.code == "schema" and wrong.value.problems[0].path == "[4].expected_output"
    settings.EVALSITE_MAX_CASES = 5
    [outcome] = evalset_import(project=acme, files=[SourceFile("g.json", json.dumps(goldens[:4]).encode())],
                               format="deepeval")
    assert sorted(CaseRow.objects.filter(version=outcome.version).values_list("eval_id", flat=True)) == [
        "golden-1", "golden-2", "golden-3", "golden-4"]


_WALKED = [
    b'[{"input": "a", "name": "x", "color": "red"}, {"input": "b", "name": "x", "expected_output": NaN}]',
    b'\xef\xbb\xbf [ {"scenario": "chat", "turns": [{"role": "user", "content": "hi"}], "id": 7} ]\n',
    b'[{"input": "a", "scenario": "s"}, {"turns": [{"role": "bot", "content": 1}]}, {"input": 3}]',
    b'[{"input": "a"}, {"scenario": "b"}, {"scenario": "c"}]',
    b'[{"input": "a"}, "not a golden"]',
    b'[{"input": "a"}, {"input": "b"},]',
    b'[{"input": "a"}] trailing',
    b'[{"input": "a", "name": ' + b"9" * 5000 + b"}]",
    b"[]",
]


@pytest.mark.parametrize("data", _WALKED)
def test_a_json_list_read_golden_by_golden_says_what_the_whole_parse_says(data: bytes) -> None:
    """The list is walked golden by golden; a file already parsed whole (as sniffing leaves it)
    is read from that parse: the two must give the same cases, warnings and problems."""

    def outcome(file: SourceFile) -> object:
        try:
            parsed = reader.parse(file, [])
        except EvalSetImportError as exc:
            return exc.code, [(p.message, p.file, p.case, p.path, p.line, p.column) for p in exc.problems]
        return parsed.evalset.model_dump(), parsed.warnings

    whole = SourceFile("goldens.json", data)
    with contextlib.suppress(EvalSetImportError):  # not JSON: both say so
        _ = whole.json
    assert outcome(SourceFile("goldens.json", data)) == outcome(whole)
