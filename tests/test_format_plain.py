"""The plain JSONL / CSV reader, and how detection tells it from DeepEval's goldens."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluations.evalsets.services import evalset_import
from evaluations.interop import EvalSetImportError, SourceFile, read_upload
from evaluations.interop.deepeval.evalset import reader as deepeval_reader
from evaluations.interop.plain.evalset import reader
from evaluations.models import EvalCase as CaseRow
from evaluations.models import Project
from evaluations.schemas.evalset import ToolCall
from tests.conftest import DATA, source

HERE = DATA / "plain"


def _error(path: Path) -> EvalSetImportError:
    with pytest.raises(EvalSetImportError) as caught:
        reader.parse(source(path), [])
    return caught.value


def test_it_reads_a_jsonl_file_into_one_invocation_per_line() -> None:
    parsed = reader.parse(source(HERE / "cases.jsonl"), [])
    assert (parsed.format, parsed.variant) == ("plain", "jsonl")
    assert parsed.evalset.eval_set_id == "cases"
    weather, convert, greeting = parsed.evalset.eval_cases
    assert [weather.eval_id, convert.eval_id, greeting.eval_id] == ["weather-tokyo", "convert", "greeting"]
    turn = weather.conversation[0]
    assert turn.user_content.get_text() == "What's the weather in Tokyo?"
    assert turn.expected_final_response is not None
    assert turn.expected_final_response.get_text() == "It is 22°C and clear in Tokyo."
    assert turn.expected_tool_trajectory == [ToolCall(name="get_weather", args={"city": "Tokyo"})]
    assert (weather.name, weather.tags, weather.metadata) == ("Tokyo weather", ["weather", "smoke"],
                                                               {"category": "weather"})
    # Tools given by name, and results kept.
    assert convert.conversation[0].expected_tool_trajectory == [
        ToolCall(name="get_rate"),
        ToolCall(name="convert", args={"amount": 10, "from": "EUR", "to": "USD"}, result=10.8),
    ]
    assert convert.tags == ["money", "smoke"]
    assert greeting.conversation[0].expected_final_response is None
    assert greeting.conversation[0].expected_tool_trajectory == []


def test_the_csv_of_the_same_cases_gives_the_same_cases() -> None:
    from_jsonl = reader.parse(source(HERE / "cases.jsonl"), []).evalset.eval_cases
    parsed = reader.parse(source(HERE / "cases.csv"), [])
    assert parsed.variant == "csv"
    assert [c.model_dump() for c in parsed.evalset.eval_cases] == [c.model_dump() for c in from_jsonl]
    # Tags split on commas as well as pipes.
    assert parsed.evalset.eval_cases[0].tags == ["weather", "smoke"]


def test_a_file_with_only_input_expected_output_and_tools_is_plain() -> None:
    file = source(HERE / "basic.jsonl")
    assert reader.sniff(file) is None
    assert deepeval_reader.sniff(file) is not None
    ping, files, total = reader.parse(file, []).evalset.eval_cases
    assert [ping.eval_id, files.eval_id, total.eval_id] == ["case-1", "case-2", "case-3"]
    assert files.conversation[0].expected_tool_trajectory == [ToolCall(name="ls", args={"path": "."})]
    # Structured input and output stay JSON.
    structured = {"task": "sum", "numbers": [1, 2, 3]}
    assert total.conversation[0].user_content.content == [{"type": "json", "json": structured}]
    expected = total.conversation[0].expected_final_response
    assert expected is not None and expected.get_text() == '{"total": 6}'


def test_without_ids_a_unique_name_is_the_id_else_the_row_position() -> None:
    cases = reader.parse(source(HERE / "no_ids.csv"), []).evalset.eval_cases
    assert [c.eval_id for c in cases] == ["case-1", "beta", "case-3", "case-4"]
    assert [c.name for c in cases] == ["alpha", "beta", "alpha", ""]


def test_every_bad_jsonl_line_is_reported_with_its_line_number() -> None:
    error = _error(HERE / "bad.jsonl")
    assert error.code == "schema"
    assert [(p.line, p.case, p.path) for p in error.problems] == [
        (2, None, None),
        (4, "no-input", "input"),
        (5, "bad-tools", "expected_tools"),
        (6, "nameless-tool", "expected_tools[0].name"),
        (7, None, None),
    ]
    messages = [p.message for p in error.problems]
    assert messages[0].startswith("not valid JSON")
    assert messages[1] == "required field is missing (every case needs an `input`)"
    assert messages[2].startswith("not valid JSON")
    assert messages[4] == "each line must be a JSON object"
    assert str(error.problems[1]) == (
        "bad.jsonl:4, case 'no-input', input: required field is missing (every case needs an `input`)"
    )


def test_bad_csv_rows_are_reported_at_their_physical_lines() -> None:
    error = _error(HERE / "bad.csv")
    # The first row's input spans lines 2 and 3, so the next rows start at 4, 5 and 6.
    assert [(p.line, p.case, p.path) for p in error.problems] == [
        (4, "no-input", "input"),
        (5, "bad-tools", "expected_tools"),
        (6, "args-list", "expected_tools[0].args"),
    ]
    assert error.problems[1].message.startswith("not valid JSON")
    assert error.problems[2].message == "must be an object of arguments"


def test_an_id_written_twice_is_an_error_naming_both_lines() -> None:
    error = _error(HERE / "duplicate_ids.jsonl")
    [problem] = error.problems
    assert (problem.case, problem.line, problem.message) == ("a", 3, "duplicate id: line 1 has it too")


def test_an_empty_jsonl_file_is_an_empty_upload() -> None:
    with pytest.raises(EvalSetImportError) as caught:
        reader.parse(SourceFile("blank.jsonl", b"\n\n"), [])
    assert caught.value.code == "empty"


# --- Detection --------------------------------------------------------------------------------


def test_plain_refuses_a_file_with_deepeval_keys_and_deepeval_takes_it() -> None:
    goldens = source(DATA / "deepeval" / "goldens.jsonl")
    assert reader.sniff(goldens) == (
        "has DeepEval's keys (actual_output, additional_metadata, context, custom_column_key_values, "
        "retrieval_context, tools_called)"
    )
    assert deepeval_reader.sniff(goldens) is None


def test_one_deepeval_column_is_enough_to_make_a_csv_deepevals() -> None:
    file = SourceFile("qa.csv", b"input,expected_output,retrieval_context\nQ,A,doc one|doc two\n")
    assert reader.sniff(file) == "has DeepEval's columns (retrieval_context)"
    assert deepeval_reader.sniff(file) is None
    [case] = deepeval_reader.parse(file, []).evalset.eval_cases
    assert case.metadata == {"retrieval_context": ["doc one", "doc two"]}


def test_plain_refuses_a_csv_without_an_input_column_and_json_files() -> None:
    assert reader.sniff(SourceFile("q.csv", b"question,answer\nQ,A\n")) == "no `input` column"
    assert reader.sniff(SourceFile("q.json", b'[{"input": "Q"}]')) == "not a .jsonl or .csv file"
    assert deepeval_reader.sniff(source(HERE / "cases.csv")) is not None


@pytest.mark.parametrize(("name", "expected"), [("cases.jsonl", "plain"), ("cases.csv", "plain"),
                                                 ("basic.jsonl", "plain")])
def test_detection_picks_plain_for_plain_files(name: str, expected: str) -> None:
    [parsed] = read_upload([source(HERE / name)])
    assert parsed.format == expected


def test_detection_picks_deepeval_for_deepeval_jsonl() -> None:
    [parsed] = read_upload([source(DATA / "deepeval" / "goldens.jsonl")])
    assert (parsed.format, parsed.variant) == ("deepeval", "deepeval-single-turn")


@pytest.mark.django_db
def test_importing_a_plain_csv_stores_its_cases_and_tags(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[source(HERE / "cases.csv")])
    assert (outcome.format, outcome.variant, outcome.case_count) == ("plain", "csv", 3)
    assert outcome.version.tags == ["money", "smoke", "weather"]
    assert outcome.version.tool_call_count == 3
    row = CaseRow.objects.get(version=outcome.version, eval_id="convert")
    assert row.metadata == {"category": "finance"}
    assert row.search_text == "Convert 10 EUR to USD"


@pytest.mark.django_db
def test_a_bad_plain_upload_writes_nothing(acme: Project) -> None:
    with pytest.raises(EvalSetImportError) as caught:
        evalset_import(project=acme, files=[source(HERE / "bad.csv")])
    assert caught.value.code == "schema"
    assert not CaseRow.objects.exists()
