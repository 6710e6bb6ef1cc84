"""An LLM user simulator for scenario-driven cases (ADK's `conversation_scenario`), modelled on
ADK's `LlmBackedUserSimulator`:

- the first user message is the scenario's `starting_prompt`, sent as it is (no LLM call);
- each later message is written by the LLM from the conversation plan, the persona and the
  conversation so far; when the LLM answers the stop signal `</finished>` the conversation
  is over (`STOP_SIGNAL_DETECTED`);
- after `max_turns` user messages (the starting prompt counts) it stops with
  `TURN_LIMIT_REACHED`; `options["max_allowed_invocations"] = -1` (ADK's "no limit", kept
  there by the importer) lifts the limit;
- `options["custom_instructions"]` replaces the instructions, with ADK's placeholders
  `{{ stop_signal }}`, `{{ conversation_plan }}`, `{{ conversation_history }}` and
  `{{ persona }}`; `options["temperature"]` is passed to the model.

Pure apart from the client: it keeps no state, so the caller passes the conversation each
time. LLM failures are raised as `LLMError` for the caller (the target) to record.
`simulate_user(config)` wraps it as the targets' `SimulateUser` callable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from evaluations.evaluators.base import text_of
from evaluations.evaluators.llm import ChatClient
from evaluations.schemas.evalset import ConversationScenario, EvalCase, UserSimulatorConfig

STOP_SIGNAL = "</finished>"
_DEFAULT_MODEL = UserSimulatorConfig.model_fields["model"].default


class Status(str, Enum):
    SUCCESS = "success"
    STOP_SIGNAL_DETECTED = "stop_signal_detected"
    TURN_LIMIT_REACHED = "turn_limit_reached"


@dataclass(frozen=True)
class Message:
    role: Literal["user", "agent"]
    text: str


@dataclass(frozen=True)
class NextUserMessage:
    status: Status
    message: str | None = None

    @property
    def stop(self) -> bool:
        return self.status is not Status.SUCCESS


DEFAULT_INSTRUCTIONS = """You are playing the part of a user talking to an AI agent, to test it. \
Follow the conversation plan below, one message at a time, the way a real user would: write only \
your next message to the agent, in the first person, with no commentary, labels or quotes. Do not \
play the agent, and do not invent facts the plan does not give you.

When the plan has been carried out, or the conversation cannot usefully continue, answer exactly \
{{ stop_signal }} and nothing else.
{{ persona }}
# Conversation plan
{{ conversation_plan }}

# Conversation so far
{{ conversation_history }}"""

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def render_instructions(template: str, values: dict[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _persona(persona: Any) -> str:
    if persona in (None, "", {}):
        return ""
    text = persona if isinstance(persona, str) else json.dumps(persona, ensure_ascii=False, indent=2)
    return f"\n# Your persona (how you write and behave)\n{text}\n"


def _history(conversation: Sequence[Message]) -> str:
    return "\n\n".join(f"{m.role}: {m.text}" for m in conversation) or "(nothing yet)"


class UserSimulator:
    def __init__(self, client: ChatClient | None = None) -> None:
        self.client = client if client is not None else ChatClient()

    def next_message(self, scenario: ConversationScenario, conversation: Sequence[Message],
                     config: UserSimulatorConfig) -> NextUserMessage:
        user_turns = sum(1 for m in conversation if m.role == "user")
        limit = config.options.get("max_allowed_invocations", config.max_turns)
        if isinstance(limit, int) and limit >= 0 and user_turns >= limit:
            return NextUserMessage(Status.TURN_LIMIT_REACHED)
        if user_turns == 0 and scenario.starting_prompt:
            return NextUserMessage(Status.SUCCESS, scenario.starting_prompt)
        template = config.options.get("custom_instructions") or DEFAULT_INSTRUCTIONS
        prompt = render_instructions(str(template), {
            "stop_signal": STOP_SIGNAL,
            "conversation_plan": scenario.conversation_plan or "(no plan: greet the agent and ask what it can do)",
            "conversation_history": _history(conversation),
            "persona": _persona(scenario.user_persona),
        })
        # The schema's default model must not override the deployment's (see judge.explicit_model).
        model = config.model if config.model != _DEFAULT_MODEL else None
        temperature = config.options.get("temperature")
        reply = self.client.complete(
            [{"role": "user", "content": prompt}], model=model,
            temperature=float(temperature) if isinstance(temperature, (int, float)) else None,
        )
        if STOP_SIGNAL in reply.text.lower():
            return NextUserMessage(Status.STOP_SIGNAL_DETECTED)
        return NextUserMessage(Status.SUCCESS, reply.text.strip())


def simulate_user(config: UserSimulatorConfig,
                  client: ChatClient | None = None) -> Callable[[EvalCase, list[Any]], str | None]:
    """The targets' `SimulateUser` callable (`(case, history) -> next user message | None`):
    history items are the turn contract's messages (`role` "user" or "assistant", `content`);
    None ends the conversation (stop signal or turn limit). LLM failures raise `LLMError`."""
    simulator = UserSimulator(client)

    def next_user_message(case: EvalCase, history: list[Any]) -> str | None:
        if case.conversation_scenario is None:
            return None
        conversation = [Message("user" if getattr(m, "role", "") == "user" else "agent",
                                text_of(getattr(m, "content", ""))) for m in history]
        result = simulator.next_message(case.conversation_scenario, conversation, config)
        return result.message if result.status is Status.SUCCESS else None

    return next_user_message
