"""The HTTP target: evalsite calls the agent's endpoint, turn by turn.

For every scripted turn of a case, the target POSTs a `TurnRequest` as JSON (see
`evaluations.runs.targets.contract`) with the conversation so far in `history`, and reads a
`TurnReply` back. Each case runs its turns in order; cases run side by side, at most
`concurrency` at a time. Per turn it records the latency of the answering request
(perf_counter) and the usage the agent reports.

Failures never raise: a request that times out, cannot connect, or gets a 5xx or 429 is
retried (`retries` times, waiting `backoff_seconds`, doubling each time, or the server's
Retry-After when longer); what still fails, a 4xx, a redirect, or a reply that is not JSON or
not a TurnReply is recorded as the turn's `error`, the case's `error` names the turn, and its
remaining turns are not sent (they would build on an answer that never came). An `error`
the agent itself puts in its reply is recorded on the turn and the conversation goes on.
Each request carries an `Idempotency-Key` header (`eval_id:iteration:invocation_id`) so an
agent can recognise a retried turn.

Replies of another shape are read with `response_mapping`: a path per field
(`final_response`, `tool_calls`, `intermediate_responses`, `usage`, `error`) in a small
JSONPath subset: an optional leading `$`, `.key` (or a bare first key), `[0]` (negative
counts from the end), `["key with.dots"]`, and `[*]` / `.*` for every item (the result is
then a list). Examples: `$.output.text`, `choices[0].message.content`,
`choices[0].message.tool_calls`, `$.usage`, `$.steps[*].tool`. Fields without a path are
still read from the reply's own TurnReply keys. Tool calls are accepted as TurnReply's
`{name, args, call_id, result}`, OpenAI's `{id, function: {name, arguments: "<json>"}}`, or
`{name, arguments | input | parameters}`; usage as `prompt_tokens`/`completion_tokens`,
`input_tokens`/`output_tokens`, or Gemini's `promptTokenCount`/`candidatesTokenCount`.

The turn driver (`drive_case`) and the reply reader (`reply_from_value`) live here and are
shared with the Python target.
"""

from __future__ import annotations

import copy
import json
import re
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from evaluations import safejson
from evaluations.runs.targets import egress
from evaluations.runs.targets.contract import Message, TurnReply, TurnRequest
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput, TurnOutput

NOT_RUNNABLE = "not runnable: needs a user simulator"

#: Called with the case and the conversation so far; returns the simulated user's next
#: message (text or structured content), or None when the conversation is over. Called
#: from worker threads, one case at a time per thread.
SimulateUser = Callable[[EvalCase, list[Message]], Any]


class ReplyError(ValueError):
    """A reply that cannot be read as a TurnReply."""


# --- JSONPath-like paths ----------------------------------------------------------------------

_MISSING: Any = object()
_SEGMENT = re.compile(
    r"""\.(?P<name>[^.\[\]*\s]+)|\[(?P<index>-?\d+)\]|(?P<star>\[\*\]|\.\*)|\[(?P<q>['"])(?P<key>.*?)(?P=q)\]"""
)

Segment = tuple[str, Any]


def compile_path(text: str) -> tuple[Segment, ...]:
    """`$.a.b[0]["c.d"][*]` as segments; raises ValueError saying where it cannot be read."""
    rest = text.strip()
    if rest.startswith("$"):
        rest = rest[1:]
    if rest and rest[0] not in ".[":
        rest = "." + rest
    segments: list[Segment] = []
    pos = 0
    while pos < len(rest):
        match = _SEGMENT.match(rest, pos)
        if match is None:
            raise ValueError(f"cannot read the path {text!r} from {rest[pos:]!r} on "
                             "(use .key, [0], [\"key\"] or [*])")
        if match.group("name") is not None:
            segments.append(("key", match.group("name")))
        elif match.group("index") is not None:
            segments.append(("index", int(match.group("index"))))
        elif match.group("star") is not None:
            segments.append(("star", None))
        else:
            segments.append(("key", match.group("key")))
        pos = match.end()
    return tuple(segments)


def extract(doc: Any, path: str | tuple[Segment, ...]) -> Any:
    """The value at `path`, a list of values when the path has a wildcard, or `_MISSING`."""
    segments = compile_path(path) if isinstance(path, str) else path
    values = [doc]
    many = False
    for kind, arg in segments:
        found: list[Any] = []
        for value in values:
            if (kind == "key" and isinstance(value, dict) and arg in value) or (
                kind == "index" and isinstance(value, list) and -len(value) <= arg < len(value)
            ):
                found.append(value[arg])
            elif kind == "star":
                many = True
                if isinstance(value, list):
                    found.extend(value)
                elif isinstance(value, dict):
                    found.extend(value.values())
        values = found
    if many:
        return values
    return values[0] if values else _MISSING


class ResponseMapping(BaseModel):
    """Where each TurnReply field is in the agent's reply, for agents with their own shape."""

    model_config = ConfigDict(extra="forbid")
    final_response: str | None = None
    tool_calls: str | None = None
    intermediate_responses: str | None = None
    usage: str | None = None
    error: str | None = None

    @field_validator("*")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            compile_path(value)
        return value

    def paths(self) -> dict[str, str]:
        return {name: path for name, path in self.model_dump().items() if path is not None}


# --- Reading replies --------------------------------------------------------------------------

_REPLY_KEYS = ("final_response", "tool_calls", "intermediate_responses", "trajectory", "usage", "error",
               "metadata")


def _first_key(obj: dict[str, Any], *keys: str) -> Any:
    return next((obj[k] for k in keys if k in obj and obj[k] is not None), None)


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = safejson.loads(value) if value.strip() else {}
        except ValueError:
            return {"input": value}
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"input": value}


def normalize_tool_call(item: Any) -> dict[str, Any]:
    """A native tool-call dict from the shapes agents use (see the module docstring)."""
    if isinstance(item, str) and item:
        return {"name": item}
    if not isinstance(item, dict):
        raise ReplyError(f"a tool call must be an object with a name, not {item!r:.80}")
    function: dict[str, Any] = item["function"] if isinstance(item.get("function"), dict) else {}
    name = _first_key(item, "name", "tool_name", "toolName", "tool") or function.get("name")
    if not isinstance(name, str) or not name:
        raise ReplyError(f"a tool call has no name: {json.dumps(item, default=str)[:120]}")
    args = _first_key(item, "args", "arguments", "input", "parameters", "kwargs")
    if args is None:
        args = function.get("arguments")
    call_id = _first_key(item, "call_id", "id", "tool_call_id", "toolCallId")
    out: dict[str, Any] = {"name": name, "args": _arguments(args),
                           "call_id": str(call_id) if call_id is not None else None}
    result_key = next((k for k in ("result", "output", "response") if k in item), None)
    if result_key is not None:
        out["result"] = item[result_key]
    for key in ("error", "latency_seconds", "node"):
        if item.get(key) is not None:
            out[key] = item[key]
    return out


def normalize_usage(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ReplyError(f"usage must be an object, not {value!r:.80}")
    usage = {
        "prompt_tokens": _first_key(value, "prompt_tokens", "input_tokens", "promptTokenCount",
                                    "prompt_token_count", "inputTokens"),
        "completion_tokens": _first_key(value, "completion_tokens", "output_tokens", "candidatesTokenCount",
                                        "candidates_token_count", "outputTokens"),
        "total_tokens": _first_key(value, "total_tokens", "totalTokenCount", "total_token_count", "totalTokens"),
        "cost_usd": _first_key(value, "cost_usd", "cost", "total_cost"),
    }
    return {k: v for k, v in usage.items() if v is not None} or None


def reply_from_value(value: Any, mapping: ResponseMapping | None = None) -> TurnReply:
    """A TurnReply from what an agent returned: a TurnReply-shaped object, a plain string (the
    final response), or any JSON read with `mapping`. Raises ReplyError saying why not."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    paths = mapping.paths() if mapping is not None else {}
    raw: dict[str, Any] = {}
    if paths:
        for name, path in paths.items():
            found = extract(value, path)
            if found is _MISSING:
                if name == "final_response":
                    raise ReplyError(f"the reply has nothing at {path} (final_response): {_snippet(value)}")
                continue
            raw[name] = found
        if isinstance(value, dict):
            raw.update({k: value[k] for k in _REPLY_KEYS if k not in paths and k in value})
    elif isinstance(value, str):
        raw = {"final_response": value}
    elif isinstance(value, dict):
        if not any(k in value for k in ("final_response", "tool_calls", "error")):
            raise ReplyError(f"the reply has no final_response, tool_calls or error (keys: "
                             f"{', '.join(sorted(map(str, value))[:10]) or 'none'}); describe its shape "
                             "with response_mapping")
        raw = {k: value[k] for k in _REPLY_KEYS if k in value}
    else:
        raise ReplyError(f"the reply must be a TurnReply object or a string, not {_snippet(value)}")

    calls = raw.get("tool_calls")
    if calls is None:
        raw["tool_calls"] = []
    elif isinstance(calls, dict):
        raw["tool_calls"] = [normalize_tool_call(calls)]
    elif isinstance(calls, list):
        raw["tool_calls"] = [normalize_tool_call(c) for c in calls]
    else:
        raise ReplyError(f"tool_calls must be a list, not {_snippet(calls)}")
    raw["usage"] = normalize_usage(raw.get("usage"))
    intermediate = raw.get("intermediate_responses")
    if intermediate is not None and not isinstance(intermediate, list):
        raw["intermediate_responses"] = [intermediate]
    if raw.get("error") is not None and not isinstance(raw["error"], str):
        raw["error"] = json.dumps(raw["error"], default=str)
    try:
        return TurnReply.model_validate(raw)
    except ValidationError as exc:
        details = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)[:3]
        )
        raise ReplyError(f"the reply does not fit the turn contract: {details}") from None


def _snippet(value: Any, limit: int = 200) -> str:
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, default=str)
    text = " ".join(text.split())
    return repr(text[:limit] + ("..." if len(text) > limit else ""))


# --- Driving a case (shared with the Python target) -------------------------------------------


@dataclass
class TurnResult:
    """One turn's answer as a target got it: a reply, or why there is none."""

    reply: TurnReply | None = None
    error: str | None = None
    latency_seconds: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


SendTurn = Callable[[dict[str, Any]], TurnResult]


def deep_merge(base: Any, override: Any) -> Any:
    """UiPath's input overrides: objects merge key by key (so `{"file": {"ID": "x"}}` keeps
    the file's other fields), lists item by item (longer overrides add items), anything
    else is replaced. Neither argument is changed."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = copy.deepcopy(base)
        for key, value in override.items():
            merged[key] = deep_merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(override, list):
        items = [deep_merge(b, o) for b, o in zip(base, override, strict=False)]
        return items + copy.deepcopy(base[len(override):]) + copy.deepcopy(override[len(base):])
    return copy.deepcopy(override)


def apply_overrides(content: Any, overrides: dict[str, Any] | None) -> Any:
    """Structured user content (`[{"type": "json", "json": {...}}]`) with the overrides merged
    into its object; text content is sent as it is (the overrides still travel in
    `TurnRequest.input_overrides`)."""
    if not overrides or not isinstance(content, list):
        return content
    return [
        {**part, "json": deep_merge(part["json"], overrides)}
        if isinstance(part, dict) and part.get("type") == "json" and isinstance(part.get("json"), dict)
        else part
        for part in content
    ]


def drive_case(
    case: EvalCase,
    iteration: int,
    send: SendTurn,
    *,
    overrides: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    simulate_user: SimulateUser | None = None,
    max_simulated_turns: int = 50,
) -> AgentOutput:
    """Run one case, turn by turn, through `send`; never raises for the agent's failures.

    Scripted cases send each invocation's user content; a case with a
    `conversation_scenario` and no scripted turns asks `simulate_user` for each next user
    message (at most `max_simulated_turns`), or is recorded as not runnable without one.
    """
    output = AgentOutput(eval_id=case.eval_id, iteration=iteration)
    scripted = [(inv.invocation_id, apply_overrides(inv.user_content.content, overrides))
                for inv in case.conversation]
    if not scripted:
        if case.conversation_scenario is None:
            output.error = "the case has no turns to run"
            return output
        if simulate_user is None:
            output.error = NOT_RUNNABLE
            return output
    session = case.session_input.model_dump(mode="json") if case.session_input is not None else None
    history: list[Message] = []
    index = 0
    while True:
        if scripted:
            if index >= len(scripted):
                break
            invocation_id, content = scripted[index]
        else:
            if index >= max_simulated_turns:
                break
            assert simulate_user is not None
            try:
                content = simulate_user(case, list(history))
            except Exception as exc:  # the simulator is another service (an LLM): record, go on
                output.error = f"the user simulator failed: {type(exc).__name__}: {exc}"
                break
            if content is None:
                break
            invocation_id = f"turn_{index + 1}"
        request = TurnRequest(
            eval_id=case.eval_id,
            iteration=iteration,
            invocation_id=invocation_id,
            turn_index=index,
            user_content=content,
            history=list(history),
            session_input=session,
            input_overrides=overrides or {},
            metadata=dict(metadata or {}),
        )
        result = send(request.model_dump(mode="json"))
        turn = TurnOutput(invocation_id=invocation_id, latency_seconds=result.latency_seconds,
                          metadata=dict(result.metadata))
        if result.reply is not None:
            reply = result.reply
            turn.final_response = reply.final_response
            turn.tool_calls = reply.tool_calls
            turn.intermediate_responses = reply.intermediate_responses
            turn.usage = reply.usage
            turn.error = reply.error
            turn.metadata = {**reply.metadata, **result.metadata}
            output.trajectory.extend(
                step.model_copy(update={"metadata": {**step.metadata, "invocation_id": invocation_id}})
                for step in reply.trajectory
            )
        else:
            turn.error = result.error
        output.turns.append(turn)
        history += [Message(role="user", content=content), Message(role="assistant", content=turn.final_response)]
        if result.reply is None:
            output.error = f"turn {invocation_id}: {result.error}"
            break
        index += 1
    latencies = [t.latency_seconds for t in output.turns]
    if latencies and all(v is not None for v in latencies):
        output.latency_seconds = sum(v for v in latencies if v is not None)
    return output


# --- The HTTP target --------------------------------------------------------------------------


class HttpTargetSpec(BaseModel):
    """How to call an agent over HTTP (a run's target configuration)."""

    model_config = ConfigDict(extra="forbid")
    url: str
    headers: dict[str, str] = Field(default_factory=dict)  # e.g. {"Authorization": "Bearer ..."}
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    retries: int = Field(default=2, ge=0, le=10)
    backoff_seconds: float = Field(default=0.5, ge=0, le=60)
    concurrency: int = Field(default=4, ge=1, le=64)
    response_mapping: ResponseMapping = Field(default_factory=ResponseMapping)
    metadata: dict[str, Any] = Field(default_factory=dict)  # sent in every TurnRequest's metadata
    max_response_bytes: int = Field(default=10_000_000, ge=1)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as exc:  # not a ValueError, so pydantic would not report it
            raise ValueError(f"not a valid URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError("must be an http:// or https:// URL")
        return value


class _Deadline(Exception):
    pass


class _Unreadable(Exception):
    """A reply in a content encoding evalsite does not decode (it asks for none)."""


class _BoundedDecoder:
    """A reply's body decoded as it arrives, never past `limit` bytes: evalsite asks for no
    content encoding, but an agent may gzip its reply anyway, and one 64 KiB network read of
    a gzip bomb inflates to 64 MB in a single call of an unbounded decoder (httpx's)."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.encoding = encoding.strip().lower()
        self.room = limit
        self._zlib: Any = None
        if self.encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif self.encoding not in ("", "identity", "deflate"):
            raise _Unreadable(self.encoding)

    def feed(self, data: bytes) -> bytes:
        if self.encoding == "deflate" and self._zlib is None and data:
            # zlib-wrapped, as the standard says, or raw deflate, as some servers send it
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS if (data[0] & 0x0F) == 8 else -zlib.MAX_WBITS)
        if self._zlib is None:
            return self._take(data)
        out: list[bytes] = []
        try:
            while data:
                out.append(self._take(self._zlib.decompress(data, self.room + 1)))
                data = self._zlib.unconsumed_tail
        except zlib.error as exc:
            raise _Unreadable(f"{self.encoding} that does not decode ({exc})") from None
        return b"".join(out)

    def _take(self, data: bytes) -> bytes:
        if len(data) > self.room:
            raise _TooLarge
        self.room -= len(data)
        return data


class _TooLarge(Exception):
    pass


class HttpTarget:
    def __init__(self, spec: HttpTargetSpec, *, simulate_user: SimulateUser | None = None,
                 max_simulated_turns: int = 50):
        self.spec = spec
        self.simulate_user = simulate_user
        self.max_simulated_turns = max_simulated_turns
        self._pinned: tuple[str, dict[str, str], dict[str, str]] = (spec.url, {}, {})

    def run_many(self, work: list[tuple[EvalCase, int]], *,
                 input_overrides: dict[str, dict[str, Any]] | None = None) -> list[AgentOutput]:
        """One output per (case, iteration), in the order given; never raises."""
        if not work:
            return []
        overrides = input_overrides or {}
        spec = self.spec
        try:
            # Checked again here, not only when the run was created: the policy or the DNS
            # may have changed since. The checked address is the one connected to.
            self._pinned = egress.pinned_request(spec.url)
        except egress.EgressRefused as exc:
            return [AgentOutput(eval_id=case.eval_id, iteration=iteration, error=f"the target URL is refused: {exc}")
                    for case, iteration in work]
        limits = httpx.Limits(max_connections=spec.concurrency, max_keepalive_connections=spec.concurrency)
        with httpx.Client(headers=spec.headers, timeout=httpx.Timeout(spec.timeout_seconds), limits=limits,
                          follow_redirects=False) as client:

            def run(item: tuple[EvalCase, int]) -> AgentOutput:
                case, iteration = item
                try:
                    return drive_case(
                        case, iteration, lambda body: self._send(client, body),
                        overrides=overrides.get(case.eval_id), metadata=spec.metadata,
                        simulate_user=self.simulate_user, max_simulated_turns=self.max_simulated_turns,
                    )
                except Exception as exc:  # a bug must cost one case, not the whole batch
                    return AgentOutput(eval_id=case.eval_id, iteration=iteration,
                                       error=f"internal error: {type(exc).__name__}: {exc}")

            with ThreadPoolExecutor(max_workers=min(spec.concurrency, len(work)),
                                    thread_name_prefix="evalsite-http-target") as pool:
                return list(pool.map(run, work))

    def _send(self, client: httpx.Client, body: dict[str, Any]) -> TurnResult:
        spec = self.spec
        headers = {"Idempotency-Key": f"{body['eval_id']}:{body['iteration']}:{body['invocation_id']}"}
        attempts = spec.retries + 1
        last_error = ""
        delay = spec.backoff_seconds
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                time.sleep(delay)
                delay *= 2
            start = perf_counter()
            try:
                status, data, retry_after = self._post(client, body, headers)
            except (httpx.TimeoutException, _Deadline):
                last_error = f"timed out after {spec.timeout_seconds:g}s"
                continue
            except _TooLarge:
                return TurnResult(error=f"the reply is larger than {spec.max_response_bytes:,} bytes",
                                  metadata={"attempts": attempt})
            except _Unreadable as exc:
                return TurnResult(error=f"cannot read the reply: content encoding {exc}",
                                  metadata={"attempts": attempt})
            except httpx.TransportError as exc:
                last_error = f"cannot reach the agent: {type(exc).__name__}: {exc}"
                continue
            except httpx.HTTPError as exc:  # e.g. a body that does not decode: asking again will not help
                return TurnResult(error=f"cannot read the reply: {type(exc).__name__}: {exc}",
                                  metadata={"attempts": attempt})
            latency = perf_counter() - start
            meta: dict[str, Any] = {"http_status": status, "attempts": attempt}
            if status >= 500 or status == 429:
                last_error = f"HTTP {status}: {_snippet(data)}"
                if retry_after is not None:
                    delay = max(delay, min(retry_after, 30.0))
                continue
            if status >= 300:
                return TurnResult(error=f"HTTP {status}: {_snippet(data)}", latency_seconds=latency, metadata=meta)
            try:
                value = safejson.loads(data)
            except ValueError:
                return TurnResult(error=f"the reply is not JSON: {_snippet(data)}", latency_seconds=latency,
                                  metadata=meta)
            try:
                reply = reply_from_value(value, spec.response_mapping)
            except ReplyError as exc:
                return TurnResult(error=str(exc), latency_seconds=latency, metadata=meta)
            return TurnResult(reply=reply, latency_seconds=latency, metadata=meta)
        return TurnResult(error=f"{last_error} (after {attempts} attempt{'s' if attempts > 1 else ''})",
                          metadata={"attempts": attempts})

    def _post(self, client: httpx.Client, body: dict[str, Any],
              headers: dict[str, str]) -> tuple[int, bytes, float | None]:
        """(status, body, Retry-After seconds). httpx's timeout bounds each network wait; the
        deadline also bounds an agent that trickles its answer out byte by byte."""
        spec = self.spec
        deadline = perf_counter() + spec.timeout_seconds
        url, pinned_headers, extensions = self._pinned
        with client.stream("POST", url, json=body,
                           headers={**headers, **pinned_headers, "Accept-Encoding": "identity"},
                           extensions=extensions) as response:
            decoder = _BoundedDecoder(response.headers.get("Content-Encoding", ""), spec.max_response_bytes)
            chunks: list[bytes] = []
            for raw in response.iter_raw():  # undecoded: the decoder above bounds what it inflates to
                chunks.append(decoder.feed(raw))
                if perf_counter() > deadline:
                    raise _Deadline
            retry_after = response.headers.get("Retry-After", "")
            wait = float(retry_after) if re.fullmatch(r"\d+(\.\d+)?", retry_after.strip()) else None
            return response.status_code, b"".join(chunks), wait
