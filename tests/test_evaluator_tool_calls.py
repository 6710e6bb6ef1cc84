"""UiPath's tool-call evaluators on UiPath's weather_tools sample, with the scores UiPath's
algorithms (`uipath/eval/_helpers/evaluators_helpers.py`) give, worked out in the comments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluations.evaluators.base import Evaluator, Level, ScoreResult
from evaluations.evaluators.tool_calls import (
    NO_CRITERIA,
    ToolCallArgsEvaluator,
    ToolCallCountEvaluator,
    ToolCallOrderEvaluator,
    ToolCallOutputEvaluator,
    sanitize_tool_name,
)
from evaluations.interop import files_from_paths
from evaluations.interop.uipath.evalset import reader
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput

EVALUATORS: dict[str, type[Evaluator]] = {cls.name: cls for cls in (
    ToolCallOrderEvaluator, ToolCallArgsEvaluator, ToolCallCountEvaluator, ToolCallOutputEvaluator)}

ORDER, ARGS, COUNT, OUTPUT = ("ToolCallOrderEvaluator", "ToolCallArgsEvaluator", "ToolCallCountEvaluator",
                              "ToolCallOutputEvaluator")

# What weather_tools' tools return (its expected outputs are their Python reprs).
RESULTS: dict[str, Any] = {
    "get_temperature": {"temperature": 25.0, "unit": "fahrenheit"},
    "get_weather_condition": {"condition": "cloudy"},
    "get_humidity": {"humidity": 65},
    "get_forecast": {"forecast": "Overcast with mild temperatures"},
}


class WeatherTools:
    def __init__(self, realworld: Path):
        files = files_from_paths([realworld / "uipath" / "weather_tools"])
        evalset = next(f for f in files if f.name == "eval-sets/default.json")
        parsed = reader.parse(evalset, [f for f in files if reader.is_companion(f)])
        assert parsed.default_config is not None
        self.cases = {case.eval_id: case for case in parsed.evalset.eval_cases}
        self.criteria = parsed.default_config.criteria

    def score(self, criterion: str, case: EvalCase | str, output: AgentOutput,
              **options: Any) -> list[ScoreResult]:
        config = self.criteria[criterion]
        if options:
            config = config.model_copy(update={"options": {**config.options, **options}})
        assert config.evaluator is not None
        evaluator = EVALUATORS[config.evaluator]()
        return evaluator.score(self.cases[case] if isinstance(case, str) else case, output, config, criterion)

    def one(self, criterion: str, case: EvalCase | str, output: AgentOutput, **options: Any) -> ScoreResult:
        results = self.score(criterion, case, output, **options)
        assert len(results) == 1
        return results[0]


@pytest.fixture
def weather(realworld: Path) -> WeatherTools:
    return WeatherTools(realworld)


def agent(*calls: tuple[str, str] | tuple[str, str, Any]) -> AgentOutput:
    """An output whose one turn calls each (tool, city[, result]); results default to RESULTS."""
    tool_calls = [OutputToolCall(name=c[0], args={"city": c[1]}, result=c[2] if len(c) > 2 else RESULTS.get(c[0]))
                  for c in calls]
    return AgentOutput(eval_id="x", turns=[TurnOutput(tool_calls=tool_calls)])


BASIC = agent(("get_temperature", "New York"), ("get_weather_condition", "New York"), ("get_humidity", "New York"))
# Conditions first, a second conditions call, and the humidity asked for the wrong city.
SLOPPY = agent(("get_weather_condition", "New York"), ("get_temperature", "New York"),
               ("get_humidity", "New York City"), ("get_weather_condition", "New York"))


class TestOnWeatherTools:
    def test_an_agent_that_does_what_basic_weather_expects_scores_one_everywhere(self, weather: WeatherTools) -> None:
        for criterion in (ORDER, ARGS, COUNT):
            result = weather.one(criterion, "basic_weather", BASIC)
            assert (result.score, result.passed, result.applies_to) == (1.0, True, Level.CONVERSATION), criterion

    def test_an_evaluator_the_case_does_not_name_does_not_score_it(self, weather: WeatherTools) -> None:
        assert OUTPUT not in weather.cases["basic_weather"].criteria
        assert weather.score(OUTPUT, "basic_weather", BASIC) == []

    def test_order_is_the_longest_common_subsequence_over_the_expected_length(self, weather: WeatherTools) -> None:
        result = weather.one(ORDER, "basic_weather", SLOPPY)
        # actual [cond, temp, hum, cond], expected [temp, cond, hum]: the LCS table's corner is 2
        # and UiPath's walk back reads [temp, cond] -> 2/3. Pass only at 1.0 (importer's threshold).
        assert result.score == pytest.approx(2 / 3)
        assert result.passed is False
        assert result.justification == {
            "expected": "['get_temperature', 'get_weather_condition', 'get_humidity']",
            "actual": "['get_weather_condition', 'get_temperature', 'get_humidity', 'get_weather_condition']",
            "lcs": ["get_temperature", "get_weather_condition"],
            "expected_tool_calls_order": ["get_temperature", "get_weather_condition", "get_humidity"],
            "actual_tool_calls_order": ["get_weather_condition", "get_temperature", "get_humidity",
                                        "get_weather_condition"],
        }

    def test_strict_order_wants_exactly_the_expected_sequence(self, weather: WeatherTools) -> None:
        assert weather.one(ORDER, "basic_weather", SLOPPY, strict=True).score == 0.0
        assert weather.one(ORDER, "basic_weather", BASIC, strict=True).score == 1.0

    def test_args_match_each_expected_call_with_an_unused_actual_call(self, weather: WeatherTools) -> None:
        result = weather.one(ARGS, "basic_weather", SLOPPY)
        # temp(New York) -> the temp call; cond(New York) -> the first cond call; hum(New York)
        # -> the only hum call has "New York City" -> no match. 2 of 3.
        assert result.score == pytest.approx(2 / 3)
        assert result.justification["explained_tool_calls_args"] == {
            "get_temperature_0": "Actual: {'city': 'New York'}, Expected: {'city': 'New York'}, Score: 1.0",
            "get_weather_condition_0": "Actual: {'city': 'New York'}, Expected: {'city': 'New York'}, Score: 1.0",
            "get_humidity_0": "Actual: {'city': 'New York City'}, Expected: {'city': 'New York'}, Score: 0.0",
        }
        assert result.justification["expected"].startswith(
            "[ToolCall(name='get_temperature', args={'city': 'New York'}, id=None), ")

    def test_strict_args_is_all_or_nothing(self, weather: WeatherTools) -> None:
        assert weather.one(ARGS, "basic_weather", SLOPPY, strict=True).score == 0.0

    def test_args_ignore_extra_actual_arguments_with_or_without_subset(self, weather: WeatherTools) -> None:
        extra = AgentOutput(eval_id="x", turns=[TurnOutput(tool_calls=[
            OutputToolCall(name=name, args={"city": "New York", "units": "metric"})
            for name in ("get_temperature", "get_weather_condition", "get_humidity")])])
        assert weather.criteria[ARGS].options["subset"] is True
        assert weather.one(ARGS, "basic_weather", extra).score == 1.0
        assert weather.one(ARGS, "basic_weather", extra, subset=False).score == 1.0

    def test_count_is_the_share_of_tools_whose_count_holds(self, weather: WeatherTools) -> None:
        result = weather.one(COUNT, "basic_weather", SLOPPY)
        # temp 1 = 1 yes; cond 2 = 1 no; hum 1 = 1 yes -> 2/3.
        assert result.score == pytest.approx(2 / 3)
        assert result.justification["explained_tool_calls_count"] == {
            "get_temperature": "Actual: 1, Expected: 1, Score: 1.0",
            "get_weather_condition": "Actual: 2, Expected: 1, Score: 0.0",
            "get_humidity": "Actual: 1, Expected: 1, Score: 1.0",
        }
        assert result.justification["expected"] == (
            "{'get_temperature': ('=', 1), 'get_weather_condition': ('=', 1), 'get_humidity': ('=', 1)}")

    def test_strict_count_stops_at_the_first_failing_tool(self, weather: WeatherTools) -> None:
        result = weather.one(COUNT, "basic_weather", SLOPPY, strict=True)
        assert result.score == 0.0
        assert result.justification["explained_tool_calls_count"] == {
            "get_weather_condition": "Actual: 2, Expected: 1, Score: 0.0"}

    def test_output_compares_each_expected_output_with_the_tool_result(self, weather: WeatherTools) -> None:
        calls = [(name, "Tokyo") for name in RESULTS]
        calls[3] = ("get_forecast", "Tokyo", {"forecast": "Sunny"})
        result = weather.one(OUTPUT, "tokyo_forecast", agent(*calls))
        # Temperature, condition and humidity reprs equal the expected strings; the forecast
        # differs -> 3 of 4.
        assert result.score == 0.75
        assert result.justification["explained_tool_calls_outputs"]["get_forecast_0"] == (
            "Actual: {'forecast': 'Sunny'}, Expected: {'forecast': 'Overcast with mild temperatures'}, Score: 0.0")
        assert result.justification["explained_tool_calls_outputs"]["get_humidity_0"] == (
            "Actual: {'humidity': 65}, Expected: {'humidity': 65}, Score: 1.0")

    def test_strict_output_stops_at_the_first_mismatch(self, weather: WeatherTools) -> None:
        calls = [(name, "Tokyo") for name in RESULTS]
        calls[0] = ("get_temperature", "Tokyo", "{'temperature': 30.0}")
        result = weather.one(OUTPUT, "tokyo_forecast", agent(*calls), strict=True)
        assert result.score == 0.0
        assert result.justification["explained_tool_calls_outputs"] == {
            "get_temperature_0": "Actual: {'temperature': 30.0}, Expected: {'temperature': 25.0, 'unit': "
                                 "'fahrenheit'}, Score: 0.0"}

    def test_an_output_given_as_text_is_compared_as_it_is(self, weather: WeatherTools) -> None:
        output = agent(("get_forecast", "Paris", "{'forecast': 'Cloudy with a chance of rain in the afternoon'}"))
        assert weather.one(OUTPUT, "weather_with_forecast", output).score == 1.0


class TestDefaultCriteria:
    def test_a_null_criterion_uses_the_evaluator_default(self, weather: WeatherTools) -> None:
        case = weather.cases["weather_with_forecast"].model_copy(update={"criteria": {COUNT: None}})
        forecast = agent(*[(name, "Paris") for name in RESULTS])
        # The default counts temperature, condition and humidity (= 1 each); get_forecast is not
        # in it, so its call changes nothing -> 3/3. The case's own criterion would need it too.
        result = weather.one(COUNT, case, forecast)
        assert result.score == 1.0
        assert list(result.justification["explained_tool_calls_count"]) == [
            "get_temperature", "get_weather_condition", "get_humidity"]

    def test_an_empty_default_order_against_real_calls_scores_zero(self, weather: WeatherTools) -> None:
        case = weather.cases["basic_weather"].model_copy(update={"criteria": {ORDER: None}})
        # toolCallsOrder [] and three actual calls: "either side empty" -> 0.0, as in UiPath.
        assert weather.one(ORDER, case, BASIC).score == 0.0
        assert weather.one(ORDER, case, AgentOutput(eval_id="x")).score == 1.0  # both empty

    def test_a_null_criterion_without_a_default_is_an_error(self) -> None:
        case = EvalCase(eval_id="c", criteria={"order": None})
        result = ToolCallOrderEvaluator().score(case, BASIC, CriterionConfig(evaluator="uipath-tool-call-order"),
                                                "order")
        assert [(r.score, r.passed, r.error) for r in result] == [(None, None, NO_CRITERIA)]


class TestCriteriaAndNames:
    def score(self, evaluator: Evaluator, criteria: dict[str, Any], output: AgentOutput,
              **options: Any) -> ScoreResult:
        case = EvalCase(eval_id="c", criteria={"c": criteria})
        [result] = evaluator.score(case, output, CriterionConfig(threshold=1.0, options=options), "c")
        return result

    def test_snake_case_criteria_are_read_as_well(self) -> None:
        result = self.score(ToolCallOrderEvaluator(), {"tool_calls_order": ["get_temperature"]},
                            agent(("get_temperature", "x")))
        assert result.score == 1.0

    @pytest.mark.parametrize(("comparator", "expected", "score"), [
        ("=", 2, 1.0), ("==", 3, 0.0), ("!=", 3, 1.0), (">", 1, 1.0), (">", 2, 0.0),
        (">=", 2, 1.0), ("<", 2, 0.0), ("<=", 2, 1.0), ("<", 5, 1.0),
    ])
    def test_each_count_comparator(self, comparator: str, expected: int, score: float) -> None:
        two_calls = agent(("search", "a"), ("search", "b"))
        result = self.score(ToolCallCountEvaluator(), {"toolCallsCount": {"search": [comparator, expected]}},
                            two_calls)
        assert result.score == score

    def test_an_unknown_comparator_is_an_error(self) -> None:
        result = self.score(ToolCallCountEvaluator(), {"toolCallsCount": {"search": ["~", 1]}}, agent(("search", "a")))
        assert (result.score, result.error) == (None, "unknown comparator '~' for 'search'; use one of "
                                                      ">, <, >=, <=, =, ==, !=")

    def test_malformed_criteria_are_an_error(self) -> None:
        result = self.score(ToolCallArgsEvaluator(), {"toolCalls": [{"args": {}}]}, agent(("search", "a")))
        assert result.score is None and result.error.startswith("invalid evaluation criteria")

    def test_names_match_after_uipath_sanitising(self) -> None:
        # Whitespace runs become "_", then everything but letters, digits, "_" and "-" goes.
        assert sanitize_tool_name("Web Search (v2)") == "Web_Search_v2"
        output = AgentOutput(eval_id="x", turns=[TurnOutput(tool_calls=[OutputToolCall(name="Web_Search")])])
        assert self.score(ToolCallOrderEvaluator(), {"toolCallsOrder": ["Web Search"]}, output).score == 1.0
        assert self.score(ToolCallCountEvaluator(), {"toolCallsCount": {"Web Search": ["=", 1]}}, output).score == 1.0
        assert self.score(ToolCallArgsEvaluator(), {"toolCalls": [{"name": "Web Search", "args": {}}]},
                          output).score == 1.0

    def test_nothing_expected_and_nothing_called_scores_one_and_either_alone_zero(self) -> None:
        nothing = AgentOutput(eval_id="x")
        assert self.score(ToolCallCountEvaluator(), {"toolCallsCount": {}}, nothing).justification[
            "explained_tool_calls_count"] == {"_result": "Both expected and actual tool calls are empty"}
        assert self.score(ToolCallArgsEvaluator(), {"toolCalls": []}, nothing).score == 1.0
        assert self.score(ToolCallOutputEvaluator(), {"toolOutputs": []}, nothing).score == 1.0
        assert self.score(ToolCallArgsEvaluator(), {"toolCalls": []}, agent(("search", "a"))).score == 0.0
        # UiPath checks for empty sides before any comparator: "never call search" with no calls
        # at all scores 0.0 there, and so here.
        assert self.score(ToolCallCountEvaluator(), {"toolCallsCount": {"search": ["=", 0]}}, nothing).score == 0.0

    def test_an_empty_result_is_an_empty_output(self) -> None:
        output = agent(("search", "a", 0), ("search", "b", None))
        criteria = {"toolOutputs": [{"name": "search", "output": ""}, {"name": "search", "output": ""}]}
        assert self.score(ToolCallOutputEvaluator(), criteria, output).score == 1.0
