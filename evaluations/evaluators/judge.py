"""LLM-as-a-judge evaluators.

`llm_judge` (Upsonic's accuracy evaluation, with AgentFlow's weighted rubrics): for each turn
that has an expected final response or rubrics, the judge model sees the user's input, the
expected answer, the agent's answer and the guidelines, and answers Upsonic's
`EvaluationScore` (score 1-10, reasoning, is_met, critique) as JSON. With `iterations` > 1 it
is asked that many times and the scores are averaged into an `AccuracyEvaluationResult`.

Rubrics come from the criterion config, the case and the invocation (a more specific rubric
replaces a broader one of the same name). With rubrics, the judge scores each rubric
separately (one call per rubric and iteration) and the turn's 1-10 value is the weighted mean
of the rubric averages, weighted by `Rubric.weight`.

Scores: `raw_value` is the 1-10 value (the average, or the weighted rubric mean); `score` maps
it onto [0, 1] as `(raw_value - 1) / 9`, so 1 -> 0.0, 5.5 -> 0.5, 10 -> 1.0 (with rubrics this
equals the weighted mean of the normalised rubric scores). The criterion threshold applies to
`score`. A turn the agent never answered scores 0 without a call. The conversation score is the
mean of the turn scores. A failed LLM call (unreachable, timed out, unparseable reply) is
recorded as the turn's `error`, never raised.

UiPath's LLM judges (`uipath-llm-judge-output-semantic-similarity`, `...-strict-json-similarity`,
the base id `uipath-llm-judge-output`, and the importer's `uipath-legacy-llm-as-a-judge`) run
on the same client with UiPath's semantics: the definition's `prompt` with `{{ActualOutput}}`
and `{{ExpectedOutput}}` replaced by `str()` of the values (missing placeholders are appended in
tagged sections, as UiPath does), the model answers `{justification, score}` with a score from
0 to 100, and the evaluator's score is that divided by 100 (rounded to 2 places for the
current evaluators, as UiPath does); `raw_value` keeps the 0-100 value.

UiPath's trajectory judges (`uipath-llm-judge-trajectory-similarity`, `...-simulation`, the
base id `uipath-llm-judge-trajectory`, and the importer's `uipath-legacy-trajectory`, which is
also what legacy "LLM as a judge" definitions of category 3 are) put the criterion's
`expectedAgentBehavior` in `{{ExpectedAgentBehavior}}` and the run (`run_history`: tool calls
with arguments and results, and answers, as JSON) in `{{AgentRunHistory}}`, and fill
`{{UserOrSyntheticInput}}` and `{{SimulationInstructions}}`.

The model is the criterion's `judge_model` when the config sets one other than the schema's
default `gpt-4o-mini` (for UiPath, the definition's `model` unless it is empty or
"same-as-agent"), else the client's default (`EVALSITE_LLM_MODEL`, itself `gpt-4o-mini` when
unset, so AgentFlow's default holds either way).

Every score a judge writes carries `justification["judge"] = {"model", "prompt_version"}`
(`stamp_judge`): the model asked, and a fingerprint of what it was asked (the judge's fixed
prompts and the criterion's own wording: guidelines, rubrics, UiPath's prompt). Judge
calibration (`evaluations.review.calibration`) groups human grades by the two.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluations.evaluators.base import Evaluator, Level, ScoreResult, Threshold, aligned_turns, register, text_of
from evaluations.evaluators.llm import ChatClient, LLMError
from evaluations.evaluators.output import (
    Unscorable,
    actual_value,
    as_structured,
    expected_value,
    mean_result,
    options_error,
    resolve_output_path,
)
from evaluations.evaluators.uipath import NOT_SCORED, UiPathOptions, uipath_actual, uipath_criteria, uipath_target
from evaluations.schemas.evalset import CriterionConfig, EvalCase, Rubric
from evaluations.schemas.outputs import AgentOutput
from evaluations.schemas.results import AccuracyEvaluationResult, EvaluationScore

# --- Upsonic-style judge ------------------------------------------------------------------------

JUDGE_SYSTEM_PROMPT = """You are an impartial, careful evaluator of AI agents. You compare an \
agent's answer with the user's request, a reference answer and the evaluation guidelines, and \
you judge it on a scale from 1 (wrong or useless) to 10 (fully correct and complete). A \
scoring guide on another scale is to be mapped proportionally onto 1-10.

Answer with one JSON object, and nothing else, with these keys:
- "reasoning": your step-by-step analysis, referring to the request, the reference and the guidelines;
- "score": a number from 1 to 10;
- "is_met": true if the answer meets the core requirements and intent of the reference answer;
- "critique": concrete advice on how the answer could have been better ("none" if it was perfect)."""


def prompt_version(*parts: Any) -> str:
    """A short fingerprint of what a judge is asked: its fixed prompts and the criterion's
    wording. Another wording gives another version; the agent's answers do not enter it."""
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def stamp_judge(results: list[ScoreResult], *, model: str, version: str) -> list[ScoreResult]:
    """Mark every score of a judged criterion (the conversation's too) with its judge."""
    for result in results:
        result.justification["judge"] = {"model": model, "prompt_version": version}
    return results


def normalise(raw: float) -> float:
    """A 1-10 judge value on [0, 1]."""
    return max(0.0, min(1.0, (raw - 1.0) / 9.0))


def merge_rubrics(*sources: list[Rubric]) -> list[Rubric]:
    merged: dict[str, Rubric] = {}
    for rubrics in sources:
        for rubric in rubrics:
            merged.pop(rubric.name, None)  # a more specific rubric replaces a broader one
            merged[rubric.name] = rubric
    return list(merged.values())


def judge_prompt(*, query: str, expected: str, actual: str, guidelines: str, rubric: Rubric | None) -> str:
    parts = [
        "<UserQuery>", query or "(none)", "</UserQuery>",
        "",
        "<ExpectedAnswer>",
        "The reference answer (the ground truth):" if expected else "No reference answer is given.",
        expected, "</ExpectedAnswer>",
        "",
        "<GeneratedAnswer>", "The answer of the agent under evaluation:", actual, "</GeneratedAnswer>",
        "",
        "<EvaluationGuidelines>", guidelines or "No additional guidelines.", "</EvaluationGuidelines>",
    ]
    if rubric is not None:
        parts += ["", "<Rubric>", f"Judge only this criterion: {rubric.name}.",
                  f"What to evaluate: {rubric.description}"]
        if rubric.scoring_guide:
            parts.append(f"How to score: {rubric.scoring_guide}")
        parts.append("</Rubric>")
    return "\n".join(parts)


class JudgeOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    iterations: int = Field(1, ge=1, le=50)
    guidelines: str = ""  # Upsonic's additional_guidelines
    temperature: float | None = 0.0
    max_tokens: int | None = None
    # ADK's judge settings as the importer keeps them; `num_samples` stands for `iterations`.
    judge_model_options: dict[str, Any] | None = None


@dataclass
class _Item:
    """One thing to judge: a turn, or a scenario-driven conversation."""

    index: int
    level: Level
    query: str
    expected: str
    actual: str | None
    rubrics: list[Rubric]


@dataclass
class _Usage:
    calls: int = 0
    tokens: dict[str, int] = field(default_factory=dict)

    def add(self, usage: dict[str, Any]) -> None:
        self.calls += 1
        for key, value in usage.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.tokens[key] = self.tokens.get(key, 0) + value

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, **self.tokens}


_DEFAULT_JUDGE_MODEL = CriterionConfig.model_fields["judge_model"].default


def explicit_model(config: CriterionConfig) -> str | None:
    """The criterion's judge model, unless it is the field's default: configs are stored with
    every field filled in, so the default cannot be told from a choice, and it must not
    override the deployment's own model (`EVALSITE_LLM_MODEL`, itself gpt-4o-mini by default)."""
    return config.judge_model if config.judge_model != _DEFAULT_JUDGE_MODEL else None


@register
class LLMJudgeEvaluator(Evaluator):
    name = "llm_judge"
    group = "llm_judge"
    calls_judge = True  # scored on the judge threads of a run (runs/engine.py)
    Options = JudgeOptions

    def __init__(self, client: ChatClient | None = None) -> None:
        self.client = client if client is not None else ChatClient()

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options: JudgeOptions = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        threshold = self.threshold(config)
        model = explicit_model(config)
        iterations = options.iterations
        if "iterations" not in options.model_fields_set and options.judge_model_options:
            samples = options.judge_model_options.get("num_samples")
            if isinstance(samples, int) and samples > 0:
                iterations = samples
        items = self._items(case, output, config)
        if not items:
            return []
        results = [self._judge(criterion, item, options, iterations, model, threshold) for item in items]
        if len(results) != 1 or results[0].applies_to is not Level.CONVERSATION:
            results = [*results, mean_result(criterion, results, threshold)]
        version = prompt_version(self.name, JUDGE_SYSTEM_PROMPT, options.guidelines,
                                 [r.model_dump() for r in config.rubrics])
        return stamp_judge(results, model=model or self.client.model, version=version)

    def _items(self, case: EvalCase, output: AgentOutput, config: CriterionConfig) -> list[_Item]:
        items: list[_Item] = []
        for index, (invocation, turn) in enumerate(aligned_turns(case, output)):
            rubrics = merge_rubrics(config.rubrics, case.rubrics, invocation.rubrics)
            if invocation.expected_final_response is None and not rubrics:
                continue
            expected = text_of(expected_value(invocation.expected_final_response))
            actual = text_of(actual_value(turn.final_response)) if turn is not None else None
            items.append(_Item(index, Level.INTERACTION, invocation.user_content.get_text(), expected, actual,
                               rubrics))
        scenario = case.conversation_scenario
        if not case.conversation and scenario is not None and output.turns:
            # A simulated conversation: judge the whole exchange against the expected outcome.
            lines = []
            for turn in output.turns:
                user = turn.metadata.get("user_content") or turn.metadata.get("user_message")
                if user:
                    lines.append(f"user: {text_of(user)}")
                lines.append(f"agent: {text_of(actual_value(turn.final_response))}")
            query = "\n".join(p for p in (scenario.starting_prompt or "", scenario.conversation_plan) if p)
            items.append(_Item(-1, Level.CONVERSATION, query, scenario.expected_outcome or "", "\n".join(lines),
                               merge_rubrics(config.rubrics, case.rubrics)))
        return items

    def _judge(self, criterion: str, item: _Item, options: JudgeOptions, iterations: int, model: str | None,
               threshold: Threshold) -> ScoreResult:
        base: dict[str, Any] = {"criterion": criterion, "applies_to": item.level, "turn_index": item.index,
                                "threshold": threshold}
        if item.actual is None:
            return ScoreResult(**base, score=0.0, passed=threshold.passes(0.0),
                               justification={"expected": item.expected, "actual": None, "no_response": True,
                                              "reason": "the agent gave no response for this turn"})
        usage = _Usage()
        try:
            if not item.rubrics:
                accuracy = self._accuracy(item, None, options, iterations, model, usage)
                raw = accuracy.average_score
                justification: dict[str, Any] = {
                    "accuracy": accuracy.model_dump(),
                    "is_met": _majority(accuracy),
                }
            else:
                rubric_results = []
                for rubric in item.rubrics:
                    accuracy = self._accuracy(item, rubric, options, iterations, model, usage)
                    rubric_results.append((rubric, accuracy))
                raw = _weighted_mean(rubric_results)
                justification = {
                    "rubrics": [
                        {"name": r.name, "description": r.description, "scoring_guide": r.scoring_guide,
                         "weight": r.weight, "average_score": a.average_score,
                         "score": normalise(a.average_score), "is_met": _majority(a), "accuracy": a.model_dump()}
                        for r, a in rubric_results
                    ],
                    "is_met": all(_majority(a) for _, a in rubric_results),
                }
        except (LLMError, ValueError) as exc:
            return ScoreResult(**base, score=None, passed=None,
                               justification={"expected": item.expected, "actual": item.actual,
                                              "usage": usage.as_dict()},
                               error=f"LLM judge failed: {exc}")
        score = normalise(raw)
        justification = {"expected": item.expected, "actual": item.actual, "average_score": raw,
                         "iterations": iterations, "model": model or self.client.model, **justification,
                         "usage": usage.as_dict()}
        return ScoreResult(**base, score=score, passed=threshold.passes(score), raw_value=raw,
                           justification=justification)

    def _accuracy(self, item: _Item, rubric: Rubric | None, options: JudgeOptions, iterations: int,
                  model: str | None, usage: _Usage) -> AccuracyEvaluationResult:
        assert item.actual is not None
        prompt = judge_prompt(query=item.query, expected=item.expected, actual=item.actual,
                              guidelines=options.guidelines, rubric=rubric)
        messages = [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": prompt}]
        scores: list[EvaluationScore] = []
        for _ in range(iterations):
            reply = self.client.structured(messages, EvaluationScore, model=model, temperature=options.temperature,
                                           max_tokens=options.max_tokens)
            usage.add(reply.raw.usage)
            scores.append(reply.value)
        return AccuracyEvaluationResult(
            evaluation_scores=scores,
            average_score=sum(s.score for s in scores) / len(scores),
            user_query=item.query,
            expected_output=item.expected,
            generated_output=item.actual,
        )


def _majority(accuracy: AccuracyEvaluationResult) -> bool:
    met = sum(1 for s in accuracy.evaluation_scores if s.is_met)
    return met * 2 > len(accuracy.evaluation_scores)


def _weighted_mean(results: list[tuple[Rubric, AccuracyEvaluationResult]]) -> float:
    if any(r.weight < 0 for r, _ in results):
        raise ValueError("rubric weights must not be negative")
    total = sum(r.weight for r, _ in results)
    if total == 0:
        raise ValueError("the rubric weights add up to 0")
    return sum(r.weight * a.average_score for r, a in results) / total


# --- UiPath judges --------------------------------------------------------------------------------

ACTUAL = "{{ActualOutput}}"
EXPECTED = "{{ExpectedOutput}}"
BEHAVIOUR = "{{ExpectedAgentBehavior}}"
HISTORY = "{{AgentRunHistory}}"
USER_INPUT = "{{UserOrSyntheticInput}}"
SIMULATION = "{{SimulationInstructions}}"

UIPATH_SYSTEM_PROMPT = """You are an expert evaluator. You are given an evaluation criterion and \
the outputs to judge. Analyse them against the criterion and give a score from 0 to 100: 0 when \
the criterion is not met at all, 100 when it is fully met.

Answer with one JSON object, and nothing else: {"justification": "<your analysis, written before \
deciding the score>", "score": <a number from 0 to 100>}."""

UIPATH_STRICT_JSON_SYSTEM_PROMPT = """You are an impartial grader of JSON outputs. List the keys \
of the expected output (N keys) and check, key by key and by exact name, whether the actual \
output has it and whether its value is identical, similar or different. Start from 100 and \
subtract 100/N for each missing key, 100/N for each key with a clearly different value, 50/N for \
each key with a similar value and 10/N for each extra key; never go below 0. Identical inputs must \
always get identical scores.

Answer with one JSON object, and nothing else: {"justification": "<the key-by-key analysis and \
the arithmetic>", "score": <a number from 0 to 100>}."""

# Used when a definition brings no prompt of its own.
UIPATH_DEFAULT_PROMPT = (
    "Judge how semantically similar the actual output is to the expected output, field by field, "
    "allowing synonyms, other valid phrasings and reasonable variations while holding accuracy and "
    "completeness to a high standard. Score from 0 to 100 and justify the score briefly.\n"
    "----\nExpectedOutput:\n" + EXPECTED + "\n----\nActualOutput:\n" + ACTUAL
)
UIPATH_STRICT_JSON_DEFAULT_PROMPT = (
    "ExpectedOutput (ground truth):\n" + EXPECTED + "\n\nActualOutput (model answer):\n" + ACTUAL
)


def with_placeholders(prompt: str, actual: str = ACTUAL, expected: str = EXPECTED) -> str:
    """UiPath's rule: a prompt lacking a placeholder gets it appended in a tagged section."""
    if actual not in prompt:
        prompt += f"\n\n## Actual Output\n<ActualOutput>\n{actual}\n</ActualOutput>"
    if expected not in prompt:
        prompt += f"\n\n## Expected Output\n<ExpectedOutput>\n{expected}\n</ExpectedOutput>"
    return prompt


class UiPathVerdict(BaseModel):
    justification: str
    score: float = Field(ge=0, le=100)


class UiPathJudgeOptions(UiPathOptions):
    prompt: str | None = None
    model: str = ""
    temperature: float = 0.0
    max_tokens: int | None = None
    iterations: int = Field(1, ge=1, le=50)  # an evalsite extension: UiPath asks once


@dataclass
class _Rendered:
    prompt: str
    expected: Any
    actual: Any


class _UiPathJudge(Evaluator):
    group = "llm_judge"
    calls_judge = True  # scored on the judge threads of a run (runs/engine.py)
    Options: ClassVar[type[BaseModel]] = UiPathJudgeOptions
    system_prompt: ClassVar[str] = UIPATH_SYSTEM_PROMPT
    default_prompt: ClassVar[str] = UIPATH_DEFAULT_PROMPT
    round_score: ClassVar[bool] = True

    def __init__(self, client: ChatClient | None = None) -> None:
        self.client = client if client is not None else ChatClient()

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options: UiPathJudgeOptions = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        threshold = self.threshold(config)
        base: dict[str, Any] = {"criterion": criterion, "threshold": threshold}
        try:
            criteria = uipath_criteria(case, criterion, options)
            if criteria is NOT_SCORED:
                return []  # the case does not name this evaluator
            rendered = self.render(case, criteria, output, options)
        except Unscorable as exc:
            return [ScoreResult(**base, score=None, passed=None, error=str(exc))]
        model = options.model if options.model and options.model != "same-as-agent" else explicit_model(config)
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": rendered.prompt}]
        verdicts: list[UiPathVerdict] = []
        usage = _Usage()
        try:
            for _ in range(options.iterations):
                reply = self.client.structured(messages, UiPathVerdict, model=model or None,
                                               temperature=options.temperature, max_tokens=options.max_tokens)
                usage.add(reply.raw.usage)
                verdicts.append(reply.value)
        except LLMError as exc:
            return [ScoreResult(**base, score=None, passed=None, error=f"LLM judge failed: {exc}",
                                justification={"expected": str(rendered.expected), "actual": str(rendered.actual),
                                               "usage": usage.as_dict()})]
        raw = sum(v.score for v in verdicts) / len(verdicts)
        score = max(0.0, min(1.0, round(raw / 100.0, 2) if self.round_score else raw / 100.0))
        justification = {
            "expected": str(rendered.expected),
            "actual": str(rendered.actual),
            "justification": verdicts[-1].justification,
            "verdicts": [v.model_dump() for v in verdicts],
            "model": model or self.client.model,
            "usage": usage.as_dict(),
        }
        version = prompt_version(self.name, self.system_prompt, options.prompt or self.default_prompt)
        return stamp_judge([ScoreResult(**base, score=score, passed=threshold.passes(score), raw_value=raw,
                                        justification=justification)],
                           model=model or self.client.model, version=version)

    def render(self, case: EvalCase, criteria: dict[str, Any], output: AgentOutput,
               options: UiPathJudgeOptions) -> _Rendered:
        expected = uipath_target(_expected_output(criteria), options.target_output_key, "expected")
        actual = uipath_target(uipath_actual(output), options.target_output_key, "actual")
        prompt = with_placeholders(options.prompt or self.default_prompt)
        return _Rendered(prompt.replace(ACTUAL, str(actual)).replace(EXPECTED, str(expected)), expected, actual)


def _expected_output(criteria: dict[str, Any]) -> Any:
    for key in ("expectedOutput", "expected_output"):
        if key in criteria:
            return criteria[key]
    raise Unscorable("the criterion has no expectedOutput")


@register
class UiPathLLMJudgeOutputEvaluator(_UiPathJudge):
    """`LLMJudgeOutputEvaluator`: semantic similarity of the expected and actual outputs."""

    name = "uipath-llm-judge-output-semantic-similarity"


@register
class UiPathLLMJudgeOutputBaseEvaluator(_UiPathJudge):
    """UiPath's base id for output judges (`EvaluatorType.LLM_JUDGE_OUTPUT`)."""

    name = "uipath-llm-judge-output"


@register
class UiPathLLMJudgeStrictJsonEvaluator(_UiPathJudge):
    """`LLMJudgeStrictJSONSimilarityOutputEvaluator`: a key-by-key grading of JSON outputs."""

    name = "uipath-llm-judge-output-strict-json-similarity"
    system_prompt = UIPATH_STRICT_JSON_SYSTEM_PROMPT
    default_prompt = UIPATH_STRICT_JSON_DEFAULT_PROMPT


class UiPathLegacyJudgeOptions(UiPathJudgeOptions):
    model: str = "same-as-agent"


@register
class UiPathLegacyLLMJudgeEvaluator(_UiPathJudge):
    """`LegacyLlmAsAJudgeEvaluator`: the definition's prompt (required); `targetOutputKey` picks
    a key on each side where it exists and keeps the whole value where it does not; an empty
    expected output is an error; the score is not rounded. `{{ExpectedAgentBehavior}}` and
    `{{UserOrSyntheticInput}}` are filled in too, for prompts that use them."""

    name = "uipath-legacy-llm-as-a-judge"
    Options = UiPathLegacyJudgeOptions
    round_score = False

    def render(self, case: EvalCase, criteria: dict[str, Any], output: AgentOutput,
               options: UiPathJudgeOptions) -> _Rendered:
        actual = uipath_actual(output)
        if not options.prompt:
            raise Unscorable("the legacy LLM judge definition has no prompt")
        expected = _expected_output(criteria)
        path = options.target_output_key
        if path and path != "*":
            expected = _keep_if_missing(expected, path)
            actual = _keep_if_missing(actual, path)
        if expected in (None, "", {}, []) or (isinstance(expected, dict) and all(
                v in (None, "", {}, []) for v in expected.values())):
            raise Unscorable("the expected output is empty")
        prompt = with_placeholders(options.prompt)
        prompt = prompt.replace(BEHAVIOUR, str(_behaviour(criteria) or ""))
        prompt = prompt.replace(USER_INPUT, str(agent_input(case)))
        return _Rendered(prompt.replace(ACTUAL, str(actual)).replace(EXPECTED, str(expected)), expected, actual)


def _keep_if_missing(value: Any, path: str) -> Any:
    try:
        return resolve_output_path(as_structured(value), path)
    except (KeyError, IndexError, TypeError):
        return value


def _behaviour(criteria: dict[str, Any]) -> Any:
    return next((criteria[k] for k in ("expectedAgentBehavior", "expected_agent_behavior") if k in criteria), None)


def agent_input(case: EvalCase) -> Any:
    """The agent's input as UiPath passes it: the first user message's value (UiPath's
    `inputs` object for imported sets)."""
    return expected_value(case.conversation[0].user_content) if case.conversation else ""


def run_history(output: AgentOutput) -> str:
    """The run as the judge reads it (UiPath renders its trace spans): every tool call with its
    arguments and result, and every answer, turn by turn."""
    steps: list[dict[str, Any]] = []
    for number, turn in enumerate(output.turns, 1):
        for call in turn.tool_calls:
            step: dict[str, Any] = {"turn": number, "tool": call.name, "args": call.args, "result": call.result}
            if call.error:
                step["error"] = call.error
            steps.append(step)
        if turn.final_response is not None:
            steps.append({"turn": number, "agent_response": actual_value(turn.final_response)})
        if turn.error:
            steps.append({"turn": number, "error": turn.error})
    if output.error:
        steps.append({"error": output.error})
    return json.dumps(steps, ensure_ascii=False, default=str, indent=1)


# UiPath's trajectory judges: the expected agent behaviour against the run history.

UIPATH_TRAJECTORY_SYSTEM_PROMPT = """You are an expert evaluator of AI agents. You are given the \
behaviour expected of an agent and the history of its run (its tool calls, their results and its \
answers). Judge how well the agent's actions and outputs match the expected behaviour, allowing \
for other valid ways to reach the same result. Score from 0 (not at all) to 100 (fully).

Answer with one JSON object, and nothing else: {"justification": "<your analysis, including the \
expected and the actual behaviour, written before deciding the score>", "score": <a number from \
0 to 100>}."""

UIPATH_SIMULATION_SYSTEM_PROMPT = """You are an expert evaluator of AI agents run in a simulation, \
where the tool responses were mocked following the simulation instructions (the agent did not \
know). Given those instructions, the behaviour expected of the agent and the history of its run, \
judge whether the simulation succeeded and the agent behaved as expected. Score from 0 (not at \
all) to 100 (fully).

Answer with one JSON object, and nothing else: {"justification": "<your analysis, written before \
deciding the score>", "score": <a number from 0 to 100>}."""

UIPATH_TRAJECTORY_DEFAULT_PROMPT = (
    "Judge, from 0 to 100, how well the agent's actions and outputs matched the expected behaviour, "
    "allowing other valid ways and wordings, with high standards of accuracy and completeness; "
    "justify the score briefly.\n----\nUserOrSyntheticInputGivenToAgent:\n" + USER_INPUT
    + "\n----\nExpectedAgentBehavior:\n" + BEHAVIOUR + "\n----\nAgentRunHistory:\n" + HISTORY + "\n"
)
UIPATH_SIMULATION_DEFAULT_PROMPT = (
    "Judge, from 0 to 100, whether the simulation succeeded and the agent behaved as expected, "
    "allowing other valid ways and wordings, with high standards of accuracy and completeness; "
    "justify the score briefly.\n----\nUserOrSyntheticInputGivenToAgent:\n" + USER_INPUT
    + "\n----\nSimulationInstructions:\n" + SIMULATION + "\n----\nExpectedAgentBehavior:\n" + BEHAVIOUR
    + "\n----\nAgentRunHistory:\n" + HISTORY + "\n"
)


def _simulation_instructions(case: EvalCase) -> str:
    value = case.metadata.get("simulationInstructions", case.metadata.get("simulation_instructions"))
    return str(value) if value else ""


@register
class UiPathLLMJudgeTrajectoryEvaluator(_UiPathJudge):
    """`LLMJudgeTrajectoryEvaluator`: `{{ExpectedAgentBehavior}}` (the criterion's
    `expectedAgentBehavior`) against `{{AgentRunHistory}}` (`run_history`); also fills
    `{{UserOrSyntheticInput}}` and `{{SimulationInstructions}}` (the case's
    `simulationInstructions`)."""

    name = "uipath-llm-judge-trajectory-similarity"
    system_prompt = UIPATH_TRAJECTORY_SYSTEM_PROMPT
    default_prompt = UIPATH_TRAJECTORY_DEFAULT_PROMPT

    def render(self, case: EvalCase, criteria: dict[str, Any], output: AgentOutput,
               options: UiPathJudgeOptions) -> _Rendered:
        behaviour = _behaviour(criteria)
        if behaviour is None:
            raise Unscorable("the criterion has no expectedAgentBehavior")
        history = run_history(output)
        prompt = with_placeholders(options.prompt or self.default_prompt, actual=HISTORY, expected=BEHAVIOUR)
        prompt = prompt.replace(HISTORY, history).replace(BEHAVIOUR, str(behaviour))
        prompt = prompt.replace(USER_INPUT, str(agent_input(case)))
        prompt = prompt.replace(SIMULATION, _simulation_instructions(case))
        return _Rendered(prompt, behaviour, history)


@register
class UiPathLLMJudgeTrajectoryBaseEvaluator(UiPathLLMJudgeTrajectoryEvaluator):
    """UiPath's base id for trajectory judges (`EvaluatorType.LLM_JUDGE_TRAJECTORY`)."""

    name = "uipath-llm-judge-trajectory"


@register
class UiPathLLMJudgeTrajectorySimulationEvaluator(UiPathLLMJudgeTrajectoryEvaluator):
    """`LLMJudgeTrajectorySimulationEvaluator`: the same, judged as a simulated run."""

    name = "uipath-llm-judge-trajectory-simulation"
    system_prompt = UIPATH_SIMULATION_SYSTEM_PROMPT
    default_prompt = UIPATH_SIMULATION_DEFAULT_PROMPT


@register
class UiPathLegacyTrajectoryEvaluator(UiPathLLMJudgeTrajectoryEvaluator):
    """`LegacyTrajectoryEvaluator` (legacy category 3, which is also what the calculator
    sample's "LLMAsAJudge" definitions are): the definition's prompt must hold
    `{{ExpectedAgentBehavior}}` and `{{AgentRunHistory}}`; an empty expected behaviour is an
    error; the score is not rounded."""

    name = "uipath-legacy-trajectory"
    Options = UiPathLegacyJudgeOptions
    round_score = False

    def render(self, case: EvalCase, criteria: dict[str, Any], output: AgentOutput,
               options: UiPathJudgeOptions) -> _Rendered:
        if not options.prompt or BEHAVIOUR not in options.prompt or HISTORY not in options.prompt:
            raise Unscorable(f"the legacy trajectory prompt must contain {BEHAVIOUR} and {HISTORY}")
        behaviour = _behaviour(criteria)
        if behaviour in (None, "") or (isinstance(behaviour, str) and not behaviour.strip()):
            raise Unscorable("the expected agent behavior is empty")
        return super().render(case, criteria, output, options)
