"""The case editor's form: a native case shown as fields, and fields read back into a case.

The form edits what a reviewer fixes: the eval id, name, tags, metadata and rubrics, and per
turn the user message, the expected response and the expected tool calls (a JSON list of
`{"name", "args"}`). Everything else a case holds (session input, scenario, criteria, a
turn's intermediate responses and metadata, structured user content left as it was) is kept
from the case the form began with. Reading the form never raises: it returns the case dict
and the problems found, each named by the field it came from."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.http import QueryDict

from evaluations import safejson
from evaluations.converters import whole_number
from evaluations.evalsets.curation import Problem
from evaluations.schemas.evalset import MessageContent

MAX_TURNS = 200
# How deep each JSON field sits in the edit the form sends on (the API's body shape, measured
# there against safejson.MAX_DEPTH): body > changes > change > case > metadata, rubrics, and
# the case itself; conversation > turn > expected tool calls two levels further in. A field
# within its share keeps the eval set's native export re-importable.
CASE_LEVEL = 4
TURN_FIELD_LEVEL = CASE_LEVEL + 2


@dataclass
class TurnFields:
    index: int  # from 0
    user: str = ""
    expected: str = ""
    tool_calls: str = ""  # JSON text
    structured_user: bool = False  # non-text content: kept unless the text is changed


@dataclass
class CaseFields:
    eval_id: str = ""
    name: str = ""
    tags: str = ""  # comma-separated
    metadata: str = ""  # JSON text
    rubrics: str = ""  # JSON text
    turns: list[TurnFields] = field(default_factory=list)
    original: str = ""  # the case the form began with, as JSON (kept fields come from it)


def _json_text(value: Any) -> str:
    if value in (None, {}, []):
        return ""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _message_text(content: Any) -> tuple[str, bool]:
    if not isinstance(content, dict):
        return "", False
    message = MessageContent.model_validate(content)
    return message.get_text(), not isinstance(message.content, str)


def fields_from_case(case: dict[str, Any]) -> CaseFields:
    """The form's fields for a native case dict (the dict a stored case or a proposal gives)."""
    turns = []
    for i, turn in enumerate(case.get("conversation") or []):
        user, structured = _message_text(turn.get("user_content"))
        expected, _ = _message_text(turn.get("expected_final_response"))
        turns.append(TurnFields(i, user, expected, _calls_text(turn.get("expected_tool_trajectory")), structured))
    return CaseFields(
        eval_id=case.get("eval_id") or "",
        name=case.get("name") or "",
        tags=", ".join(case.get("tags") or []),
        metadata=_json_text(case.get("metadata")),
        rubrics=_json_text(case.get("rubrics")),
        turns=turns,
        original=json.dumps(case, ensure_ascii=False, sort_keys=True),
    )


def _calls_text(calls: Any) -> str:
    """Expected tool calls as the form shows them: name and args (an id or result a call
    has is kept while the text is left as it is)."""
    shown = [{"name": c.get("name"), "args": c.get("args") or {}} for c in calls or [] if isinstance(c, dict)]
    return json.dumps(shown, ensure_ascii=False, indent=2) if shown else ""


def _load_json(text: str, default: Any, where: str, problems: list[Problem], *, level: int = CASE_LEVEL) -> Any:
    """The field's JSON, or `default` and a problem: invalid, or nested deeper than its share
    of the API's limit (measured before parsing, so no depth can exhaust the stack)."""
    if not text.strip():
        return default
    limit = safejson.MAX_DEPTH - level
    try:
        safejson.check_depth(text, limit)
        return json.loads(text)
    except safejson.TooDeep as exc:
        problems.append(Problem(where, f"nested more than {limit} levels deep at line {exc.lineno}, column "
                                       f"{exc.colno}: an eval set holds at most {safejson.MAX_DEPTH} levels, "
                                       f"and this field starts {level} levels in"))
        return default
    except json.JSONDecodeError as exc:
        problems.append(Problem(where, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"))
        return default


def case_from_post(post: QueryDict) -> tuple[dict[str, Any], CaseFields, list[Problem]]:
    """The case dict the form describes, the fields as typed (to show again), and problems."""
    problems: list[Problem] = []
    original = _load_json(post.get("original", ""), {}, "original", problems, level=CASE_LEVEL - 1)
    if not isinstance(original, dict):
        original = {}
    old_turns = original.get("conversation") or []
    typed = CaseFields(
        eval_id=post.get("eval_id", "").strip(),
        name=post.get("name", "").strip(),
        tags=post.get("tags", ""),
        metadata=post.get("metadata", ""),
        rubrics=post.get("rubrics", ""),
        original=post.get("original", ""),
    )
    case = dict(original)
    case["eval_id"] = typed.eval_id
    case["name"] = typed.name
    case["tags"] = list(dict.fromkeys(t.strip() for t in typed.tags.split(",") if t.strip()))
    case["metadata"] = _load_json(typed.metadata, {}, "metadata", problems)
    case["rubrics"] = _load_json(typed.rubrics, [], "rubrics", problems)
    try:
        count = min(int(post.get("turn_count", "0")), MAX_TURNS)
    except ValueError:
        count = 0
    conversation: list[dict[str, Any]] = []
    for i in range(count):
        user = post.get(f"turn-{i}-user", "").replace("\r\n", "\n")
        expected = post.get(f"turn-{i}-expected", "").replace("\r\n", "\n")
        tools = post.get(f"turn-{i}-tools", "").replace("\r\n", "\n")
        old = old_turns[i] if i < len(old_turns) and isinstance(old_turns[i], dict) else {}
        old_user, structured = _message_text(old.get("user_content"))
        typed.turns.append(TurnFields(i, user, expected, tools, structured))
        if post.get(f"turn-{i}-remove") or (
            not old and not user.strip() and not expected.strip() and not tools.strip()
        ):
            continue  # removed, or the blank turn the form offers for adding one
        turn = dict(old)
        turn.setdefault("invocation_id", f"turn-{len(conversation) + 1}")
        if not (structured and user == old_user):
            turn["user_content"] = {"role": "user", "content": user}
        old_expected, structured_expected = _message_text(old.get("expected_final_response"))
        if not (structured_expected and expected == old_expected):
            turn["expected_final_response"] = {"role": "model", "content": expected} if expected.strip() else None
        if tools.strip() != _calls_text(old.get("expected_tool_trajectory")).strip():
            turn["expected_tool_trajectory"] = _load_json(tools, [], f"turn {i + 1} · expected tool calls", problems,
                                                          level=TURN_FIELD_LEVEL)
        conversation.append(turn)
    case["conversation"] = conversation
    return case, typed, problems


def friendly_path(path: str) -> str:
    """`changes[0].case.conversation[1].expected_tool_trajectory[0].args` as the form names it:
    `turn 2 · expected_tool_trajectory[0].args`."""
    for prefix in ("changes[0].case.", "case."):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    if path.startswith("conversation["):
        index, _, rest = path[len("conversation[") :].partition("]")
        number = whole_number(index)
        if number is not None:
            return f"turn {number + 1}" + (f" · {rest.lstrip('.')}" if rest else "")
    return path
