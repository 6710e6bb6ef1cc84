"""UiPath's eval-set writer: a version as UiPath's evaluation-set JSON (and evaluator files).

It inverts `interop/uipath/evalset.py`; `evalsets/exports.py` reads every export back with it.
"""

from __future__ import annotations

import posixpath
from typing import Any

from evaluations.interop.base import SourceFile
from evaluations.interop.writing import EvalSetWriter, Header, Loss, dump, safe_name


def _uipath_value(message: dict[str, Any] | None, path: str, case: str, losses: list[Loss]) -> tuple[bool, Any]:
    """(present, value) of a one-JSON-part MessageContent (how UiPath inputs and outputs are kept)."""
    if message is None:
        return False, None
    content = message["content"]
    if (
        isinstance(content, list)
        and len(content) == 1
        and set(content[0]) == {"type", "json"}
        and content[0]["type"] == "json"
        and not message.get("metadata")
    ):
        return True, content[0]["json"]
    losses.append(Loss(case, path, "UiPath holds inputs and expected outputs as JSON values; this is text"))
    return False, None


def _uipath_case(case: dict[str, Any], variant: str, losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    for key, message in (
        ("tags", "UiPath evaluations have no tags"),
        ("rubrics", "UiPath evaluations have no rubrics"),
        ("session_input", "UiPath evaluations have no session input"),
        ("conversation_scenario", "UiPath evaluations have no conversation scenario"),
    ):
        if raw[key]:
            losses.append(Loss(eid, key, message))
    if len(raw["conversation"]) != 1:
        losses.append(
            Loss(eid, "conversation", f"a UiPath evaluation is one turn (this case has {len(raw['conversation'])})")
        )
        return {"id": eid}
    inv = raw["conversation"][0]
    _, inputs = _uipath_value(inv["user_content"], "conversation[0].user_content", eid, losses)
    has_output, output = _uipath_value(
        inv.get("expected_final_response"), "conversation[0].expected_final_response", eid, losses
    )
    if inv["expected_intermediate_responses"]:
        losses.append(
            Loss(
                eid,
                "conversation[0].expected_intermediate_responses",
                "UiPath evaluations have no intermediate responses",
            )
        )
    if inv["metadata"] or inv["rubrics"] or inv["invocation_id"] != "turn_1":
        for key in ("metadata", "rubrics"):
            if inv[key]:
                losses.append(Loss(eid, f"conversation[0].{key}", "UiPath evaluations have none"))
        if inv["invocation_id"] != "turn_1":
            losses.append(Loss(eid, "conversation[0].invocation_id", "a UiPath evaluation's turn is always turn_1"))
    criteria = _uipath_criteria(raw["criteria"], inv["expected_tool_trajectory"], eid, losses)
    out: dict[str, Any] = {"id": eid}
    if raw["name"]:
        out["name"] = raw["name"]
    if variant == "uipath-evaluation-items":
        out["agentInput"] = inputs
        out["evaluations"] = [{"evaluatorId": k, "evaluationCriteria": v} for k, v in criteria.items()]
    else:
        out["inputs"] = inputs
        out["evaluationCriterias"] = criteria
        if has_output:
            out["expectedOutput"] = output
    metadata = {k: v for k, v in raw["metadata"].items() if k not in out}
    out.update(metadata)
    # (The evaluation-items shape has no expectedOutput of its own: the reader takes it from
    # the criteria, and the read-back check reports an expected output they do not hold.)
    return out


def _uipath_criteria(
    criteria: dict[str, Any], trajectory: list[dict[str, Any]], case: str, losses: list[Loss]
) -> dict[str, Any]:
    """The stored criteria, as they are: UiPath reads a case's expected tool calls from them
    (the first `toolCalls` list, else `toolCallsOrder`; `toolOutputs` for results), so an
    expected trajectory that says something else cannot be written, and is reported."""
    path = "conversation[0].expected_tool_trajectory"
    if any(c.get("call_id") for c in trajectory):
        losses.append(Loss(case, path, "UiPath tool calls have no ids"))
    wanted = [(c["name"], c.get("args") or {}) for c in trajectory]
    holder = _holder(criteria, ("toolCalls", "tool_calls"))
    if holder is not None:
        key, calls = holder
        implied = [(c.get("name"), c.get("args") or {}) for c in calls if isinstance(c, dict)]
        where = f"criteria.{key}"
    else:
        order = _holder(criteria, ("toolCallsOrder", "tool_calls_order"))
        implied = [(name, {}) for name in order[1]] if order else []
        where = f"criteria.{order[0]}" if order else "criteria"
    if implied != wanted:
        losses.append(
            Loss(
                case,
                path,
                f"UiPath reads the expected tool calls from the criteria ({where}), which "
                "say otherwise: change the criteria to match (or the trajectory back)",
            )
        )
    return criteria


def _holder(criteria: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, list[Any]] | None:
    """(evaluator.key, list) of the first criterion holding one of `keys` as a list."""
    for evaluator, value in criteria.items():
        if isinstance(value, dict):
            for key in keys:
                if isinstance(value.get(key), list):
                    return f"{evaluator}.{key}", value[key]
    return None


def _write_uipath(header: Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    items_key = "evaluationItems" if variant == "uipath-evaluation-items" else "evaluations"
    if variant == "uipath-legacy":
        # A legacy evaluation's criteria are implied by its expectedOutput; edited ones are
        # written in the current shape, whose criteria are explicit (read as current by the
        # per-evaluation criteria, as UiPath's own converter produces them).
        variant = "uipath-current"
    doc: dict[str, Any] = {"id": header.eval_set_id}
    if header.name:
        doc["name"] = header.name
    if header.description:
        doc["description"] = header.description
    doc.update(header.metadata)
    doc[items_key] = [_uipath_case(c, variant, losses) for c in cases]
    folder = safe_name(header.eval_set_id)
    files = [SourceFile(f"{folder}/eval-sets/{folder}.json", dump(doc, len(cases)))]
    config = dict(header.evaluator_config or {})
    types = config.pop("$types", {}) if isinstance(config.get("$types"), dict) else {}
    for index, (ref, definition) in enumerate(config.items()):
        files.append(SourceFile(f"{folder}/evaluators/{index + 1:02d}-{safe_name(ref)}.json", dump(definition)))
    for type_id, type_doc in types.items():
        relative = posixpath.normpath(str(type_id)[len("file://") :]).lstrip("/")
        if relative.startswith(".."):
            losses.append(Loss(None, f"evaluator_config.$types.{type_id}", "a type file outside the project"))
            continue
        files.append(SourceFile(f"{folder}/evaluators/{relative}", dump(type_doc)))
    return files if len(files) > 1 else [SourceFile(f"{folder}.json", files[0].data)]


writer = EvalSetWriter("uipath", "UiPath", _write_uipath)
