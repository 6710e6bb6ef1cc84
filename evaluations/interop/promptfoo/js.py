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
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import yaml

from evaluations.interop.limits import current_expansion
from evaluations.safejson import max_int_digits

MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 2_000_000


class YamlError(ValueError):
    """YAML that cannot be read, with its 1-based line and column where known. `code` and
    `final` as an upload's error has them (`final`: whoever reads the file, it is refused)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None, *,
                 code: str = "invalid_yaml", final: bool = False):
        super().__init__(message)
        self.line, self.column = line, column
        self.code, self.final = code, final


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


# libyaml's parser with the core schema's tags: its events are built into values as they come
# (`_Builder`), and a node tree is composed only to say where a problem is (`node_line`).
_CoreLoader: Any = type("_CoreLoader", _loader_bases(), {"__init__": _loader_init})

_YAML11_BREAKS = "\x85\u2028\u2029"
_YAML11_BREAK = re.compile("[\x85\u2028\u2029]")


_YAML11_BREAK_BYTES = re.compile(b"\xc2\x85|\xe2\x80[\xa8\xa9]")  # the same three, in UTF-8


class YamlText:
    """Where a loaded document's values are: its text (or its UTF-8 bytes), read again only
    when a problem is located (`node_line`). No node tree is kept: PyYAML's nodes and marks take
    about 20 times the text (66 MB for a 3 MB config), four times what its values take."""

    def __init__(self, text: str | bytes) -> None:
        self.text = text


def load_yaml(text: str | bytes, *, strict_breaks: bool = True,
              pack: Callable[[dict[str, Any]], Any] | None = None) -> tuple[Any, YamlText | None]:
    """(document, where it came from, for `node_line`) of one YAML document, read safely (no
    tags that build objects) with the core schema, its values built from the parser's events;
    raises YamlError with the line. A document nested deeper than MAX_YAML_DEPTH, with more than
    MAX_YAML_NODES values once its aliases are followed (a "billion laughs" document), or whose
    aliases repeat more text than the upload may still expand by, is refused when the alias
    that goes past is met: what an alias stands for is counted, never built again (its value
    is shared).

    `text` may be a UTF-8 file's bytes: libyaml reads them as they are, where a str is first
    encoded to a copy of them. `pack`: each mapping of the top-level mapping's `tests` list
    written there (not an alias, not anchored, holding no alias: nothing shared is copied) is
    kept as `pack(mapping)` returns it, as soon as it is built."""
    if isinstance(text, bytes):
        if strict_breaks and _YAML11_BREAK_BYTES.search(text) is not None:
            return load_yaml(text.decode("utf-8-sig"), pack=pack)  # the located error, from the text
        own = len(text) if text.isascii() else len(text.decode("utf-8-sig"))
    else:
        found = _YAML11_BREAK.search(text) if strict_breaks else None
        if found is not None:
            odd = found.start()
            line = text.count("\n", 0, odd) + 1
            raise YamlError(f"a raw U+{ord(text[odd]):04X} character: YAML 1.1 readers take it for a line break and "
                            "promptfoo's YAML 1.2 reader does not; write it as an escape in double quotes "
                            '("\\N", "\\L", "\\P")', line, odd - text.rfind("\n", 0, odd))
        own = len(text)
    loader = _CoreLoader(text)
    try:
        builder = _Builder(loader, own, pack)
        value = builder.document()
        if builder.empty:
            return None, None
        if builder.added:
            current_expansion().expand(builder.added, file=None, what="its aliases")
        return value, YamlText(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "not valid YAML"
        raise YamlError(f"not valid YAML: {message}", mark.line + 1 if mark else None,
                        mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()


_STR, _NULL, _BOOL = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool"
_INT, _FLOAT, _MERGE = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:merge"
_SEQ, _MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_NO_KEY = object()
_MERGE_KEY = object()


class _Anchored:
    """A value an anchor names, and what an alias to it stands for."""

    __slots__ = ("chars", "depth", "done", "nodes", "value")

    def __init__(self, value: Any) -> None:
        self.value, self.chars, self.nodes, self.depth, self.done = value, 0, 0, 0, False


class _Frame:
    """A sequence or mapping being built."""

    __slots__ = ("aliased", "anchor", "chars", "depth", "key", "mark", "merged", "nodes", "value")

    def __init__(self, value: list[Any] | dict[str, Any], mark: Any, anchor: _Anchored | None) -> None:
        self.value, self.mark, self.anchor = value, mark, anchor
        self.aliased = False  # an alias somewhere inside: its value is shared, never copied
        self.chars, self.nodes, self.depth = 0, 1, 1
        self.key: Any = _NO_KEY
        self.merged: dict[str, Any] | None = None


def _at(mark: Any) -> tuple[int, int]:
    return mark.line + 1, mark.column + 1


class _Builder:
    """The JSON values of one YAML document, from the parser's events: mapping keys as
    JavaScript makes them (text), merge keys (`<<`) merged, and any other tag (binary, a set, a
    timestamp, an object), a NaN or infinity, or an integer Python will not read refused with
    its line. Aliases share their anchor's value; what they stand for (values, depth, text) is
    counted against the limits as each is met."""

    def __init__(self, loader: Any, own: int, pack: Callable[[dict[str, Any]], Any] | None = None) -> None:
        self.loader, self.own, self.pack = loader, own, pack
        budget = current_expansion()
        self.limit = budget.expanded_limit
        self.allowed = own + max(budget.expanded_limit - budget.expanded, 0)
        self.anchors: dict[str, _Anchored] = {}
        self.stack: list[_Frame] = []
        self.nodes = self.chars = 0
        self.empty = False
        self.result: Any = None

    @property
    def added(self) -> int:
        return max(self.chars - self.own, 0)

    def document(self) -> Any:
        loader = self.loader
        loader.get_event()  # the stream's start
        if loader.check_event(yaml.StreamEndEvent):
            self.empty = True
            return None
        loader.get_event()  # the document's start
        while not loader.check_event(yaml.DocumentEndEvent):
            self._event(loader.get_event())
        loader.get_event()
        if not loader.check_event(yaml.StreamEndEvent):
            event = loader.get_event()
            raise YamlError("not valid YAML: expected a single document in the stream, but found another",
                            *_at(event.start_mark))
        return self.result

    def _count(self, nodes: int, chars: int, depth: int, mark: Any) -> None:
        """Count a value (an alias's: all it stands for) met at the current depth."""
        self.nodes += nodes
        self.chars += chars
        if self.nodes > MAX_YAML_NODES:
            raise YamlError(f"the document holds more than {MAX_YAML_NODES:,} values once its aliases are "
                            "expanded", *_at(mark))
        if len(self.stack) + depth > MAX_YAML_DEPTH:
            raise YamlError(f"nested deeper than {MAX_YAML_DEPTH} levels", *_at(mark))
        if self.chars > self.allowed:
            raise YamlError(f"its aliases repeat more text than the {self.limit:,} bytes an upload may expand by "
                            f"(EVALSITE_MAX_EXPANDED_MB): the {self.own:,}-character document holds over "
                            f"{self.chars:,} once they are followed", *_at(mark), code="too_expanded", final=True)

    def _anchor(self, name: str | None, value: Any, mark: Any) -> _Anchored | None:
        if name is None:
            return None
        if name in self.anchors:
            raise YamlError(f"not valid YAML: found duplicate anchor {name!r}", *_at(mark))
        anchored = self.anchors[name] = _Anchored(value)
        return anchored

    def _event(self, event: Any) -> None:
        if isinstance(event, yaml.ScalarEvent):
            self._on_scalar(event)
        elif isinstance(event, yaml.AliasEvent):
            self._on_alias(event)
        elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            self._on_start(event, isinstance(event, yaml.SequenceStartEvent))
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            self._on_end()

    def _on_scalar(self, event: Any) -> None:
        text: str = event.value
        self._count(1, len(text), 1, event.start_mark)
        tag = event.tag if event.tag not in (None, "!") else self.loader.resolve(yaml.ScalarNode, text, event.implicit)
        value = _scalar(tag, text, event.start_mark)
        anchored = self._anchor(event.anchor, value, event.start_mark)
        if anchored is not None:
            anchored.chars, anchored.nodes, anchored.depth, anchored.done = len(text), 1, 1, True
        self._add(value, len(text), 1, 1, event.start_mark, tag)

    def _on_alias(self, event: Any) -> None:
        anchored = self.anchors.get(event.anchor)
        if anchored is None:
            raise YamlError(f"not valid YAML: found undefined alias {event.anchor!r}", *_at(event.start_mark))
        if not anchored.done:
            raise YamlError("an alias inside the value its anchor names (a cycle JSON cannot hold)",
                            *_at(event.start_mark))
        self._count(anchored.nodes, anchored.chars, anchored.depth, event.start_mark)
        if self.stack:
            self.stack[-1].aliased = True
        self._add(anchored.value, anchored.chars, anchored.nodes, anchored.depth, event.start_mark, None)

    def _on_start(self, event: Any, sequence: bool) -> None:
        self._count(1, 0, 1, event.start_mark)
        tag: str = event.tag if event.tag not in (None, "!") else (_SEQ if sequence else _MAP)
        if tag != (_SEQ if sequence else _MAP):
            raise YamlError(f"a value JSON cannot hold ({tag.rsplit(':', 1)[-1]}: ...)", *_at(event.start_mark))
        value: list[Any] | dict[str, Any] = [] if sequence else {}
        self.stack.append(_Frame(value, event.start_mark, self._anchor(event.anchor, value, event.start_mark)))

    def _on_end(self) -> None:
        frame = self.stack.pop()
        built: Any = frame.value
        if frame.aliased and self.stack:
            self.stack[-1].aliased = True
        if frame.merged is not None:
            assert isinstance(built, dict)
            built = {**frame.merged, **built}
            if frame.anchor is not None:
                frame.anchor.value = built
        if frame.anchor is not None:
            frame.anchor.chars, frame.anchor.nodes, frame.anchor.depth = frame.chars, frame.nodes, frame.depth
            frame.anchor.done = True
        elif self.pack is not None and isinstance(built, dict) and not frame.aliased and self._in_tests():
            built = self.pack(built)
        self._add(built, frame.chars, frame.nodes, frame.depth, frame.mark, None)

    def _in_tests(self) -> bool:
        """Whether the value just finished is an item of the top-level mapping's `tests` list
        (itself not anchored: no alias may see its items packed)."""
        stack = self.stack
        return (len(stack) == 2 and isinstance(stack[0].value, dict) and stack[0].key == "tests"
                and isinstance(stack[1].value, list) and stack[1].anchor is None)

    def _add(self, value: Any, chars: int, nodes: int, depth: int, mark: Any, tag: str | None) -> None:
        """Put a finished value in the container being built (or make it the document)."""
        if not self.stack:
            self.result = value
            return
        frame = self.stack[-1]
        frame.chars += chars
        frame.nodes += nodes
        frame.depth = max(frame.depth, depth + 1)
        target = frame.value
        if isinstance(target, list):
            target.append(value)
        elif frame.key is _NO_KEY:
            if tag == _MERGE:
                frame.key = _MERGE_KEY
            elif isinstance(value, (list, dict)):
                raise YamlError("a mapping key is a list or a mapping", *_at(mark))
            else:  # keys repeat in every test: one string each (as json's decoder shares them)
                frame.key = sys.intern(value if isinstance(value, str) else js_key(value))
        elif frame.key is _MERGE_KEY:
            frame.key = _NO_KEY
            sources = value if isinstance(value, list) else [value]
            if frame.merged is None:
                frame.merged = {}
            for source in reversed(sources):
                if not isinstance(source, dict):
                    raise YamlError("a merge key (<<) takes a mapping or a list of mappings", *_at(mark))
                frame.merged.update(source)
        else:
            target[frame.key] = value
            frame.key = _NO_KEY


def _scalar(tag: str, text: str, mark: Any) -> Any:
    if tag == _STR:
        return text
    if tag == _NULL:
        return None
    if tag == _BOOL:
        return text.lower() == "true"
    if tag == _INT:
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        digits = len(text.lstrip("+-"))
        if digits > (limit := max_int_digits()) > 0:
            raise YamlError(f"an integer of {digits:,} digits (evalsite reads integers of at most {limit:,} "
                            "digits; quote it to keep it as text)", *_at(mark), final=True)
        return int(text, 10)
    if tag == _FLOAT and text.lower().lstrip("+-") not in (".inf", ".nan"):
        return float(text)
    if tag == _MERGE:
        return text  # a `<<` key: `_add` merges the value that follows it
    raise YamlError(f"a value JSON cannot hold ({tag.rsplit(':', 1)[-1]}: {text[:40]})", *_at(mark))


def js_key(key: Any) -> str:
    """A YAML mapping key as the text JavaScript makes of it (`1` -> "1", `true` -> "true")."""
    if isinstance(key, (list, dict, tuple)):
        raise YamlError("a mapping key is a list or a mapping")
    return "null" if key is None else js_string(key)


def node_line(where: YamlText | None, path: tuple[str | int, ...]) -> tuple[int, int] | None:
    """(line, column) of the value at `path` in a loaded document, or of its deepest parent
    there (an alias: where it is written). The text is parsed again, its events walked to the
    path; nothing else is kept."""
    if where is None:
        return None
    loader = _CoreLoader(where.text)
    # One entry per open container on the way to `path`: its next index (a sequence), or the key
    # just read (a mapping: None while a key is expected, _NO_KEY after a key that is not text).
    best: tuple[int, int] | None = None
    trail: list[list[Any]] = []  # [kind, state]
    skip = 0  # depth inside a value (or a complex key) off the path
    skipping_key = False
    try:
        loader.get_event()
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()
        while not loader.check_event(yaml.DocumentEndEvent):
            event = loader.get_event()
            starts = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
            ends = isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent)
            if skip:
                skip += 1 if starts else -1 if ends else 0
                if skip == 0 and not skipping_key:
                    _advance(trail)
                skipping_key = skipping_key and skip > 0
                continue
            if ends:
                trail.pop()
                if not trail:
                    return best
                _advance(trail)
                continue
            if trail and trail[-1][0] == "map" and trail[-1][1] is None:  # a mapping's key
                trail[-1][1] = event.value if isinstance(event, yaml.ScalarEvent) else _NO_KEY
                if starts:
                    skip, skipping_key = 1, True
                continue
            depth = len(trail)
            if depth > len(path) or (depth and trail[-1][1] != path[depth - 1]):  # off the path
                if starts:
                    skip = 1
                else:
                    _advance(trail)
                continue
            best = _at(event.start_mark)
            if depth == len(path) or not starts:
                return best
            trail.append(["seq", 0] if isinstance(event, yaml.SequenceStartEvent) else ["map", None])
        return best
    except yaml.YAMLError:
        return best
    finally:
        loader.dispose()


def _advance(trail: list[list[Any]]) -> None:
    """The value of the innermost container is done: the next index, or the next key."""
    if trail:
        if trail[-1][0] == "seq":
            trail[-1][1] += 1
        else:
            trail[-1][1] = None


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
        if abs(value) < 10**21:
            return str(value)
        try:
            return js_number(float(value))
        except OverflowError:  # past the largest double: JavaScript's number is infinite
            return "Infinity" if value > 0 else "-Infinity"
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


def render(template: str, variables: dict[str, Any], used: set[str] | None = None) -> str:
    """`nunjucks.renderString(template, vars)` for the templates promptfoo configs mostly hold:
    text with `{{ name }}` / `{{ name.key }}` / `{{ name[0] }}` references. Anything else
    Nunjucks would interpret raises TemplateError rather than be rendered differently.

    A reference met again (in this template, or in the others of `used`'s rendering) repeats
    its value: counted against the upload's expansion budget, so a short template naming a
    long var ten thousand times is refused rather than built."""
    if not any(tag in template for tag in _TAGS):
        return template
    used = set() if used is None else used
    out: list[str] = []
    position = 0
    for match in _VARIABLE.finditer(template):
        out.append(_literal(template[position:match.start()]))
        text = js_string(_lookup(variables, match.group(1)))
        if match.group(1) in used:
            current_expansion().expand(len(text), file=None, what="the prompt's repeated {{ var }} references")
        else:
            used.add(match.group(1))
        out.append(text)
        position = match.end()
    out.append(_literal(template[position:]))
    return "".join(out)


def render_prompt(template: str, variables: dict[str, Any]) -> str:
    """promptfoo's `renderPrompt` of an inline prompt: a prompt that is JSON (a chat) has its
    strings rendered and is written back indented; otherwise the text vars, themselves
    templates, are rendered first, then the prompt with them."""
    used: set[str] = set()
    try:
        parsed = json.loads(template)
    except ValueError:
        parsed = None
    else:
        return json.dumps(_render_in(parsed, prompt_vars(variables), used), ensure_ascii=False, indent=2)
    variables = prompt_vars(variables)
    rendered = {k: render(v, variables, set()) if isinstance(v, str) else v for k, v in variables.items()}
    return render(template, rendered, used)


def _render_in(value: Any, variables: dict[str, Any], used: set[str]) -> Any:
    if isinstance(value, str):
        return render(value, variables, used)
    if isinstance(value, list):
        return [_render_in(v, variables, used) for v in value]
    if isinstance(value, dict):
        return {k: _render_in(v, variables, used) for k, v in value.items()}
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
