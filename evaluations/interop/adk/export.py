"""Google ADK's eval-set writer: a version as ADK's `.evalset.json` (and its `test_config.json`).

It inverts `interop/adk/evalset.py`; `evalsets/exports.py` reads every export back with it.
"""

from __future__ import annotations

from typing import Any

from evaluations.interop.base import SourceFile
from evaluations.interop.writing import EvalSetWriter, Header, Loss, dump, safe_name


def _adk_content(
    message: dict[str, Any] | None, path: str, case: str, losses: list[Loss], *, role: str | None = None
) -> dict[str, Any] | None:
    """A native MessageContent dict as a genai Content ({role, parts})."""
    if message is None:
        return None
    if message.get("metadata"):
        losses.append(Loss(case, f"{path}.metadata", "ADK content has no metadata"))
    content = message["content"]
    parts = ([{"text": content}] if content else []) if isinstance(content, str) else list(content)
    out_role = role or message["role"]
    return {"role": "model" if out_role == "assistant" else out_role, "parts": parts}


def _adk_rubrics(
    rubrics: list[dict[str, Any]], types: dict[str, Any], path: str, case: str, losses: list[Loss]
) -> list[dict[str, Any]]:
    out = []
    for index, rubric in enumerate(rubrics):
        if rubric.get("weight", 1.0) != 1.0:
            losses.append(Loss(case, f"{path}[{index}].weight", "ADK rubrics have no weight"))
        item: dict[str, Any] = {"rubric_id": rubric["name"], "rubric_content": {"text_property": rubric["description"]}}
        if rubric.get("scoring_guide"):
            item["description"] = rubric["scoring_guide"]
        if rubric["name"] in types:
            item["type"] = types[rubric["name"]]
        out.append(item)
    return out


def _adk_invocation(inv: dict[str, Any], path: str, case: str, losses: list[Loss]) -> dict[str, Any]:
    metadata = dict(inv.get("metadata") or {})
    types = metadata.pop("rubric_types", {}) if inv.get("rubrics") else {}
    out: dict[str, Any] = {
        "invocation_id": inv["invocation_id"],
        "user_content": _adk_content(inv["user_content"], f"{path}.user_content", case, losses),
    }
    final = _adk_content(inv.get("expected_final_response"), f"{path}.expected_final_response", case, losses)
    if final is not None:
        out["final_response"] = final
    uses, responses, intermediate = [], [], []
    for call in inv.get("expected_tool_trajectory") or []:
        use: dict[str, Any] = {"name": call["name"], "args": call.get("args") or {}}
        if call.get("call_id") is not None:
            use["id"] = call["call_id"]
        uses.append(use)
        if call.get("result") is not None:
            response: dict[str, Any] = {"name": call["name"], "response": call["result"]}
            if call.get("call_id") is not None:
                response["id"] = call["call_id"]
            responses.append(response)
    for index, message in enumerate(inv.get("expected_intermediate_responses") or []):
        where = f"{path}.expected_intermediate_responses[{index}]"
        meta = message.get("metadata") or {}
        if set(meta) - {"author"} or message.get("role") != "assistant":
            losses.append(Loss(case, where, "ADK keeps an intermediate response as [author, parts] only"))
        content = message["content"]
        parts = [{"text": content}] if isinstance(content, str) else list(content)
        intermediate.append([meta.get("author", ""), parts])
    if uses or responses or intermediate:
        out["intermediate_data"] = {
            "tool_uses": uses,
            "tool_responses": responses,
            "intermediate_responses": intermediate,
        }
    if inv.get("rubrics"):
        out["rubrics"] = _adk_rubrics(inv["rubrics"], types, f"{path}.rubrics", case, losses)
    out.update(metadata)
    return out


def _adk_case(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    if raw["tags"]:
        losses.append(Loss(eid, "tags", "ADK eval cases have no tags"))
    if raw["criteria"]:
        losses.append(Loss(eid, "criteria", "ADK eval cases have no per-case criteria"))
    metadata = dict(raw["metadata"])
    types = metadata.pop("rubric_types", {}) if raw["rubrics"] else {}
    out: dict[str, Any] = {
        "eval_id": eid,
        "name": raw["name"],
        "conversation": [
            _adk_invocation(inv, f"conversation[{i}]", eid, losses) for i, inv in enumerate(raw["conversation"])
        ],
    }
    session = raw["session_input"]
    if session is not None:
        adk_session = dict(session["config"])
        if session["thread_id"] is not None:
            adk_session["session_id"] = session["thread_id"]
        adk_session["state"] = session["initial_state"]
        out["session_input"] = adk_session
    scenario = raw["conversation_scenario"]
    if scenario is not None:
        if scenario.get("expected_outcome") is not None:
            losses.append(
                Loss(
                    eid, "conversation_scenario.expected_outcome", "ADK conversation scenarios have no expected outcome"
                )
            )
        out["conversation_scenario"] = {
            "starting_prompt": scenario["starting_prompt"],
            "conversation_plan": scenario["conversation_plan"],
            "user_persona": scenario["user_persona"],
            **scenario["metadata"],
        }
        if not raw["conversation"]:
            del out["conversation"]
    if raw["rubrics"]:
        out["rubrics"] = _adk_rubrics(raw["rubrics"], types, "rubrics", eid, losses)
    out.update(metadata)
    return out


def _adk_config(config: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    """The native EvalConfig as ADK's test_config.json."""
    criterion_default = {"enabled": True, "match_type": "EXACT", "judge_model": "gpt-4o-mini", "rubrics": []}
    criteria: dict[str, Any] = {}
    custom: dict[str, Any] = {}
    for name, criterion in config.get("criteria", {}).items():
        where = f"default_config.criteria.{name}"
        if criterion.get("evaluator") not in (None, name):
            losses.append(Loss(None, f"{where}.evaluator", "an ADK criterion is named by its evaluator"))
        if not criterion.get("enabled", True):
            losses.append(Loss(None, f"{where}.enabled", "ADK criteria cannot be disabled"))
        options = dict(criterion.get("options") or {})
        if "custom_metric" in options:
            custom[name] = options.pop("custom_metric")
        judge = options.get("judge_model_options")
        if criterion.get("judge_model", "gpt-4o-mini") != (judge or {}).get("judge_model", "gpt-4o-mini"):
            losses.append(Loss(None, f"{where}.judge_model", "ADK names the judge model in judge_model_options"))
        rest = {k: criterion.get(k, v) for k, v in criterion_default.items()}
        if rest == criterion_default and not options:
            criteria[name] = criterion["threshold"]
            continue
        item: dict[str, Any] = {"threshold": criterion["threshold"], "match_type": criterion.get("match_type", "EXACT")}
        if criterion.get("rubrics"):
            item["rubrics"] = _adk_rubrics(
                criterion["rubrics"], options.pop("rubric_types", {}), f"{where}.rubrics", "", losses
            )
        item.update(options)
        criteria[name] = item
    out: dict[str, Any] = {"criteria": criteria}
    if custom:
        out["custom_metrics"] = custom
    simulator = config.get("user_simulator_config")
    if simulator is not None:
        sim = {
            "model": simulator["model"],
            "max_allowed_invocations": simulator["max_turns"],
            **simulator.get("options", {}),
        }
        out["user_simulator_config"] = sim
    return out


def _write_adk(header: Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    doc: dict[str, Any] = {
        "eval_set_id": header.eval_set_id,
        "name": header.name,
        "description": header.description,
        "eval_cases": [_adk_case(c, losses) for c in cases],
        **header.metadata,
    }
    if header.evaluator_config:
        losses.append(Loss(None, "evaluator_config", "ADK eval sets carry no evaluator definitions"))
    base = safe_name(header.eval_set_id)
    if header.default_config is None:
        return [SourceFile(f"{base}.evalset.json", dump(doc, len(cases)))]
    config = _adk_config(header.default_config, losses)
    return [
        SourceFile(f"{base}/{base}.evalset.json", dump(doc, len(cases))),
        SourceFile(f"{base}/test_config.json", dump(config)),
    ]


writer = EvalSetWriter("adk", "ADK", _write_adk)
