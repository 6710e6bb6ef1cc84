"""What promptfoo's files mean in JavaScript, said in Python: its YAML (js-yaml's YAML 1.2
core schema, not PyYAML's 1.1), JavaScript's string forms of values, and the `{{ var }}`
Nunjucks templates of prompts and assertion values.

Used by the promptfoo reader (prompts rendered with a test's vars as its user turn) and by the
`promptfoo_*` criteria (assertion values rendered as promptfoo renders them before comparing).
"""

from __future__ import annotations

import importlib
import json
import math
import re
from decimal import Decimal
from typing import Any

import yaml

MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 2_000_000


class YamlError(ValueError):
    """YAML that cannot be read, with its 1-based line and column where known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line, self.column = line, column


class _CoreResolver(yaml.resolver.Resolver):
    """YAML 1.2's core schema, as js-yaml (promptfoo's parser) reads plain scalars: `yes`, `on`,
    `0755`, `1_000`, `1:30` and `2024-01-01` stay text or decimal numbers, never YAML 1.1's
    booleans, octals, sexagesimals or dates."""

    yaml_implicit_resolvers: dict[str, Any] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        """Resolver.resolve without its path resolvers (none here), called once per node: a
        third of a large config's reading time otherwise."""
        if kind is yaml.ScalarNode:
            if implicit[0]:
                for tag, regexp in self.yaml_implicit_resolvers.get(value[:1], ()):
                    if regexp.match(value):
                        return str(tag)
            return "tag:yaml.org,2002:str"
        return "tag:yaml.org,2002:seq" if kind is yaml.SequenceNode else "tag:yaml.org,2002:map"


for _first, _resolvers in yaml.resolver.Resolver.yaml_implicit_resolvers.items():
    _CoreResolver.yaml_implicit_resolvers[_first] = [
        (tag, regexp) for tag, regexp in _resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                       "tag:yaml.org,2002:timestamp")]
_CoreResolver.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                    list("tTfF"))
_CoreResolver.add_implicit_resolver("tag:yaml.org,2002:int",
                                    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
                                    list("-+0123456789"))
_CoreResolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))

# libyaml's parser (C) where PyYAML has it (its wheels bundle it): the pure-Python one reads
# about 70 KB a second here.
_Parser: Any = getattr(importlib.import_module("yaml.cyaml"), "CParser", None) if yaml.__with_libyaml__ else None


def _loader_bases() -> tuple[type, ...]:
    if _Parser is not None:
        return (_Parser, _CoreResolver)
    return (yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser,  # pragma: no cover
            yaml.composer.Composer, _CoreResolver)


def _loader_init(self: Any, text: str) -> None:
    if _Parser is not None:
        _Parser.__init__(self, text)
    else:  # pragma: no cover
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
    _CoreResolver.__init__(self)


# A composer of nodes with the core schema's tags; `_json_values` builds the values (no tag builds an
# object).
_CoreLoader: Any = type("_CoreLoader", _loader_bases(), {"__init__": _loader_init})


def _check_shape(node: yaml.Node) -> None:
    """Refuse a document nested deeper than MAX_YAML_DEPTH or with more than MAX_YAML_NODES
    nodes once its aliases are followed (a "billion laughs" document), before it is built."""
    count = 0
    stack: list[tuple[yaml.Node, int]] = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        count += 1
        if count > MAX_YAML_NODES:
            raise YamlError(f"the document holds more than {MAX_YAML_NODES:,} values once its aliases are "
                            "expanded", current.start_mark.line + 1, current.start_mark.column + 1)
        if depth > MAX_YAML_DEPTH:
            raise YamlError(f"nested deeper than {MAX_YAML_DEPTH} levels", current.start_mark.line + 1,
                            current.start_mark.column + 1)
        if isinstance(current, yaml.SequenceNode):
            stack.extend((child, depth + 1) for child in current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


_YAML11_BREAKS = "\x85\u2028\u2029"
_YAML11_BREAK = re.compile("[\x85\u2028\u2029]")


def load_yaml(text: str, *, strict_breaks: bool = True) -> tuple[Any, yaml.Node | None]:
    """(document, its node tree for locating keys) of one YAML document, read safely (no tags
    that build objects) with the core schema; raises YamlError with the line."""
    found = _YAML11_BREAK.search(text) if strict_breaks else None
    if found is not None:
        odd = found.start()
        line = text.count("\n", 0, odd) + 1
        raise YamlError(f"a raw U+{ord(text[odd]):04X} character: YAML 1.1 readers take it for a line break and "
                        "promptfoo's YAML 1.2 reader does not; write it as an escape in double quotes "
                        '("\\N", "\\L", "\\P")', line, odd - text.rfind("\n", 0, odd))
    loader = _CoreLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check_shape(node)
        return _json_values(node), node
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "not valid YAML"
        raise YamlError(f"not valid YAML: {message}", mark.line + 1 if mark else None,
                        mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {exc}") from None
    except RecursionError:
        raise YamlError(f"nested deeper than {MAX_YAML_DEPTH} levels") from None
    finally:
        loader.dispose()


_STR, _NULL, _BOOL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
_INT, _FLOAT, _MERGE = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:merge"
_SEQ, _MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


def _json_values(node: yaml.Node) -> Any:
    """The document's JSON values, built from its nodes (whose tags the resolver has set):
    mapping keys as JavaScript makes them (text), merge keys (`<<`) merged, and any other tag
    (binary, a set, a timestamp, an object) or a NaN or infinity refused with its line. One
    pass; PyYAML's own constructor is several times slower."""
    if isinstance(node, yaml.ScalarNode):
        tag, text = node.tag, node.value
        if tag == _STR:
            return text
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return text.lower() == "true"
        if tag == _INT:
            return int(text[2:], 8) if text.startswith("0o") else int(text[2:], 16) if text.startswith("0x") \
                else int(text, 10)
        if tag == _FLOAT and text.lower().lstrip("+-") not in (".inf", ".nan"):
            return float(text)
    elif isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
        return [_json_values(child) for child in node.value]
    elif isinstance(node, yaml.MappingNode) and node.tag == _MAP:
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in reversed(sources):
                    value = _json_values(source)
                    if not isinstance(value, dict):
                        break
                    merged.update(value)
                else:
                    continue
                raise YamlError("a merge key (<<) takes a mapping or a list of mappings",
                                value_node.start_mark.line + 1, value_node.start_mark.column + 1)
            key = _json_values(key_node) if isinstance(key_node, yaml.ScalarNode) else key_node
            out[key if isinstance(key, str) else js_key(key)] = _json_values(value_node)
        return {**merged, **out} if merged else out
    shown = str(node.value)[:40] if isinstance(node, yaml.ScalarNode) else "..."
    raise YamlError(f"a value JSON cannot hold ({node.tag.rsplit(':', 1)[-1]}: {shown})",
                    node.start_mark.line + 1, node.start_mark.column + 1)


def js_key(key: Any) -> str:
    """A YAML mapping key as the text JavaScript makes of it (`1` -> "1", `true` -> "true")."""
    if isinstance(key, (list, dict, tuple)):
        raise YamlError("a mapping key is a list or a mapping")
    return "null" if key is None else js_string(key)


def node_line(root: yaml.Node | None, path: tuple[str | int, ...]) -> tuple[int, int] | None:
    """(line, column) of the value at `path` in a loaded document's node tree, or of its deepest
    parent there."""
    if root is None:
        return None
    node = root
    for part in path:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            child = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node = child
    return node.start_mark.line + 1, node.start_mark.column + 1


def dump_yaml(value: Any) -> str:
    """YAML a YAML 1.2 reader reads back as `value`: strings js-yaml would take for another
    type (`yes`, `0755`) are quoted, since PyYAML quotes only what YAML 1.1 would misread."""
    return yaml.dump(value, Dumper=_CoreDumper, allow_unicode=True, sort_keys=False, width=1000)


class _CoreDumper(yaml.SafeDumper):
    pass


_RESOLVER = _CoreResolver()


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None
    if any(c in _YAML11_BREAKS for c in value):
        style = '"'  # escaped as \\N, \\L, \\P: read alike by YAML 1.1 and 1.2 readers
    elif _CoreLoader(value).resolve(yaml.ScalarNode, value, (True, False)) != "tag:yaml.org,2002:str":
        style = "'"
    elif "\n" in value:
        style = "|"
    node = dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)
    if style == "|" and (value != value.rstrip("\n") + "\n" or any(line != line.rstrip() for line in value.split("\n"))
                         or value.startswith((" ", "\n"))):
        node.style = '"'  # a block scalar would change the trailing newlines or spaces
    return node


_CoreDumper.add_representer(str, _represent_str)


# --- JavaScript's values ------------------------------------------------------------------------


def js_number(value: float | int) -> str:
    """`String(n)` for a JavaScript number."""
    if isinstance(value, int):
        return str(value) if abs(value) < 10**21 else js_number(float(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)  # the shortest digits that read back as `value`, as JavaScript picks them
    if 1e-6 <= abs(value) < 1e21:
        return format(Decimal(text), "f")
    mantissa, _, exponent = format(Decimal(text), "e").partition("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{'-' if exponent.startswith('-') else '+'}{exponent.lstrip('+-').lstrip('0') or '0'}"


def js_string(value: Any) -> str:
    """`String(value)` as Nunjucks prints a variable: null and undefined as empty text, arrays
    joined by commas, objects as `[object Object]`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(js_string(item) for item in value)
    return "[object Object]"


def js_stringify(value: Any) -> str:
    """`JSON.stringify(value)` (compact, keys in their order, numbers as JavaScript writes them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "null" if isinstance(value, float) and not math.isfinite(value) else js_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(js_stringify(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{js_stringify(v)}"
                              for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)


def utf16(text: str) -> str:
    """`text` as JavaScript holds it: one character per UTF-16 code unit (a character beyond
    the BMP becomes its two surrogates), so lengths, distances and `.` count as JavaScript's."""
    if text.isascii() or max(text) < "\U00010000":
        return text
    data = text.encode("utf-16-le", "surrogatepass")
    return "".join(chr(int.from_bytes(data[i:i + 2], "little")) for i in range(0, len(data), 2))


# --- Nunjucks templates ------------------------------------------------------------------------

_VARIABLE = re.compile(r"\{\{-?\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*|\[\d+\])*)\s*-?\}\}")
_PATH_PART = re.compile(r"\.([A-Za-z_$][\w$]*)|\[(\d+)\]")
_TAGS = ("{{", "{%", "{#")


class TemplateError(ValueError):
    """A template that uses more of Nunjucks than `{{ var }}` (tags, filters, expressions)."""


def render(template: str, variables: dict[str, Any]) -> str:
    """`nunjucks.renderString(template, vars)` for the templates promptfoo configs mostly hold:
    text with `{{ name }}` / `{{ name.key }}` / `{{ name[0] }}` references. Anything else
    Nunjucks would interpret raises TemplateError rather than be rendered differently."""
    if not any(tag in template for tag in _TAGS):
        return template
    out: list[str] = []
    position = 0
    for match in _VARIABLE.finditer(template):
        out.append(_literal(template[position:match.start()]))
        out.append(js_string(_lookup(variables, match.group(1))))
        position = match.end()
    out.append(_literal(template[position:]))
    return "".join(out)


def render_prompt(template: str, variables: dict[str, Any]) -> str:
    """promptfoo's `renderPrompt` of an inline prompt: a prompt that is JSON (a chat) has its
    strings rendered and is written back indented; otherwise the text vars, themselves
    templates, are rendered first, then the prompt with them."""
    try:
        parsed = json.loads(template)
    except ValueError:
        parsed = None
    else:
        return json.dumps(_render_in(parsed, prompt_vars(variables)), ensure_ascii=False, indent=2)
    variables = prompt_vars(variables)
    rendered = {k: render(v, variables) if isinstance(v, str) else v for k, v in variables.items()}
    return render(template, rendered)


def _render_in(value: Any, variables: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return render(value, variables)
    if isinstance(value, list):
        return [_render_in(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _render_in(v, variables) for k, v in value.items()}
    return value


def prompt_vars(variables: dict[str, Any]) -> dict[str, Any]:
    """The vars as promptfoo renders with them: each text var loses one trailing newline
    (`renderPrompt`'s `replace(/\\n$/, "")`, which the assertions then see too)."""
    return {k: v[:-1] if isinstance(v, str) and v.endswith("\n") else v for k, v in variables.items()}


def _literal(text: str) -> str:
    if any(tag in text for tag in _TAGS):
        raise TemplateError("the template uses Nunjucks beyond {{ variable }} references (tags, filters or "
                            "expressions), which evalsite does not render")
    return text


def _lookup(variables: dict[str, Any], reference: str) -> Any:
    head = re.match(r"[A-Za-z_$][\w$]*", reference)
    assert head is not None
    value: Any = variables.get(head.group())
    for attr, index in _PATH_PART.findall(reference[head.end():]):
        if isinstance(value, dict) and attr:
            value = value.get(attr)
        elif isinstance(value, list) and index and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    return value


def is_template(text: str) -> bool:
    return any(tag in text for tag in _TAGS)
