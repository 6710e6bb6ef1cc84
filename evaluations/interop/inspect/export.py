"""Inspect AI's eval-set writer: a version as an Inspect dataset (JSONL samples: `id`, `input`,
`target`, `metadata`, and what else the sample held for inspect), which inspect_ai reads with
`json_dataset()`.

It inverts `interop/inspect/evalset.py` (`samples.to_case`); `evalsets/exports.py` reads every
export back with it. A case with one plain user turn is written with a string `input`; any other
as chat messages.
"""

from __future__ import annotations

import json
from typing import Any

from evaluations.interop.base import SourceFile
from evaluations.interop.inspect.samples import RESERVED
from evaluations.interop.writing import EvalSetWriter, Header, Loss, safe_name

_CASE_LOSSES = ("name", "description", "tags", "session_input", "conversation_scenario", "rubrics", "criteria")
_TURN_LOSSES = ("rubrics", "expected_node_order")


def _messages(case: dict[str, Any], losses: list[Loss]) -> list[dict[str, Any]]:
    eid = case["eval_id"]
    out: list[dict[str, Any]] = []
    turns = case["conversation"]
    for index, turn in enumerate(turns):
        where = f"conversation[{index}]"
        for key in _TURN_LOSSES:
            if turn.get(key):
                losses.append(Loss(eid, f"{where}.{key}", f"an Inspect sample's messages have no {key}"))
        extra = sorted(set(turn["metadata"]) - {"system"})
        if extra:
            losses.append(Loss(eid, f"{where}.metadata", f"an Inspect sample's messages keep no {', '.join(extra)}"))
        if turn.get("expected_final_response") is not None and index != len(turns) - 1:
            losses.append(Loss(eid, f"{where}.expected_final_response",
                               "an Inspect sample has one target: only the last turn's expected response"))
        out += [{"role": "system", "content": text} for text in turn["metadata"].get("system", [])]
        out.append({"role": "user", "content": turn["user_content"]["content"]})
        said = [m["content"] for m in turn["expected_intermediate_responses"]]
        calls = turn["expected_tool_trajectory"]
        if any(c["call_id"] is None for c in calls):
            losses.append(Loss(eid, f"{where}.expected_tool_trajectory", "an Inspect tool call needs an id"))
        if calls:
            out.append({"role": "assistant", "content": said.pop(0) if said else "", "tool_calls": [
                {"id": c["call_id"], "function": c["name"], "arguments": c["args"], "type": "function"}
                for c in calls]})
            out += [{"role": "tool", "tool_call_id": c["call_id"], "function": c["name"], "content": c["result"]}
                    for c in calls if c.get("result") is not None]
        out += [{"role": "assistant", "content": text} for text in said]
    return out


def _sample(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    eid = case["eval_id"]
    for key in _CASE_LOSSES:
        if case.get(key):
            losses.append(Loss(eid, key, f"an Inspect sample has no {key}"))
    metadata = dict(case["metadata"])
    extras = metadata.pop(RESERVED, None) or {}
    turns = case["conversation"]
    if not turns:
        losses.append(Loss(eid, "conversation", "an Inspect sample needs an input"))
        return {"id": eid, "input": ""}
    messages = _messages(case, losses)
    plain = len(messages) == 1 and isinstance(messages[0]["content"], str)
    sample: dict[str, Any] = {"id": extras.get("id", eid), "input": messages[0]["content"] if plain else messages}
    final = turns[-1].get("expected_final_response")
    if isinstance(extras.get("other_targets"), list):
        others = extras["other_targets"]
        text = final["content"] if final is not None else ""
        sample["target"] = [text, *others] if final is not None or others else []
    elif final is not None:
        if not isinstance(final["content"], str):
            losses.append(Loss(eid, f"conversation[{len(turns) - 1}].expected_final_response.content",
                               "an Inspect target is text; this one has parts"))
        sample["target"] = final["content"]
    else:
        sample["target"] = ""
    for key in ("choices", "sandbox", "files", "setup"):
        if key in extras:
            sample[key] = extras[key]
    if metadata:
        sample["metadata"] = metadata
    return sample


def _write_inspect(header: Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    for key in ("name", "description", "metadata", "default_config", "evaluator_config"):
        if getattr(header, key):
            losses.append(Loss(None, key, f"an Inspect dataset has no {key} of its own"))
    lines = [json.dumps(_sample(case, losses), ensure_ascii=False) + "\n" for case in cases]
    return [SourceFile(f"{safe_name(header.eval_set_id)}.jsonl", "".join(lines).encode())]


writer = EvalSetWriter("inspect", "Inspect AI", _write_inspect)
