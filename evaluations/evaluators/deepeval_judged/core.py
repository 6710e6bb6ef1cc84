"""What every judged DeepEval metric shares: asking the judge for a structured reply and
reading it as DeepEval 4.3.1 reads a custom model's text reply (`trimAndLoadJson`, then the
metric's own extraction), the verdict vocabulary and its normalisation, the share-of-verdicts
score with strict mode, the test case a case and an output make, and the evaluator base class.

Reading a reply: the text from the first `{` to the last `}` (a missing closing brace is
added), parsed as JSON, a trailing comma before `]` or `}` forgiven on a second try; a
verdict is stripped, lower-cased and cut to its first word (`"No, it is off-topic"` is `no`;
`idk` is `borderline`), and a verdict outside the metric's vocabulary is dropped. Anything
DeepEval raises on (a reply that is not JSON, a missing key, a field of the wrong type) is an
error on the score, with the steps taken so far and what the calls cost.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluations.evaluators.base import Evaluator, ScoreResult, Threshold, text_of
from evaluations.evaluators.deepeval_judged import prompts
from evaluations.evaluators.deepeval_judged.schemas import YES_NO, Verdict
from evaluations.evaluators.judge import explicit_model, prompt_version, stamp_judge
from evaluations.evaluators.llm import ChatClient, Spend
from evaluations.evaluators.output import actual_value, expected_value, options_error
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput

R = TypeVar("R")
DEFAULT_THRESHOLD = 0.5  # every DeepEval metric's default
# What the judge is asked changes with prompts.py: its text is part of each score's prompt
# version, so judge calibration tells one wording from another.
PROMPTS_FINGERPRINT = hashlib.sha256(Path(prompts.__file__).read_bytes()).hexdigest()[:16]
LEGACY_ALIASES = {"idk": Verdict.BORDERLINE}


class JudgeReplyError(ValueError):
    """The judge's reply could not be read (DeepEval raises here too)."""


# --- Reading replies -----------------------------------------------------------------------------


def trim_and_load_json(text: str | None) -> Any:
    if text is None:
        raise JudgeReplyError("the judge's reply is not valid JSON")
    start, end = text.find("{"), text.rfind("}") + 1
    if end == 0 and start != -1:
        text = text + "}"
        end = len(text)
    body = text[start:end] if start != -1 and end != 0 else ""
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        try:
            return json.loads(re.sub(r",\s*([\]}])", r"\1", body))
        except json.JSONDecodeError:
            raise JudgeReplyError(f"the judge's reply is not valid JSON: {text[:200]!r}") from None


def normalize_verdict(raw: Any, allowed: tuple[Verdict, ...] = YES_NO) -> Verdict | None:
    if isinstance(raw, Verdict):
        return raw if raw in allowed else None
    match = re.match(r"[a-z]+", str(raw if raw is not None else "").strip().lower())
    leading = match.group(0) if match else ""
    verdict = LEGACY_ALIASES.get(leading)
    if verdict is None:
        try:
            verdict = Verdict(leading)
        except ValueError:
            return None
    return verdict if verdict in allowed else None


V = TypeVar("V", bound=BaseModel)


def verdict_from_json(data: dict[str, Any], verdict_cls: type[V], allowed: tuple[Verdict, ...]) -> V | None:
    normalized = normalize_verdict(data.get("verdict"), allowed)
    if normalized is None:
        return None
    return verdict_cls(**{**data, "verdict": normalized})


def verdicts_from_json(data: dict[str, Any], verdict_cls: type[V], allowed: tuple[Verdict, ...]) -> list[V]:
    verdicts: list[V] = []
    for item in data.get("verdicts", []) or []:
        verdict = verdict_from_json(item, verdict_cls, allowed)
        if verdict is not None:
            verdicts.append(verdict)
    return verdicts


def qag_score(verdicts: list[Any], *, passing: tuple[Verdict, ...], strict: bool, threshold: float,
              empty_score: float = 1) -> float:
    """DeepEval's `score_qag_verdicts`: the share of verdicts in `passing` (None entries,
    dropped replies, ignored); `empty_score` with none; 0 below the threshold in strict mode."""
    kept = [v for v in verdicts if v is not None]
    if not kept:
        return empty_score
    passed = sum(1 for v in kept if normalize_verdict(v.verdict, passing) is not None)
    score = passed / len(kept)
    return 0 if strict and score < threshold else score


def logged(*values: Any) -> None:
    """DeepEval's measure ends by writing its verbose log, which takes the length of each list
    of intermediate steps: a judge that answered null or a number for one makes it raise."""
    for value in values:
        len(value)


# --- The judge -----------------------------------------------------------------------------------


@dataclass
class Judge:
    """One metric's conversation with the judge: each call's schema in order, and its spend."""

    client: ChatClient
    model: str | None
    temperature: float | None = 0.0
    spend: Spend = field(default_factory=Spend)
    calls: list[str] = field(default_factory=list)

    def ask(self, prompt: str, schema: type[BaseModel]) -> str:
        self.calls.append(schema.__name__)
        result = self.client.structured_text([{"role": "user", "content": prompt}], schema, model=self.model,
                                             temperature=self.temperature)
        self.spend.add(result, self.model or self.client.model)
        return result.text

    def extract(self, prompt: str, schema: type[BaseModel], read: Callable[[Any], R]) -> R:
        """DeepEval's `generate_with_schema_and_extract` for a model that answers text."""
        return read(trim_and_load_json(self.ask(prompt, schema)))

    def verdicts(self, prompt: str, wrapper: type[BaseModel], verdict_cls: type[V],
                 allowed: tuple[Verdict, ...]) -> list[V]:
        return self.extract(prompt, wrapper, lambda d: verdicts_from_json(d, verdict_cls, allowed))

    def verdict(self, prompt: str, verdict_cls: type[V], allowed: tuple[Verdict, ...]) -> V | None:
        return self.extract(prompt, verdict_cls, lambda d: verdict_from_json(d, verdict_cls, allowed))

    def reason(self, prompt: str, schema: type[BaseModel]) -> Any:
        return self.extract(prompt, schema, lambda d: d["reason"])


# --- What a case and an output give DeepEval --------------------------------------------------


@dataclass
class Tool:
    name: str
    input_parameters: dict[str, Any] | None = None
    output: Any = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "input_parameters": self.input_parameters, "output": self.output}


@dataclass
class TestCase:
    """An `LLMTestCase` as the single-turn metrics read it."""

    input: str | None = None
    actual_output: str | None = None
    expected_output: str | None = None
    context: list[str] | None = None
    retrieval_context: list[str] | None = None
    tools_called: list[Tool] | None = None
    expected_tools: list[Tool] | None = None


@dataclass
class Turn:
    role: str  # "user" | "assistant"
    content: str
    tools_called: list[Tool] | None = None


PARAM_NAMES = ("input", "actual_output", "expected_output", "context", "retrieval_context", "tools_called",
               "expected_tools")


def _texts(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [_text(v) for v in value]
    return [text_of(value)]


def _text(value: Any) -> str:
    """A retrieved document's text (DeepEval's `RetrievedContextData` is `{context, source}`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("context"), str):
        return str(value["context"])
    return text_of(value)


def _output_list(output: AgentOutput, key: str) -> list[str] | None:
    """A list the agent's output carries (its retrieval, say): on its turns' metadata, joined,
    or on the output's."""
    found: list[str] = []
    seen = False
    for turn in output.turns:
        if key in turn.metadata:
            seen = True
            found += _texts(turn.metadata[key]) or []
    if seen:
        return found
    return _texts(output.metadata[key]) if key in output.metadata else None


def single_turn(case: EvalCase, output: AgentOutput) -> TestCase:
    """The case as DeepEval's test case: the last invocation's input and expected answer, the
    agent's last answer, every tool called and expected in order, the golden's `context`, and
    `retrieval_context` from the output when it carries one, else the golden's."""
    last = case.conversation[-1] if case.conversation else None
    user = last.user_content.get_text() if last is not None else None
    if user is None:
        user = next((text_of(t.metadata[k]) for t in output.turns for k in ("user_content", "user_message", "input")
                     if k in t.metadata), None)
    expected = next((expected_value(i.expected_final_response) for i in reversed(case.conversation)
                     if i.expected_final_response is not None), None)
    answer = output.turns[-1].final_response if output.turns else None
    retrieval = _output_list(output, "retrieval_context")
    if retrieval is None:
        retrieval = _texts(case.metadata.get("retrieval_context"))
    context = _output_list(output, "context")
    if context is None:
        context = _texts(case.metadata.get("context"))
    called = [Tool(c.name, c.args, c.result) for t in output.turns for c in t.tool_calls]
    expected_tools = [Tool(c.name, c.args, c.result) for i in case.conversation for c in i.expected_tool_trajectory]
    return TestCase(
        input=user, actual_output=None if answer is None else text_of(actual_value(answer)),
        expected_output=None if expected is None else text_of(expected), context=context, retrieval_context=retrieval,
        tools_called=called, expected_tools=expected_tools)


def conversation(case: EvalCase, output: AgentOutput) -> list[Turn]:
    """The exchange as DeepEval's turns: for each answered turn, the user's message (the
    invocation's, or the one a simulator or a thread recorded) then the agent's answer."""
    turns: list[Turn] = []
    by_id = {i.invocation_id: i for i in case.conversation}
    for index, turn in enumerate(output.turns):
        invocation = by_id.get(turn.invocation_id or "") or (
            case.conversation[index] if index < len(case.conversation) else None)
        user = next((turn.metadata[k] for k in ("user_content", "user_message", "input") if k in turn.metadata), None)
        if user is None and invocation is not None:
            user = invocation.user_content.get_text()
        if user is not None:
            turns.append(Turn("user", text_of(user)))
        answer = turn.final_response
        turns.append(Turn("assistant", "" if answer is None else text_of(actual_value(answer)),
                          [Tool(c.name, c.args, c.result) for c in turn.tool_calls] or None))
    return turns


def missing(test_case: TestCase, params: tuple[str, ...], metric: str) -> str | None:
    """DeepEval's `MissingTestCaseParamsError` message, or None when the case has them all."""
    if "actual_output" in params and test_case.actual_output == "":
        return f"'actual_output' cannot be empty for the '{metric}' metric"
    absent = [f"'{p}'" for p in params if getattr(test_case, p) is None]
    if not absent:
        return None
    if len(absent) == 1:
        names = absent[0]
    elif len(absent) == 2:
        names = " and ".join(absent)
    else:
        names = ", ".join(absent[:-1]) + ", and " + absent[-1]
    return f"{names} cannot be None for the '{metric}' metric"


# --- The evaluator -------------------------------------------------------------------------------


class JudgedOptions(BaseModel):
    """What every judged metric takes besides the criterion's `threshold` (DeepEval's defaults)."""

    model_config = ConfigDict(extra="forbid")
    strict_mode: bool = False
    include_reason: bool = True
    temperature: float | None = Field(0.0, ge=0, le=2)


@dataclass
class Measured:
    score: float
    reason: str | None
    steps: dict[str, Any]


class Unmeasurable(Exception):
    """The case lacks what the metric needs (DeepEval raises before any call)."""


class JudgedMetric(Evaluator):
    """A DeepEval LLM metric on evalsite's judge. Subclasses give `deepeval_name` (the class
    DeepEval calls it), `title` (its `__name__`), `Options`, and `measure()`."""

    group: ClassVar[str] = "llm_judge"
    Options: ClassVar[type[BaseModel]] = JudgedOptions
    deepeval_name: ClassVar[str]
    title: ClassVar[str]
    default_threshold: ClassVar[float] = DEFAULT_THRESHOLD
    conversational: ClassVar[bool] = False
    calls_judge: ClassVar[bool] = True
    reference_free: ClassVar[bool] = True  # no expected answer needed: usable on monitors

    def __init__(self, client: ChatClient | None = None) -> None:
        self.client = client if client is not None else ChatClient()

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float,
                judge: Judge, steps: dict[str, Any]) -> Measured:
        raise NotImplementedError

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        try:
            options = self.options(config)
        except ValidationError as exc:
            return options_error(criterion, exc)
        strict = bool(getattr(options, "strict_mode", False))
        threshold_value = 1.0 if strict else config.threshold
        threshold = Threshold(lower_limit=threshold_value)
        model = explicit_model(config)
        judge = Judge(self.client, model, temperature=getattr(options, "temperature", 0.0))
        steps: dict[str, Any] = {}
        justification: dict[str, Any]
        about = {"metric": self.deepeval_name, "threshold": threshold_value, "strict_mode": strict,
                 "include_reason": getattr(options, "include_reason", None)}
        base: dict[str, Any] = {"criterion": criterion, "threshold": threshold}
        try:
            measured = self.measure(case, output, options, threshold_value, judge, steps)
        except Unmeasurable as exc:
            return [ScoreResult(**base, score=None, passed=None, error=str(exc),
                                justification={"deepeval": about})]
        except Exception as exc:  # the judge failed or answered what DeepEval cannot read either
            justification = {"deepeval": about, "steps": steps, "calls": judge.calls, "usage": judge.spend.as_dict()}
            result = ScoreResult(**base, score=None, passed=None, justification=justification,
                                 error=f"{self.title}: {_describe(exc)}")
            return stamp_judge([result], model=model or self.client.model, version=self.version(options))
        score = measured.score
        justification = {"reason": measured.reason, "deepeval": about, "steps": steps, "calls": judge.calls,
                         "usage": judge.spend.as_dict()}
        passed = score >= threshold_value
        result = ScoreResult(**base, score=float(score), passed=passed, raw_value=float(score),
                             justification=justification)
        return stamp_judge([result], model=model or self.client.model, version=self.version(options))

    def version(self, options: BaseModel) -> str:
        return prompt_version(self.name, PROMPTS_FINGERPRINT, options.model_dump(mode="json"))


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"the judge's reply does not fit {exc.title}: {where}: {first['msg']}"
    if isinstance(exc, KeyError):
        return f"the judge's reply has no {exc.args[0]!r}"
    return f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
