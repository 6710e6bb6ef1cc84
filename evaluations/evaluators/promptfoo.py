"""promptfoo's deterministic assertions, computed as promptfoo 0.123.1 computes them
(`src/assertions/*.ts`): the same pass and score on every output.

A promptfoo test's assertions are imported as the case's criteria (`interop/promptfoo/`): the
k-th assertion of a type in a test is criterion `promptfoo_<type>` (`promptfoo_<type>_<k>` from
the second on; `not-contains` is `promptfoo_not_contains`), holding the assertion as written in
`case.criteria[criterion]`, and the eval set's config names the evaluator below for its base
type. A case without the criterion is not scored by it, as promptfoo runs only a test's own
assertions.

What promptfoo sees of an evalsite output: `output` is the last turn's final response (text as
it is, a structured response as its value; none is empty text) and `outputString` that text or
`JSON.stringify` of the value. Assertion values are rendered with the test's vars first
(`{{ var }}` Nunjucks references; other Nunjucks is an error here). Strings are compared as
JavaScript compares them: by UTF-16 code units (Levenshtein distances, regex `.`), with
JavaScript's `toLowerCase`, and regexes with JavaScript's meaning of `\\d`, `\\w`, `\\s`, `\\b`,
`.` and `$` (no flags: promptfoo compiles `new RegExp(value)`).

Each assertion scores 1 when it passes and 0 when it fails, except `tool-call-f1` (its F1);
`not-` inverts the pass; `weight: 0` always passes (promptfoo's rule), and the weight is kept in
the justification (a test's score is the weighted mean, which the imported run keeps). Where
promptfoo throws (a missing or mistyped value), the score is an error with promptfoo's message.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from rapidfuzz.distance import Levenshtein

from evaluations.evaluators.base import Evaluator, ScoreResult, register
from evaluations.evaluators.output import actual_value
from evaluations.interop.promptfoo.assertions import SCORED_TYPES, base_type, criterion_key, not_scored_reason
from evaluations.interop.promptfoo.assertions import comma_values as split_values
from evaluations.interop.promptfoo.js import (
    TemplateError,
    YamlError,
    js_string,
    js_stringify,
    load_yaml,
    prompt_vars,
    render,
    utf16,
)
from evaluations.patterns import BoundedPattern, PatternBoundExceeded, compile_bounded
from evaluations.schemas.evalset import CriterionConfig, EvalCase
from evaluations.schemas.outputs import AgentOutput


class Invariant(Exception):
    """promptfoo's `invariant` failing: the assertion throws, and the test is an error there."""


def evaluator_name(kind: str) -> str:
    return criterion_key(base_type(kind)[0])


# --- What promptfoo sees ------------------------------------------------------------------------


def output_of(output: AgentOutput) -> Any:
    if not output.turns:
        return ""
    value = actual_value(output.turns[-1].final_response)
    return "" if value is None else value


def output_string(value: Any) -> str:
    """promptfoo's `coerceString`: a string as it is, anything else `JSON.stringify`'d."""
    return value if isinstance(value, str) else js_stringify(value)


def rendered_value(value: Any, variables: dict[str, Any]) -> Any:
    """The assertion's value as promptfoo renders it with the test's vars (strings, and the
    strings of an array; other values as they are)."""
    variables = prompt_vars(variables)
    try:
        if isinstance(value, str):
            return render(value, variables)
        if isinstance(value, list):
            return [render(v, variables) if isinstance(v, str) else v for v in value]
    except TemplateError as exc:
        raise Invariant(str(exc)) from None
    return value


def js_string_of(value: Any) -> str:
    """`String(value)` for an assertion's (rendered) value."""
    if isinstance(value, dict):
        return "[object Object]"
    return js_string(value) if value is not None else "null"


def js_lower(text: str) -> str:
    """`String.prototype.toLowerCase`: Python's `lower` gives the same (final sigma and `İ` too;
    differentially tested), kept as one name for the rule."""
    return text.lower()


def is_contains_value(value: Any) -> bool:
    return (isinstance(value, str) and value != "") or (
        isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value))


def js_truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "") or isinstance(value, (list, dict))


def comma_values(value: str) -> list[str]:
    try:
        return split_values(value)
    except ValueError as exc:
        raise Invariant(str(exc)) from None


def js_deep_equal(a: Any, b: Any) -> bool:
    """`util.isDeepStrictEqual` over JSON values (booleans are not numbers; 1 and 1.0 are one number)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return (a == b) or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(js_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(js_deep_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def json_parse(text: str) -> Any:
    """`JSON.parse`: what Python's json takes, less NaN and Infinity."""
    def refuse(name: str) -> Any:
        raise ValueError(name)
    return json.loads(text, parse_constant=refuse)


# --- JavaScript regular expressions --------------------------------------------------------------

_JS_SPACE = ("\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
             "\u2028\u2029\u202f\u205f\u3000\ufeff")
_CLASS_ESCAPES = {"d": "0-9", "w": "A-Za-z0-9_", "s": re.escape(_JS_SPACE)}


def js_regex(pattern: str) -> BoundedPattern:
    """`new RegExp(pattern)` (no flags) as a Python pattern over UTF-16 code units (`utf16`),
    run in bounded time (`evaluations.patterns`: RE2 where it can say it, which is all but
    backreferences, lookaround and negated classes holding `\\S` `\\D` `\\W`):
    `\\d`, `\\w` and `\\b` are ASCII as in JavaScript, `\\s` JavaScript's whitespace (also inside
    a class, and `[\\s\\S]`, `[^]`, `[]` as JavaScript reads them), `.` any unit but a line
    terminator, `$` the end of the text only, `(?<name>` a named group. Raises re.error where
    Python cannot read it as JavaScript would."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            i += 2
            if nxt in _CLASS_ESCAPES:
                out.append(f"[{_CLASS_ESCAPES[nxt]}]")
            elif nxt in "DWS":
                out.append(f"[^{_CLASS_ESCAPES[nxt.lower()]}]")
            elif nxt == "k" and i < n and pattern[i] == "<":
                end = pattern.index(">", i)
                out.append(f"(?P={pattern[i + 1:end]})")
                i = end + 1
            else:
                out.append(_escape(nxt))
            continue
        if char == "[":
            translated, i = _js_class(pattern, i)
            out.append(translated)
            continue
        if char == ".":
            out.append("[^\n\r\u2028\u2029]")
        elif char == "$":
            out.append(r"\Z")
        elif char == "(" and pattern[i + 1:i + 3] == "?<" and pattern[i + 3:i + 4] not in ("=", "!"):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(char)
        i += 1
    return compile_bounded("".join(out), re.ASCII)


def _escape(char: str) -> str:
    if char.isalnum() and char not in "bBnrtfvux0123456789c":
        return re.escape(char)  # an identity escape (`\\a` is `a` in JavaScript)
    if char == "c":
        raise re.error("\\c escapes are not translated")
    return "\\" + char


def _js_class(pattern: str, start: int) -> tuple[str, int]:
    """The class opening at `start` (JavaScript: the first unescaped `]` closes it, `[]` matches
    nothing, `[^]` anything), and where it ends. `\\S`, `\\D`, `\\W` inside it, which Python's
    ASCII classes cannot say, become an alternation."""
    i = start + 1
    negated = pattern[i:i + 1] == "^"
    if negated:
        i += 1
    members: list[str] = []
    complements: list[str] = []
    while i < len(pattern) and pattern[i] != "]":
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            i += 2
            if nxt in _CLASS_ESCAPES:
                members.append(_CLASS_ESCAPES[nxt])
            elif nxt in "DWS":
                complements.append(f"[^{_CLASS_ESCAPES[nxt.lower()]}]")
            elif nxt == "B":
                members.append("B")  # Annex B: a literal letter inside a class
            else:
                members.append(_escape(nxt))
            continue
        members.append("\\[" if char == "[" else char)
        i += 1
    if i >= len(pattern):
        raise re.error("unterminated character set")
    options = ([f"[{''.join(members)}]"] if members else []) + complements
    if not options:  # `[]` matches nothing, `[^]` any unit
        return ("(?s:.)" if negated else "(?!)"), i + 1
    either = options[0] if len(options) == 1 and not complements else "(?:" + "|".join(options) + ")"
    if negated:
        if not complements:
            return f"[^{''.join(members)}]", i + 1
        return f"(?:(?!{either})(?s:.))", i + 1
    return either, i + 1


# --- JSON inside text ----------------------------------------------------------------------------

MAX_JSON_LENGTH = 100_000


def _slash_comments_to_hash(text: str) -> str:
    """promptfoo's `convertSlashCommentsToHash`, line by line."""
    out_lines = []
    for line in text.split("\n"):
        state, result, i, done = "normal", [], 0, None
        while i < len(line):
            char, nxt = line[i], line[i + 1:i + 2]
            prev = line[i - 1] if i > 0 else ""
            if state == "normal":
                if char == "'" and not re.match(r"[a-zA-Z]", prev):
                    state = "single"
                    result.append(char)
                elif char == '"':
                    state = "double"
                    result.append(char)
                elif char == "/" and nxt == "/":
                    token_start = 0
                    for j in range(i - 1, -1, -1):
                        if line[j] in _JS_SPACE:
                            token_start = j + 1
                            break
                    if "://" in line[token_start:i + 2]:
                        result.append(char)
                        break
                    slashes = 2
                    while i + slashes < len(line) and line[i + slashes] == "/":
                        slashes += 1
                    done = "".join(result) + "#" * (slashes // 2) + line[i + slashes:]
                    break
                else:
                    result.append(char)
            elif state == "single":
                result.append(char)
                if char == "'" and not _escaped(line, i) and not re.match(r"[a-zA-Z]", nxt):
                    state = "normal"
            else:
                result.append(char)
                if char == '"' and not _escaped(line, i):
                    state = "normal"
            i += 1
        out_lines.append(done if done is not None else "".join(result))
    return "\n".join(out_lines)


def _escaped(line: str, index: int) -> bool:
    count, i = 0, index - 1
    while i >= 0 and line[i] == "\\":
        count += 1
        i -= 1
    return count % 2 == 1


def _yaml_object(text: str) -> bool:
    """Whether js-yaml reads the candidate as an object or array. JSON first (what JSON takes,
    YAML 1.2 reads alike), else the YAML reader, which a raw U+2028 does not stop here: only
    whether the value is an object matters, and both readers make one of a mapping."""
    try:
        return isinstance(json_parse(text), (dict, list))
    except ValueError:
        pass
    try:
        value, _ = load_yaml(_slash_comments_to_hash(text), strict_breaks=False)
    except (YamlError, RecursionError):
        return False
    return isinstance(value, (dict, list))


def json_objects(text: str) -> Iterator[str]:
    """The candidates promptfoo's `extractJsonObjects` accepts, in order: from each `{`, the
    shortest balanced (or, at the end, closed) span that reads as a YAML/JSON object."""
    i, n = 0, len(text)
    while i < n:
        if text[i] == "{":
            opened, closed, j = 1, 0, i + 1
            limit = min(i + MAX_JSON_LENGTH, n)
            while j < limit and opened > closed:
                if text[j] == "{":
                    opened += 1
                if text[j] == "}":
                    closed += 1
                j += 1
                if opened == closed or j == n or j == i + MAX_JSON_LENGTH:
                    candidate = text[i:j] + "}" * max(0, opened - closed)
                    if _yaml_object(candidate):
                        yield candidate
                        i = j - 1
                        break
                    if opened == closed:
                        break
        i += 1


# --- Tool calls ----------------------------------------------------------------------------------


def _js_object(value: Any) -> bool:
    return isinstance(value, (dict, list))


def tool_names(output: Any) -> set[str]:
    """promptfoo's `extractToolNames`: the tool names in a structured output, a JSON text, or
    the JSON blocks standing on their own lines in prose (`_json_values_in_text`)."""
    names: set[str] = set()
    if output is None:
        return names
    if isinstance(output, str):
        try:
            parsed = json_parse(output)
        except ValueError:
            for block in _json_values_in_text(output):
                names |= tool_names(block)
            return names
        return tool_names(parsed)
    if isinstance(output, dict):
        calls = output.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    fn = call.get("function")
                    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                        names.add(fn["name"])
                    if isinstance(call.get("name"), str):
                        names.add(call["name"])
            return names
        if output.get("type") in ("tool_use", "function_call") and isinstance(output.get("name"), str):
            return {output["name"]}
        if _js_object(output.get("functionCall")):
            fc = output["functionCall"]
            return {fc["name"]} if isinstance(fc, dict) and isinstance(fc.get("name"), str) else names
        if _js_object(output.get("toolCall")):
            calls = output["toolCall"].get("functionCalls") if isinstance(output["toolCall"], dict) else None
            for fc in calls if isinstance(calls, list) else []:
                if isinstance(fc, dict) and isinstance(fc.get("name"), str):
                    names.add(fc["name"])
        return names
    if isinstance(output, list):
        for block in output:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("name"), str):
                names.add(block["name"])
            elif _js_object(block.get("functionCall")):
                fc = block["functionCall"]
                if isinstance(fc, dict) and isinstance(fc.get("name"), str):
                    names.add(fc["name"])
            elif _js_object(block.get("function")):
                fn = block["function"]
                if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                    names.add(fn["name"])
            elif isinstance(block.get("name"), str):
                names.add(block["name"])
    return names


class _ToolCallParseError(Exception):
    pass


MAX_UNMATCHED_DELIMITERS = 65_536
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-+*]|\d+[.)])[ \t]+")


def _column_width(text: str) -> int:
    column = 0
    for char in text:
        column += 4 - column % 4 if char == "\t" else 1
    return column


def _delimiters(text: str) -> Iterator[tuple[str, int, bool, bool] | None]:
    """promptfoo's `jsonDelimiters`: (bracket, index, starts its line, ends its line) outside
    strings and Markdown code fences; None where a block cannot continue. `text` is in UTF-16
    code units (`utf16`), as JavaScript indexes it."""
    in_string = escaped = False
    fence, fence_container = "", 0
    containers: list[int] = []
    line_start = 0
    while line_start < len(text):
        offset = line_start
        newline = text.find("\n", line_start)
        line_end = len(text) if newline < 0 else newline
        content = _js_trim_end(text[line_start:line_end])
        line_start = line_end + 1
        first = next((k for k, c in enumerate(content) if c not in _JS_SPACE), -1)
        indent = _column_width(content[:max(0, first)])
        if fence and content and indent < fence_container:
            fence = ""
            yield None
        if fence:
            marker = _FENCE.match(content)
            if (marker and indent <= fence_container + 3 and marker.group(1)[0] == fence[0]
                    and len(marker.group(1)) >= len(fence) and not content[marker.end():].strip(_JS_SPACE)):
                fence = ""
            continue
        while content and containers and indent < containers[-1]:
            containers.pop()
        item = _LIST_ITEM.match(content)
        if item:
            containers.append(_column_width(item.group()))
        container = containers[-1] if containers else 0
        fence_text = content[item.end():] if item else content
        marker = _FENCE.match(fence_text)
        if marker and (item or indent <= container + 3) and (
                marker.group(1)[0] != "`" or "`" not in fence_text[marker.end():]):
            fence, fence_container = marker.group(1), container
            yield None
            continue
        for column, char in enumerate(content):
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
                continue
            if char == '"':
                in_string = True
            elif char in "{[}]":
                yield char, offset + column, column == first, column == len(content) - 1
        if in_string:
            in_string = escaped = False
            yield None


def _js_trim_end(text: str) -> str:
    return text.rstrip(_JS_SPACE)


def _blocks(text: str, skip_root: bool = False) -> Iterator[tuple[str, bool]]:
    """promptfoo's `jsonBlocks`: (block text, starts its line) of each balanced block that ends
    its line."""
    unmatched: list[int] = []
    stack_start = 0
    for token in _delimiters(text):
        if token is None:
            stack_start = len(unmatched)
        elif token[0] in "{[":
            unmatched.append(token[1])
        elif len(unmatched) > stack_start and text[unmatched[-1]] == ("{" if token[0] == "}" else "["):
            unmatched.pop()
        else:
            unmatched.append(token[1])
            stack_start = len(unmatched)
        if len(unmatched) > MAX_UNMATCHED_DELIMITERS:
            raise _ToolCallParseError(f"Tool Call F1 exceeded its delimiter limit ({MAX_UNMATCHED_DELIMITERS})")
    next_unmatched = depth = start_depth = 0
    start, starts_line = -1, False
    for token in _delimiters(text):
        if token is None:
            continue
        char, index, token_starts, token_ends = token
        if next_unmatched < len(unmatched) and index == unmatched[next_unmatched]:
            next_unmatched += 1
            continue
        if char in "{[":
            if start < 0 and depth == (1 if skip_root else 0):
                start, start_depth, starts_line = index, depth, token_starts
            depth += 1
            continue
        depth -= 1
        if start >= 0 and depth == start_depth:
            if token_ends:
                yield text[start:index + 1], starts_line
            start = -1


def _json_values_in_text(text: str) -> Iterator[Any]:
    """promptfoo's `extractJsonBlocks`: each block that parses as JSON and starts its line; a
    block that does not parse is searched for blocks inside it, within a work limit."""
    units = utf16(text)
    pending = [_blocks(units)]
    remaining = 4 * len(units)
    while pending:
        try:
            block, starts_line = next(pending[-1])
        except StopIteration:
            pending.pop()
            continue
        if len(block) > remaining:
            raise _ToolCallParseError("Tool Call F1 could not finish parsing malformed output within its work limit")
        remaining -= len(block)
        try:
            parsed = json_parse(block.encode("utf-16-le", "surrogatepass").decode("utf-16-le"))
        except (ValueError, UnicodeDecodeError):
            pending.append(_blocks(block, True))
            continue
        if starts_line:
            yield parsed


# --- The assertions ------------------------------------------------------------------------------

Outcome = tuple[bool, float, str]  # (pass, score, reason)


def _binary(passed: bool, inverse: bool, failure: str) -> Outcome:
    result = passed != inverse
    return result, 1.0 if result else 0.0, "Assertion passed" if result else failure


def _contains(value: Any, text: str, inverse: bool, kind: str, lower: bool) -> Outcome:
    if not is_contains_value(value):
        raise Invariant(f'"{kind}" assertion type must have a string or number value')
    needle = js_string_of(value)
    found = js_lower(needle) in js_lower(text) if lower else needle in text
    return _binary(found, inverse, f'Expected output to {"not " if inverse else ""}contain "{needle}"')


def _contains_many(value: Any, text: str, inverse: bool, kind: str, lower: bool, every: bool) -> Outcome:
    if not js_truthy(value):
        raise Invariant(f'"{kind}" assertion type must have a value')
    if isinstance(value, str):
        value = comma_values(value)
    if not isinstance(value, list):
        raise Invariant(f'"{kind}" assertion type must have an array value')
    haystack = js_lower(text) if lower else text
    needles = [js_lower(js_string_of(v)) if lower else js_string_of(v) for v in value]
    shown = ", ".join(js_string_of(v) for v in value)
    if every:
        missing = [js_string_of(v) for v, needle in zip(value, needles, strict=True) if needle not in haystack]
        return _binary(not missing, inverse, f'Expected output to {"not " if inverse else ""}contain all of '
                                             f'[{shown}]. Missing: [{", ".join(missing)}]')
    return _binary(any(needle in haystack for needle in needles), inverse,
                   f'Expected output to {"not " if inverse else ""}contain one of "{shown}"')


def _equals(value: Any, text: str, inverse: bool) -> Outcome:
    if isinstance(value, (dict, list)) or value is None:
        try:
            passed = js_deep_equal(value, json_parse(text)) != inverse
        except ValueError:
            passed = inverse
        expected = js_stringify(value)
    else:
        expected = js_string_of(value)
        passed = (expected == text) != inverse
    return passed, 1.0 if passed else 0.0, "Assertion passed" if passed else (
        f'Expected output "{text}" to {"not " if inverse else ""}equal "{expected}"')


def _regex(value: Any, text: str, inverse: bool) -> Outcome:
    if not value or not isinstance(value, str):
        raise Invariant('"regex" assertion type must have a string value')
    try:
        pattern = js_regex(utf16(value))
    except (re.error, ValueError, OverflowError, RecursionError) as exc:
        if isinstance(exc, re.error) and "translated" not in str(exc) and "class" not in str(exc):
            return False, 0.0, f"Invalid regex pattern: {exc}"
        raise Invariant(f"the pattern uses JavaScript regex syntax evalsite does not translate: {exc}") from None
    try:
        found = pattern.search(utf16(text)) is not None
    except PatternBoundExceeded as exc:  # promptfoo would have hung; evalsite stops and says so
        raise Invariant(str(exc)) from None
    return _binary(found, inverse, f'Expected output to {"not " if inverse else ""}match regex "{value}"')


def _starts_with(value: Any, text: str, inverse: bool) -> Outcome:
    if not value or not isinstance(value, str):
        raise Invariant('"starts-with" assertion type must have a string value')
    return _binary(text.startswith(value), inverse,
                   f'Expected output to {"not " if inverse else ""}start with "{value}"')


def _is_json(text: str, inverse: bool) -> Outcome:
    try:
        json_parse(text)
        parsed = True
    except ValueError:
        parsed = False
    return _binary(parsed, inverse, f'Expected output to {"not " if inverse else ""}be valid JSON')


def _contains_json(text: str, inverse: bool) -> Outcome:
    found = next(json_objects(text), None) is not None
    return _binary(found, inverse, f'Expected output to {"not " if inverse else ""}contain valid JSON')


def _levenshtein(value: Any, text: str, inverse: bool, threshold: Any) -> Outcome:
    if not isinstance(value, str):
        raise Invariant('"levenshtein" assertion type must have a string value')
    distance = Levenshtein.distance(utf16(text), utf16(value))
    limit = 5 if threshold is None else threshold
    passed = (distance <= limit) != inverse
    return passed, 1.0 if passed else 0.0, "Assertion passed" if passed else (
        f"Levenshtein distance {distance} is {'less than or equal to' if inverse else 'greater than'} "
        f"threshold {limit}")


def _tool_call_f1(value: Any, output: Any, called: set[str], inverse: bool, threshold: Any) -> Outcome:
    if isinstance(value, list):
        expected_list = [name.strip() for name in (js_string_of(v) for v in value) if name.strip()]
    elif isinstance(value, str):
        expected_list = [name.strip() for name in value.split(",") if name.strip()]
    else:
        raise Invariant('"tool-call-f1" assertion requires a value: array of tool names or comma-separated string')
    if not expected_list:
        raise Invariant('"tool-call-f1" assertion requires at least one expected tool name')
    expected = set(expected_list)
    try:
        actual = tool_names(output) | called
    except _ToolCallParseError as exc:
        return False, 0.0, str(exc)
    hits = len(expected & actual)
    precision = hits / len(actual) if actual else 0.0
    recall = hits / len(expected)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    limit = 1 if threshold is None else threshold
    passed = (f1 >= limit) != inverse
    shown, names = ", ".join(sorted(expected)), ", ".join(sorted(actual)) or "(none)"
    reason = (f"Tool Call F1: {f1:.3f} (precision={precision:.3f}, recall={recall:.3f}). Expected: [{shown}], "
              f"Called: [{names}]") if passed else (
        f"Tool Call F1 score {f1:.3f} is {'above' if inverse else 'below'} threshold {limit}. Expected: [{shown}], "
        f"Called: [{names}]. Precision={precision:.3f}, Recall={recall:.3f}")
    return passed, f1, reason


def run_assertion(assertion: dict[str, Any], output: Any, variables: dict[str, Any],
                  called: set[str] | None = None) -> Outcome:
    """(pass, score, reason) of one deterministic assertion on `output`, as promptfoo's
    `runAssertion`; raises Invariant where promptfoo throws. `called`: tool names the agent
    called besides those written in its output (evalsite's recorded tool calls)."""
    kind = assertion["type"]
    base, inverse = base_type(kind)
    value = rendered_value(assertion.get("value"), variables)
    text = output_string(output)
    handlers: dict[str, Callable[[], Outcome]] = {
        "equals": lambda: _equals(value, text, inverse),
        "contains": lambda: _contains(value, text, inverse, base, False),
        "icontains": lambda: _contains(value, text, inverse, base, True),
        "contains-any": lambda: _contains_many(value, text, inverse, base, False, False),
        "icontains-any": lambda: _contains_many(value, text, inverse, base, True, False),
        "contains-all": lambda: _contains_many(value, text, inverse, base, False, True),
        "icontains-all": lambda: _contains_many(value, text, inverse, base, True, True),
        "regex": lambda: _regex(value, text, inverse),
        "starts-with": lambda: _starts_with(value, text, inverse),
        "is-json": lambda: _is_json(text, inverse),
        "contains-json": lambda: _contains_json(text, inverse),
        "levenshtein": lambda: _levenshtein(value, text, inverse, assertion.get("threshold")),
        "tool-call-f1": lambda: _tool_call_f1(value, output, called or set(), inverse, assertion.get("threshold")),
    }
    passed, score, reason = handlers[base]()
    if assertion.get("weight") == 0:
        passed = True
    return passed, score, reason


# --- The criteria ----------------------------------------------------------------------------------


class _PromptfooEvaluator(Evaluator):
    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        if criterion not in case.criteria:
            return []  # promptfoo runs only a test's own assertions
        assertion = case.criteria[criterion]
        justification: dict[str, Any] = {"promptfoo_assertion": assertion}
        if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str) or (
                evaluator_name(assertion["type"]) != self.name):
            return [ScoreResult(criterion=criterion, score=None, passed=None, justification=justification,
                                error=f"the case's criterion is not a promptfoo {self.name[10:]} assertion")]
        if not_scored_reason(assertion) is not None:
            return []  # kept in the case, marked there, never given a number promptfoo would not give
        meta = case.metadata.get("promptfoo")
        variables: dict[str, Any] = {}
        if isinstance(meta, dict) and isinstance(meta.get("vars"), dict):
            variables = meta["vars"]
        called = {call.name for turn in output.turns for call in turn.tool_calls}
        try:
            passed, score, reason = run_assertion(assertion, output_of(output), variables, called)
        except Invariant as exc:
            return [ScoreResult(criterion=criterion, score=None, passed=None, justification=justification,
                                error=str(exc))]
        justification["reason"] = reason
        justification["weight"] = assertion.get("weight", 1)
        return [ScoreResult(criterion=criterion, score=score, passed=passed, raw_value=score,
                            justification=justification)]


def _evaluator(kind: str) -> type[Evaluator]:
    cls = type(f"Promptfoo{kind.title().replace('-', '')}Evaluator", (_PromptfooEvaluator,),
               {"name": criterion_key(kind), "group": "trajectory" if kind == "tool-call-f1" else "output",
                "__module__": __name__, "__doc__": f"promptfoo's `{kind}` assertion (and `not-{kind}`)."})
    return register(cls)


EVALUATORS = {kind: _evaluator(kind) for kind in SCORED_TYPES}


@register
class PromptfooNotScoredEvaluator(Evaluator):
    """What the eval set's config names for the assertions evalsite does not compute (llm-rubric,
    javascript, similar, ...): kept in the cases and disabled in the config, with why; scoring
    them gives nothing."""

    name = "promptfoo_not_scored"
    group = "output"

    def score(self, case: EvalCase, output: AgentOutput, config: CriterionConfig,
              criterion: str) -> list[ScoreResult]:
        return []
