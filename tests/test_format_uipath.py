"""The UiPath reader: current and legacy eval sets, their evaluator definitions, and problems.

Most tests call the reader directly (the way `read_upload` does: companions split off by
`is_companion`, the eval set picked by `sniff`), so they need no other reader. The few that go
through `read_upload` and `evalset_import` wait for every reader module to exist.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evaluations.interop import EvalSetImportError, SourceFile, expand, files_from_paths
from evaluations.interop.base import ParsedEvalSet
from evaluations.interop.uipath.evalset import reader
from evaluations.schemas.evalset import ToolCall
from tests.conftest import DATA, source

FIXTURES = DATA / "uipath"


def parse_upload(files: Sequence[SourceFile]) -> ParsedEvalSet:
    """What read_upload does, for this reader alone."""
    files = expand(files)
    companions = [f for f in files if reader.is_companion(f)]
    evalsets = [f for f in files if not reader.is_companion(f) and reader.sniff(f) is None]
    assert len(evalsets) == 1, [f.name for f in evalsets]
    return reader.parse(evalsets[0], companions)


def zipped(folder: Path, prefix: str = "") -> SourceFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted(folder.rglob("*.json")):
            zf.writestr(prefix + path.relative_to(folder).as_posix(), path.read_bytes())
    return SourceFile("x.zip", buffer.getvalue())


def each_file(folder: Path) -> list[SourceFile]:
    """The folder's files uploaded one by one: only their base names survive."""
    return files_from_paths(sorted(folder.rglob("*.json")))


def as_json(doc: Any, name: str = "eval-sets/inline.json") -> SourceFile:
    return SourceFile(name, json.dumps(doc, indent=2).encode())


def line_of(text: str, snippet: str) -> int:
    return text[: text.index(snippet)].count("\n") + 1


def problems_of(exc: pytest.ExceptionInfo[EvalSetImportError]) -> dict[str, Any]:
    return {p.path: p for p in exc.value.problems}


@pytest.fixture
def weather(realworld: Path) -> Path:
    return realworld / "uipath" / "weather_tools"


@pytest.fixture
def calculator(realworld: Path) -> Path:
    return realworld / "uipath" / "calculator"


@pytest.fixture
def calculator_evaluators(calculator: Path) -> list[SourceFile]:
    """The calculator sample's evaluator definitions, laid out as in its project."""
    return [f for f in files_from_paths([calculator]) if f.name.startswith("evaluators/")]


class TestDetection:
    def test_it_accepts_the_real_current_and_legacy_eval_sets(self, weather: Path, calculator: Path) -> None:
        assert reader.sniff(source(weather / "eval-sets" / "default.json")) is None
        assert reader.sniff(source(calculator / "eval-sets" / "legacy.json")) is None

    def test_it_accepts_the_shape_from_the_uipath_documentation(self) -> None:
        assert reader.sniff(source(FIXTURES / "evaluation_items.json")) is None

    def test_it_refuses_every_evaluator_definition_and_takes_it_as_a_companion(
        self, weather: Path, calculator: Path
    ) -> None:
        definitions = sorted((weather / "evaluators").glob("*.json"))
        definitions += sorted((calculator / "evaluators").glob("*.json"))
        assert len(definitions) == 21
        for path in definitions:
            file = source(path)
            assert "evaluator definition" in (reader.sniff(file) or ""), path.name
            assert reader.is_companion(file), path.name

    def test_it_refuses_evaluator_type_schemas_and_takes_them_as_companions(
        self, realworld: Path, calculator: Path
    ) -> None:
        schemas = sorted((realworld / "uipath" / "_evaluator_types").glob("*.json"))
        schemas.append(calculator / "evaluators" / "custom" / "types" / "correct-operator-evaluator-types.json")
        assert len(schemas) == 12
        for path in schemas:
            file = source(path)
            assert "type schema" in (reader.sniff(file) or ""), path.name
            assert reader.is_companion(file), path.name

    def test_it_refuses_a_json_schema(self) -> None:
        schema = as_json({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                          "properties": {"evaluations": {"type": "array"}}, "evaluations": []})
        assert reader.sniff(schema) == "it is a JSON Schema, not an eval set"
        assert not reader.is_companion(schema)

    def test_it_refuses_adk_native_and_deepeval_files(self, realworld: Path) -> None:
        adk = realworld / "google-adk"
        native = as_json({"eval_set_id": "weather", "eval_cases": [{"eval_id": "a", "conversation": []}]})
        refused = {
            "adk": reader.sniff(source(adk / "hello_world_agent" / "roll_die.test.json")),
            "adk legacy list": reader.sniff(source(adk / "trip_planner_agent" / "trip_inquiry.test.json")),
            "adk test_config": reader.sniff(source(adk / "hello_world_agent" / "test_config.json")),
            "native": reader.sniff(native),
            "deepeval json": reader.sniff(source(realworld / "deepeval" / "test_core_test_datasets_goldens.json")),
            "deepeval csv": reader.sniff(source(realworld / "deepeval" / "test_core_test_datasets_goldens.csv")),
        }
        assert refused == {
            "adk": "it has eval_set_id / eval_cases (an AgentFlow or ADK eval set)",
            "adk legacy list": "the document is not a JSON object with an `evaluations` list",
            "adk test_config": "no top-level `evaluations` list",
            "native": "it has eval_set_id / eval_cases (an AgentFlow or ADK eval set)",
            "deepeval json": "the document is not a JSON object with an `evaluations` list",
            "deepeval csv": "not a .json file",
        }

    def test_eval_sets_and_other_formats_are_not_companions(self, weather: Path, realworld: Path) -> None:
        assert not reader.is_companion(source(weather / "eval-sets" / "default.json"))
        assert not reader.is_companion(source(realworld / "google-adk" / "hello_world_agent" / "test_config.json"))
        assert not reader.is_companion(source(realworld / "deepeval" / "test_core_test_datasets_goldens.csv"))
        assert not reader.is_companion(SourceFile("broken.json", b"{not json"))


class TestCurrentFormat:
    """weather_tools: evaluatorRefs, evaluationCriterias, definitions in evaluators/."""

    def test_it_reads_every_case_with_its_inputs_as_json(self, weather: Path) -> None:
        parsed = parse_upload(files_from_paths([weather]))
        assert (parsed.format, parsed.variant) == ("uipath", "uipath-current")
        assert parsed.evalset.eval_set_id == "WeatherToolsEval"
        assert parsed.evalset.name == "Weather Tools Agent Evaluation"
        cases = parsed.evalset.eval_cases
        assert [c.eval_id for c in cases] == [
            "basic_weather", "weather_with_forecast", "weather_with_alerts", "sunny_weather", "tokyo_forecast",
        ]
        first = cases[0].conversation
        assert len(first) == 1 and first[0].invocation_id == "turn_1"
        assert first[0].user_content.role == "user"
        inputs = {"city": "New York", "action": "get_weather"}
        assert first[0].user_content.content == [{"type": "json", "json": inputs}]
        assert parsed.evalset.metadata["version"] == "1.0"

    def test_it_keeps_the_criteria_as_given_and_leaves_absent_evaluators_absent(self, weather: Path) -> None:
        cases = parse_upload(files_from_paths([weather])).evalset.eval_cases
        # basic_weather has no ToolCallOutputEvaluator criterion: UiPath skips it for that case.
        assert list(cases[0].criteria) == [
            "TrajectoryEvaluator", "ToolCallCountEvaluator", "ToolCallOrderEvaluator", "ToolCallArgsEvaluator",
        ]
        assert cases[0].criteria["ToolCallCountEvaluator"] == {
            "toolCallsCount": {"get_temperature": ["=", 1], "get_weather_condition": ["=", 1], "get_humidity": ["=", 1]}
        }
        assert cases[1].criteria["ToolCallOutputEvaluator"] == {
            "toolOutputs": [
                {"name": "get_forecast", "output": "{'forecast': 'Cloudy with a chance of rain in the afternoon'}"},
            ]
        }

    def test_it_takes_the_expected_tool_calls_from_the_args_criterion(self, weather: Path) -> None:
        cases = parse_upload(files_from_paths([weather])).evalset.eval_cases
        assert cases[0].conversation[0].expected_tool_trajectory == [
            ToolCall(name="get_temperature", args={"city": "New York"}),
            ToolCall(name="get_weather_condition", args={"city": "New York"}),
            ToolCall(name="get_humidity", args={"city": "New York"}),
        ]
        # No output criterion in weather_tools: nothing to expect of the final answer.
        assert cases[0].conversation[0].expected_final_response is None

    def test_expected_tool_outputs_become_the_results_of_the_expected_calls(self, weather: Path) -> None:
        tokyo = parse_upload(files_from_paths([weather])).evalset.eval_cases[4]
        results = {c.name: c.result for c in tokyo.conversation[0].expected_tool_trajectory}
        assert results == {
            "get_temperature": "{'temperature': 25.0, 'unit': 'fahrenheit'}",
            "get_weather_condition": "{'condition': 'cloudy'}",
            "get_humidity": "{'humidity': 65}",
            "get_forecast": "{'forecast': 'Overcast with mild temperatures'}",
        }

    def test_it_keeps_every_referenced_definition_by_id(self, weather: Path) -> None:
        parsed = parse_upload(files_from_paths([weather]))
        config = parsed.evaluator_config or {}
        assert list(config) == [
            "TrajectoryEvaluator", "ToolCallCountEvaluator", "ToolCallOrderEvaluator", "ToolCallArgsEvaluator",
            "ToolCallOutputEvaluator",
        ]
        definition = json.loads((weather / "evaluators" / "tool-call-order.json").read_text())
        assert config["ToolCallOrderEvaluator"] == definition
        assert sorted(f.name for f in parsed.companions_used) == [
            "evaluators/tool-call-args.json", "evaluators/tool-call-count.json", "evaluators/tool-call-order.json",
            "evaluators/tool-call-output.json", "evaluators/trajectory.json",
        ]
        assert parsed.warnings == []

    def test_the_default_config_has_one_criterion_per_evaluator_ref(self, weather: Path) -> None:
        criteria = parse_upload(files_from_paths([weather])).default_config.criteria  # type: ignore[union-attr]
        assert {k: c.evaluator for k, c in criteria.items()} == {
            "TrajectoryEvaluator": "uipath-llm-judge-trajectory-similarity",
            "ToolCallCountEvaluator": "uipath-tool-call-count",
            "ToolCallOrderEvaluator": "uipath-tool-call-order",
            "ToolCallArgsEvaluator": "uipath-tool-call-args",
            "ToolCallOutputEvaluator": "uipath-tool-call-output",
        }
        assert {k: c.threshold for k, c in criteria.items()} == {
            "TrajectoryEvaluator": 0.7,
            "ToolCallCountEvaluator": 1.0,
            "ToolCallOrderEvaluator": 1.0,
            "ToolCallArgsEvaluator": 1.0,
            "ToolCallOutputEvaluator": 1.0,
        }
        assert criteria["ToolCallArgsEvaluator"].options == {
            "name": "ToolCallArgsEvaluator", "strict": False, "subset": True,
            "defaultEvaluationCriteria": {"toolCalls": []},
        }
        assert criteria["TrajectoryEvaluator"].judge_model == "gpt-4.1-2025-04-14"
        assert all(c.enabled for c in criteria.values())

    def test_a_zip_and_separate_files_read_the_same_as_the_folder(self, weather: Path) -> None:
        folder = parse_upload(files_from_paths([weather]))
        for parsed in (parse_upload([zipped(weather, "weather_tools/")]), parse_upload(each_file(weather))):
            assert parsed.evalset == folder.evalset
            assert parsed.evaluator_config == folder.evaluator_config
            assert parsed.default_config == folder.default_config
            assert sorted(f.basename for f in parsed.companions_used) == sorted(
                f.basename for f in folder.companions_used
            )
            assert parsed.warnings == []

    def test_the_eval_set_alone_warns_about_the_missing_definitions(self, weather: Path) -> None:
        parsed = parse_upload([source(weather / "eval-sets" / "default.json")])
        assert parsed.warnings == [
            "evaluator definitions not in the upload: TrajectoryEvaluator, ToolCallCountEvaluator, "
            "ToolCallOrderEvaluator, ToolCallArgsEvaluator, ToolCallOutputEvaluator (their criteria are kept; "
            "upload the evaluators/ folder with the eval set to run them)"
        ]
        assert parsed.evaluator_config == {}
        assert parsed.companions_used == []
        criteria = parsed.default_config.criteria  # type: ignore[union-attr]
        assert list(criteria) == [
            "TrajectoryEvaluator", "ToolCallCountEvaluator", "ToolCallOrderEvaluator", "ToolCallArgsEvaluator",
            "ToolCallOutputEvaluator",
        ]
        assert not any(c.enabled for c in criteria.values())
        # The cases themselves do not depend on the definitions.
        assert len(parsed.evalset.eval_cases[0].conversation[0].expected_tool_trajectory) == 3


class TestLegacyFormat:
    """calculator: eval-sets/legacy.json and every definition, new and legacy."""

    def test_it_reads_the_cases_and_their_expected_output(self, calculator: Path) -> None:
        parsed = parse_upload(files_from_paths([calculator]))
        assert parsed.variant == "uipath-legacy"
        assert parsed.evalset.eval_set_id == "default-eval-set-id"
        cases = parsed.evalset.eval_cases
        assert [c.eval_id for c in cases] == [
            "test-addition", "test-random-addition-using-llm", "test-with-llm-input-mocking",
        ]
        turn = cases[0].conversation[0]
        assert turn.user_content.content == [{"type": "json", "json": {"a": 1, "b": 1, "operator": "+"}}]
        assert turn.expected_final_response is not None
        assert turn.expected_final_response.role == "assistant"
        assert turn.expected_final_response.content == [{"type": "json", "json": {"result": 2.0}}]
        assert cases[2].conversation[0].user_content.content == [{"type": "json", "json": {}}]
        assert {k: parsed.evalset.metadata[k] for k in ("fileName", "batchSize")} == {
            "fileName": "default.json", "batchSize": 10,
        }

    def test_legacy_fields_go_to_the_case_metadata(self, calculator: Path) -> None:
        cases = parse_upload(files_from_paths([calculator])).evalset.eval_cases
        assert cases[1].metadata == {
            "expectedAgentBehavior": "The operation should produce the right output.",
            "simulateTools": True,
            "simulationInstructions": "The random operator is '+'.",
            "toolsToSimulate": [{"name": "get_random_operator"}],
            "evalSetId": "default-eval-set-id",
            "createdAt": "2025-09-04T18:54:58.378Z",
            "updatedAt": "2025-09-04T18:55:55.416Z",
        }
        assert cases[2].metadata["simulateInput"] is True
        assert cases[2].metadata["inputGenerationInstructions"].startswith("Generate a multiplication")

    def test_every_referenced_evaluator_gets_the_legacy_criteria(self, calculator: Path) -> None:
        case = parse_upload(files_from_paths([calculator])).evalset.eval_cases[0]
        expected = {
            "expectedOutput": {"result": 2.0},
            "expectedAgentBehavior": "The operation should produce the right output.",
        }
        assert case.criteria == {
            ref: expected
            for ref in ("equality", "equality-with-target-key", "llm-as-a-judge", "json-similarity", "trajectory",
                        "llm-as-a-judge-haiku-4.5", "llm-as-a-judge-sonnet-4.5")
        }

    def test_references_resolve_by_the_id_inside_each_file_not_its_name(self, calculator: Path) -> None:
        parsed = parse_upload(files_from_paths([calculator]))
        config = parsed.evaluator_config or {}
        assert config["equality"]["fileName"] == "equality.json"
        assert config["equality"]["name"] == "Equality Evaluator"
        used = {f.name for f in parsed.companions_used}
        assert "evaluators/legacy-equality.json" in used
        # The new-style definitions beside them are not referenced by legacy.json.
        assert "ExactMatchEvaluator" not in config and "TrajectoryEvaluator" not in config
        assert "evaluators/exact-match.json" not in used and "evaluators/trajectory.json" not in used
        assert len(used) == 7
        assert parsed.warnings == []

    def test_legacy_evaluators_are_named_from_their_category_and_type(self, calculator: Path) -> None:
        criteria = parse_upload(files_from_paths([calculator])).default_config.criteria  # type: ignore[union-attr]
        assert {k: (c.evaluator, c.threshold) for k, c in criteria.items()} == {
            "equality": ("uipath-legacy-exact-match", 1.0),
            "equality-with-target-key": ("uipath-legacy-exact-match", 1.0),
            # category 3 is Trajectory, whatever the file calls itself
            "llm-as-a-judge": ("uipath-legacy-trajectory", 0.7),
            "json-similarity": ("uipath-legacy-json-similarity", 0.7),
            "trajectory": ("uipath-legacy-trajectory", 0.7),
            "llm-as-a-judge-haiku-4.5": ("uipath-legacy-trajectory", 0.7),
            "llm-as-a-judge-sonnet-4.5": ("uipath-legacy-trajectory", 0.7),
        }
        assert criteria["equality-with-target-key"].options == {
            "name": "Legacy Equality Evaluator With Target Key", "targetOutputKey": "result",
        }
        haiku = criteria["llm-as-a-judge-haiku-4.5"]
        assert haiku.judge_model == "anthropic.claude-haiku-4-5-20251001-v1:0"
        assert haiku.options["maxTokens"] == 8000

    def test_a_zip_and_separate_files_read_the_same_as_the_folder(self, calculator: Path) -> None:
        folder = parse_upload(files_from_paths([calculator]))
        for parsed in (parse_upload([zipped(calculator)]), parse_upload(each_file(calculator))):
            assert parsed.evalset == folder.evalset
            assert parsed.evaluator_config == folder.evaluator_config
            assert parsed.default_config == folder.default_config
            assert len(parsed.companions_used) == 7

    def test_the_eval_set_alone_warns_and_keeps_its_criteria(self, calculator: Path) -> None:
        parsed = parse_upload([source(calculator / "eval-sets" / "legacy.json")])
        assert len(parsed.warnings) == 1
        assert parsed.warnings[0].startswith(
            "evaluator definitions not in the upload: equality, equality-with-target-key, llm-as-a-judge, "
        )
        assert len(parsed.evalset.eval_cases[0].criteria) == 7


class TestCustomEvaluatorsAndDefaults:
    """A current eval set over the calculator sample's new-style and custom definitions."""

    @pytest.fixture
    def parsed(self, calculator_evaluators: list[SourceFile]) -> ParsedEvalSet:
        evalset = source(FIXTURES / "calculator_current" / "eval-sets" / "custom.json", "eval-sets/custom.json")
        return parse_upload([evalset, *calculator_evaluators])

    def test_a_custom_evaluator_brings_its_type_file_under_types(self, parsed: ParsedEvalSet) -> None:
        config = parsed.evaluator_config or {}
        type_id = "file://types/correct-operator-evaluator-types.json"
        assert config["CorrectOperatorEvaluator"]["evaluatorTypeId"] == type_id
        assert list(config["$types"]) == [type_id]
        assert config["$types"][type_id]["evaluatorTypeId"] == "CorrectOperatorEvaluator"
        assert "evaluators/custom/types/correct-operator-evaluator-types.json" in {
            f.name for f in parsed.companions_used
        }
        custom = parsed.default_config.criteria["CorrectOperatorEvaluator"]  # type: ignore[union-attr]
        assert (custom.evaluator, custom.threshold) == (type_id, 0.7)
        assert custom.options == {"name": "CorrectOperatorEvaluator", "defaultEvaluationCriteria": {"operator": "+"},
                                  "negated": False}

    def test_null_criteria_are_kept_and_the_expected_output_comes_from_the_default(
        self, parsed: ParsedEvalSet
    ) -> None:
        first, second = parsed.evalset.eval_cases
        assert first.criteria == {"ExactMatchEvaluator": None, "ContainsEvaluator": None,
                                  "CorrectOperatorEvaluator": None}
        response = first.conversation[0].expected_final_response
        assert response is not None and response.content == [{"type": "json", "json": {"result": "5.0"}}]
        # A criterion of the case's own wins over an evaluator default.
        assert second.criteria["ExactMatchEvaluator"] is None
        response = second.conversation[0].expected_final_response
        assert response is not None and response.content == [{"type": "json", "json": {"result": 42.0}}]

    def test_the_tool_call_order_gives_the_trajectory_when_no_args_are_given(self, parsed: ParsedEvalSet) -> None:
        first, second = parsed.evalset.eval_cases
        assert second.conversation[0].expected_tool_trajectory == [
            ToolCall(name="get_random_operator"), ToolCall(name="multiply"),
        ]
        assert first.conversation[0].expected_tool_trajectory == []

    def test_mocking_settings_and_expected_behaviour_go_to_the_metadata(self, parsed: ParsedEvalSet) -> None:
        first, second = parsed.evalset.eval_cases
        assert first.metadata == {"expectedAgentBehavior": "Adds the two numbers."}
        assert second.metadata == {
            "mockingStrategy": {
                "type": "llm",
                "prompt": "The random operator is '*'.",
                "toolsToSimulate": [{"name": "get_random_operator"}],
            },
            "inputMockingStrategy": {"prompt": "Pick two numbers whose product is 42."},
        }

    def test_evaluator_configs_give_refs_and_weights(self, parsed: ParsedEvalSet) -> None:
        criteria = parsed.default_config.criteria  # type: ignore[union-attr]
        assert list(criteria) == [
            "ExactMatchEvaluator", "JsonSimilarityEvaluator", "ContainsEvaluator", "CorrectOperatorEvaluator",
            "ToolCallOrderEvaluator",
        ]
        assert criteria["JsonSimilarityEvaluator"].options["weight"] == 2.0
        assert "weight" not in criteria["ExactMatchEvaluator"].options
        assert (criteria["ContainsEvaluator"].evaluator, criteria["ContainsEvaluator"].threshold) == (
            "uipath-contains", 1.0,
        )
        # ToolCallOrderEvaluator has no definition in the calculator sample.
        assert criteria["ToolCallOrderEvaluator"].enabled is False
        assert parsed.warnings == [
            "evaluator definitions not in the upload: ToolCallOrderEvaluator (their criteria are kept; "
            "upload the evaluators/ folder with the eval set to run them)"
        ]
        assert "LLMJudgeOutputEvaluator" not in (parsed.evaluator_config or {})

    def test_a_missing_type_file_is_a_warning(self, calculator_evaluators: list[SourceFile]) -> None:
        evalset = source(FIXTURES / "calculator_current" / "eval-sets" / "custom.json", "eval-sets/custom.json")
        without_types = [f for f in calculator_evaluators if "/types/" not in f.name]
        parsed = parse_upload([evalset, *without_types])
        assert (
            "custom evaluator 'CorrectOperatorEvaluator': its type file "
            "types/correct-operator-evaluator-types.json is not in the upload"
        ) in parsed.warnings
        assert "$types" not in (parsed.evaluator_config or {})
        assert "CorrectOperatorEvaluator" in (parsed.evaluator_config or {})


class TestEvaluationItemsShape:
    def test_it_reads_the_documented_shape(self) -> None:
        parsed = parse_upload([source(FIXTURES / "evaluation_items.json")])
        assert parsed.variant == "uipath-evaluation-items"
        first, second = parsed.evalset.eval_cases
        assert first.eval_id == "test-1"
        assert first.conversation[0].user_content.content == [{"type": "json", "json": {"query": "What is 2+2?"}}]
        assert first.criteria == {
            "exact-match-1": {"expectedOutput": {"result": "4"}},
            "MyCustomEvaluator": {"expectedValues": ["value1", "value2"]},
        }
        response = first.conversation[0].expected_final_response
        assert response is not None and response.content == [{"type": "json", "json": {"result": "4"}}]
        assert second.criteria["exact-match-1"] is None
        assert second.conversation[0].expected_tool_trajectory == [ToolCall(name="get_weather", args={"city": "Oslo"})]
        assert second.metadata == {"tags": ["weather"]}

    def test_criteria_for_an_evaluator_the_set_does_not_reference_are_a_warning(self) -> None:
        parsed = parse_upload([source(FIXTURES / "evaluation_items.json")])
        assert (
            "criteria for evaluator 'tool-args', which the eval set does not reference (cases test-2): "
            "UiPath would not run it"
        ) in parsed.warnings


class TestDuplicateDefinitions:
    def test_the_definition_in_the_eval_sets_own_project_wins(self, weather: Path, calculator: Path) -> None:
        files = [
            source(calculator / "evaluators" / "trajectory.json", "calculator/evaluators/trajectory.json"),
            *[SourceFile("weather_tools/" + f.name, f.data) for f in files_from_paths([weather])],
        ]
        parsed = parse_upload(files)
        config = parsed.evaluator_config or {}
        assert config["TrajectoryEvaluator"]["description"].endswith("for weather operations.")
        assert parsed.warnings == []

    def test_two_different_definitions_at_the_same_distance_are_a_warning(
        self, weather: Path, calculator: Path
    ) -> None:
        files = [
            source(weather / "eval-sets" / "default.json"),
            source(weather / "evaluators" / "trajectory.json", "weather-trajectory.json"),
            source(calculator / "evaluators" / "trajectory.json", "calculator-trajectory.json"),
        ]
        parsed = parse_upload(files)
        assert (
            "evaluator 'TrajectoryEvaluator' is defined by several files (weather-trajectory.json, "
            "calculator-trajectory.json); using weather-trajectory.json"
        ) in parsed.warnings


class TestProblems:
    def test_every_problem_in_a_current_eval_set_is_reported_where_it_is(self) -> None:
        file = source(FIXTURES / "broken_current.json")
        with pytest.raises(EvalSetImportError) as exc:
            reader.parse(file, [])
        assert exc.value.code == "schema"
        found = problems_of(exc)
        text = file.text
        assert {path: (p.case, p.line) for path, p in found.items()} == {
            "evaluations[0].inputs": ("inputs-not-an-object", line_of(text, '"inputs": "New York"')),
            "evaluations[1].evaluationCriterias": (
                "criteria-not-an-object", line_of(text, '"evaluationCriterias": ["ToolCallOrderEvaluator"]'),
            ),
            "evaluations[2].id": ("#3", line_of(text, '"name": "No id"') - 1),
            "evaluations[3].evaluationCriterias.ToolCallArgsEvaluator.toolCalls[0]": (
                "bad-tool-calls", line_of(text, '"toolCalls": [{"args"'),
            ),
            "evaluations[3].evaluationCriterias.ToolCallOrderEvaluator.toolCallsOrder[1]": (
                "bad-tool-calls", line_of(text, '"toolCallsOrder"'),
            ),
            "evaluations[4].id": ("inputs-not-an-object", line_of(text, '"name": "Duplicate id"') - 1),
            "evaluations[5]": ("#6", line_of(text, '"not an evaluation"')),
        }
        assert found["evaluations[0].inputs"].message == "Input should be a valid dictionary"
        assert found["evaluations[2].id"].message == "required field is missing"
        assert found["evaluations[4].id"].message == "duplicate id: evaluations #1 and #5 share it"
        assert all(p.file == "broken_current.json" for p in found.values())

    def test_every_problem_in_a_legacy_eval_set_is_reported_where_it_is(self) -> None:
        file = source(FIXTURES / "broken_legacy.json")
        with pytest.raises(EvalSetImportError) as exc:
            reader.parse(file, [])
        found = problems_of(exc)
        assert {path: p.case for path, p in found.items()} == {
            "evaluations[0].expectedOutput": "no-expected-output",
            "evaluations[1].simulateTools": "bad-simulation",
            "evaluations[1].toolsToSimulate[0].name": "bad-simulation",
        }
        assert found["evaluations[1].simulateTools"].line == line_of(file.text, '"simulateTools": "sometimes"')
        # A missing field is located at the evaluation that lacks it.
        assert found["evaluations[0].expectedOutput"].line == line_of(file.text, '"id": "no-expected-output"') - 1

    def test_problems_in_the_eval_sets_own_fields_are_reported_together(self) -> None:
        file = as_json({"version": "1.0", "name": 7, "evaluatorConfigs": ["a", {"ref": "b", "weight": -1}, 3],
                        "evaluations": {"id": "x"}})
        with pytest.raises(EvalSetImportError) as exc:
            reader.parse(file, [])
        found = problems_of(exc)
        assert sorted(found) == [
            "evaluations", "evaluatorConfigs[1].weight", "evaluatorConfigs[2]", "id", "name",
        ]
        assert found["evaluations"].message == "must be a list of evaluations"
        assert found["evaluatorConfigs[2]"].line == file.text.splitlines().index("    3") + 1

    def test_an_eval_set_that_is_not_an_object_is_refused(self) -> None:
        with pytest.raises(EvalSetImportError) as exc:
            reader.parse(SourceFile("list.json", b"[]"), [])
        assert exc.value.problems[0].message == "a UiPath eval set is a JSON object with an `evaluations` list"

    def test_a_broken_definition_is_reported_in_its_own_file(self, weather: Path) -> None:
        definition = as_json(
            {
                "version": "1.0",
                "id": "ToolCallOrderEvaluator",
                "evaluatorTypeId": "uipath-tool-call-order",
                "evaluatorConfig": {"defaultEvaluationCriteria": {"toolCallsOrder": "get_humidity"}},
            },
            name="evaluators/tool-call-order.json",
        )
        use_default = {"ToolCallOrderEvaluator": None}
        evalset = as_json(
            {
                "version": "1.0",
                "id": "s",
                "evaluatorRefs": ["ToolCallOrderEvaluator"],
                "evaluations": [
                    {"id": "a", "inputs": {}, "evaluationCriterias": use_default},
                    {"id": "b", "inputs": {}, "evaluationCriterias": use_default},
                ],
            },
            name="eval-sets/s.json",
        )
        with pytest.raises(EvalSetImportError) as exc:
            reader.parse(evalset, [definition])
        # Reported once, though two cases use that default.
        assert [(p.file, p.path, p.message) for p in exc.value.problems] == [
            (
                "evaluators/tool-call-order.json",
                "evaluatorConfig.defaultEvaluationCriteria.toolCallsOrder",
                "must be a list",
            ),
        ]


class TestThroughTheImport:
    def test_read_upload_finds_the_uipath_eval_set_in_a_folder(self, weather: Path) -> None:
        from evaluations.interop import read_upload

        [parsed] = read_upload(files_from_paths([weather]))
        assert (parsed.format, parsed.variant, len(parsed.evalset.eval_cases)) == ("uipath", "uipath-current", 5)
        assert len(parsed.companions_used) == 5

    def test_evalset_import_stores_the_legacy_set_with_its_evaluators(self, acme: Any, calculator: Path) -> None:
        from evaluations.evalsets.services import evalset_import

        [outcome] = evalset_import(project=acme, files=[zipped(calculator)])
        assert (outcome.format, outcome.variant, outcome.case_count) == ("uipath", "uipath-legacy", 3)
        assert sorted(outcome.version.evaluator_config) == sorted([
            "equality", "equality-with-target-key", "llm-as-a-judge", "json-similarity", "trajectory",
            "llm-as-a-judge-haiku-4.5", "llm-as-a-judge-sonnet-4.5",
        ])
        assert outcome.version.default_config["criteria"]["equality"]["evaluator"] == "uipath-legacy-exact-match"
