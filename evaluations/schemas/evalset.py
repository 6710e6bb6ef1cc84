"""The native eval-set format: AgentFlow's `EvalSet` (seed 004), field for field.

Every importer converts into these models, and the native `.evalset.json` export writes them
back out. A few fields extend AgentFlow's model for data the other formats carry and that a
run needs; each defaults to empty, so a plain AgentFlow file is valid as it is:

- `Invocation.rubrics`: ADK's per-invocation rubrics.
- `EvalCase.conversation_scenario`: ADK's `conversation_scenario` / DeepEval's multi-turn
  scenario, for cases that a user simulator drives instead of scripted turns.
- `EvalCase.rubrics`: rubrics that apply to the whole case.
- `EvalCase.criteria`: per-case evaluator criteria keyed by evaluator or criterion id
  (UiPath's `evaluationCriterias`); `None` means "use the evaluator's default criteria".

Structured (non-text) content, such as UiPath's `inputs` or an `expectedOutput` object, is
kept as a one-part list: `[{"type": "json", "json": {...}}]`; `get_text()` renders it as JSON.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from evaluations.schemas.text import without_nul


class _Native(BaseModel):
    # Unknown keys are errors, not silently dropped: a typo such as
    # "expected_tool_trajectry" must be reported with its path, not lose the data.
    model_config = ConfigDict(extra="forbid")


class MessageContent(_Native):
    role: str
    content: str | list[dict[str, Any]]
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def user(cls, content: str | list[dict[str, Any]]) -> MessageContent:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str | list[dict[str, Any]]) -> MessageContent:
        return cls(role="assistant", content=content)

    @classmethod
    def json_part(cls, role: str, value: Any) -> MessageContent:
        return cls(role=role, content=[{"type": "json", "json": value}])

    def get_text(self) -> str:
        return content_text(self.content)


def content_text(content: str | list[dict[str, Any]]) -> str:
    """A message's content as text (`MessageContent.get_text`, also for its JSON dump)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif "json" in part:
            texts.append(json.dumps(part["json"], ensure_ascii=False, sort_keys=True))
    return "\n".join(texts)


class ToolCall(_Native):
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    call_id: str | None = None
    result: Any | None = None

    def matches(self, other: ToolCall, *, check_args: bool = True, check_call_id: bool = False) -> bool:
        if self.name != other.name:
            return False
        if check_args and self.args != other.args:
            return False
        return not (check_call_id and self.call_id != other.call_id)


class StepType(str, Enum):
    NODE = "NODE"
    TOOL = "TOOL"
    MESSAGE = "MESSAGE"
    CONDITIONAL = "CONDITIONAL"


class TrajectoryStep(_Native):
    step_type: StepType
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    timestamp: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Rubric(_Native):
    name: str
    description: str
    scoring_guide: str = ""
    weight: float = 1.0


class Invocation(_Native):
    invocation_id: str
    user_content: MessageContent
    expected_tool_trajectory: list[ToolCall] = Field(default_factory=list)
    expected_intermediate_responses: list[MessageContent] = Field(default_factory=list)
    expected_final_response: MessageContent | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    rubrics: list[Rubric] = Field(default_factory=list)  # extension: ADK invocation rubrics
    # AgentFlow 0.10's graph nodes expected in this turn, in order (`node_order` scores them).
    # Left out of the dump when empty, so content written before it hashes as it did.
    expected_node_order: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)


class SessionInput(_Native):
    """The session a case starts in, in either of AgentFlow's shapes: the documented one
    (`thread_id`, `config`, `initial_state`) or the one 10xscale-agentflow 0.10 writes (`app_name`,
    `user_id`, `state`, `config`). It is written back in the shape it was read in."""

    thread_id: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    initial_state: dict[str, Any] = Field(default_factory=dict)
    app_name: str | None = None
    user_id: str | None = None
    state: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _in_the_shape_read(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.app_name is None and self.user_id is None and self.state is None:
            for name in ("app_name", "user_id", "state"):
                data.pop(name, None)
        elif self.thread_id is None and not self.initial_state:
            data.pop("thread_id", None)
            data.pop("initial_state", None)
        return data


class ConversationScenario(_Native):
    """A case driven by a simulated user instead of scripted turns (extension)."""

    starting_prompt: str | None = None
    conversation_plan: str = ""
    user_persona: Any | None = None
    expected_outcome: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class EvalCase(_Native):
    eval_id: str
    name: str = ""
    # AgentFlow 0.10 writes one; left out of the dump when empty (content hashes unchanged).
    description: str = Field(default="", exclude_if=lambda v: not v)
    conversation: list[Invocation] = Field(default_factory=list)
    session_input: SessionInput | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    # Extensions (see the module docstring).
    conversation_scenario: ConversationScenario | None = None
    rubrics: list[Rubric] = Field(default_factory=list)
    criteria: dict[str, dict[str, Any] | None] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        return without_nul(data)  # see evaluations.schemas.text


class EvalSet(_Native):
    eval_set_id: str
    name: str = ""
    description: str = ""
    eval_cases: list[EvalCase] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


# --- Evaluation config (AgentFlow EvalConfig) ---------------------------------------------


class MatchType(str, Enum):
    EXACT = "EXACT"
    IN_ORDER = "IN_ORDER"
    ANY_ORDER = "ANY_ORDER"


class CriterionConfig(_Native):
    enabled: bool = True
    threshold: float = 0.8
    match_type: MatchType = MatchType.EXACT
    judge_model: str = "gpt-4o-mini"
    rubrics: list[Rubric] = Field(default_factory=list)
    # Extensions: which registered evaluator computes this criterion (default: the
    # criterion's own name) and its evaluator-specific options.
    evaluator: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class UserSimulatorConfig(_Native):
    model: str = "gpt-4o-mini"
    max_turns: int = 10
    options: dict[str, Any] = Field(default_factory=dict)


class EvalConfig(_Native):
    criteria: dict[str, CriterionConfig] = Field(default_factory=dict)
    user_simulator_config: UserSimulatorConfig | None = None

    @classmethod
    def default(cls) -> EvalConfig:
        return cls(
            criteria={
                "trajectory_match": CriterionConfig(threshold=0.8),
                "response_match": CriterionConfig(threshold=0.7),
                "llm_judge": CriterionConfig(threshold=0.7, judge_model="gpt-4o-mini"),
            }
        )
