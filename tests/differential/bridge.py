"""Scores with the real libraries, for the differential tests: run by the interpreter of a
venv that has them (google-adk, uipath, deepeval; or 10xscale-agentflow under Python 3.12),
never by evalsite's. One JSON request a line on stdin, one JSON reply a line on stdout:
`{"score": ...}` or `{"raises": "ExceptionType: message"}` when the library raised.

Only the libraries' deterministic paths are called: no model, no network.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("UIPATH_TELEMETRY_ENABLED", "false")


def adk_rouge(request: dict[str, Any]) -> Any:
    from google.adk.evaluation.eval_case import Invocation
    from google.adk.evaluation.eval_metrics import EvalMetric
    from google.adk.evaluation.final_response_match_v1 import RougeEvaluator
    from google.genai import types

    def content(text: str | None, role: str) -> Any:
        return None if text is None else types.Content(role=role, parts=[types.Part(text=text)])

    def invocation(text: str | None) -> Any:
        return Invocation(user_content=content("q", "user"), final_response=content(text, "model"))

    evaluator = RougeEvaluator(EvalMetric(metric_name="response_match_score", threshold=request["threshold"]))
    result = evaluator.evaluate_invocations([invocation(a) for a in request["actual"]],
                                            [invocation(e) for e in request["expected"]])
    return {"overall": result.overall_score, "turns": [r.score for r in result.per_invocation_results],
            "passed": [r.eval_status.name == "PASSED" for r in result.per_invocation_results]}


def adk_trajectory(request: dict[str, Any]) -> Any:
    from google.adk.evaluation.eval_case import IntermediateData, Invocation
    from google.adk.evaluation.eval_metrics import EvalMetric, ToolTrajectoryCriterion
    from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
    from google.genai import types

    def invocation(calls: list[dict[str, Any]]) -> Any:
        return Invocation(user_content=types.Content(role="user", parts=[types.Part(text="q")]),
                          intermediate_data=IntermediateData(tool_uses=[
                              types.FunctionCall(name=c["name"], args=c["args"]) for c in calls]))

    criterion = ToolTrajectoryCriterion(threshold=request["threshold"],
                                        match_type=ToolTrajectoryCriterion.MatchType[request["match_type"]],
                                        ignore_args=request["ignore_args"])
    evaluator = TrajectoryEvaluator(eval_metric=EvalMetric(metric_name="tool_trajectory_avg_score",
                                                           threshold=request["threshold"], criterion=criterion))
    result = evaluator.evaluate_invocations([invocation(a) for a in request["actual"]],
                                            [invocation(e) for e in request["expected"]])
    return {"overall": result.overall_score, "turns": [r.score for r in result.per_invocation_results],
            "passed": [r.eval_status.name == "PASSED" for r in result.per_invocation_results]}


def uipath(request: dict[str, Any]) -> Any:
    from uipath.eval.evaluators.evaluator_factory import EvaluatorFactory
    from uipath.eval.models import WorkloadExecution

    evaluator = EvaluatorFactory.create_evaluator(request["definition"])
    output = request["output"]
    # UiPath's eval runtime (`run_evaluator`): a falsy output is {}.
    execution = WorkloadExecution(agent_input={}, workload_output=output if output else {}, workload_trace=[],
                                  expected_agent_behavior="")
    result = asyncio.run(evaluator.validate_and_evaluate_criteria(execution, request["criteria"]))
    if type(result).__name__ == "ErrorEvaluationResult":  # UiPath's evaluators catch what they raise
        raise RuntimeError(str(result.details))
    return float(result.score)


def _no_llm() -> Any:
    """A judge model that refuses: ToolCorrectnessMetric wants one (else it needs an OpenAI key)
    but, without `available_tools`, never calls it."""
    from deepeval.models import DeepEvalBaseLLM

    class NoLLM(DeepEvalBaseLLM):
        def __init__(self) -> None:
            super().__init__(model="no-llm")

        def load_model(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def generate(self, *args: Any, **kwargs: Any) -> str:
            raise RuntimeError("the differential tests never call an LLM")

        async def a_generate(self, *args: Any, **kwargs: Any) -> str:
            raise RuntimeError("the differential tests never call an LLM")

        def get_model_name(self, *args: Any, **kwargs: Any) -> str:
            return "no-llm"

    return NoLLM()


def deepeval_tool_correctness(request: dict[str, Any]) -> Any:
    from deepeval.metrics import ToolCorrectnessMetric
    from deepeval.test_case import LLMTestCase, ToolCall, ToolCallParams

    def tools(calls: list[dict[str, Any]]) -> list[Any]:
        return [ToolCall(name=c["name"], input_parameters=c["args"], output=c.get("result")) for c in calls]

    options = dict(request["options"])
    options["evaluation_params"] = [ToolCallParams(p) for p in options.get("evaluation_params", [])]
    metric = ToolCorrectnessMetric(threshold=request["threshold"], async_mode=False, model=_no_llm(), **options)
    test_case = LLMTestCase(input="q", actual_output="a", tools_called=tools(request["called"]),
                            expected_tools=tools(request["expected"]))
    score = metric.measure(test_case, _show_indicator=False)
    return {"score": float(score), "passed": bool(metric.success)}


def deepeval_exact_match(request: dict[str, Any]) -> Any:
    from deepeval.metrics import ExactMatchMetric
    from deepeval.test_case import LLMTestCase

    metric = ExactMatchMetric(threshold=request["threshold"])
    test_case = LLMTestCase(input="q", actual_output=request["actual"], expected_output=request["expected"])
    score = metric.measure(test_case, _show_indicator=False)
    return {"score": float(score), "passed": bool(metric.success)}


def agentflow(request: dict[str, Any]) -> Any:
    from agentflow.qa.evaluation.config.eval_config import CriterionConfig
    from agentflow.qa.evaluation.criteria import CRITERIA_REGISTRY
    from agentflow.qa.evaluation.dataset.eval_set import EvalCase, ToolCall
    from agentflow.qa.evaluation.execution.result import ExecutionResult

    criterion = CRITERIA_REGISTRY[request["criterion"]](config=CriterionConfig.model_validate(request["config"]))
    actual = ExecutionResult(tool_calls=[ToolCall(name=c["name"], args=c["args"]) for c in request["tool_calls"]],
                             actual_response=request["actual_response"])
    result = criterion.evaluate_sync(actual, EvalCase.model_validate(request["case"]))
    return {"score": float(result.score), "passed": bool(result.passed)}


def versions(request: dict[str, Any]) -> Any:
    from importlib import metadata

    return {name: metadata.version(name) for name in request["packages"]}


HANDLERS = {f.__name__: f for f in (versions, adk_rouge, adk_trajectory, uipath, deepeval_tool_correctness, deepeval_exact_match, agentflow)}


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the libraries print must not reach the replies
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"score": HANDLERS[request["kind"]](request)}
        except Exception as exc:  # the library raising is an answer too
            reply = {"raises": f"{type(exc).__name__}: {exc}"[:500]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
