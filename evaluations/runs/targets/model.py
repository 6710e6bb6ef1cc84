"""The model target: evalsite runs a model, a prompt and its tools itself, the tools simulated.

For each case, turn by turn (the turn driver of `targets.http`, so multi-turn cases carry
their history and `conversation_scenario` cases get the user simulator), evalsite sends the
conversation to an OpenAI-compatible `/chat/completions` endpoint (`stream: false`): the
system message and the user template rendered from the case (`schemas.prompt_template`), and
the tools. While the model answers with tool calls, each call is answered with a simulated
result (`runs.simulation`) as a `tool` message, and the model is called again, up to
`max_steps` model calls in the turn; its first answer without tool calls is the turn's final
response. A model still calling tools after `max_steps` ends the turn with that error.

Per turn it records the tool calls (arguments as the model sent them, the simulated result
and where it came from), the model calls' usage summed (prompt and completion tokens, and
the cost: the one the endpoint reports in `usage.cost`, else the target's prices per
million tokens) and their latency summed (the time of the HTTP calls to the model, not of
the simulation). Arguments that are not JSON are the call's error, answered to the model as
such (so it may try again).

Failures never raise: 408/409/425/429/5xx/529, timeouts and dropped connections are retried
(`retries` times, waiting `backoff_seconds` doubling, or the server's Retry-After when
longer, up to 30 s); what still fails ends the case with the turn's error. The endpoint's
URL passes the egress policy (`targets.egress`) before every batch and is called at the
address checked. The API key is read from the environment variable `api_key_env` names, in
the worker, when the batch starts: it is never stored with the run nor shown.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import httpx
import orjson

from evaluations.evaluators.llm import ChatClient, LLMError, extract_json
from evaluations.runs import simulation
from evaluations.runs.targets import egress
from evaluations.runs.targets.contract import TurnReply
from evaluations.runs.targets.http import SimulateUser, TurnResult, drive_case
from evaluations.schemas.evalset import EvalCase, content_text
from evaluations.schemas.model_target import ModelTargetSpec, ToolModelSpec, ToolSpec
from evaluations.schemas.outputs import AgentOutput, OutputToolCall, Usage
from evaluations.schemas.prompt_template import render

RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
MAX_RETRY_AFTER = 30.0
_RETRY_AFTER = re.compile(r"\d+(\.\d+)?")


class ModelCallError(Exception):
    """The model endpoint did not give a usable completion; the message says why."""


# --- Calling an endpoint ----------------------------------------------------------------------


class Endpoint:
    """One OpenAI-compatible `/chat/completions` URL, called at its pinned address."""

    def __init__(self, client: httpx.Client, base_url: str, *, api_key: str = "", key_header: str = "Authorization",
                 api_version: str | None = None, retries: int = 3, backoff: float = 0.5, timeout: float = 120.0,
                 max_bytes: int = 10_000_000, pin: bool = True) -> None:
        url = f"{base_url.rstrip('/')}/chat/completions"
        self.url, self.headers, self.extensions = egress.pinned_request(url) if pin else (url, {}, {})
        self.headers = {**self.headers, "Content-Type": "application/json"}
        if api_key:
            self.headers[key_header] = f"Bearer {api_key}" if key_header.lower() == "authorization" else api_key
        self.params = {"api-version": api_version} if api_version else None
        self.client, self.retries, self.backoff = client, retries, backoff
        self.timeout, self.max_bytes = timeout, max_bytes

    def complete(self, payload: dict[str, Any]) -> tuple[dict[str, Any], float, dict[str, str]]:
        """(the completion, seconds of the answering request, its headers); ModelCallError."""
        content = orjson.dumps(payload)
        delay = self.backoff
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            start = perf_counter()
            try:
                status, data, headers = self._post(content)
            except (httpx.TimeoutException, _Deadline):
                last = f"the model did not answer within {self.timeout:g} s"
                continue
            except _TooLarge:
                raise ModelCallError(f"the model's answer is larger than {self.max_bytes:,} bytes") from None
            except httpx.TransportError as exc:
                last = f"cannot reach the model: {type(exc).__name__}: {exc}"
                continue
            latency = perf_counter() - start
            if status in RETRY_STATUSES:
                last = f"HTTP {status}: {_error_text(data)}"
                wait = headers.get("retry-after", "").strip()
                if _RETRY_AFTER.fullmatch(wait):
                    delay = max(delay, min(float(wait), MAX_RETRY_AFTER))
                continue
            if status >= 300:
                raise ModelCallError(f"HTTP {status}: {_error_text(data)}")
            try:
                body = orjson.loads(data)
            except orjson.JSONDecodeError:
                raise ModelCallError(f"the answer is not JSON: {_snippet(data)}") from None
            if not isinstance(body, dict):
                raise ModelCallError(f"the answer is a JSON {type(body).__name__}, not a chat completion")
            return body, latency, headers
        attempts = self.retries + 1
        raise ModelCallError(f"{last} (after {attempts} attempt{'s' if attempts > 1 else ''})")

    def _post(self, content: bytes) -> tuple[int, bytes, dict[str, str]]:
        deadline = perf_counter() + self.timeout
        with self.client.stream("POST", self.url, content=content, headers=self.headers, params=self.params,
                                extensions=self.extensions) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_bytes:
                    raise _TooLarge
                chunks.append(chunk)
                if perf_counter() > deadline:
                    raise _Deadline
            return response.status_code, b"".join(chunks), {k.lower(): v for k, v in response.headers.items()}


class _Deadline(Exception):
    pass


class _TooLarge(Exception):
    pass


def _snippet(data: bytes, limit: int = 200) -> str:
    text = " ".join(data.decode("utf-8", "replace").split())
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


def _error_text(data: bytes) -> str:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return _snippet(data)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return _snippet(data)


# --- Reading a completion -------------------------------------------------------------------


@dataclass
class Step:
    """One model call's answer."""

    content: str | None
    tool_calls: list[dict[str, Any]]
    message: dict[str, Any]  # as it goes back into the conversation
    finish_reason: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None


def read_step(body: dict[str, Any], headers: dict[str, str]) -> Step:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelCallError(f"the completion has no choices: {_snippet(orjson.dumps(body))}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise ModelCallError("the completion's first choice has no message")
    content = message.get("content")
    if isinstance(content, list):  # content parts, as some gateways send them
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    calls = message.get("tool_calls")
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    if not calls and isinstance(message.get("function_call"), dict):  # the older single-call shape
        calls = [{"id": "call_0", "type": "function", "function": message["function_call"]}]
    back: dict[str, Any] = {"role": "assistant", "content": content if isinstance(content, str) else None}
    if calls:
        back["tool_calls"] = calls
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    assert isinstance(usage, dict)
    cost = next((usage[k] for k in ("cost", "cost_usd", "total_cost") if isinstance(usage.get(k), int | float)), None)
    if cost is None and _RETRY_AFTER.fullmatch(headers.get("x-litellm-response-cost", "").strip() or "x"):
        cost = float(headers["x-litellm-response-cost"])
    return Step(content if isinstance(content, str) else None, calls, back, str(choices[0].get("finish_reason") or ""),
                _int(usage.get("prompt_tokens", usage.get("input_tokens"))),
                _int(usage.get("completion_tokens", usage.get("output_tokens"))),
                float(cost) if cost is not None else None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# --- The tools ------------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


class ToolInference:
    """One function per tool name an eval set expects anywhere (expected tool calls, UiPath
    mocks and tools to simulate), its parameters inferred from the expected arguments: a
    property per argument name seen, typed by the values seen (several types: a list of
    them; integer and number together: number), required when every expected call of the
    tool gives it. Fed case by case, so a large eval set is never held whole."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.seen: dict[str, dict[str, set[str]]] = {}
        self.present: dict[str, dict[str, int]] = {}

    def add_case(self, case: EvalCase) -> None:
        for invocation in case.conversation:
            for call in invocation.expected_tool_trajectory:
                self.add_call(call.name, call.args)
        strategy = case.metadata.get("mockingStrategy")
        if isinstance(strategy, dict):
            for behavior in strategy.get("config", strategy.get("behaviors")) or []:
                if isinstance(behavior, dict) and isinstance(behavior.get("function"), str):
                    arguments = behavior.get("arguments")
                    kwargs = arguments.get("kwargs") if isinstance(arguments, dict) else None
                    self.add_call(behavior["function"], kwargs if isinstance(kwargs, dict) else None)
            for tool in strategy.get("toolsToSimulate") or []:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    self.add_call(tool["name"], None)
        for tool in case.metadata.get("toolsToSimulate") or []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                self.add_call(tool["name"], None)

    def add_call(self, name: str, args: dict[str, Any] | None) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            return  # not a name a function can have; the model could never call it
        self.seen.setdefault(name, {})
        self.present.setdefault(name, {})
        if args is None:
            return
        self.calls[name] = self.calls.get(name, 0) + 1
        for key, value in args.items():
            self.seen[name].setdefault(key, set()).add(_json_type(value))
            self.present[name][key] = self.present[name].get(key, 0) + 1

    def tools(self) -> list[dict[str, Any]]:
        out = []
        for name in sorted(self.seen):
            properties: dict[str, Any] = {}
            for key, types in self.seen[name].items():
                kinds = sorted(types - {"null"}) or ["string"]
                if set(kinds) == {"integer", "number"}:
                    kinds = ["number"]
                properties[key] = {"type": kinds[0] if len(kinds) == 1 else kinds}
            calls = self.calls.get(name, 0)
            required = [k for k, n in self.present[name].items() if calls and n == calls]
            parameters: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                parameters["required"] = required
            out.append({"type": "function", "function": {
                "name": name, "description": f"The {name} tool (as the eval set's expected calls use it).",
                "parameters": parameters}})
        return out


# --- The conversation of one case ---------------------------------------------------------------


def _input_value(content: Any) -> Any:
    """The turn's user content for `{{input}}`: text, or a structured input's object."""
    if isinstance(content, list):
        parts = [p["json"] for p in content if isinstance(p, dict) and p.get("type") == "json" and "json" in p]
        if len(parts) == 1:
            return parts[0]
        return content_text(content)
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)


def _result_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class Conversation:
    """One (case, iteration) with the model: the messages so far, across its turns."""

    def __init__(self, target: ModelTarget, case: EvalCase, endpoint: Endpoint) -> None:
        self.target, self.case, self.endpoint = target, case, endpoint
        spec = target.spec
        self.tools = simulation.CaseTools(case, play=target.play_tool, schemas=target.schemas,
                                          simulate_with_llm=spec.simulate_with_llm,
                                          instructions=spec.tool_instructions)
        session = case.session_input
        state = {}
        if session is not None:
            state = session.initial_state or session.state or {}
        self.context: dict[str, Any] = {
            "state": state, "session": session.model_dump(mode="json") if session is not None else {},
            "metadata": case.metadata, "eval_id": case.eval_id, "case_name": case.name,
        }
        self.messages: list[dict[str, Any]] = []
        system = render(spec.prompt.system, {**self.context, "input": "", "turn": 1}) if spec.prompt.system else ""
        if system:
            self.messages.append({"role": "system", "content": system})

    def send(self, request: dict[str, Any]) -> TurnResult:
        spec = self.target.spec
        turn = int(request["turn_index"])
        self.messages.append({"role": "user", "content": render(spec.prompt.user, {
            **self.context, "input": _input_value(request["user_content"]), "turn": turn + 1})})
        calls: list[OutputToolCall] = []
        prompt_tokens = completion_tokens = 0
        tokens_known = False
        cost: float | None = None
        latency = 0.0
        final: str | None = None
        error: str | None = None
        finish = ""
        steps = 0
        counts = simulation.ToolCounts()
        while True:
            if steps >= spec.max_steps:
                error = (f"the model was still calling tools after {spec.max_steps} model call"
                         f"{'s' if spec.max_steps != 1 else ''} (max_steps)")
                break
            steps += 1
            try:
                body, seconds, headers = self.endpoint.complete(self.target.payload(self.messages))
                step = read_step(body, headers)
            except ModelCallError as exc:
                if not calls:  # nothing happened in this turn: the case stops here
                    return TurnResult(error=f"model call {steps}: {exc}", latency_seconds=latency or None,
                                      metadata={"model_calls": steps})
                error = f"model call {steps}: {exc}"
                break
            latency += seconds
            if step.prompt_tokens is not None or step.completion_tokens is not None:
                tokens_known = True
                prompt_tokens += step.prompt_tokens or 0
                completion_tokens += step.completion_tokens or 0
            step_cost = step.cost if step.cost is not None else self.target.price(step)
            if step_cost is not None:
                cost = (cost or 0.0) + step_cost
            finish = step.finish_reason
            self.messages.append(step.message)
            if not step.tool_calls:
                final = step.content or ""
                break
            for raw in step.tool_calls:
                call = self._answer(raw, turn, counts)
                calls.append(call)
                self.messages.append({"role": "tool", "tool_call_id": call.call_id or "",
                                      "content": _result_text(call.result)})
        usage = Usage(prompt_tokens=prompt_tokens if tokens_known else None,
                      completion_tokens=completion_tokens if tokens_known else None,
                      total_tokens=prompt_tokens + completion_tokens if tokens_known else None, cost_usd=cost)
        metadata: dict[str, Any] = {"model_calls": steps, "finish_reason": finish}
        if counts.by_source:
            metadata["simulated"] = counts.by_source
        reply = TurnReply(final_response=final, tool_calls=calls, usage=usage, error=error, metadata=metadata)
        return TurnResult(reply=reply, latency_seconds=latency, metadata=metadata)

    def _answer(self, raw: dict[str, Any], turn: int, counts: simulation.ToolCounts) -> OutputToolCall:
        function = raw.get("function") if isinstance(raw.get("function"), dict) else {}
        assert isinstance(function, dict)
        name = str(function.get("name") or raw.get("name") or "")
        call_id = str(raw.get("id") or f"call_{len(self.messages)}")
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, dict):
            args: Any = arguments
        else:
            try:
                args = orjson.loads(arguments or "{}") if isinstance(arguments, str) else None
            except orjson.JSONDecodeError:
                args = None
        if not isinstance(args, dict):
            why = "the model's arguments are not a JSON object"
            return OutputToolCall(name=name or "(no name)", args={"_raw": str(arguments)[:2000]}, call_id=call_id,
                                  result={"error": f"{why}: send the arguments as a JSON object"}, error=why)
        found = self.tools.answer(name, args, turn=turn, transcript=self.messages)
        counts.add(found.source)
        return OutputToolCall(name=name, args=args, call_id=call_id, result=found.result, error=found.error,
                              simulated=found.source)


# --- The target -------------------------------------------------------------------------------


class ModelTarget:
    def __init__(self, spec: ModelTargetSpec, *, simulate_user: SimulateUser | None = None,
                 max_simulated_turns: int = 50, transport: httpx.BaseTransport | None = None) -> None:
        self.spec = spec
        self.simulate_user = simulate_user
        self.max_simulated_turns = max_simulated_turns
        self.transport = transport
        self.schemas = {tool.function.name: tool.function.parameters for tool in spec.tools or []}
        self._tools = [tool.model_dump(mode="json", exclude_none=True) for tool in spec.tools or []]
        self._base = {"model": spec.model, "stream": False, **spec.body_parameters()}
        self._client: httpx.Client | None = None
        self._tool_endpoint: tuple[Endpoint, str] | None = None
        self._tool_lock = threading.Lock()

    def payload(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = {**self._base, "messages": messages}
        if self._tools:
            body["tools"] = self._tools
        return body

    def price(self, step: Step) -> float | None:
        spec = self.spec
        if spec.input_cost_per_million is None and spec.output_cost_per_million is None:
            return None
        if step.prompt_tokens is None and step.completion_tokens is None:
            return None
        return ((step.prompt_tokens or 0) * (spec.input_cost_per_million or 0.0)
                + (step.completion_tokens or 0) * (spec.output_cost_per_million or 0.0)) / 1_000_000

    def run_many(self, work: list[tuple[EvalCase, int]], *,
                 input_overrides: dict[str, dict[str, Any]] | None = None) -> list[AgentOutput]:
        """One output per (case, iteration), in the order given; never raises."""
        if not work:
            return []
        spec = self.spec
        failed = self._refusal()
        if failed is not None:
            return [AgentOutput(eval_id=case.eval_id, iteration=iteration, error=failed) for case, iteration in work]
        overrides = input_overrides or {}
        client = self._http()
        try:
            endpoint = Endpoint(client, spec.base_url, api_key=_key(spec.api_key_env), key_header=spec.api_key_header,
                                api_version=spec.api_version, retries=spec.retries, backoff=spec.backoff_seconds,
                                timeout=spec.timeout_seconds, max_bytes=spec.max_response_bytes)
        except egress.EgressRefused as exc:
            return [AgentOutput(eval_id=case.eval_id, iteration=iteration, error=f"the model URL is refused: {exc}")
                    for case, iteration in work]

        def run(item: tuple[EvalCase, int]) -> AgentOutput:
            case, iteration = item
            try:
                conversation = Conversation(self, case, endpoint)
                output = drive_case(case, iteration, conversation.send, overrides=overrides.get(case.eval_id),
                                    metadata=spec.metadata, simulate_user=self.simulate_user,
                                    max_simulated_turns=self.max_simulated_turns)
                if conversation.tools.unsimulated:
                    output.metadata["unsimulated_tools"] = sorted(set(conversation.tools.unsimulated))
                return output
            except Exception as exc:  # a bug must cost one case, not the whole batch
                return AgentOutput(eval_id=case.eval_id, iteration=iteration,
                                   error=f"internal error: {type(exc).__name__}: {exc}")

        if len(work) == 1:
            return [run(work[0])]
        with ThreadPoolExecutor(max_workers=min(spec.concurrency, len(work)),
                                thread_name_prefix="evalsite-model-target") as pool:
            return list(pool.map(run, work))

    def _refusal(self) -> str | None:
        name = self.spec.api_key_env
        if name and not os.environ.get(name):
            return f"the environment variable {name} (api_key_env) is not set in the worker"
        return None

    def _http(self) -> httpx.Client:
        if self._client is None:
            n = self.spec.concurrency
            self._client = httpx.Client(timeout=httpx.Timeout(self.spec.timeout_seconds), follow_redirects=False,
                                        limits=httpx.Limits(max_connections=n + 2, max_keepalive_connections=n + 2),
                                        transport=self.transport)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # The model that plays tools: built on first need, shared by the batch's cases.
    def play_tool(self, play: simulation.ToolPlay) -> Any:
        endpoint, model = self._player()
        body, _, headers = endpoint.complete({"model": model, "stream": False, "temperature": 0,
                                              "messages": simulation.play_messages(play)})
        step = read_step(body, headers)
        text = (step.content or "").strip()
        try:
            return extract_json(text)
        except LLMError:
            return text  # a tool may answer text

    def _player(self) -> tuple[Endpoint, str]:
        with self._tool_lock:
            if self._tool_endpoint is None:
                self._tool_endpoint = tool_endpoint(self._http(), self.spec.tool_model, self.spec)
            return self._tool_endpoint


def tool_endpoint(client: httpx.Client, spec: ToolModelSpec | None, target: ModelTargetSpec) -> tuple[Endpoint, str]:
    """The model that plays tools: the target's `tool_model` (its URL through the egress
    policy), else the judge's (`EVALSITE_LLM_*`, the operator's own setting)."""
    if spec is not None:
        return Endpoint(client, spec.base_url, api_key=_key(spec.api_key_env), retries=target.retries,
                        backoff=target.backoff_seconds, timeout=target.timeout_seconds), spec.model
    judge = ChatClient()
    return Endpoint(client, judge.base_url, api_key=judge.api_key, retries=target.retries,
                    backoff=target.backoff_seconds, timeout=target.timeout_seconds, pin=False), judge.model


def _key(name: str | None) -> str:
    return os.environ.get(name, "") if name else ""


def inferred_tools(cases: Iterable[EvalCase]) -> list[ToolSpec]:
    """The tools of an eval set's cases as tool specs (see `ToolInference`)."""
    inference = ToolInference()
    for case in cases:
        inference.add_case(case)
    return [ToolSpec.model_validate(tool) for tool in inference.tools()]
