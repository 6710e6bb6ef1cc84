"""The native format: AgentFlow `.evalset.json` (seed 004), read and written as it is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from evaluations.formats.base import (
    ParsedEvalSet,
    PathPart,
    SourceFile,
    problems_from_validation_error,
    schema_error,
)
from evaluations.schemas.evalset import EvalSet

# Keys only the native invocation has (ADK's use `final_response` / `intermediate_data` and
# `parts` inside contents).
_NATIVE_INVOCATION_KEYS = {"expected_tool_trajectory", "expected_final_response", "expected_intermediate_responses"}


class NativeReader:
    name = "native"
    label = "AgentFlow / evalsite native .evalset.json"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix != "json":
            return "not a .json file"
        doc, why = file.try_json()
        if why:
            return why
        if not isinstance(doc, dict):
            return "the document is not a JSON object with eval_set_id and eval_cases"
        if "eval_set_id" not in doc or "eval_cases" not in doc:
            return "no top-level eval_set_id and eval_cases"
        cases = doc.get("eval_cases")
        if not isinstance(cases, list):
            return "eval_cases is not a list"
        for case in cases[:50]:
            if not isinstance(case, dict):
                continue
            for inv in case.get("conversation") or []:
                if not isinstance(inv, dict):
                    continue
                if _NATIVE_INVOCATION_KEYS & inv.keys():
                    return None
                user = inv.get("user_content")
                if isinstance(user, dict):
                    return None if "content" in user else "invocations carry ADK `parts`, not `content`"
                if {"final_response", "intermediate_data"} & inv.keys():
                    return "invocations use ADK's final_response / intermediate_data"
            if "conversation_scenario" in case and "conversation" not in case:
                # ADK's scenario-only cases look the same in both; ADK owns its session_input.
                si = case.get("session_input") or {}
                if isinstance(si, dict) and ({"app_name", "user_id", "state"} & si.keys()):
                    return "session_input has ADK's app_name / user_id / state"
        return None

    def is_companion(self, file: SourceFile) -> bool:
        return False

    def parse(self, file: SourceFile, companions: Sequence[SourceFile]) -> ParsedEvalSet:
        doc = file.json
        try:
            evalset = EvalSet.model_validate(doc)
        except ValidationError as exc:
            raise schema_error(
                problems_from_validation_error(exc, file=file, case_of=lambda loc: _case_id(doc, loc))
            ) from None
        return ParsedEvalSet(evalset=evalset, format=self.name, variant="agentflow", source=file)


def _case_id(doc: Any, loc: list[PathPart]) -> str | None:
    if len(loc) >= 2 and loc[0] == "eval_cases" and isinstance(loc[1], int):
        try:
            case = doc["eval_cases"][loc[1]]
            return str(case.get("eval_id")) if isinstance(case, dict) and case.get("eval_id") else f"#{loc[1] + 1}"
        except (IndexError, KeyError, TypeError):
            return None
    return None


def dumps(evalset: EvalSet) -> str:
    """The native JSON text for an eval set (what the download gives)."""
    return json.dumps(evalset.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"


reader = NativeReader()
