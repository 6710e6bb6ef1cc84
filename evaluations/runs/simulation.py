"""Simulated tool results for the model target: what evalsite answers when the model under test
calls a tool, so an eval set runs a prompt and its tools with no tool deployed anywhere.

For each call, in this order:

1. **expected**: the eval set's own expected response for that call. A case's expected tool
   calls that carry a `result` (ADK eval sets keep the tool responses of each invocation;
   UiPath's `toolOutputs` fill them too) answer a call with the same name and the same
   arguments, each at most once, in order: first among the current turn's expected calls,
   then among the other turns'. ADK responses no call claimed (kept in an invocation's
   `metadata.tool_responses`) answer a call of their tool by name alone, after those.
2. **mock**: a UiPath mockito mock (`mockingStrategy: {"type": "mockito", "config":
   [{"function", "arguments": {"args", "kwargs"}, "then": [{"type": "return" | "raise",
   "value"}]}]}`) whose function is the tool and whose arguments match: `kwargs` equal to the
   call's arguments, `args` to its first argument values in order; no `arguments` matches any
   call. Each call takes the mock's next answer, the last one repeating (as mockito does); a
   "raise" answer is the tool failing with that value.
3. **llm**: when the case asks for it (UiPath's legacy `simulateTools: true` with its
   `simulationInstructions`, or `mockingStrategy: {"type": "llm", "prompt"}`, each for the
   tools in `toolsToSimulate`, all tools when that list is empty) or the target does
   (`simulate_with_llm`, with `tool_instructions`), a model plays the tool from the
   instructions, the tool's schema, the arguments and the conversation so far.
4. **none**: a result saying that no simulation exists for the call, given to the model as
   the tool's error and recorded on the call (its `error`, `simulated: "none"`).

Every answered call records where its result came from (`OutputToolCall.simulated`), which
the drill-down shows next to the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evaluations.schemas.evalset import EvalCase

EXPECTED = "expected"
MOCK = "mock"
LLM = "llm"
NONE = "none"
SOURCES = (EXPECTED, MOCK, LLM, NONE)
LABELS = {EXPECTED: "the eval set's expected response", MOCK: "a mock of the eval set",
          LLM: "played by a model", NONE: "no simulation"}


@dataclass(frozen=True)
class ToolPlay:
    """What the model that plays a tool is told."""

    name: str
    args: dict[str, Any]
    schema: dict[str, Any] | None
    instructions: str
    transcript: list[dict[str, Any]]


#: Plays a tool: returns its result (any JSON value); raises when the model cannot.
PlayTool = Callable[[ToolPlay], Any]


@dataclass
class Simulated:
    result: Any
    source: str
    error: str | None = None


@dataclass
class _Recorded:
    name: str
    args: dict[str, Any] | None  # None: a response matched by name alone
    result: Any
    turn: int
    used: bool = False


@dataclass
class _Mock:
    function: str
    args: list[Any] | None  # None: any call
    kwargs: dict[str, Any]
    answers: list[dict[str, Any]]
    calls: int = 0


@dataclass
class _LlmRule:
    tools: frozenset[str]  # empty: every tool
    instructions: str


def _mocks(strategy: Any) -> list[_Mock]:
    if not isinstance(strategy, dict) or strategy.get("type") != "mockito":
        return []
    behaviors = strategy.get("config", strategy.get("behaviors"))
    mocks: list[_Mock] = []
    for behavior in behaviors if isinstance(behaviors, list) else []:
        if not isinstance(behavior, dict) or not isinstance(behavior.get("function"), str):
            continue
        answers = [a for a in behavior.get("then") or []
                   if isinstance(a, dict) and a.get("type") in ("return", "raise")]
        if not answers:
            continue
        arguments = behavior.get("arguments")
        if isinstance(arguments, dict):
            args, kwargs = arguments.get("args"), arguments.get("kwargs")
            mocks.append(_Mock(behavior["function"], args if isinstance(args, list) else [],
                               kwargs if isinstance(kwargs, dict) else {}, answers))
        else:
            mocks.append(_Mock(behavior["function"], None, {}, answers))
    return mocks


def _names(tools: Any) -> frozenset[str]:
    if not isinstance(tools, list):
        return frozenset()
    return frozenset(str(t["name"]) for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str))


def _llm_rules(case: EvalCase, *, target_asks: bool, target_instructions: str) -> list[_LlmRule]:
    meta = case.metadata
    rules: list[_LlmRule] = []
    strategy = meta.get("mockingStrategy")
    if isinstance(strategy, dict) and strategy.get("type") == "llm":
        rules.append(_LlmRule(_names(strategy.get("toolsToSimulate")), str(strategy.get("prompt") or "")))
    if meta.get("simulateTools") is True:
        rules.append(_LlmRule(_names(meta.get("toolsToSimulate")), str(meta.get("simulationInstructions") or "")))
    if target_asks:
        rules.append(_LlmRule(frozenset(), target_instructions))
    return rules


def _mock_matches(mock: _Mock, name: str, args: dict[str, Any]) -> bool:
    if mock.function != name:
        return False
    if mock.args is None:
        return True
    values = list(args.values())
    if values[:len(mock.args)] != mock.args:
        return False
    named = dict(list(args.items())[len(mock.args):])
    return named == mock.kwargs


class CaseTools:
    """The simulated tools of one case: keeps which recorded responses and mock answers were
    used, so it serves one (case, iteration) at a time and is made anew for the next."""

    def __init__(self, case: EvalCase, *, play: PlayTool | None = None,
                 schemas: dict[str, dict[str, Any]] | None = None, simulate_with_llm: bool = False,
                 instructions: str = "") -> None:
        self.play = play
        self.schemas = schemas or {}
        self.recorded: list[_Recorded] = []
        for turn, invocation in enumerate(case.conversation):
            for call in invocation.expected_tool_trajectory:
                if call.result is not None:
                    self.recorded.append(_Recorded(call.name, call.args, call.result, turn))
        for turn, invocation in enumerate(case.conversation):
            leftovers = invocation.metadata.get("tool_responses")
            for item in leftovers if isinstance(leftovers, list) else []:
                if isinstance(item, dict) and isinstance(item.get("name"), str) and "response" in item:
                    self.recorded.append(_Recorded(item["name"], None, item["response"], turn))
        self.mocks = _mocks(case.metadata.get("mockingStrategy"))
        self.llm_rules = _llm_rules(case, target_asks=simulate_with_llm, target_instructions=instructions)
        self.unsimulated: list[str] = []

    @property
    def needs_llm(self) -> bool:
        return bool(self.llm_rules)

    def answer(self, name: str, args: dict[str, Any], *, turn: int,
               transcript: list[dict[str, Any]] | None = None) -> Simulated:
        recorded = self._recorded(name, args, turn)
        if recorded is not None:
            recorded.used = True
            return Simulated(recorded.result, EXPECTED)
        mock = next((m for m in self.mocks if _mock_matches(m, name, args)), None)
        if mock is not None:
            answer = mock.answers[min(mock.calls, len(mock.answers) - 1)]
            mock.calls += 1
            if answer["type"] == "raise":
                value = answer.get("value")
                text = value if isinstance(value, str) else json.dumps(value, default=str)
                return Simulated({"error": value}, MOCK, error=f"the mock raises: {text}"[:500])
            return Simulated(answer.get("value"), MOCK)
        rule = next((r for r in self.llm_rules if not r.tools or name in r.tools), None)
        if rule is not None and self.play is not None:
            try:
                result = self.play(ToolPlay(name, args, self.schemas.get(name), rule.instructions,
                                            list(transcript or [])))
            except Exception as exc:  # the playing model is another service: the call fails, the case goes on
                why = f"the model playing {name} failed: {type(exc).__name__}: {exc}"[:500]
                return Simulated({"error": why}, LLM, error=why)
            return Simulated(result, LLM)
        why = f"no simulated result for {name} with these arguments (no expected response, mock or instructions)"
        self.unsimulated.append(name)
        return Simulated({"error": why}, NONE, error=why)

    def _recorded(self, name: str, args: dict[str, Any], turn: int) -> _Recorded | None:
        fresh = [r for r in self.recorded if not r.used and r.name == name]
        exact = [r for r in fresh if r.args is not None and r.args == args]
        for pool in (exact, [r for r in fresh if r.args is None]):
            here = next((r for r in pool if r.turn == turn), None)
            if here is not None:
                return here
            if pool:
                return pool[0]
        return None


@dataclass
class ToolCounts:
    by_source: dict[str, int] = field(default_factory=dict)

    def add(self, source: str) -> None:
        self.by_source[source] = self.by_source.get(source, 0) + 1


PLAY_INSTRUCTIONS = """You stand in for a software tool while an AI agent is being tested. \
The agent has just called the tool below. Answer with the tool's result only: one JSON value, \
no prose and no code fence. Make the result realistic and consistent with the tool's schema, \
the instructions and everything earlier in the conversation."""


def play_messages(play: ToolPlay) -> list[dict[str, Any]]:
    """The chat messages that ask a model to play a tool."""
    history = [m for m in play.transcript if m.get("role") in ("user", "assistant", "tool")][-20:]
    lines = [PLAY_INSTRUCTIONS, "", f"Tool: {play.name}"]
    if play.schema:
        lines.append("Its schema: " + json.dumps(play.schema, ensure_ascii=False))
    lines.append("The arguments of this call: " + json.dumps(play.args, ensure_ascii=False, default=str))
    if play.instructions:
        lines += ["", "Instructions for this test:", play.instructions]
    if history:
        lines += ["", "The conversation so far:"]
        for message in history:
            content = message.get("content")
            if message.get("tool_calls"):
                content = json.dumps([c.get("function") for c in message["tool_calls"] if isinstance(c, dict)],
                                     ensure_ascii=False)
            lines.append(f"{message.get('role')}: {content if isinstance(content, str) else json.dumps(content)}")
    return [{"role": "user", "content": "\n".join(lines)}]
