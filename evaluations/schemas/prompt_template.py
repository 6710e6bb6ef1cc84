"""The prompt template syntax of the model target and the stored prompts.

A template is text with `{{ variable }}` placeholders; a variable may be followed by a path
into its value: `{{ state.customer.tier }}`, `{{ metadata.tags[0] }}`, `{{ input.order_id }}`.
The variables:

- `input`: the turn's user message: its text, or for structured input (UiPath's `inputs`)
  the object, written as JSON, whose keys `{{ input.key }}` reads;
- `state`: the case's session state (`session_input.initial_state`, or `state`);
- `session`: the whole session input (`app_name`, `user_id`, `config`, ...);
- `metadata`: the case's metadata;
- `eval_id`, `case_name`, `turn` (1 for the first turn).

Text is inserted as it is, anything else as compact JSON; a path that leads nowhere renders
as nothing. A placeholder that is not one of these is refused when the prompt is saved (or
the run created), with where it is, so a typo never reaches the model as literal braces.
"""

from __future__ import annotations

import json
import re
from typing import Any

VARIABLES = ("input", "state", "session", "metadata", "eval_id", "case_name", "turn")

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_EXPRESSION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_\-]+|\[\d+\])*)$")
_STEP = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(\d+)\]")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def template_problems(text: str) -> list[str]:
    """What is wrong with a template, each with its line; empty when it renders."""
    problems: list[str] = []
    for match in _PLACEHOLDER.finditer(text):
        expression = match.group(1).strip()
        found = _EXPRESSION.fullmatch(expression)
        line = _line_of(text, match.start())
        if found is None:
            problems.append(f"line {line}: {{{{{expression[:40]}}}}} is not a variable (use a name such as "
                            "{{input}} or a path such as {{state.city}})")
        elif found.group(1) not in VARIABLES:
            problems.append(f"line {line}: unknown variable {found.group(1)!r} (known: {', '.join(VARIABLES)})")
    rest = _PLACEHOLDER.sub("", text)
    if "{{" in rest:
        problems.append(f"line {_line_of(text, text.rfind('{{'))}: a {{{{ without its }}}}")
    return problems


def template_variables(text: str) -> list[str]:
    """The placeholders a template uses, in order of first use."""
    return list(dict.fromkeys(m.group(1).strip() for m in _PLACEHOLDER.finditer(text)))


_MISSING: Any = object()


def _lookup(value: Any, path: str) -> Any:
    for step in _STEP.finditer(path):
        key, index = step.group(1), step.group(2)
        if key is not None and isinstance(value, dict) and key in value:
            value = value[key]
        elif index is not None and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        elif key is not None and key.isdigit() and isinstance(value, list) and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def as_text(value: Any) -> str:
    if value is None or value is _MISSING:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def render(text: str, context: dict[str, Any]) -> str:
    """The template with its placeholders filled from `context` (checked templates only: an
    unreadable placeholder is left as it is)."""
    if "{{" not in text:
        return text

    def fill(match: re.Match[str]) -> str:
        found = _EXPRESSION.fullmatch(match.group(1).strip())
        if found is None or found.group(1) not in context:
            return match.group(0)
        return as_text(_lookup(context[found.group(1)], found.group(2)))

    return _PLACEHOLDER.sub(fill, text)
