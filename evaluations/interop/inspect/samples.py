"""Inspect AI samples, as datasets and eval logs hold them, and their native forms.

The shapes are inspect_ai's (`Sample`, `EvalSample`, `ChatMessage*`, `ToolCall`, `Score`),
checked with pydantic models of the fields evalsite reads; everything else a sample holds is
left alone.

A sample becomes a case:

- `eval_id`: the sample's `id` as text (inspect numbers samples without one 1, 2, ...);
- its `input` (a string, or chat messages) becomes the conversation: each user message opens an
  invocation; system messages before it are kept in that invocation's metadata (`system`);
  assistant messages that follow it (a scripted history) are its expected intermediate
  responses and their tool calls its expected tool trajectory, with each call's `id` and, from
  the tool message that answers it, its result;
- `target` is the last invocation's expected final response (a list of targets: the first, the
  others kept in `metadata.inspect_sample.other_targets`, so an edited expectation is written
  back as the first target);
- `metadata` is the case's metadata; what else the sample holds for inspect (`choices`,
  `sandbox`, `files`, `setup`, an integer `id`) is kept in `metadata.inspect_sample`, so the
  dataset writer (`export.py`) gives the sample back.

A logged sample's `messages` past its input are what the model did: one `TurnOutput` (the
last input invocation's; each later user message opens another) with the assistant's tool
calls (arguments, id, the tool message's result or error; a tool message whose call is not in
the log keeps its function, id and result), its earlier texts as intermediate
responses and `output.completion` as the final response; the sample's `model_usage` summed
is that turn's usage, `total_time` its latency.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluations.interop.base import EvalSetImportError, PathPart, Problem, as_float, format_path
from evaluations.schemas.evalset import EvalCase, Invocation, MessageContent, ToolCall
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, TurnOutput, Usage

RESERVED = "inspect_sample"
KEPT = ("choices", "sandbox", "files", "setup")
SAMPLE_KEYS = {"id", "input", "target", "metadata", *KEPT}
Scalar = str | int | float | bool | None


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class InspectToolCall(_Loose):
    id: str | None = None
    function: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolError(_Loose):
    message: str = ""


class ChatMessage(_Loose):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] = ""
    tool_calls: list[InspectToolCall] | None = None
    tool_call_id: str | None = None
    function: str | None = None
    error: ToolError | None = None
    source: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p["text"] for p in self.content if p.get("type") == "text" and isinstance(p.get("text"), str))


class DatasetSample(_Loose):
    id: int | str | None = None
    input: str | list[ChatMessage]
    target: str | list[str] = ""
    metadata: dict[str, Any] | None = None


class InspectScore(_Loose):
    value: Scalar | list[Scalar] | dict[str, Scalar]
    answer: str | None = None
    explanation: str | None = None
    metadata: dict[str, Any] | None = None


class ModelUsage(_Loose):
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0


class ModelOutput(_Loose):
    model: str | None = None
    completion: str = ""


class SampleError(_Loose):
    message: str = ""


class LoggedSample(DatasetSample):
    id: int | str
    epoch: int = Field(default=1, ge=1)
    messages: list[ChatMessage] = Field(default_factory=list)
    output: ModelOutput | None = None
    scores: dict[str, InspectScore] | None = None
    model_usage: dict[str, ModelUsage] = Field(default_factory=dict)
    total_time: float | None = None
    error: SampleError | None = None


def validation_problems(exc: ValidationError, *, file: str, prefix: Sequence[PathPart],
                        case: str | None) -> EvalSetImportError:
    problems = []
    for error in exc.errors(include_url=False):
        loc = [*prefix, *[p for p in error["loc"] if isinstance(p, str | int)]]
        message = "required field is missing" if error["type"] == "missing" else error["msg"]
        problems.append(Problem(message, file=file, case=case, path=format_path(loc) or None))
    return EvalSetImportError("schema", problems)


def sample_key(raw: dict[str, Any], position: int) -> str:
    value = raw.get("id")
    return str(value) if isinstance(value, str | int) and not isinstance(value, bool) else str(position + 1)


def _content(message: ChatMessage) -> str | list[dict[str, Any]]:
    return message.content


def to_case(sample: DatasetSample, eval_id: str, *, file: str, prefix: Sequence[PathPart],
            raw: dict[str, Any]) -> EvalCase:
    """The case a sample is (see the module docstring); raises a located error."""
    def fail(path: Sequence[PathPart], message: str) -> EvalSetImportError:
        return EvalSetImportError("schema", [Problem(message, file=file, case=eval_id,
                                                     path=format_path([*prefix, *path]))])

    messages = ([ChatMessage(role="user", content=sample.input)] if isinstance(sample.input, str)
                else sample.input)
    invocations: list[Invocation] = []
    system: list[str | list[dict[str, Any]]] = []
    calls: dict[str, ToolCall] = {}
    for index, message in enumerate(messages):
        if message.role == "system":
            system.append(_content(message))
        elif message.role == "user":
            metadata: dict[str, Any] = {"system": system} if system else {}
            invocations.append(Invocation(invocation_id=f"turn-{len(invocations) + 1}",
                                          user_content=MessageContent(role="user", content=_content(message)),
                                          metadata=metadata))
            system = []
        elif not invocations:
            raise fail(["input", index], f"a {message.role} message before any user message")
        elif message.role == "assistant":
            current = invocations[-1]
            if not (message.tool_calls and message.content == ""):
                current.expected_intermediate_responses.append(MessageContent(role="assistant",
                                                                              content=_content(message)))
            for call in message.tool_calls or []:
                native = ToolCall(name=call.function, args=call.arguments, call_id=call.id)
                current.expected_tool_trajectory.append(native)
                if call.id is not None:
                    calls[call.id] = native
        else:
            found = calls.get(message.tool_call_id or "")
            if found is None:
                raise fail(["input", index, "tool_call_id"], "answers no tool call of an earlier assistant message")
            found.result = message.text()
    if not invocations:
        raise fail(["input"], "no user message")
    if system:
        raise fail(["input"], "system messages after the last user message")
    extras: dict[str, Any] = {k: raw[k] for k in KEPT if raw.get(k) is not None}
    if isinstance(sample.id, int):
        extras["id"] = sample.id
    target = sample.target
    if isinstance(target, list):
        extras["other_targets"] = target[1:]
        target = target[0] if target else ""
    if target:
        invocations[-1].expected_final_response = MessageContent(role="assistant", content=target)
    metadata = dict(sample.metadata or {})
    if RESERVED in metadata:
        raise fail(["metadata", RESERVED], f"`{RESERVED}` is where evalsite keeps what else a sample holds: "
                                           "rename this key")
    if extras:
        metadata[RESERVED] = extras
    try:
        return EvalCase(eval_id=eval_id, conversation=invocations, metadata=metadata)
    except ValidationError as exc:
        raise validation_problems(exc, file=file, prefix=prefix, case=eval_id) from None


def to_output(sample: LoggedSample, eval_id: str) -> AgentOutput:
    """What the model did in a logged sample (see the module docstring)."""
    # What came from the input is marked so (a solver's system prompt may sit before it); in
    # logs that do not mark it, the prompt is the leading system and user messages.
    given = max((i + 1 for i, m in enumerate(sample.messages) if m.source == "input"), default=None)
    if given is None:
        given = next((i for i, m in enumerate(sample.messages) if m.role not in ("system", "user")),
                     len(sample.messages))
    turns = [TurnOutput(invocation_id=f"turn-{_user_turns(sample)}")]
    texts: list[list[Any]] = [[]]
    calls: dict[str, OutputToolCall] = {}
    for message in sample.messages[given:]:
        if message.role == "user":
            turns.append(TurnOutput())
            texts.append([])
        elif message.role == "assistant":
            if message.content != "" and message.text():
                texts[-1].append(message.text())
            for call in message.tool_calls or []:
                out = OutputToolCall(name=call.function, args=call.arguments, call_id=call.id)
                turns[-1].tool_calls.append(out)
                if call.id is not None:
                    calls[call.id] = out
        elif message.role == "tool":
            found = calls.get(message.tool_call_id or "")
            if found is None:  # its call is not in the log (a trimmed history): kept with what it says
                found = OutputToolCall(name=message.function or "tool", call_id=message.tool_call_id)
                turns[-1].tool_calls.append(found)
            found.result = message.text()
            if message.error is not None:
                found.error = message.error.message or "the tool failed"
    for turn, said in zip(turns, texts, strict=True):
        turn.final_response = said[-1] if said else None
        turn.intermediate_responses = said[:-1]
    if sample.output is not None and sample.output.completion:
        last = turns[-1]
        if last.final_response is not None and last.final_response != sample.output.completion:
            last.intermediate_responses.append(last.final_response)
        last.final_response = sample.output.completion
    usage = list(sample.model_usage.values())
    if usage:
        turns[-1].usage = Usage(prompt_tokens=sum(u.input_tokens for u in usage),
                                completion_tokens=sum(u.output_tokens for u in usage),
                                total_tokens=sum(u.total_tokens for u in usage))
    return AgentOutput(eval_id=eval_id, iteration=sample.epoch - 1, turns=turns, latency_seconds=sample.total_time,
                       error=sample.error.message or "the sample failed" if sample.error is not None else None)


def _user_turns(sample: LoggedSample) -> int:
    if isinstance(sample.input, str):
        return 1
    return max(1, sum(1 for m in sample.input if m.role == "user"))


# --- Scores ---------------------------------------------------------------------------------

CORRECT, INCORRECT, PARTIAL, NOANSWER = "C", "I", "P", "N"
_LETTERS = {CORRECT: 1.0, INCORRECT: 0.0, PARTIAL: 0.5, NOANSWER: 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}


def value_to_float(value: Any) -> float | None:
    """A score value as a number, as inspect_ai's `value_to_float()` reads it (C/I/P/N, yes/no,
    true/false, numbers and numeric text); None for what it cannot read."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return as_float(value)
    if isinstance(value, str):
        text = value.strip()
        if text in _LETTERS:
            return _LETTERS[text]
        if text.lower() in _WORDS:
            return _WORDS[text.lower()]
        try:
            return float(text)
        except ValueError:
            return None
    return None


def verdict(value: Any) -> bool | None:
    """Pass or fail where the value says it: C passes, I and N fail, booleans are themselves."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in (CORRECT, INCORRECT, NOANSWER):
        return value.strip() == CORRECT
    return None
