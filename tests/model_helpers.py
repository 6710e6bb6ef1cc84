"""Building blocks for the model target's tests: the demo eval set with expected tool results,
and a scripted model for tests/llm_server.py that plays an agent from that eval set.

The scripted model reads the conversation it is sent: after a user message it asks for the
tools the eval set expects for that message (all at once, as parallel calls), after the tool
results it answers the expected final response. A model named in `sloppy` gets one argument
wrong in the cases listed, so experiments have something to compare."""

from __future__ import annotations

import copy
import json
from typing import Any

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import EvalSetVersion, Project
from tests.conftest import REPO
from tests.llm_server import Behaviour, reply, tool_calls

DEMO = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"


def demo_with_results() -> dict[str, Any]:
    """The demo eval set, each expected tool call given a result (as ADK eval sets record them)."""
    doc = json.loads(DEMO.read_text())
    for case in doc["eval_cases"]:
        for invocation in case["conversation"]:
            for call in invocation.get("expected_tool_trajectory", []):
                call["result"] = {"tool": call["name"], "ok": True, **{f"for_{k}": v for k, v in call["args"].items()}}
    doc["eval_set_id"] = "travel_with_results"
    return doc


def import_with_results(project: Project) -> EvalSetVersion:
    doc = demo_with_results()
    [outcome] = evalset_import(project=project, files=[SourceFile("travel.evalset.json", json.dumps(doc).encode())])
    return outcome.version


class ScriptedAgent:
    """`llm.responder = ScriptedAgent(doc)`: answers as the eval set expects."""

    def __init__(self, doc: dict[str, Any], *, sloppy: dict[str, set[str]] | None = None) -> None:
        self.turns: dict[str, tuple[str, list[dict[str, Any]], str]] = {}
        for case in doc["eval_cases"]:
            for invocation in case["conversation"]:
                final = (invocation.get("expected_final_response") or {}).get("content", "")
                self.turns[invocation["user_content"]["content"]] = (
                    case["eval_id"], copy.deepcopy(invocation.get("expected_tool_trajectory", [])), final)
        self.sloppy = sloppy or {}

    def __call__(self, body: dict[str, Any]) -> Behaviour:
        messages = body["messages"]
        last_user = next(m for m in reversed(messages) if m["role"] == "user")
        text = last_user["content"]  # a prompt's user template may wrap the case's message
        known = max((k for k in self.turns if k in text), key=len, default=None)
        eval_id, calls, final = self.turns[known] if known is not None else ("", [], "I cannot help with that.")
        if messages[-1]["role"] == "user" and calls:
            wanted = [(c["name"], dict(c["args"])) for c in calls]
            if eval_id in self.sloppy.get(body["model"], set()):
                name, args = wanted[0]
                wanted[0] = (name, {**args, next(iter(args)): "somewhere else"} if args else {"x": 1})
            return tool_calls(*wanted, prompt_tokens=120, completion_tokens=12)
        return reply(final or "Done.", prompt_tokens=150, completion_tokens=20)
