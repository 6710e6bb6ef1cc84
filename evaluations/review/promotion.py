"""Results promoted into cases: what a run's agent actually said and called, proposed as a
case's expectation. Selectors only: the proposal is shown in the case editor (or saved in
one step for a selection) and written by `evalsets.curation.evalset_edit`.

A trace received on /v1/traces (`Trace` with `received=True`) is promoted the same way, by
`proposed_case_from_trace`: each root span is a turn (as `interop.otel.spans.turn_spans` reads
them), whose user input, final answer and tool calls are read off its spans (below)."""

from __future__ import annotations

import json
from typing import Any

from openinference.semconv.trace import MessageAttributes, SpanAttributes
from pydantic import ValidationError

from evaluations import safejson
from evaluations.converters import whole_number
from evaluations.evalsets.curation import CASE_FIELDS, case_native
from evaluations.evaluators.base import aligned_turns, text_of
from evaluations.interop.otel.spans import LLM, SpanNode, derive, final_text, span_forest, turn_spans
from evaluations.interop.otel.spans import Span as SpanModel
from evaluations.models import CaseResult, EvalCase, EvalSetVersion, Run, Span, Trace
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.outputs import AgentOutput


def _free(wanted: str, taken: set[str]) -> str:
    candidate, n = wanted, 2
    while candidate in taken:
        candidate, n = f"{wanted}-{n}", n + 1
    return candidate


def proposed_case(*, base: dict[str, Any], result: CaseResult, new_case: bool, taken: set[str]) -> dict[str, Any]:
    """`base` (a native case dict) with each turn's expected response and expected tool calls
    replaced by the agent's actual ones in `result`. A new case gets a free eval id, named
    after the run, and the tag `promoted`."""
    case = dict(base)
    try:
        native = NativeCase.model_validate(base)
        output = AgentOutput.model_validate(result.output) if result.output else None
    except ValidationError:
        native, output = None, None
    if native is not None and output is not None:
        conversation = []
        for invocation, turn in aligned_turns(native, output):
            data = invocation.model_dump(mode="json")
            if turn is not None:
                text = text_of(turn.final_response)
                data["expected_final_response"] = {"role": "model", "content": text} if text else None
                data["expected_tool_trajectory"] = [{"name": c.name, "args": c.args} for c in turn.tool_calls]
            conversation.append(data)
        case["conversation"] = conversation
    if new_case:
        case["eval_id"] = _free(f"{base.get('eval_id') or 'case'}-run{result.run_id}", taken)
        taken.add(case["eval_id"])
        case["tags"] = list(dict.fromkeys([*(base.get("tags") or []), "promoted"]))
    return case


def proposed_expectations(*, run: Run, version: EvalSetVersion, eval_ids: list[str]) -> list[dict[str, Any]]:
    """The cases of `version` named by `eval_ids` with the run's answers as their expected
    ones (its first repeat of each); ids the version no longer has are left out. Two queries."""
    current = {
        c.eval_id: case_native(c) for c in EvalCase.objects.in_version_by_eval_id(version, eval_ids).only(*CASE_FIELDS)
    }
    results = (
        CaseResult.objects.filter(run=run, case__eval_id__in=list(current))
        .select_related("case")
        .only("pk", "run_id", "iteration", "output", "case__eval_id")
        .order_by("case__position", "iteration")
    )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for result in results:
        eval_id = result.case.eval_id
        if eval_id not in seen:
            seen.add(eval_id)
            out.append(proposed_case(base=current[eval_id], result=result, new_case=False, taken=set()))
    return out


def proposed_cases(*, run: Run, eval_ids: list[str], taken: set[str]) -> list[dict[str, Any]]:
    """New cases from a run's results for `eval_ids` (its first repeat of each), in the
    run's case order: two queries."""
    results = (
        CaseResult.objects.filter(run=run, case__eval_id__in=eval_ids)
        .select_related("case")
        .only("pk", "run_id", "iteration", "output", "case_id", *(f"case__{f}" for f in CASE_FIELDS), "case__position")
        .order_by("case__position", "iteration")
    )
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for result in results:
        if result.case.eval_id in seen:
            continue
        seen.add(result.case.eval_id)
        out.append(proposed_case(base=case_native(result.case), result=result, new_case=True, taken=taken))
    return out


# --- From a received trace ----------------------------------------------------------------------

MAX_TRACE_SPANS = 5_000  # a proposal reads at most this many spans (the trace page shows fewer)


def trace_span_models(trace: Trace) -> list[SpanModel]:
    """The stored spans of a received trace as `interop.otel.spans.Span` models (one query)."""
    spans = []
    rows = (Span.objects.filter(trace_id=trace.pk).order_by("start_ns", "pk")
            .values_list("span_id", "parent_span_id", "name", "start_ns", "end_ns", "status", "attributes"))
    for span_id, parent, name, start, end, status, attributes in rows[:MAX_TRACE_SPANS]:
        attributes = dict(attributes or {})
        message = str(attributes.pop("otel.status_message", "") or "")
        spans.append(SpanModel(trace_id=trace.trace_id, span_id=span_id, parent_span_id=parent or None, name=name,
                               start_time_unix_nano=start or 0, end_time_unix_nano=end, attributes=attributes,
                               status_code=status or "UNSET", status_message=message))
    return spans


def _message_text(message: Any) -> str | None:
    """The text of a GenAI message (`parts` of type text) or of an OpenAI-style one (`content`)."""
    if not isinstance(message, dict):
        return None
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [p["content"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                 and isinstance(p.get("content"), str)]
        return "\n".join(texts) if texts else None
    content = message.get("content")
    return content if isinstance(content, str) and content else None


def _last_user_message(messages: Any) -> str | None:
    if isinstance(messages, str):
        try:
            messages = safejson.loads(messages)
        except ValueError:
            return None
    if isinstance(messages, dict) and isinstance(messages.get("messages"), list):
        messages = messages["messages"]
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") in ("user", "human"):
            return _message_text(message)
    return None


def _flattened_user_message(attrs: dict[str, Any]) -> str | None:
    """OpenInference's flattened `llm.input_messages.<i>.message.role|content`: the last user one."""
    found: dict[int, dict[str, Any]] = {}
    prefix = SpanAttributes.LLM_INPUT_MESSAGES + "."
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, dot, field = key[len(prefix):].partition(".")
            number = whole_number(index, maximum=1_000_000)
            if number is not None and dot and field in (MessageAttributes.MESSAGE_ROLE,
                                                         MessageAttributes.MESSAGE_CONTENT):
                found.setdefault(number, {})[field.rpartition(".")[2]] = value
    for number in sorted(found, reverse=True):
        if found[number].get("role") == "user" and isinstance(found[number].get("content"), str):
            return str(found[number]["content"])
    return None


def user_input(span: SpanModel) -> str | None:
    """What the user said, as a span records it: OpenInference `input.value` (the text, or the
    last user message of a JSON message list), its flattened `llm.input_messages`, or GenAI
    `gen_ai.input.messages` (the last user message's text parts) / the older `gen_ai.prompt`."""
    attrs = span.attributes
    value = attrs.get(SpanAttributes.INPUT_VALUE)
    if isinstance(value, str) and value:
        text = value.strip()
        if text.startswith(("{", "[")):
            from_messages = _last_user_message(text)
            if from_messages:
                return from_messages
        return value
    for found in (_flattened_user_message(attrs), _last_user_message(attrs.get("gen_ai.input.messages")),
                  _last_user_message(attrs.get("gen_ai.prompt"))):
        if found:
            return found
    return None


def _llm_output(span: SpanModel) -> str | None:
    attrs = span.attributes
    text = final_text(span)
    if text not in (None, ""):
        return text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    content = attrs.get(f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0.{MessageAttributes.MESSAGE_CONTENT}")
    return content if isinstance(content, str) and content else None


def _turn_from(root: SpanNode) -> dict[str, Any]:
    nodes = [node for node, _ in root.walk()]
    llm = [n.span for n in nodes if n.span.category == LLM]
    said = user_input(root.span) or next((t for s in llm if (t := user_input(s))), None)
    answer = _llm_output(root.span) or next((t for s in reversed(llm) if (t := _llm_output(s))), None)
    calls = derive([root]).tool_calls
    return {
        "user_content": {"role": "user", "content": said or ""},
        "expected_final_response": {"role": "model", "content": answer} if answer else None,
        "expected_tool_trajectory": [{"name": c.name, "args": c.args} for c in calls],
    }


def proposed_case_from_trace(trace: Trace, *, taken: set[str], eval_id: str | None = None) -> dict[str, Any]:
    """A new native case from a received trace: one turn per root span (a lone root that only
    wraps turns is opened up, as for a run), the user input and the final answer read from the
    root span (else its LLM spans), the tool calls of its TOOL spans with their arguments as
    the expected trajectory. Its id is `eval_id` or a free `trace-<first 12 hex of the id>`;
    tagged `promoted`, with the trace named in its metadata."""
    roots = span_forest(trace_span_models(trace))
    turns = turn_spans(roots, 0)
    if len(turns) == 1 and turns[0].children and user_input(turns[0].span) is None:
        opened = turn_spans(roots, 2)  # a wrapper without input of its own: its children are the turns
        if len(opened) > 1 and all(user_input(n.span) for n in opened):
            turns = opened
    conversation = []
    for number, root in enumerate(turns, start=1):
        conversation.append({"invocation_id": f"turn_{number}", **_turn_from(root)})
    if not conversation:
        conversation = [{"invocation_id": "turn_1", "user_content": {"role": "user", "content": ""}}]
    wanted = eval_id or f"trace-{trace.trace_id[:12] or trace.pk}"
    return {
        "eval_id": wanted if eval_id else _free(wanted, taken),
        "name": trace.name[:255],
        "conversation": conversation,
        "tags": ["promoted"],
        "metadata": {"source_trace_id": trace.trace_id, **({"service": trace.service_name} if trace.service_name
                                                             else {})},
    }
