"""The native format: AgentFlow `.evalset.json` (seed 004), read and written as it is."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from evaluations.interop.base import (
    MAX_REPORTED_PROBLEMS,
    CaseSink,
    ParsedEvalSet,
    Problem,
    SourceFile,
    gc_paused,
    problems_from_validation_error,
    schema_error,
)
from evaluations.schemas.evalset import EvalCase, EvalSet

# Keys only the native invocation has (ADK's use `final_response` / `intermediate_data` and
# `parts` inside contents).
_NATIVE_INVOCATION_KEYS = {"expected_tool_trajectory", "expected_final_response", "expected_intermediate_responses"}
# Keys that only ADK writes (snake and camelCase): a file with them is ADK's, even when it
# also looks native, so a native typo still gets the native reader's located error.
_ADK_INVOCATION_KEYS = {"final_response", "intermediate_data", "finalResponse", "intermediateData", "userContent",
                        "invocationId", "creationTimestamp", "appDetails", "app_details"}
_ADK_CASE_KEYS = {"evalId", "sessionInput", "conversationScenario", "creationTimestamp", "finalSessionState",
                  "final_session_state"}
_ADK_SESSION_KEYS = {"app_name", "user_id", "state", "appName", "userId"}


class NativeReader:
    name = "native"
    label = "AgentFlow / evalsite native .evalset.json"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix != "json":
            return "not a .json file"
        doc, why = file.try_outline()
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
            if adk_case := sorted(_ADK_CASE_KEYS & case.keys()):
                return f"cases use ADK's {', '.join(adk_case)}"
            if "description" in case:
                return None  # AgentFlow 0.10 writes one (and ADK's session keys in session_input)
            for inv in case.get("conversation") or []:
                if not isinstance(inv, dict):
                    continue
                if adk_inv := sorted(_ADK_INVOCATION_KEYS & inv.keys()):
                    return f"invocations use ADK's {', '.join(adk_inv)}"
                if _NATIVE_INVOCATION_KEYS & inv.keys():
                    return None
                user = inv.get("user_content")
                if isinstance(user, dict) and "content" not in user and "parts" in user:
                    return "invocations carry ADK `parts`, not `content`"
            session = case.get("session_input")
            if isinstance(session, dict) and (adk_session := sorted(_ADK_SESSION_KEYS & session.keys())):
                return f"session_input has ADK's {', '.join(adk_session)}"
        return None

    def is_companion(self, file: SourceFile) -> bool:
        return False

    def parse(
        self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None
    ) -> ParsedEvalSet:
        """Validates the set's header, then each case on its own, handing it to the sink (if
        any) at once, so a large file never exists as raw JSON and models at the same time."""
        doc = file.json_outline
        if not isinstance(doc, dict) or not isinstance(doc.get("eval_cases", []), list):
            try:  # let the model say what is wrong with the document's shape
                EvalSet.model_validate(doc)
            except ValidationError as exc:
                raise schema_error(problems_from_validation_error(exc, file=file)) from None
        raw_cases = file.iter_json_items("eval_cases") if "eval_cases" in doc else iter(())
        problems: list[Problem] = []
        try:
            evalset = EvalSet.model_validate({**doc, "eval_cases": []})
        except ValidationError as exc:
            problems += problems_from_validation_error(exc, file=file)
        cases: list[EvalCase] = []
        with gc_paused():
            for index, raw in enumerate(raw_cases):
                try:
                    case = EvalCase.model_validate(raw)
                except ValidationError as exc:
                    problems += problems_from_validation_error(
                        exc, file=file, prefix=("eval_cases", index), case=_case_id(raw, index),
                        # locating rescans the text: enough for the problems that get shown
                        locate_in_text=len(problems) < MAX_REPORTED_PROBLEMS,
                    )
                    continue
                if problems:
                    continue  # nothing will be imported; just keep collecting problems
                if sink is not None:
                    sink.add(case)
                else:
                    cases.append(case)
        file.release()
        if problems:
            raise schema_error(problems)
        evalset.eval_cases = cases
        return ParsedEvalSet(evalset=evalset, format=self.name, variant="agentflow", source=file)


def _case_id(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("eval_id"), str) and raw["eval_id"]:
        return str(raw["eval_id"])
    return f"#{index + 1}"


def dumps(evalset: EvalSet) -> str:
    """The native JSON text for an eval set (what the download gives)."""
    return json.dumps(evalset.model_dump(mode="json"), ensure_ascii=False, indent=2) + "\n"


reader = NativeReader()
