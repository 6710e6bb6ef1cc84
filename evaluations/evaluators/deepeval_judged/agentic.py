"""DeepEval's agentic metrics on evalsite's judge: task completion, argument correctness (both
single-turn, read from the case's input, the agent's answer and its tool calls) and tool use
(conversational: each user-to-agent exchange's tool choice and arguments against the tools
available), step by step as DeepEval 4.3.1's synchronous `measure` takes them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evaluations.evaluators.base import register
from evaluations.evaluators.deepeval_judged import prompts
from evaluations.evaluators.deepeval_judged import schemas as s
from evaluations.evaluators.deepeval_judged.conversational import _Conversational, unit_interactions
from evaluations.evaluators.deepeval_judged.core import Judge, JudgedOptions, Measured, Tool, qag_score
from evaluations.evaluators.deepeval_judged.rag import _SingleTurn, dumped
from evaluations.evaluators.deepeval_judged.schemas import YES_NO, Verdict
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput


class TaskCompletionOptions(JudgedOptions):
    task: str | None = None


@register
class TaskCompletion(_SingleTurn):
    """The judge's 0-1 verdict of how far the outcome accomplishes the task (the option's,
    else the one the judge reads from the exchange)."""

    name = "deepeval_task_completion"
    deepeval_name = "TaskCompletionMetric"
    title = "Task Completion"
    Options = TaskCompletionOptions
    required = ("input", "actual_output")

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        tools = [t.as_dict() for t in tc.tools_called or []]
        task, outcome = judge.extract(prompts.task_and_outcome(tc.input, tc.actual_output, tools), s.TaskAndOutcome,
                                      lambda d: (d["task"], d["outcome"]))
        if options.task is not None:
            task = options.task
        steps.update(task=task, outcome=outcome)
        verdict, reason = judge.extract(prompts.task_verdict(task, outcome), s.TaskCompletionVerdict,
                                        lambda d: (d["verdict"], d["reason"]))
        if isinstance(verdict, bool) or not isinstance(verdict, int | float):
            raise ValueError(f"the judge's verdict is not a number: {verdict!r}")
        steps["verdict"] = verdict
        score = 0 if options.strict_mode and verdict < threshold else verdict
        return Measured(score, reason if options.include_reason else None, steps)


@register
class ArgumentCorrectness(_SingleTurn):
    """The share of the agent's tool calls whose arguments the judge finds right for the
    input; no tool call scores 1 without a call."""

    name = "deepeval_argument_correctness"
    deepeval_name = "ArgumentCorrectnessMetric"
    title = "Argument Correctness"
    required = ("input", "tools_called")

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        tc = self.test_case(case, output)
        tools = tc.tools_called or []
        if len(tools) == 0:
            steps["verdicts"] = []
            return Measured(1.0, "No tool calls provided", steps)
        verdicts = judge.verdicts(prompts.argument_verdicts(tc.input or "", [t.as_dict() for t in tools]),
                                  s.ArgumentCorrectnessVerdicts, s.ArgumentCorrectnessVerdict, YES_NO)
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.YES,), strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            wrong = [v.reason for v in verdicts if v.verdict == Verdict.NO]
            reason = judge.reason(prompts.reason("argument correctness", format(score, ".2f"), request=tc.input,
                                                 incorrect_calls=wrong), s.ArgumentCorrectnessScoreReason)
        return Measured(score, reason, steps)


class AvailableTool(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    description: str | None = None
    input_parameters: dict[str, Any] | None = None


class ToolUseOptions(JudgedOptions):
    available_tools: list[AvailableTool] = Field(min_length=1)


def _tools_text(tools: list[Any]) -> str:
    return ",".join(repr(t.as_dict() if isinstance(t, Tool) else t.model_dump(exclude_none=True)) for t in tools)


@register
class ToolUse(_Conversational):
    """The smaller of the mean tool-selection score over the exchanges and the mean argument
    score over the exchanges that called a tool (an empty mean is 0)."""

    name = "deepeval_tool_use"
    deepeval_name = "ToolUseMetric"
    title = "Tool Use"
    Options = ToolUseOptions

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        turns = self.turns(case, output)
        available = _tools_text(options.available_tools)
        exchanges = []
        for unit in unit_interactions(turns):
            if len(unit) < 2:
                continue
            user = assistant = ""
            called: list[Tool] = []
            used = False
            for turn in unit:
                if turn.role != "user":
                    break
                user += f"{turn.content} \n"
            for turn in unit[1:]:
                if turn.role == "assistant":
                    assistant += f"{turn.content} \n"
                    if turn.tools_called:
                        called.extend(turn.tools_called)
                        used = True
            exchanges.append((user, assistant, _tools_text(called), used))
        selection = [judge.extract(prompts.tool_selection(u, a, c, available), s.ToolSelectionScore,
                                   lambda d: s.ToolSelectionScore(**d)) for u, a, c, _ in exchanges]
        arguments = [judge.extract(prompts.argument_quality(u, a, c, available), s.ArgumentCorrectnessScore,
                                   lambda d: s.ArgumentCorrectnessScore(**d)) for u, a, c, used in exchanges if used]
        steps["tool_selection"] = [x.model_dump() for x in selection]
        steps["argument_correctness"] = [x.model_dump() for x in arguments]
        selection_mean = sum(x.score for x in selection) / (len(selection) or 1)
        argument_mean = sum(x.score for x in arguments) / (len(arguments) or 1)
        score = min(selection_mean, argument_mean)
        score = 0 if options.strict_mode and score < threshold else score
        reasons = []
        for found in (selection, arguments):
            text = "".join(f"\nScore: {x.score} \nReason: {x.reason} \n" for x in found)
            reasons.append(judge.reason(prompts.tool_use_reason(text, score, threshold), s.Reason))
        reason = "\n".join(reasons)
        return Measured(score, reason if options.include_reason else None, steps)
