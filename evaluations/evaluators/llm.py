"""A small client for OpenAI-compatible chat-completions endpoints (OpenAI, vLLM, Ollama,
LiteLLM, Azure-style gateways...), used by the LLM judge and the user simulator.

Configuration comes from the constructor, else from the environment at call time, so a
worker picks up a changed key without a restart:

- `EVALSITE_LLM_BASE_URL` (default `https://api.openai.com/v1`): the URL that
  `/chat/completions` is appended to;
- `EVALSITE_LLM_MODEL` (default `gpt-4o-mini`): used when a call names no model;
- `EVALSITE_LLM_API_KEY`: sent as a bearer token when set.

Transient failures (HTTP 429 and 5xx, timeouts, dropped connections) are retried with
exponential backoff, honouring `Retry-After`. Structured output is asked for with
`response_format: {"type": "json_schema", ...}`; a server that rejects that parameter gets the
schema in the prompt instead (and is remembered as such). Replies are parsed with pydantic;
a reply wrapped in a ```json fence, or with prose around one JSON object, is accepted.
Every failure is raised as `LLMError`, whose message says what went wrong and where.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from evaluations import safejson

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"

T = TypeVar("T", bound=BaseModel)

# A fenced block's text, stripped where it is used: so no `\s*\n?` after the opening fence,
# which made an unclosed fence followed by whitespace quadratic (20,000 spaces: 3.2 s of a
# worker on a judge's reply, which an answer can steer).
_FENCE = re.compile(r"```(?:json|JSON)?(.*?)```", re.DOTALL)
# Statuses worth another try: rate limits, gateway hiccups, overloaded servers.
_RETRY_STATUSES = {408, 409, 425, 429, 500, 502, 503, 504, 529}
_MAX_RETRY_AFTER = 30.0


class LLMError(Exception):
    """The LLM call failed: unreachable, timed out, refused, or answered something unusable."""

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body


@dataclass
class ChatResult:
    text: str
    model: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1


@dataclass
class StructuredResult(Generic[T]):
    value: T
    raw: ChatResult


class ChatClient:
    """Synchronous chat-completions client; safe to share between threads."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 20.0,
        json_schema: bool | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._base_url = base_url
        self._model = model
        self._api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        # None: try `response_format: json_schema` and fall back if the server refuses it.
        self.json_schema = json_schema
        self._transport = transport
        # Calls in flight at once, shared by the clients of one batch (runs/engine.py): held
        # around each HTTP request only, never while a retry waits.
        self.limiter: threading.Semaphore | None = None
        self._http: httpx.Client | None = None
        self._lock = threading.Lock()

    # Settings are read when used, not when built (see the module docstring).
    @property
    def base_url(self) -> str:
        return (self._base_url or os.environ.get("EVALSITE_LLM_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")

    @property
    def model(self) -> str:
        return self._model or os.environ.get("EVALSITE_LLM_MODEL") or DEFAULT_MODEL

    @property
    def api_key(self) -> str:
        return self._api_key if self._api_key is not None else os.environ.get("EVALSITE_LLM_API_KEY", "")

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(timeout=httpx.Timeout(self.timeout), transport=self._transport)
            return self._http

    # --- Calls ----------------------------------------------------------------------------

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion; returns the first choice's text."""
        payload: dict[str, Any] = {"model": model or self.model, "messages": messages}
        if temperature is not None:
            payload["temperature"] = temperature
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if response_format is not None:
            payload["response_format"] = response_format
        body, attempts = self._post(payload)
        return _chat_result(body, attempts)

    def structured(
        self,
        messages: list[dict[str, Any]],
        schema: type[T],
        *,
        model: str | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
    ) -> StructuredResult[T]:
        """A completion parsed into `schema`, asked for as a JSON-schema response format."""
        result = self.structured_text(messages, schema, model=model, temperature=temperature, max_tokens=max_tokens)
        return StructuredResult(parse_json_reply(result.text, schema), result)

    def structured_text(
        self,
        messages: list[dict[str, Any]],
        schema: type[BaseModel],
        *,
        model: str | None = None,
        temperature: float | None = 0.0,
        max_tokens: int | None = None,
    ) -> ChatResult:
        """A completion asked for as `schema` (a JSON-schema response format named after the
        class), returned unparsed: for callers that read the reply by their own rules."""
        json_schema = _json_schema(schema)
        if self.json_schema is not False:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": False},
            }
            try:
                return self.complete(messages, model=model, temperature=temperature, max_tokens=max_tokens,
                                     response_format=response_format)
            except LLMError as exc:
                if not _refuses_response_format(exc):
                    raise
                self.json_schema = False  # this server does not know the parameter: stop asking
        instruction = {
            "role": "system",
            "content": "Answer with one JSON object, and nothing else, that matches this JSON Schema:\n"
            + json.dumps(json_schema),
        }
        return self.complete([*messages, instruction], model=model, temperature=temperature, max_tokens=max_tokens)

    def _post(self, payload: dict[str, Any]) -> tuple[dict[str, Any], int]:
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempts = 0
        while True:
            attempts += 1
            retry_after: float | None = None
            try:
                with self.limiter if self.limiter is not None else contextlib.nullcontext():
                    response = self._client().post(url, json=payload, headers=headers)
            except httpx.TimeoutException as exc:
                failure = LLMError(f"{url} did not answer within {self.timeout:g} s ({type(exc).__name__})")
            except httpx.TransportError as exc:
                failure = LLMError(f"could not reach {url}: {type(exc).__name__}: {exc}")
            else:
                if response.status_code < 400:
                    try:
                        body = response.json()
                    except ValueError:
                        raise LLMError(f"{url} answered HTTP {response.status_code} with a body that is not JSON",
                                       status=response.status_code, body=response.text[:2000]) from None
                    if not isinstance(body, dict):
                        raise LLMError(f"{url} answered a JSON {type(body).__name__}, not a chat completion object",
                                       status=response.status_code, body=response.text[:2000])
                    return body, attempts
                failure = LLMError(
                    f"{url} answered HTTP {response.status_code}: {_error_message(response)}",
                    status=response.status_code, body=response.text[:2000],
                )
                if response.status_code not in _RETRY_STATUSES:
                    raise failure
                retry_after = _retry_after(response)
            if attempts > self.max_retries:
                if attempts > 1:
                    raise LLMError(f"{failure} (gave up after {attempts} attempts)", status=failure.status,
                                   body=failure.body) from failure
                raise failure
            delay = min(self.max_backoff, self.backoff * 2 ** (attempts - 1))
            if retry_after is not None:
                delay = max(delay, min(retry_after, _MAX_RETRY_AFTER))
            time.sleep(delay)


@functools.lru_cache(maxsize=512)
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A structured reply's JSON schema, made once per class (about a millisecond each time)."""
    return schema.model_json_schema()


# --- Reply handling ---------------------------------------------------------------------------


def _chat_result(body: dict[str, Any], attempts: int) -> ChatResult:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError("the chat completion has no choices", body=json.dumps(body)[:2000])
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts, as some gateways return them
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal") if isinstance(message, dict) else None
        reason = f"refused: {refusal}" if refusal else "an empty message"
        raise LLMError(f"the model answered {reason}", body=json.dumps(body)[:2000])
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return ChatResult(text=content, model=str(body.get("model") or ""), usage=dict(usage or {}), attempts=attempts)


def extract_json(text: str) -> Any:
    """The JSON value in a model's reply: the whole text, a ```json fenced block, or the
    outermost {...} span, tried in that order."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return safejson.loads(candidate)
        except ValueError:
            continue
    raise LLMError(f"the reply is not JSON: {text[:300]!r}", body=text[:2000])


def parse_json_reply(text: str, schema: type[T]) -> T:
    value = extract_json(text)
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise LLMError(f"the reply does not match {schema.__name__}: {problems}", body=text[:2000]) from None


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
        if body.get("message"):
            return str(body["message"])[:300]
    return response.text[:300]


def _refuses_response_format(exc: LLMError) -> bool:
    return exc.status in (400, 422) and any(word in exc.body for word in ("response_format", "json_schema"))


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from LLM gateways, and the backoff still applies


# --- Usage and cost -----------------------------------------------------------------------------

# US dollars per million tokens (input, output), for judges whose provider does not report a
# cost itself. The list price of a few common judge models; `EVALSITE_LLM_PRICES` (JSON:
# {"model": [input, output]}) adds others or replaces these. A model found in neither is
# counted in tokens only.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
}


def prices() -> dict[str, tuple[float, float]]:
    table = dict(DEFAULT_PRICES)
    raw = os.environ.get("EVALSITE_LLM_PRICES", "")
    if raw:
        try:
            extra = json.loads(raw)
        except ValueError:
            extra = {}
        if isinstance(extra, dict):
            for name, pair in extra.items():
                if (isinstance(pair, list | tuple) and len(pair) == 2
                        and all(isinstance(p, int | float) and not isinstance(p, bool) for p in pair)):
                    table[str(name)] = (float(pair[0]), float(pair[1]))
    return table


def call_cost(model: str, usage: dict[str, Any]) -> float | None:
    """What one call cost in US dollars: the provider's own figure (`usage.cost`, as
    OpenRouter and LiteLLM report it) when given, else the tokens at the model's price; None
    when neither is known. A dated model name (`gpt-4o-mini-2024-07-18`) takes its base's price."""
    reported = usage.get("cost")
    if isinstance(reported, int | float) and not isinstance(reported, bool):
        return float(reported)
    table = prices()
    price = table.get(model)
    if price is None:
        base = re.sub(r"-\d{4}-\d{2}-\d{2}$", "", model)
        price = table.get(base)
    if price is None:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return (prompt * price[0] + completion * price[1]) / 1_000_000


@dataclass
class Spend:
    """A judge's calls, tokens and cost, added up call by call (thread-safe)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, result: ChatResult, model: str) -> None:
        cost = call_cost(result.model or model, result.usage)
        if cost is None and result.model and result.model != model:
            cost = call_cost(model, result.usage)
        with self._lock:
            self.calls += 1
            prompt, completion = result.usage.get("prompt_tokens"), result.usage.get("completion_tokens")
            self.prompt_tokens += prompt if isinstance(prompt, int) else 0
            self.completion_tokens += completion if isinstance(completion, int) else 0
            if cost is not None:
                self.cost_usd = (self.cost_usd or 0.0) + cost

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd}
