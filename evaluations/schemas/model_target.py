"""The model target's configuration (a run's `target` when `target_kind` is "model"), and the
prompt it renders: what the API, the experiments page and a stored run all carry.

evalsite calls an OpenAI-compatible `/chat/completions` endpoint with a system message and a
user message rendered from the case, offers the model the tools, and answers each tool call
with a simulated result (evaluations/runs/simulation.py) until the model gives a final answer
or `max_steps` model calls have been made in the turn (docs/runs.md, "Model").

The API key is never part of it: `api_key_env` names the environment variable of the worker
that holds it, read when the run executes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaluations.schemas.prompt_template import template_problems
from evaluations.schemas.text import without_nul

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI accepts as a function name
MAX_PROMPT_CHARS = 100_000
MAX_TOOLS = 128
# Body keys evalsite sets itself: `parameters` may not replace them.
RESERVED_PARAMETERS = frozenset({"model", "messages", "tools", "tool_choice", "stream", "n"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptText(_Strict):
    """A system message and a user template; `{{input}}` and the other variables of
    `evaluations.schemas.prompt_template` are filled from the case. `prompt_id` and `version` say which
    stored prompt version the text came from (informational once the run is created)."""

    system: str = Field(default="", max_length=MAX_PROMPT_CHARS)
    user: str = Field(default="{{input}}", max_length=MAX_PROMPT_CHARS)
    prompt_id: int | None = Field(default=None, ge=1)
    version: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        return without_nul(data)

    @field_validator("system", "user")
    @classmethod
    def _renders(cls, value: str) -> str:
        problems = template_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class FunctionSpec(_Strict):
    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not TOOL_NAME.fullmatch(value):
            raise ValueError("a function name is 1-64 letters, digits, _ or -")
        return value

    @field_validator("parameters")
    @classmethod
    def _object(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type", "object") != "object":
            raise ValueError('parameters must be a JSON Schema of "type": "object"')
        return value


class ToolSpec(_Strict):
    """An OpenAI tool: `{"type": "function", "function": {name, description, parameters}}`."""

    type: Literal["function"] = "function"
    function: FunctionSpec


class ToolModelSpec(_Strict):
    """The model that plays a tool from the instructions when nothing recorded answers it.
    Unset: the judge's model (`EVALSITE_LLM_BASE_URL`, `EVALSITE_LLM_MODEL`, `EVALSITE_LLM_API_KEY`)."""

    base_url: str
    model: str = Field(min_length=1, max_length=200)
    api_key_env: str | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return http_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        return env_name(value)


def http_url(value: str) -> str:
    import httpx

    try:
        url = httpx.URL(value)
    except (httpx.InvalidURL, ValueError, TypeError) as exc:  # InvalidURL is no ValueError
        raise ValueError(f"not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


def env_name(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if not ENV_NAME.fullmatch(value):
        raise ValueError("the name of an environment variable: letters, digits and _, not starting with a digit "
                         "(the key itself is never given here)")
    return value


class ModelTargetSpec(_Strict):
    base_url: str  # `/chat/completions` is appended
    model: str = Field(min_length=1, max_length=200)
    api_key_env: str | None = None
    # Azure-style gateways: the key in an `api-key` header instead of `Authorization: Bearer`.
    api_key_header: str = Field(default="Authorization", pattern=r"^[A-Za-z0-9-]{1,64}$")
    api_version: str | None = Field(default=None, max_length=40)  # Azure's `?api-version=`
    prompt: PromptText = Field(default_factory=PromptText)
    tools: list[ToolSpec] | None = None  # None: one function per tool the eval set expects
    tools_inferred: bool = False  # set by evalsite when it built `tools` from the eval set
    tool_results: Literal["simulate"] = "simulate"
    # The judge model plays every tool nothing recorded answers (as UiPath's `simulateTools`).
    simulate_with_llm: bool = False
    tool_instructions: str = Field(default="", max_length=MAX_PROMPT_CHARS)
    tool_model: ToolModelSpec | None = None
    max_steps: int = Field(default=10, ge=1, le=100)  # model calls per turn
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    seed: int | None = None
    parallel_tool_calls: bool | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)  # anything else the endpoint takes
    timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    retries: int = Field(default=3, ge=0, le=10)
    backoff_seconds: float = Field(default=0.5, ge=0, le=60)
    concurrency: int = Field(default=8, ge=1, le=64)  # cases in flight per worker
    # Cost per million tokens, for endpoints whose usage carries no cost of its own.
    input_cost_per_million: float | None = Field(default=None, ge=0)
    output_cost_per_million: float | None = Field(default=None, ge=0)
    max_response_bytes: int = Field(default=10_000_000, ge=1)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return http_url(value)

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, value: str | None) -> str | None:
        return env_name(value)

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[ToolSpec] | None) -> list[ToolSpec] | None:
        if value is None:
            return None
        if len(value) > MAX_TOOLS:
            raise ValueError(f"at most {MAX_TOOLS} tools")
        names = [tool.function.name for tool in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tool names must be unique: {', '.join(twice)}")
        return value

    @field_validator("parameters")
    @classmethod
    def _parameters(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(RESERVED_PARAMETERS & value.keys())
        if taken:
            raise ValueError(f"evalsite sets {', '.join(taken)} itself")
        return value

    def body_parameters(self) -> dict[str, Any]:
        """The sampling parameters sent with every model call."""
        body: dict[str, Any] = dict(self.parameters)
        for name in ("temperature", "top_p", "max_tokens", "seed", "parallel_tool_calls"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        return body

    def tool_names(self) -> list[str]:
        return [tool.function.name for tool in self.tools or []]


# --- Experiments --------------------------------------------------------------------------------

MIN_VARIANTS = 2
MAX_VARIANTS = 8
# The target fields a variant may set besides its model and prompt.
VARIANT_PARAMETERS = frozenset({
    "temperature", "top_p", "max_tokens", "seed", "parallel_tool_calls", "parameters", "max_steps",
    "base_url", "api_key_env", "api_key_header", "api_version", "input_cost_per_million", "output_cost_per_million",
    "simulate_with_llm", "tool_instructions",
})


class PromptRef(_Strict):
    """A stored prompt's version (the latest when `version` is None)."""

    prompt_id: int = Field(ge=1)
    version: int | None = Field(default=None, ge=1)


class VariantSpec(_Strict):
    """One variant of an experiment: a model, a prompt (stored or as text) and parameters,
    laid over the experiment's base target."""

    label: str = Field(default="", max_length=120)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    prompt: PromptRef | PromptText | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)

    @field_validator("parameters")
    @classmethod
    def _known(cls, value: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(value) - VARIANT_PARAMETERS)
        if unknown:
            raise ValueError(f"a variant cannot set {', '.join(unknown)} (it may set: "
                             f"{', '.join(sorted(VARIANT_PARAMETERS))}; model and prompt have fields of their own)")
        return value


class ExperimentSpec(_Strict):
    """What `POST /api/v1/experiments/` takes besides the eval set."""

    name: str = Field(default="", max_length=200)
    base: dict[str, Any] = Field(default_factory=dict)  # a model target, less what the variants set
    variants: list[VariantSpec] = Field(min_length=MIN_VARIANTS, max_length=MAX_VARIANTS)
    iterations: int = Field(default=1, ge=1, le=100)
    eval_ids: list[str] = Field(default_factory=list)
    branch: str = Field(default="", max_length=255)
    tags: list[str] = Field(default_factory=list, max_length=20)
