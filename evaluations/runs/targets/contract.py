"""The turn contract between evalsite and an agent, shared by the HTTP and Python targets.

For every scripted turn of a case, evalsite sends a `TurnRequest` (as the JSON body of a POST
for an HTTP agent, as a dict argument for a Python callable) and expects a `TurnReply` back
(an HTTP agent whose replies have another shape can be mapped with JSONPath-like paths, see
`evaluations.runs.targets.http`). Multi-turn cases are driven turn by turn with the conversation
so far, so a stateless agent can answer follow-ups.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evaluations.schemas.evalset import TrajectoryStep
from evaluations.schemas.outputs import OutputToolCall, Usage


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str  # "user" or "assistant"
    content: Any  # text, or structured content ([{"type": "json", "json": ...}])


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    eval_id: str
    iteration: int = 0
    invocation_id: str
    turn_index: int
    # The user's message for this turn: text, or structured input (e.g. UiPath `inputs`).
    user_content: Any
    # Everything said before this turn, user and assistant alternating.
    history: list[Message] = Field(default_factory=list)
    session_input: dict[str, Any] | None = None  # thread_id, config, initial_state
    # Per-eval-id overrides merged into the inputs (`--input-overrides`).
    input_overrides: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class TurnReply(BaseModel):
    """What the agent answers for one turn. Only `final_response` is required."""

    model_config = ConfigDict(extra="ignore")  # agents may send more; it is not an error
    final_response: Any | None = None
    tool_calls: list[OutputToolCall] = Field(default_factory=list)
    intermediate_responses: list[Any] = Field(default_factory=list)
    trajectory: list[TrajectoryStep] = Field(default_factory=list)
    usage: Usage | None = None
    error: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
