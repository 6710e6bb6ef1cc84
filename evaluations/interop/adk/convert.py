"""The conversion of an ADK document into the native `EvalSet` (`adk.py` detects and reads
the files): the current EvalSet JSON with its snake_case and camelCase spellings, and the two
legacy list formats. Every problem is reported at the path as the file spells it, so the path
and the line point at what the user wrote."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from evaluations.interop.base import (
    MAX_REPORTED_PROBLEMS,
    TOO_LARGE_A_NUMBER,
    CaseSink,
    PathPart,
    Problem,
    SourceFile,
    as_float,
    format_path,
    locate,
    problems_from_validation_error,
)
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.text import nul_trusted

Path = tuple[PathPart, ...]


MISSING: Any = object()


# Keys the conversion maps to native fields; every other key goes to `metadata`.
_SET_KEYS = {"eval_set_id", "name", "description", "eval_cases"}


_CASE_KEYS = {"eval_id", "name", "conversation", "conversation_scenario", "session_input", "rubrics"}


_INVOCATION_KEYS = {"invocation_id", "user_content", "final_response", "intermediate_data", "rubrics"}


_SCENARIO_KEYS = {"starting_prompt", "conversation_plan", "user_persona"}


_LEGACY_CASE_KEYS = {"name", "data", "initial_session"}


_LEGACY_TURN_KEYS = {"query", "reference", "expected_tool_use", "expected_intermediate_agent_responses"}


# Native-only keys (the native reader's) and ADK-only keys: what detection looks for.
NATIVE_INVOCATION_KEYS = {"expected_tool_trajectory", "expected_final_response", "expected_intermediate_responses"}


ADK_INVOCATION_KEYS = {
    "final_response", "intermediate_data", "creation_timestamp", "app_details",
    "finalResponse", "intermediateData", "userContent", "invocationId", "creationTimestamp", "appDetails",
}


ADK_CASE_KEYS = {
    "creation_timestamp", "final_session_state",
    "evalId", "sessionInput", "conversationScenario", "creationTimestamp", "finalSessionState",
}


ADK_SESSION_KEYS = {"app_name", "user_id", "state", "appName", "userId", "session_id", "sessionId"}


_MATCH_TYPES = ["EXACT", "IN_ORDER", "ANY_ORDER"]  # ADK's enum values 0, 1, 2


SNIFF_CASES = 50


_CAMEL_HUMP = re.compile(r"[A-Z]")


def _snake(key: str) -> str:
    """`userContent` -> `user_content`; snake_case keys come back unchanged."""
    out = _snake_cache.get(key)
    if out is None:
        out = _CAMEL_HUMP.sub(lambda m: "_" + m.group(0).lower(), key) if not key.islower() else key
        _snake_cache[key] = out
    return out


def _camel(name: str) -> str:
    out = _camel_cache.get(name)
    if out is None:
        first, *rest = name.split("_")
        out = first + "".join(word[:1].upper() + word[1:] for word in rest)
        _camel_cache[name] = out
    return out


def take(obj: dict[str, Any], name: str) -> tuple[str, Any]:
    """(the key as the file spells it, its value) for a snake_case field name, or
    (name, MISSING) when neither spelling is present."""
    value = obj.get(name, MISSING)
    if value is MISSING:
        camel = _camel_cache.get(name) or _camel(name)
        value = obj.get(camel, MISSING)
        if value is not MISSING:
            return camel, value
    return name, value


def _extras(obj: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """The keys the conversion does not map, snake_cased, so that nothing in the file is lost."""
    unknown = obj.keys() - known
    if not unknown:
        return {}
    return {s: v for k, v in obj.items() if k in unknown and (s := _snake(k)) not in known}


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


class AdkConverter:
    """Turns one ADK document into native dicts, collecting every problem on the way.

    Each dict it makes holds every field of its native model (defaults included), so that a
    case's dict is the validated model's `model_dump(mode="json")`: the import writes its
    columns from the dict, with no dump of the model (tests/test_format_adk.py checks the
    two agree on every ADK file of the tests).

    Plain dict work, checking each field it maps; the native model then validates each case
    once (10,000 cases of 3 turns: about 0.4 s converting and 0.3 s validating).
    """

    def __init__(self, file: SourceFile, sink: CaseSink | None = None):
        self.file = file
        self.sink = sink
        self.errors: list[tuple[str, Path, str | None]] = []
        # Values the native model refuses although the conversion accepted them; their paths
        # are native ones, so they are not located in the text.
        self.native_problems: list[Problem] = []

    def bad(self, path: Path, message: str, case: str | None = None) -> None:
        self.errors.append((message, path, case))

    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        for index, (message, path, case) in enumerate(self.errors):
            line = column = None
            # Only the reported problems are located: each `locate` scans the text again.
            if index < MAX_REPORTED_PROBLEMS:
                located = locate(self.file.text, path)
                if located:
                    line, column = located
            out.append(Problem(message, file=self.file.name, case=case, path=format_path(path) or None,
                               line=line, column=column))
        return out

    # --- Small typed getters ------------------------------------------------------------

    def text_field(self, obj: dict[str, Any], name: str, path: Path, case: str | None, *,
                   required: bool = False) -> str | None:
        key, value = take(obj, name)
        if value is MISSING or value is None:
            if required:
                self.bad((*path, key), "required field is missing" if value is MISSING else f"{key} is null",
                         case)
            return None
        if not isinstance(value, str):
            self.bad((*path, key), f"{key} must be a string, not {type_name(value)}", case)
            return None
        return value

    def list_field(self, obj: dict[str, Any], name: str, path: Path, case: str | None, *,
                   required: bool = False) -> tuple[str, list[Any]]:
        key, value = take(obj, name)
        if value is MISSING or value is None:
            if required:
                self.bad((*path, key), "required field is missing" if value is MISSING else f"{key} is null",
                         case)
            return key, []
        if not isinstance(value, list):
            self.bad((*path, key), f"{key} must be a list, not {type_name(value)}", case)
            return key, []
        return key, value

    def dict_field(self, obj: dict[str, Any], name: str, path: Path, case: str | None) -> tuple[str, Any]:
        """(key, dict or None); a value of another type is a problem and gives None."""
        key, value = take(obj, name)
        if value is MISSING or value is None:
            return key, None
        if not isinstance(value, dict):
            self.bad((*path, key), f"{key} must be an object, not {type_name(value)}", case)
            return key, None
        return key, value

    # --- The current EvalSet ------------------------------------------------------------

    def evalset(self, doc: dict[str, Any]) -> dict[str, Any]:
        eval_set_id = self.text_field(doc, "eval_set_id", (), None, required=True) or ""
        name = self.text_field(doc, "name", (), None) or ""
        description = self.text_field(doc, "description", (), None) or ""
        key, outlined = self.list_field(doc, "eval_cases", (), None, required=True)
        # `doc` is the file's outline (only the first cases); the cases themselves are
        # streamed, and each is dropped once converted and validated, so neither the raw
        # document nor the native set is ever in memory whole.
        raw_cases = self.file.iter_json_items_exact(key) if outlined else iter(())
        cases: list[EvalCase] = []
        sink = self.sink
        # Text with no NUL: validation would change nothing in a converted case (see `nul_trusted`).
        dumps = sink is not None and sink.takes_dumps and nul_trusted()
        for index, (raw, exact) in enumerate(raw_cases):
            case = self.case(raw, (key, index), index)
            if case is not None and not self.errors:
                if dumps:
                    assert sink is not None
                    # Every field was checked on the way (the conversion's contract, held by
                    # tests/test_format_adk.py on every ADK file and on generated ones): the
                    # dict is what the native model would dump, with no model built.
                    sink.add_dump(case, exact=exact)
                    continue
                model = self.native_case(case, index)
                if model is None:
                    pass
                elif self.sink is not None:
                    # the sink keeps what it needs; the model goes. The converted dict has
                    # every field of the native model, so it is the model's JSON dump when
                    # validation had nothing to change: no NUL to replace (see `nul_trusted`).
                    self.sink.add(model, dumped=case if nul_trusted() else None)
                else:
                    cases.append(model)
        return {
            "eval_set_id": eval_set_id,
            "name": name,
            "description": description,
            "eval_cases": cases,
            "metadata": _extras(doc, _SET_KEYS),
        }

    def native_case(self, case: dict[str, Any], index: int) -> EvalCase | None:
        try:
            return EvalCase.model_validate(case)
        except ValidationError as exc:
            self.native_problems += problems_from_validation_error(
                exc, file=self.file, prefix=("eval_cases", index), case=case["eval_id"], locate_in_text=False
            )
            return None

    def case(self, raw: Any, path: Path, index: int) -> dict[str, Any] | None:
        label = f"#{index + 1}"
        if not isinstance(raw, dict):
            self.bad(path, f"a case must be an object, not {type_name(raw)}", label)
            return None
        id_key, eval_id = take(raw, "eval_id")
        if isinstance(eval_id, str) and eval_id:
            label = eval_id
        elif eval_id is MISSING:
            self.bad((*path, id_key), "required field is missing", label)
        else:
            self.bad((*path, id_key), f"{id_key} must be a non-empty string, not {eval_id!r}", label)
        metadata = _extras(raw, _CASE_KEYS)

        conv_key, conversation = take(raw, "conversation")
        scenario_key, raw_scenario = take(raw, "conversation_scenario")
        invocations: list[dict[str, Any]] = []
        if conversation is not MISSING and conversation is not None:
            if not isinstance(conversation, list):
                self.bad((*path, conv_key), f"{conv_key} must be a list of invocations, not "
                         f"{type_name(conversation)}", label)
            else:
                for turn, inv in enumerate(conversation):
                    converted = self.invocation(inv, (*path, conv_key, turn), turn, label)
                    if converted is not None:
                        invocations.append(converted)
        scenario = None
        if raw_scenario is not MISSING and raw_scenario is not None:
            scenario = self.scenario(raw_scenario, (*path, scenario_key), label)
        elif conversation is MISSING or conversation is None:
            self.bad(path, "a case needs a `conversation` (scripted turns) or a `conversation_scenario`", label)

        rubrics_key, raw_rubrics = take(raw, "rubrics")
        rubrics = self.rubrics(raw_rubrics, (*path, rubrics_key), label, metadata)
        name = raw.get("name")
        return {
            "eval_id": label if isinstance(eval_id, str) else "",
            "name": name if isinstance(name, str) else "",
            "conversation": invocations,
            "session_input": self.session_input(raw, path, label),
            "metadata": metadata,
            "conversation_scenario": scenario,
            "rubrics": rubrics,
            "tags": [],
            "criteria": {},
        }

    def invocation(self, raw: Any, path: Path, turn: int, case: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            self.bad(path, f"an invocation must be an object, not {type_name(raw)}", case)
            return None
        id_key, invocation_id = take(raw, "invocation_id")
        if invocation_id is MISSING or invocation_id is None or invocation_id == "":
            invocation_id = f"turn_{turn + 1}"  # ADK's default is "", which cannot match outputs by id
        elif not isinstance(invocation_id, str):
            self.bad((*path, id_key), f"{id_key} must be a string, not {type_name(invocation_id)}", case)
            invocation_id = f"turn_{turn + 1}"
        metadata = _extras(raw, _INVOCATION_KEYS)

        user_key, raw_user = take(raw, "user_content")
        user: dict[str, Any] | None = None
        if raw_user is MISSING or raw_user is None:
            self.bad((*path, user_key), "required field is missing" if raw_user is MISSING
                     else f"{user_key} is null", case)
        else:
            user, _ = self.content(raw_user, (*path, user_key), case, "user")

        final_key, raw_final = take(raw, "final_response")
        final = None
        if raw_final is not MISSING and raw_final is not None:
            final, has_any = self.content(raw_final, (*path, final_key), case, "assistant")
            if not has_any:
                final = None  # ADK writes `{"parts": [{"text": null, ...}]}` for "no expected response"

        data_key, raw_data = take(raw, "intermediate_data")
        tools: list[dict[str, Any]] = []
        intermediate: list[dict[str, Any]] = []
        if raw_data is not MISSING and raw_data is not None:
            tools, intermediate = self.intermediate_data(raw_data, (*path, data_key), case, metadata)

        rubrics_key, raw_rubrics = take(raw, "rubrics")
        rubrics = self.rubrics(raw_rubrics, (*path, rubrics_key), case, metadata)
        if user is None:
            return None
        return {
            "invocation_id": invocation_id,
            "user_content": user,
            "expected_tool_trajectory": tools,
            "expected_intermediate_responses": intermediate,
            "expected_final_response": final,
            "metadata": metadata,
            "rubrics": rubrics,
        }

    def content(self, raw: Any, path: Path, case: str | None, default_role: str) -> tuple[dict[str, Any] | None, bool]:
        """A native MessageContent dict from a genai `Content`, and whether it holds anything."""
        if not isinstance(raw, dict):
            self.bad(path, f"must be an object with `role` and `parts`, not {type_name(raw)}", case)
            return None, False
        role = raw.get("role")
        if role is None:
            role = default_role
        elif not isinstance(role, str):
            self.bad((*path, "role"), f"role must be a string, not {type_name(role)}", case)
            role = default_role
        elif role == "model":
            role = "assistant"  # Gemini's name for it
        parts = raw.get("parts")
        if parts is None:
            parts = []
        elif not isinstance(parts, list):
            self.bad((*path, "parts"), f"parts must be a list, not {type_name(parts)}", case)
            parts = []
        value, has_any = self.parts(enumerate(parts), (*path, "parts"), case)
        return {"role": role, "content": value, "metadata": {}}, has_any

    def parts(self, parts: Iterable[tuple[int, Any]], path: Path,
              case: str | None) -> tuple[str | list[dict[str, Any]], bool]:
        """(index, part) pairs of a genai part list as native content: the text parts joined
        by newlines or, when any part is not plain text (a file, a function call, a thought),
        every part as a dict with its null fields dropped."""
        texts: list[str] = []
        kept: list[dict[str, Any]] = []
        structured = False
        for index, part in parts:
            if not isinstance(part, dict):
                self.bad((*path, index), f"a part must be an object, not {type_name(part)}", case)
                continue
            if len(part) == 1 and type(text := part.get("text")) is str:  # the usual part
                texts.append(text)
                kept.append(part)
                continue
            clean = {k: v for k, v in part.items() if v is not None}
            if not clean:
                continue
            text = clean.get("text")
            if len(clean) == 1 and isinstance(text, str):
                texts.append(text)
                kept.append(clean)
                continue
            if text is not None and not isinstance(text, str):
                self.bad((*path, index, "text"), f"text must be a string, not {type_name(text)}", case)
                continue
            structured = True
            kept.append({_snake(k): v for k, v in clean.items()})  # `inlineData` -> `inline_data`
        if structured:
            return kept, True
        return "\n".join(texts), any(texts)

    def intermediate_data(self, raw: Any, path: Path, case: str,
                          metadata: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if not isinstance(raw, dict):
            self.bad(path, f"must be an object, not {type_name(raw)}", case)
            return [], []
        events_key, events = take(raw, "invocation_events")
        if events is not MISSING:
            return self.invocation_events(events, (*path, events_key), case, metadata)

        uses_key, uses = self.list_field(raw, "tool_uses", path, case)
        calls = [c for i, u in enumerate(uses) if (c := self.tool_call(u, (*path, uses_key, i), case)) is not None]
        responses_key, raw_responses = self.list_field(raw, "tool_responses", path, case)
        responses = [r for i, u in enumerate(raw_responses)
                     if (r := self.tool_response(u, (*path, responses_key, i), case)) is not None]
        if responses:
            self.attach_results(calls, responses, metadata)

        inter_key, raw_inter = self.list_field(raw, "intermediate_responses", path, case)
        intermediate = []
        for index, item in enumerate(raw_inter):
            item_path = (*path, inter_key, index)
            if not (isinstance(item, list) and len(item) == 2):
                self.bad(item_path, "an intermediate response must be an [author, parts] pair", case)
                continue
            author, parts = item
            if not isinstance(author, str):
                self.bad((*item_path, 0), f"the author must be a string, not {type_name(author)}", case)
                continue
            if not isinstance(parts, list):
                self.bad((*item_path, 1), f"the parts must be a list, not {type_name(parts)}", case)
                continue
            value, _ = self.parts(enumerate(parts), (*item_path, 1), case)
            intermediate.append({"role": "assistant", "content": value, "metadata": {"author": author}})
        return calls, intermediate

    def invocation_events(self, events: Any, path: Path, case: str,
                          metadata: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Newer ADK keeps the agent's events instead of `tool_uses`: function calls become the
        trajectory, function responses their results, other content intermediate responses."""
        if events is None:
            return [], []
        if not isinstance(events, list):
            self.bad(path, f"invocation_events must be a list, not {type_name(events)}", case)
            return [], []
        calls: list[dict[str, Any]] = []
        responses: list[dict[str, Any]] = []
        intermediate: list[dict[str, Any]] = []
        details: list[dict[str, Any]] = []
        for index, event in enumerate(events):
            event_path = (*path, index)
            if not isinstance(event, dict):
                self.bad(event_path, f"an event must be an object, not {type_name(event)}", case)
                continue
            author = self.text_field(event, "author", event_path, case, required=True) or ""
            content_key, content = self.dict_field(event, "content", event_path, case)
            extra = {k: v for k, v in _extras(event, {"author", "content"}).items() if v is not None}
            if extra:
                details.append({"author": author, **extra})
            if content is None:
                continue
            parts_key, parts = self.list_field(content, "parts", (*event_path, content_key), case)
            parts_path = (*event_path, content_key, parts_key)
            other: list[tuple[int, Any]] = []
            for part_index, part in enumerate(parts):
                if isinstance(part, dict):
                    call_key, call = take(part, "function_call")
                    if call is not MISSING and call is not None:
                        converted = self.tool_call(call, (*parts_path, part_index, call_key), case)
                        if converted is not None:
                            calls.append(converted)
                        continue
                    response_key, response = take(part, "function_response")
                    if response is not MISSING and response is not None:
                        result = self.tool_response(response, (*parts_path, part_index, response_key), case)
                        if result is not None:
                            responses.append(result)
                        continue
                other.append((part_index, part))
            if other:
                value, has_any = self.parts(other, parts_path, case)
                if has_any:
                    intermediate.append({"role": "assistant", "content": value, "metadata": {"author": author}})
        if responses:
            self.attach_results(calls, responses, metadata)
        if details:
            metadata["invocation_events"] = details
        return calls, intermediate

    def tool_call(self, raw: Any, path: Path, case: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            self.bad(path, f"a tool call must be an object, not {type_name(raw)}", case)
            return None
        name = raw.get("name", MISSING)
        if not isinstance(name, str) or not name:
            self.bad((*path, "name"), "required field is missing" if name is MISSING
                     else f"the tool name must be a non-empty string, not {name!r}", case)
            return None
        args = raw.get("args")
        if args is None:
            args = {}
        elif not isinstance(args, dict):
            self.bad((*path, "args"), f"args must be an object, not {type_name(args)}", case)
            return None
        call_id = raw.get("id")
        if call_id is not None and not isinstance(call_id, str):
            self.bad((*path, "id"), f"id must be a string, not {type_name(call_id)}", case)
            return None
        return {"name": name, "args": args, "call_id": call_id, "result": None}

    def tool_response(self, raw: Any, path: Path, case: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            self.bad(path, f"a tool response must be an object, not {type_name(raw)}", case)
            return None
        call_id = self.text_field(raw, "id", path, case)
        name = self.text_field(raw, "name", path, case)
        return {"id": call_id, "name": name, "raw": {_snake(k): v for k, v in raw.items() if v is not None}}

    @staticmethod
    def attach_results(calls: list[dict[str, Any]], responses: list[dict[str, Any]],
                       metadata: dict[str, Any]) -> None:
        """Give each call its response: by id, or (for calls without one) the next unused
        response without an id and of the same tool. Responses left over go to metadata."""
        by_id = {r["id"]: r for r in reversed(responses) if r["id"]}
        used: set[int] = set()
        for call in calls:
            response = by_id.get(call["call_id"]) if call["call_id"] else None
            if response is None and not call["call_id"]:
                response = next((r for r in responses if not r["id"] and id(r) not in used
                                 and r["name"] in (None, call["name"])), None)
            if response is not None and id(response) not in used:
                used.add(id(response))
                call["result"] = response["raw"].get("response")
        leftover = [r["raw"] for r in responses if id(r) not in used]
        if leftover:
            metadata["tool_responses"] = leftover

    def rubrics(self, raw: Any, path: Path, case: str | None, metadata: dict[str, Any]) -> list[dict[str, Any]]:
        """ADK rubrics as native ones: the id names it, the text property describes it, ADK's
        `description` (how to read the result) is the scoring guide; types go to metadata."""
        if raw is MISSING or raw is None:
            return []
        if not isinstance(raw, list):
            self.bad(path, f"rubrics must be a list, not {type_name(raw)}", case)
            return []
        out = []
        for index, rubric in enumerate(raw):
            item_path = (*path, index)
            if not isinstance(rubric, dict):
                self.bad(item_path, f"a rubric must be an object, not {type_name(rubric)}", case)
                continue
            rubric_id = self.text_field(rubric, "rubric_id", item_path, case, required=True)
            content_key, content = take(rubric, "rubric_content")
            text = None
            if content is MISSING or content is None:
                self.bad((*item_path, content_key), "required field is missing", case)
            elif not isinstance(content, dict):
                self.bad((*item_path, content_key), f"{content_key} must be an object, not "
                         f"{type_name(content)}", case)
            else:
                text = self.text_field(content, "text_property", (*item_path, content_key), case)
            guide = self.text_field(rubric, "description", item_path, case)
            kind = self.text_field(rubric, "type", item_path, case)
            if rubric_id is None:
                continue
            out.append({"name": rubric_id, "description": text or "", "scoring_guide": guide or "", "weight": 1.0})
            if kind:
                metadata.setdefault("rubric_types", {})[rubric_id] = kind
        return out

    def scenario(self, raw: Any, path: Path, case: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            self.bad(path, f"conversation_scenario must be an object, not {type_name(raw)}", case)
            return None
        starting_prompt = self.text_field(raw, "starting_prompt", path, case, required=True)
        plan = self.text_field(raw, "conversation_plan", path, case, required=True)
        _, persona = take(raw, "user_persona")
        return {
            "starting_prompt": starting_prompt,
            "conversation_plan": plan or "",
            "user_persona": None if persona is MISSING else persona,
            "expected_outcome": None,
            "metadata": _extras(raw, _SCENARIO_KEYS),
        }

    def session_input(self, raw_case: dict[str, Any], path: Path, case: str) -> dict[str, Any] | None:
        """ADK's {app_name, user_id, session_id, state}: the ids configure the session, the
        state is its initial state."""
        key, raw = self.dict_field(raw_case, "session_input", path, case)
        if raw is None:
            return None
        return self.session_from(raw, (*path, key), case)

    def session_from(self, raw: dict[str, Any], path: Path, case: str) -> dict[str, Any]:
        config: dict[str, Any] = {}
        state: dict[str, Any] = {}
        thread_id = None
        for key, value in raw.items():
            name = _snake(key)
            if name == "state":
                if isinstance(value, dict):
                    state = value
                elif value is not None:
                    self.bad((*path, key), f"state must be an object, not {type_name(value)}", case)
            elif name == "session_id":
                if isinstance(value, str):
                    thread_id = value
                elif value is not None:
                    self.bad((*path, key), f"session_id must be a string, not {type_name(value)}", case)
            else:
                config[name] = value
        return {"thread_id": thread_id, "config": config, "initial_state": state}

    # --- The older list formats -----------------------------------------------------------

    def legacy_list(self, doc: list[Any], set_id: str) -> dict[str, Any]:
        cases = []
        for index, raw in enumerate(doc):
            path: Path = (index,)
            label = f"#{index + 1}"
            if not isinstance(raw, dict):
                self.bad(path, f"a case must be an object with `name` and `data`, not {type_name(raw)}", label)
                continue
            name = self.text_field(raw, "name", path, label, required=True)
            label = name or label
            key, data = self.list_field(raw, "data", path, label, required=True)
            turns = [t for n, item in enumerate(data) if (t := self.legacy_turn(item, (*path, key, n), n, label))]
            session_key, session = self.dict_field(raw, "initial_session", path, label)
            cases.append({
                "eval_id": name or "",
                "conversation": turns,
                # ADK ignores an empty initial_session, and so do we.
                "session_input": self.session_from(session, (*path, session_key), label) if session else None,
                "metadata": _extras(raw, _LEGACY_CASE_KEYS),
            })
        return {"eval_set_id": set_id, "name": set_id, "eval_cases": cases}

    def oldest_list(self, doc: list[Any], set_id: str) -> dict[str, Any]:
        turns = [t for n, item in enumerate(doc) if (t := self.legacy_turn(item, (n,), n, set_id))]
        return {"eval_set_id": set_id, "name": set_id, "eval_cases": [{"eval_id": set_id, "conversation": turns}]}

    def legacy_turn(self, raw: Any, path: Path, turn: int, case: str) -> dict[str, Any] | None:
        if not isinstance(raw, dict):
            self.bad(path, f"a turn must be an object with `query`, not {type_name(raw)}", case)
            return None
        query = self.text_field(raw, "query", path, case, required=True)
        reference = self.text_field(raw, "reference", path, case)
        key, uses = self.list_field(raw, "expected_tool_use", path, case)
        calls = []
        for index, use in enumerate(uses):
            use_path = (*path, key, index)
            if not isinstance(use, dict):
                self.bad(use_path, f"a tool use must be an object, not {type_name(use)}", case)
                continue
            name = self.text_field(use, "tool_name", use_path, case, required=True)
            _, args = self.dict_field(use, "tool_input", use_path, case)
            if name is None:
                continue
            call: dict[str, Any] = {"name": name, "args": args or {}}
            if use.get("mock_tool_output") is not None:  # early ADK's canned tool result
                call["result"] = use["mock_tool_output"]
            calls.append(call)
        inter_key, raw_inter = self.list_field(raw, "expected_intermediate_agent_responses", path, case)
        intermediate = []
        for index, item in enumerate(raw_inter):
            item_path = (*path, inter_key, index)
            if not isinstance(item, dict):
                self.bad(item_path, f"an intermediate response must be an object with `author` and `text`, "
                         f"not {type_name(item)}", case)
                continue
            author = self.text_field(item, "author", item_path, case, required=True)
            text = self.text_field(item, "text", item_path, case, required=True)
            if author is not None and text is not None:
                intermediate.append({"role": "assistant", "content": text, "metadata": {"author": author}})
        if query is None:
            return None
        return {
            "invocation_id": f"turn_{turn + 1}",
            "user_content": {"role": "user", "content": query},
            "expected_tool_trajectory": calls,
            "expected_intermediate_responses": intermediate,
            "expected_final_response": {"role": "assistant", "content": reference} if reference else None,
            "metadata": _extras(raw, _LEGACY_TURN_KEYS),
        }

    # --- test_config.json -----------------------------------------------------------------

    def eval_config(self, doc: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
        """ADK's EvalConfig as the native one: each criterion keeps its ADK name as key and
        evaluator; settings with no native field go to the criterion's `options`."""
        criteria_key, raw_criteria = self.dict_field(doc, "criteria", (), None)
        _, custom = self.dict_field(doc, "custom_metrics", (), None)
        custom = dict(custom or {})
        criteria: dict[str, Any] = {}
        for name, value in (raw_criteria or {}).items():
            path: Path = (criteria_key, name)
            criterion: dict[str, Any] = {"evaluator": name}
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if (number := as_float(value)) is None:
                    self.bad(path, TOO_LARGE_A_NUMBER)
                    continue
                criterion["threshold"] = number
            elif isinstance(value, dict):
                criterion.update(self.criterion(value, path))
            else:
                self.bad(path, f"a criterion must be a threshold number or an object, not {type_name(value)}")
                continue
            if name in custom:
                criterion.setdefault("options", {})["custom_metric"] = custom.pop(name)
            criteria[name] = criterion
        for name in custom:
            warnings.append(f"{self.file.name}: custom metric {name!r} is not used by any criterion")
        out: dict[str, Any] = {"criteria": criteria}
        sim_key, sim = self.dict_field(doc, "user_simulator_config", (), None)
        if sim is not None:
            out["user_simulator_config"] = self.user_simulator(sim, (sim_key,))
        for key in _extras(doc, {"criteria", "custom_metrics", "user_simulator_config"}):
            warnings.append(f"{self.file.name}: `{key}` has no equivalent in evalsite and is ignored")
        return out

    def criterion(self, raw: dict[str, Any], path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        options: dict[str, Any] = {}
        for key, value in raw.items():
            name = _snake(key)
            if name == "threshold":
                if isinstance(value, (int, float)) and not isinstance(value, bool) and as_float(value) is not None:
                    out["threshold"] = float(value)
                elif isinstance(value, int) and not isinstance(value, bool):
                    self.bad((*path, key), TOO_LARGE_A_NUMBER)
                else:
                    self.bad((*path, key), f"threshold must be a number, not {type_name(value)}")
            elif name == "match_type":
                match_type = self.match_type(value)
                if match_type is None:
                    self.bad((*path, key), f"match_type must be one of {', '.join(_MATCH_TYPES)} (or 0, 1, 2), "
                             f"not {value!r}")
                else:
                    out["match_type"] = match_type
            elif name == "rubrics":
                out["rubrics"] = self.rubrics(value, (*path, key), None, options)
            elif name == "judge_model_options" and isinstance(value, dict):
                judge = {_snake(k): v for k, v in value.items()}
                if isinstance(judge.get("judge_model"), str):
                    out["judge_model"] = judge["judge_model"]
                options[name] = judge
            else:
                options[name] = value
        if "threshold" not in out and not any(_snake(k) == "threshold" for k in raw):
            self.bad((*path, "threshold"), "required field is missing")
        if options:
            out["options"] = options
        return out

    @staticmethod
    def match_type(value: Any) -> str | None:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(_MATCH_TYPES):
            return _MATCH_TYPES[value]
        if isinstance(value, str):
            normal = value.strip().upper().replace("-", "_").replace(" ", "_")
            if normal in _MATCH_TYPES:
                return normal
        return None

    def user_simulator(self, raw: dict[str, Any], path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        options: dict[str, Any] = {}
        for key, value in raw.items():
            name = _snake(key)
            if name == "model" and isinstance(value, str):
                out["model"] = value
            elif name == "max_allowed_invocations" and isinstance(value, int) and value > 0:
                out["max_turns"] = value
            else:
                # -1 ("no limit") included: native max_turns has no way to say it.
                options[name] = value
        out["options"] = options
        return out


_snake_cache: dict[str, str] = {}


_camel_cache: dict[str, str] = {}
