"""Google ADK's result files read as uploaded outputs (`interop/outputs.py` is the registry).

Google ADK's own result files (`*.evalset_result.json`, an `EvalSetResult`, snake_case
or camelCase, also as ADK's older double-encoded JSON string): each case result's
`eval_metric_result_per_invocation[].actual_invocation` becomes a turn (the final response
text, `intermediate_data.tool_uses` or the function calls of newer
`invocation_events` as tool calls, their responses as results, `duration` as latency,
the events' `usage_metadata` as usage). A case result without per-invocation results is
read from its `session_details.events`, grouped by invocation. ADK has no iteration
number: a case that appears several times (`num_runs`) gets iterations 0, 1, 2, ... in
file order. The turn's `invocation_id` is the expected invocation's, which is what ADK
paired it with; ADK's own id stays in the turn's metadata.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from evaluations.interop.adk.convert import MISSING, AdkConverter, take
from evaluations.interop.base import SourceFile
from evaluations.interop.outputs import OutputsFormat, Path, Problems, ReadOutput, Text, type_name
from evaluations.schemas.evalset import MessageContent
from evaluations.schemas.outputs import MAX_ITERATIONS, AgentOutput, OutputToolCall, TurnOutput, Usage

_STATUS = {1: "PASSED", 2: "FAILED", 3: "NOT_EVALUATED"}
_MARKERS = ("eval_case_results", "evalCaseResults", "eval_set_result_id", "evalSetResultId")


def _claims(doc: dict[str, Any]) -> bool:
    return any(key in doc for key in _MARKERS) or "eval_metric_result_per_invocation" in doc


def _read(doc: dict[str, Any], file: SourceFile, where: Text, problems: Problems) -> list[ReadOutput]:
    if not any(key in doc for key in _MARKERS):  # one case result on its own
        return _read_adk({"eval_case_results": [doc]}, file, Text(None, None), problems)
    return _read_adk(doc, file, where, problems)



def _read_adk(doc: dict[str, Any], file: SourceFile, where: Text, problems: Problems) -> list[ReadOutput]:
    converter = AdkConverter(file)  # ADK's own reader: contents, tool uses and events as ADK spells them
    set_id = _text(doc, "eval_set_id")
    result_id = _text(doc, "eval_set_result_id")
    key, cases = take(doc, "eval_case_results")
    if not isinstance(cases, list):
        problems.add(file, where, (key,), "required: the list of case results")
        return []
    runs: Counter[str] = Counter()
    out = []
    for index, raw in enumerate(cases):
        path: Path = (key, index)
        if not isinstance(raw, dict):
            problems.add(file, where, path, f"a case result must be an object, not {type_name(raw)}")
            continue
        id_key, eval_id = take(raw, "eval_id")
        if not isinstance(eval_id, str) or not eval_id:
            problems.add(file, where, (*path, id_key), "required: the case's eval_id", f"#{index + 1}")
            continue
        if runs[eval_id] >= MAX_ITERATIONS:  # each repeat of a case is its next iteration
            problems.add(file, where, (*path, id_key), f"more than {MAX_ITERATIONS} results for this case "
                         f"(a run has at most {MAX_ITERATIONS} iterations)", eval_id)
            continue
        before = len(converter.errors)
        turns = _adk_turns(converter, raw, path, eval_id, file, where, problems)
        if len(converter.errors) > before:
            continue
        status = take(raw, "final_eval_status")[1]
        metadata: dict[str, Any] = {"source_format": "adk-eval-result"}
        for name, value in (("eval_set_id", _text(raw, "eval_set_id") or set_id),
                            ("eval_set_result_id", result_id),
                            ("session_id", _text(raw, "session_id")),
                            ("final_eval_status", _STATUS.get(status, status) if status is not MISSING else None)):
            if value is not None:
                metadata[name] = value
        output = AgentOutput(
            eval_id=eval_id,
            iteration=runs[eval_id],
            turns=turns,
            error=None if turns else "the ADK result holds no actual invocations for this case",
            metadata=metadata,
        )
        runs[eval_id] += 1
        out.append(ReadOutput(output, file, where, path))
    for message, error_path, case in converter.errors:
        problems.add(file, where, error_path, message, case)
    return out


def _text(obj: dict[str, Any], name: str) -> str | None:
    value = take(obj, name)[1]
    return value if isinstance(value, str) and value else None


def _adk_turns(converter: AdkConverter, raw: dict[str, Any], path: Path, eval_id: str, file: SourceFile,
               where: Text, problems: Problems) -> list[TurnOutput]:
    per_key, per_invocation = take(raw, "eval_metric_result_per_invocation")
    turns: list[TurnOutput] = []
    if isinstance(per_invocation, list) and per_invocation:
        for turn, item in enumerate(per_invocation):
            item_path: Path = (*path, per_key, turn)
            if not isinstance(item, dict):
                problems.add(file, where, item_path, f"must be an object, not {type_name(item)}", eval_id)
                continue
            actual_key, actual = take(item, "actual_invocation")
            if not isinstance(actual, dict):
                problems.add(file, where, (*item_path, actual_key), "required: the actual invocation", eval_id)
                continue
            invocation = converter.invocation(actual, (*item_path, actual_key), turn, eval_id)
            if invocation is None:
                continue
            expected = take(item, "expected_invocation")[1]
            expected_id = _text(expected, "invocation_id") if isinstance(expected, dict) else None
            turns.append(_turn(invocation, expected_id))
        return turns
    if per_invocation not in (MISSING, None) and not isinstance(per_invocation, list):
        problems.add(file, where, (*path, per_key), f"must be a list, not {type_name(per_invocation)}", eval_id)
        return []
    session = take(raw, "session_details")[1]
    events = take(session, "events")[1] if isinstance(session, dict) else None
    return _session_turns(events) if isinstance(events, list) else []


def _turn(invocation: dict[str, Any], expected_id: str | None) -> TurnOutput:
    """A turn from the native invocation dict that ADK's converter builds (it names the
    actual data `expected_*`, being written for eval sets)."""
    metadata = dict(invocation["metadata"])
    latency = metadata.pop("duration", None)
    final = invocation["expected_final_response"]
    response: Any = None
    if final is not None:
        content = final["content"]
        response = content if isinstance(content, str) else (MessageContent(**final).get_text() or content)
    if expected_id and expected_id != invocation["invocation_id"]:
        metadata["adk_invocation_id"] = invocation["invocation_id"]
    return TurnOutput(
        invocation_id=expected_id or invocation["invocation_id"],
        final_response=response,
        tool_calls=[
            OutputToolCall(name=c["name"], args=c["args"], call_id=c.get("call_id"), result=c.get("result"))
            for c in invocation["expected_tool_trajectory"]
        ],
        intermediate_responses=invocation["expected_intermediate_responses"],
        latency_seconds=float(latency) if isinstance(latency, (int, float)) and not isinstance(latency, bool) else None,
        usage=_adk_usage(metadata.get("invocation_events") or []),
        metadata=metadata,
    )


def _adk_usage(events: list[Any]) -> Usage | None:
    """Token totals over the events' genai `usage_metadata` (either spelling)."""
    found = False
    usage = Usage()
    for event in events:
        meta = take(event, "usage_metadata")[1] if isinstance(event, dict) else None
        if not isinstance(meta, dict):
            continue
        for field_name, adk_name in (("prompt_tokens", "prompt_token_count"),
                                     ("completion_tokens", "candidates_token_count"),
                                     ("total_tokens", "total_token_count")):
            value = take(meta, adk_name)[1]
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(usage, field_name, (getattr(usage, field_name) or 0) + value)
                found = True
    return usage if found else None


def _session_turns(events: list[Any]) -> list[TurnOutput]:
    """Turns from a session's events grouped by invocation id, in order: the agents' function
    calls and responses, their last text as the final response, earlier texts as
    intermediate responses. Written by ADK itself, so nothing is reported about them."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        invocation_id = take(event, "invocation_id")[1]
        groups.setdefault(invocation_id if isinstance(invocation_id, str) else "", []).append(event)
    turns = []
    for number, (invocation_id, group) in enumerate(groups.items(), start=1):
        agent_events = [e for e in group if e.get("author") != "user"]
        scratch = AdkConverter(SourceFile("session", b"{}"))
        metadata: dict[str, Any] = {}
        calls, intermediate = scratch.invocation_events(agent_events, (), "", metadata)
        final = intermediate.pop()["content"] if intermediate else None
        if isinstance(final, list):
            final = MessageContent(role="assistant", content=final).get_text() or final
        turns.append(TurnOutput(
            invocation_id=invocation_id or f"turn_{number}",
            final_response=final,
            tool_calls=[OutputToolCall(name=c["name"], args=c["args"], call_id=c.get("call_id"),
                                       result=c.get("result")) for c in calls],
            intermediate_responses=intermediate,
            usage=_adk_usage(agent_events),
        ))
    return turns


outputs_format = OutputsFormat("adk", _claims, _read)
