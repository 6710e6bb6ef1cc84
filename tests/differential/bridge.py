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
import types
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
    if output is None or isinstance(output, (str, dict)):
        # What `uipath eval` does with an agent's output, by UiPath's own code: its runtime's
        # `run_evaluator` (a falsy output becomes {}), called with the runtime's result types.
        from uipath.eval.runtime.runtime import (
            EvaluationItem,
            UiPathEvalRunExecutionOutput,
            UiPathEvalRuntime,
            UiPathTraceManager,
        )
        from uipath.runtime import UiPathRuntimeResult

        runtime = types.SimpleNamespace(trace_manager=UiPathTraceManager())
        executed = UiPathEvalRunExecutionOutput(execution_time=0.0, spans=[], logs=[],
                                                result=UiPathRuntimeResult(output=output))
        item = EvaluationItem(id="case", name="case", inputs={}, evaluation_criterias={"E": request["criteria"]})
        result = asyncio.run(UiPathEvalRuntime.run_evaluator(runtime, evaluator, executed, item,
                                                             evaluation_criteria=request["criteria"]))
    else:
        # An output the runtime's result cannot hold (a list, a number): the evaluator as the
        # runtime would call it, `output or {}`.
        execution = WorkloadExecution(agent_input={}, workload_output=output if output else {}, workload_trace=[],
                                      expected_agent_behavior="")
        result = asyncio.run(evaluator.validate_and_evaluate_criteria(execution, request["criteria"]))
    if type(result).__name__ == "ErrorEvaluationResult":  # UiPath's evaluators catch what they raise
        raise RuntimeError(str(result.details))
    return float(result.score)


def uipath_levenshtein(request: dict[str, Any]) -> Any:
    """UiPath's own edit distance (both JSON similarity evaluators'), for pairs of strings."""
    from uipath.eval.evaluators.json_similarity_evaluator import JsonSimilarityEvaluator
    from uipath.eval.evaluators.legacy_json_similarity_evaluator import LegacyJsonSimilarityEvaluator

    current = JsonSimilarityEvaluator.__new__(JsonSimilarityEvaluator)  # the method reads no state
    legacy = LegacyJsonSimilarityEvaluator.__new__(LegacyJsonSimilarityEvaluator)
    return [[current._levenshtein(a, b), legacy._levenshtein(a, b)] for a, b in request["pairs"]]


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


def adk_eval_history(request: dict[str, Any]) -> Any:
    """An eval set file (`eval_set_path`) run by google-adk itself, as `adk eval` runs it (LocalEvalService, the local
    eval-set results manager writing `.adk/eval_history/`), with a scripted agent instead of a
    model: for each user message it replays `script[text]`, a list of steps (`{"call": name,
    "args": {...}, "result": {...}}` or `{"text": ...}`). Returns the file ADK wrote, verbatim."""
    import tempfile
    from collections.abc import AsyncGenerator
    from pathlib import Path

    from google.adk.agents import BaseAgent
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.evaluation.base_eval_service import (
        EvaluateConfig,
        EvaluateRequest,
        InferenceConfig,
        InferenceRequest,
    )
    from google.adk.evaluation.eval_metrics import EvalMetric, PrebuiltMetrics
    from google.adk.evaluation.in_memory_eval_sets_manager import InMemoryEvalSetsManager
    from google.adk.evaluation.local_eval_service import LocalEvalService
    from google.adk.evaluation.local_eval_set_results_manager import LocalEvalSetResultsManager
    from google.adk.evaluation.local_eval_sets_manager import load_eval_set_from_file
    from google.adk.events import Event
    from google.genai import types as genai

    script: dict[str, list[dict[str, Any]]] = request["script"]

    class ScriptedAgent(BaseAgent):
        async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
            said = "".join(p.text or "" for p in (ctx.user_content.parts or [])) if ctx.user_content else ""
            for step in script.get(said, []):
                if "call" in step:
                    call = genai.FunctionCall(name=step["call"], args=step["args"], id=step.get("id"))
                    yield Event(invocation_id=ctx.invocation_id, author=self.name,
                                content=genai.Content(role="model", parts=[genai.Part(function_call=call)]))
                    response = genai.FunctionResponse(name=step["call"], response=step.get("result") or {},
                                                      id=step.get("id"))
                    yield Event(invocation_id=ctx.invocation_id, author=self.name,
                                content=genai.Content(role="user", parts=[genai.Part(function_response=response)]))
                else:
                    yield Event(invocation_id=ctx.invocation_id, author=self.name,
                                content=genai.Content(role="model", parts=[genai.Part(text=step["text"])]))

    async def run(folder: str) -> str:
        app = "scripted_app"
        # ADK's own loader (it converts the older `.test.json` lists too).
        eval_set = load_eval_set_from_file(request["eval_set_path"], request["eval_set_id"])
        sets = InMemoryEvalSetsManager()
        sets.create_eval_set(app, eval_set.eval_set_id)
        for case in eval_set.eval_cases:
            sets.add_eval_case(app, eval_set.eval_set_id, case)
        results = LocalEvalSetResultsManager(agents_dir=folder)
        service = LocalEvalService(root_agent=ScriptedAgent(name="scripted"), eval_sets_manager=sets,
                                   eval_set_results_manager=results)
        inference = [r async for r in service.perform_inference(InferenceRequest(
            app_name=app, eval_set_id=eval_set.eval_set_id, inference_config=InferenceConfig(parallelism=1)))]
        metrics = [EvalMetric(metric_name=name, threshold=threshold) for name, threshold in request["metrics"]]
        async for _ in service.evaluate(EvaluateRequest(inference_results=inference,
                                                        evaluate_config=EvaluateConfig(eval_metrics=metrics,
                                                                                       parallelism=1))):
            pass
        [written] = list(Path(folder, app, ".adk", "eval_history").glob("*.evalset_result.json"))
        return written.read_text(encoding="utf-8")

    assert PrebuiltMetrics  # the metric names the request uses are ADK's own (checked by the test)
    with tempfile.TemporaryDirectory() as folder:
        return {"file": asyncio.run(run(folder))}


def agentflow_files(request: dict[str, Any]) -> Any:
    """What 10xscale-agentflow writes, by its own models: the eval set of `cases` (dicts of its
    `EvalCase` fields) as `EvalSet.model_dump_json()`, and the `EvalReport` of scoring each case's
    `execution` (tool calls, node visits, answer) with its criteria `criteria` ({name: config})."""
    from agentflow.qa.evaluation.config.eval_config import CriterionConfig
    from agentflow.qa.evaluation.criteria import CRITERIA_REGISTRY
    from agentflow.qa.evaluation.dataset.eval_set import EvalCase, EvalSet, ToolCall
    from agentflow.qa.evaluation.eval_result import EvalCaseResult, EvalReport
    from agentflow.qa.evaluation.execution.result import ExecutionResult

    cases = [EvalCase.model_validate(case) for case in request["cases"]]
    evalset = EvalSet(eval_set_id=request["eval_set_id"], name=request["name"], description="written by agentflow",
                      eval_cases=cases)
    results = []
    for case, execution in zip(cases, request["executions"], strict=True):
        actual = ExecutionResult(tool_calls=[ToolCall(name=c["name"], args=c["args"]) for c in execution["tool_calls"]],
                                 node_visits=execution["node_visits"], actual_response=execution["actual_response"])
        scored = [CRITERIA_REGISTRY[name](config=CriterionConfig.model_validate(config)).evaluate_sync(actual, case)
                  for name, config in request["criteria"].items()]
        results.append(EvalCaseResult.success(eval_id=case.eval_id, name=case.name, criterion_results=scored,
                                              actual_tool_calls=actual.tool_calls, node_visits=actual.node_visits,
                                              actual_response=actual.actual_response))
    report = EvalReport.create(eval_set_id=evalset.eval_set_id, results=results, eval_set_name=evalset.name)
    return {"evalset": evalset.model_dump_json(), "report": report.model_dump_json()}


def agentflow_reads(request: dict[str, Any]) -> Any:
    """An eval set text read back by 10xscale-agentflow's own model, as it dumps it."""
    from agentflow.qa.evaluation.dataset.eval_set import EvalSet

    return {"evalset": EvalSet.model_validate_json(request["text"]).model_dump_json()}


# --- DeepEval's LLM metrics with a scripted judge ------------------------------------------------

_STEP_ATTRIBUTES = ("statements", "truths", "claims", "opinions", "verdicts", "verdicts_list", "coverage_verdicts",
                    "alignment_verdicts", "score_breakdown", "evaluation_steps", "task", "outcome", "verdict",
                    "knowledges", "out_of_character_verdicts", "user_intentions", "assessment_questions")


def _plain(value: Any) -> Any:
    from enum import Enum

    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="json"))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def deepeval_judged(request: dict[str, Any]) -> Any:
    """One of DeepEval's LLM metrics measured (synchronously, as `async_mode=False` does) with
    a judge that answers from a script: `replies` maps a structured reply's class name to the
    texts to answer, in order (the last repeats). Returns the score, success, reason, the
    metric's intermediate steps, and each call's schema name and JSON schema."""
    import deepeval.metrics as metrics
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import ConversationalTestCase, LLMTestCase, SingleTurnParams, ToolCall, Turn

    replies: dict[str, list[str]] = {k: list(v) for k, v in request["replies"].items()}
    calls: list[dict[str, Any]] = []

    class ScriptedJudge(DeepEvalBaseLLM):
        def __init__(self) -> None:
            super().__init__(model="scripted-judge")

        def load_model(self, *args: Any, **kwargs: Any) -> Any:
            return self

        def generate(self, prompt: str, schema: Any = None, **kwargs: Any) -> str:
            name = schema.__name__ if schema is not None else ""
            calls.append({"schema": name, "json_schema": schema.model_json_schema() if schema is not None else None})
            queue = replies.get(name) or ["{}"]
            return queue.pop(0) if len(queue) > 1 else queue[0]

        async def a_generate(self, prompt: str, schema: Any = None, **kwargs: Any) -> str:
            return self.generate(prompt, schema=schema)

        def get_model_name(self, *args: Any, **kwargs: Any) -> str:
            return "scripted-judge"

    def tools(items: list[dict[str, Any]] | None) -> Any:
        if items is None:
            return None
        return [ToolCall(name=t["name"], input_parameters=t.get("input_parameters"), output=t.get("output"))
                for t in items]

    kwargs = dict(request.get("kwargs") or {})
    if "evaluation_params" in kwargs:
        kwargs["evaluation_params"] = [SingleTurnParams(p) for p in kwargs["evaluation_params"]]
    if "rubric" in kwargs and kwargs["rubric"] is not None:
        from deepeval.metrics.g_eval import Rubric

        kwargs["rubric"] = [Rubric(score_range=tuple(r["score_range"]), expected_outcome=r["expected_outcome"])
                            for r in kwargs["rubric"]]
    if "available_tools" in kwargs:
        kwargs["available_tools"] = tools(kwargs["available_tools"])
    metric = getattr(metrics, request["metric"])(model=ScriptedJudge(), async_mode=False, **kwargs)
    if "turns" in request:
        test_case: Any = ConversationalTestCase(
            turns=[Turn(role=t["role"], content=t["content"], tools_called=tools(t.get("tools_called")))
                   for t in request["turns"]],
            chatbot_role=request.get("chatbot_role"))
    else:
        fields = dict(request["test_case"])
        for key in ("tools_called", "expected_tools"):
            if key in fields:
                fields[key] = tools(fields[key])
        test_case = LLMTestCase(**fields)
    try:
        score = metric.measure(test_case, _show_indicator=False)
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}"[:500], "calls": calls}
    steps = {name: _plain(getattr(metric, name)) for name in _STEP_ATTRIBUTES if name in vars(metric)}
    return {"score": score if isinstance(score, int | float) else repr(score), "score_type": type(score).__name__,
            "success": metric.is_successful(), "threshold": metric.threshold, "reason": _plain(metric.reason),
            "steps": steps, "calls": calls}


def versions(request: dict[str, Any]) -> Any:
    from importlib import metadata

    return {name: metadata.version(name) for name in request["packages"]}


HANDLERS = {f.__name__: f for f in (versions, adk_eval_history, agentflow_files, agentflow_reads, adk_rouge,
                                      adk_trajectory, uipath, uipath_levenshtein, deepeval_tool_correctness,
                                      deepeval_exact_match, agentflow, deepeval_judged)}


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
