"""DeepEval's eval-set writer: a version as DeepEval goldens (JSON, or CSV when it came as CSV).

It inverts `interop/deepeval/evalset.py`; `evalsets/exports.py` reads every export back with it.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from evaluations.interop.base import SourceFile, stem
from evaluations.interop.deepeval.evalset import LIST_DELIMITER, derive_eval_ids
from evaluations.interop.writing import EvalSetWriter, Header, Loss, dump, safe_name


def _text_of(message: dict[str, Any] | None, path: str, case: str, losses: list[Loss]) -> str | None:
    if message is None:
        return None
    if not isinstance(message["content"], str):
        losses.append(Loss(case, f"{path}.content", "DeepEval turns are text; this content has parts"))
        return None
    return message["content"]


def _deepeval_tools(
    calls: list[dict[str, Any]], notes: list[dict[str, Any]], path: str, case: str, losses: list[Loss]
) -> list[dict[str, Any]]:
    out = []
    for index, call in enumerate(calls):
        if call.get("call_id") is not None:
            losses.append(Loss(case, f"{path}[{index}].call_id", "DeepEval tool calls have no ids"))
        tool: dict[str, Any] = {"name": call["name"], "input_parameters": call.get("args") or {}}
        if call.get("result") is not None:
            tool["output"] = call["result"]
        if index < len(notes):
            tool.update(notes[index])
        out.append(tool)
    return out


def _stored_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metadata `tools_called` entries ({name, args, result, ...notes}) back as DeepEval tools."""
    out = []
    for tool in tools:
        item = {k: v for k, v in tool.items() if k not in ("args", "result")}
        item["input_parameters"] = tool.get("args") or {}
        if tool.get("result") is not None:
            item["output"] = tool["result"]
        out.append(item)
    return out


_SHARED = ("context", "comments", "additional_metadata", "custom_column_key_values")


def _golden_common(raw: dict[str, Any], golden: dict[str, Any], metadata: dict[str, Any]) -> None:
    if raw["name"]:
        golden["name"] = raw["name"]
    if raw["tags"]:
        golden["tags"] = raw["tags"]
    for key in _SHARED:
        if key in metadata:
            golden[key] = metadata.pop(key)
    extra = metadata.pop("extra", None)
    if isinstance(extra, dict):
        golden.update({k: v for k, v in extra.items() if k not in golden})


def _single_golden(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    for key in ("session_input", "conversation_scenario", "rubrics", "criteria"):
        if raw[key]:
            losses.append(Loss(eid, key, f"a single-turn DeepEval golden has no {key}"))
    if len(raw["conversation"]) != 1:
        losses.append(
            Loss(eid, "conversation", f"a single-turn golden is one turn (this case has {len(raw['conversation'])})")
        )
        return {"input": ""}
    inv = raw["conversation"][0]
    golden: dict[str, Any] = {"input": _text_of(inv["user_content"], "conversation[0].user_content", eid, losses)}
    expected = _text_of(inv.get("expected_final_response"), "conversation[0].expected_final_response", eid, losses)
    if expected is not None:
        golden["expected_output"] = expected
    metadata = dict(raw["metadata"])
    inv_meta = dict(inv["metadata"])
    notes = inv_meta.pop("expected_tools_notes", [])
    if inv["expected_tool_trajectory"]:
        golden["expected_tools"] = _deepeval_tools(
            inv["expected_tool_trajectory"], notes, "conversation[0].expected_tool_trajectory", eid, losses
        )
    for key in ("retrieval_context", "actual_output", "source_file"):
        if key in metadata:
            golden[key] = metadata.pop(key)
    if "tools_called" in metadata:
        golden["tools_called"] = _stored_tools(metadata.pop("tools_called"))
    _golden_common(raw, golden, metadata)
    return golden


def _turn(message: dict[str, Any], role: str) -> dict[str, Any]:
    meta = dict(message.get("metadata") or {})
    turn: dict[str, Any] = {"role": role, "content": message["content"]}
    if "tools_called" in meta:
        turn["tools_called"] = _stored_tools(meta.pop("tools_called"))
    notes = meta.pop("tools_called_notes", None)
    turn.update(meta)
    if notes is not None:
        turn["_notes"] = notes
    return turn


def _multi_golden(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    for key in ("session_input", "rubrics", "criteria"):
        if raw[key]:
            losses.append(Loss(eid, key, f"a conversational DeepEval golden has no {key}"))
    scenario = raw["conversation_scenario"] or {}
    golden: dict[str, Any] = {"scenario": scenario.get("conversation_plan", "")}
    if scenario.get("starting_prompt") is not None:
        losses.append(Loss(eid, "conversation_scenario.starting_prompt", "DeepEval scenarios have no starting prompt"))
    if scenario.get("expected_outcome") is not None:
        golden["expected_outcome"] = scenario["expected_outcome"]
    if scenario.get("user_persona") is not None:
        golden["user_description"] = scenario["user_persona"]
    if (scenario.get("metadata") or {}).get("persona") is not None:
        golden["persona"] = scenario["metadata"]["persona"]
    metadata = dict(raw["metadata"])
    turns: list[dict[str, Any]] = [dict(t) for t in metadata.pop("opening_assistant_turns", [])]
    for index, inv in enumerate(raw["conversation"]):
        where = f"conversation[{index}]"
        if inv["invocation_id"] != f"turn_{index + 1}":
            losses.append(Loss(eid, f"{where}.invocation_id", "DeepEval turns have no ids"))
        inv_meta = dict(inv["metadata"])
        if inv["rubrics"]:
            losses.append(Loss(eid, f"{where}.rubrics", "DeepEval turns have no rubrics"))
        user = _turn(inv["user_content"], "user")
        if inv_meta.get("user_retrieval_context"):
            user["retrieval_context"] = inv_meta.pop("user_retrieval_context")
        turns.append(user)
        replies = [*inv["expected_intermediate_responses"]]
        if inv.get("expected_final_response") is not None:
            replies.append(inv["expected_final_response"])
        if not replies and (inv["expected_tool_trajectory"] or inv_meta.get("retrieval_context")):
            losses.append(
                Loss(
                    eid,
                    f"{where}.expected_tool_trajectory",
                    "a DeepEval turn's tools belong to an assistant reply; this turn has none",
                )
            )
        written = [_turn(r, "assistant") for r in replies]
        if written:
            last = written[-1]
            if inv["expected_tool_trajectory"]:
                notes = last.pop("_notes", [])
                earlier = [t for t in written[:-1] if "tools_called" in t]
                if earlier:
                    losses.append(
                        Loss(
                            eid, f"{where}.expected_tool_trajectory", "the tool calls are split between several replies"
                        )
                    )
                last["tools_called"] = _deepeval_tools(
                    inv["expected_tool_trajectory"], notes, f"{where}.expected_tool_trajectory", eid, losses
                )
            if "retrieval_context" in inv_meta:
                last["retrieval_context"] = inv_meta.pop("retrieval_context")
        for turn in written:
            if "_notes" in turn:
                losses.append(Loss(eid, f"{where}", "tool notes of a reply without tool calls"))
                turn.pop("_notes")
        if inv_meta:
            for key in inv_meta:
                losses.append(Loss(eid, f"{where}.metadata.{key}", "DeepEval turns have no such field"))
        turns.extend(written)
    if turns:
        golden["turns"] = turns
    _golden_common(raw, golden, metadata)
    return golden


def _write_deepeval(header: Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    multi = variant == "deepeval-multi-turn"
    goldens = [_multi_golden(c, losses) if multi else _single_golden(c, losses) for c in cases]
    # Goldens carry no ids: the reader derives them (id, else a unique name, else golden-<n>).
    # An id is written only where the derivation would not give the case's own.
    derived = derive_eval_ids([[None, g.get("name")] for g in goldens], "golden")
    for golden, case, guess in zip(goldens, cases, derived, strict=True):
        if guess != case["eval_id"]:
            golden["id"] = case["eval_id"]
    csv_file = header.metadata.get("file_type") == "csv"
    filename = f"{safe_name(header.eval_set_id)}.{'csv' if csv_file else 'json'}"
    if stem(filename) != header.eval_set_id:
        losses.append(Loss(None, "eval_set_id", "a DeepEval dataset's id is its file name; this id is not a file name"))
    return [SourceFile(filename, _deepeval_csv(goldens) if csv_file else dump(goldens, len(cases)))]


_LIST_CELLS = {"context", "retrieval_context", "tags"}


def _deepeval_csv(goldens: list[dict[str, Any]]) -> bytes:
    """Goldens as DeepEval's CSV: list cells joined with `|`, objects and tool lists as JSON."""
    columns = list(dict.fromkeys(key for golden in goldens for key in golden))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for golden in goldens:
        row = []
        for column in columns:
            value = golden.get(column)
            if value is None:
                row.append("")
            elif isinstance(value, str):
                row.append(value)
            elif column in _LIST_CELLS and isinstance(value, list) and all(isinstance(v, str) for v in value):
                row.append(LIST_DELIMITER.join(value))
            else:
                row.append(json.dumps(value, ensure_ascii=False))
        writer.writerow(row)
    return buffer.getvalue().encode()


writer = EvalSetWriter("deepeval", "DeepEval", _write_deepeval)
