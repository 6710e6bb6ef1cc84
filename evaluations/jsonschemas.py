"""JSON Schemas written by users (the `json_schema` criterion of runs, eval sets and monitors):
checked when they are saved, and run on untrusted documents (agents' answers) within bounds.

When saved (`schema_problems`):

- a draft 2020-12 schema (the meta-schema's check) of at most `MAX_NODES` JSON values nested at
  most `MAX_DEPTH` deep;
- every `$ref` / `$dynamicRef` resolves inside the document: a JSON pointer (`#/$defs/x`), an
  anchor, or a subschema the document names with its own `$id`. Anything else (`http://`,
  `file://`, a relative file name, even the published meta-schemas) is refused with the
  reference named; nothing is ever fetched;
- the subschemas one validation can apply, counted through references and applicators with
  shared definitions counted each time they are used, are at most `MAX_EXPANSION` (`$defs`
  that double through `allOf` reach 2^n), and no reference leads back to itself without
  descending into the document (`{"$ref": "#"}`).

When run (`validation_problems`), whatever was stored:

- references resolve in a registry that refuses to retrieve anything, so an old stored schema
  naming a URL fails with the reference named, never with a fetched document;
- every keyword applied is charged to a budget (`MAX_STEPS`) with a clock (`MAX_SECONDS`),
  which bounds what an answer's shape can multiply (a recursive schema on a deeply nested
  answer);
- `pattern`, `patternProperties` and the additional / unevaluated properties they decide go
  through `evaluations.patterns` (RE2, else bounded backtracking), and `uniqueItems` hashes;
- the whole schema is read as draft 2020-12: a subschema's `$schema` does not switch dialect;
- each message is cut to `MAX_MESSAGE` characters.

Past a bound, `SchemaBoundExceeded` says which; the caller records it as the score's error.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import attrs
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import SchemaError
from jsonschema.validators import extend

from evaluations.patterns import PatternBoundExceeded, compile_bounded

MAX_NODES = 20_000
MAX_DEPTH = 64
MAX_EXPANSION = 20_000
MAX_STEPS = 20_000
MAX_SECONDS = 1.0
MAX_MESSAGE = 300
MAX_PROBLEMS = 5

# The criteria whose options hold a JSON Schema: evaluator name -> option (evaluators/online.py).
SCHEMA_OPTIONS = {"json_schema": "schema"}

# Draft 2020-12's applicators: those applying a subschema to the same value, and those
# applying it to a part of it (an item, a property's value or name).
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_MANY = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAP = ("dependentSchemas",)
_DESCEND_ONE = ("items", "additionalProperties", "contains", "propertyNames", "unevaluatedItems",
                "unevaluatedProperties")
_DESCEND_MANY = ("prefixItems",)
_DESCEND_MAP = ("properties", "patternProperties")
_DEFINITIONS = ("$defs", "definitions")  # applied only through references, checked all the same
_REFERENCES = ("$ref", "$dynamicRef")


class SchemaBoundExceeded(Exception):
    """A validation went past one of evalsite's bounds, or its schema refers outside itself."""


class CriterionLike(Protocol):
    evaluator: str | None
    options: dict[str, Any]


def cut(text: str, limit: int = MAX_MESSAGE) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _refuse(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


_REFUSING = referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]


# --- When saved ----------------------------------------------------------------------------------


def schema_problems(schema: Any) -> list[str]:
    """Why `schema` cannot be saved as a criterion's JSON Schema ([] when it can). Checked
    again each time a stored config's options are read (once per case scored), so the answer
    is kept per schema text: the meta-schema's check alone costs ~17 ms."""
    if not isinstance(schema, (dict, bool)):
        return [f"a JSON Schema is an object or a boolean, not {type(schema).__name__}"]
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return ["a JSON Schema is JSON"]
    return list(_problems_of(text))


@functools.lru_cache(maxsize=256)
def _problems_of(text: str) -> tuple[str, ...]:
    return tuple(_problems(json.loads(text)))


def _problems(schema: Any) -> list[str]:
    if not isinstance(schema, (dict, bool)):
        return [f"a JSON Schema is an object or a boolean, not {type(schema).__name__}"]
    nodes, depth = _size(schema)
    if nodes > MAX_NODES:
        return [f"the schema has more than {MAX_NODES:,} JSON values"]
    if depth > MAX_DEPTH:
        return [f"the schema nests more than {MAX_DEPTH} levels deep"]
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return [cut(f"not a JSON schema: {exc.message}")]
    if isinstance(schema, bool):
        return []
    walk = _Walk(schema)
    try:
        walk.expansions(walk.root, walk.root_contents, 0)
    except RecursionError:
        walk.problems.append("the schema's references chain too deeply")
    if not walk.problems and walk.total > MAX_EXPANSION:
        walk.problems.append(
            f"a validation would apply more than {MAX_EXPANSION:,} subschemas (references and applicators "
            f"multiply: shared definitions count each time they are used); simplify the schema")
    return walk.problems[:MAX_PROBLEMS]


def _size(schema: Any) -> tuple[int, int]:
    """(JSON values, deepest nesting), stopping early past the limits."""
    nodes, deepest = 0, 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        if nodes > MAX_NODES or deepest > MAX_DEPTH:
            break
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return nodes, deepest


class _Walk:
    """The subschemas of a document, followed through its references: which do not resolve
    inside it, and how many subschemas a validation can apply (each use counted)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        resource = referencing.jsonschema.DRAFT202012.create_resource(schema)
        self.root = _REFUSING.resolver_with_root(resource)
        self.root_contents = schema
        self.problems: list[str] = []
        self.total = 0
        self._cost: dict[int, int] = {}
        self._open: dict[int, int] = {}  # subschemas being counted: the descents made when each was entered
        self._checked: set[int] = set()

    def expansions(self, resolver: Any, contents: Any, descents: int) -> int:
        """Subschemas applied when `contents` is (its own cost, counted in `total` at the root)."""
        if not isinstance(contents, dict) or len(self.problems) >= MAX_PROBLEMS:
            return 1
        key = id(contents)
        if key in self._open:
            if descents == self._open[key]:
                self.problems.append("a reference leads back to itself without descending into the value "
                                     "(the schema would apply itself forever)")
            return 1  # recursion that descends: bounded by the document, charged when run
        if key in self._cost:
            return self._cost[key]
        self._open[key] = descents
        cost = 1
        if "$id" in contents and contents is not self.root_contents:
            resolver = resolver.in_subresource(referencing.jsonschema.DRAFT202012.create_resource(contents))
        for keyword in _REFERENCES:
            ref = contents.get(keyword)
            if isinstance(ref, str):
                target = self._lookup(resolver, ref)
                if target is not None:
                    cost += self.expansions(target.resolver, target.contents, descents)
        for child, descended in _children(contents):
            cost += self.expansions(resolver, child, descents + descended)
            if cost > MAX_EXPANSION:
                break
        for keyword in _DEFINITIONS:  # not applied by themselves: checked for references only
            definitions = contents.get(keyword)
            if isinstance(definitions, dict):
                for child in definitions.values():
                    if id(child) not in self._cost and id(child) not in self._open:
                        self.expansions(resolver, child, descents + 1)
        del self._open[key]
        self._cost[key] = cost
        if contents is self.root_contents:
            self.total = cost
        return cost

    def _lookup(self, resolver: Any, ref: str) -> Any:
        try:
            return resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            self.problems.append(cut(f"the reference {ref!r} is not inside the schema: evalsite resolves only "
                                     f"references to the schema itself (#/..., anchors, its own $id subschemas) "
                                     f"and fetches nothing", 400))
            return None


def _children(contents: dict[str, Any]) -> Iterator[tuple[Any, int]]:
    """(subschema, 1 when it applies to a part of the value else 0) for each applicator."""
    for keyword in _IN_PLACE_ONE:
        if keyword in contents:
            yield contents[keyword], 0
    for keyword in _IN_PLACE_MANY:
        if isinstance(contents.get(keyword), list):
            for child in contents[keyword]:
                yield child, 0
    for keyword in _IN_PLACE_MAP:
        if isinstance(contents.get(keyword), dict):
            for child in contents[keyword].values():
                yield child, 0
    for keyword in _DESCEND_ONE:
        if keyword in contents:
            yield contents[keyword], 1
    for keyword in _DESCEND_MANY:
        if isinstance(contents.get(keyword), list):
            for child in contents[keyword]:
                yield child, 1
    for keyword in _DESCEND_MAP:
        if isinstance(contents.get(keyword), dict):
            for child in contents[keyword].values():
                yield child, 1


def criteria_schema_problems(criteria: Mapping[str, CriterionLike]) -> list[str]:
    """Problems of the JSON Schemas in a config's criteria, each prefixed with where it is
    (`criteria.<name>.options.schema: ...`)."""
    problems: list[str] = []
    for name, config in criteria.items():
        option = SCHEMA_OPTIONS.get(config.evaluator or name)
        if option is None or not isinstance(config.options, dict) or option not in config.options:
            continue
        problems += [f"criteria.{name}.options.{option}: {p}" for p in schema_problems(config.options[option])]
    return problems


# --- When run ------------------------------------------------------------------------------------


class _Budget:
    __slots__ = ("deadline", "steps")

    def __init__(self) -> None:
        self.steps = MAX_STEPS
        self.deadline = time.monotonic() + MAX_SECONDS


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("evalsite_schema_budget", default=None)


def _charge() -> None:
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.steps -= 1
    if budget.steps < 0:
        raise SchemaBoundExceeded(f"the validation applied more than {MAX_STEPS:,} keywords (evalsite's bound)")
    if budget.steps % 256 == 0 and time.monotonic() > budget.deadline:
        raise SchemaBoundExceeded(f"the validation took more than {MAX_SECONDS} s (evalsite's bound)")


def _charged(keyword: Any) -> Any:
    def applied(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _charge()
        return keyword(validator, value, instance, schema)
    applied.__name__ = getattr(keyword, "__name__", "keyword")
    return applied


def _matches(pattern: str, text: str) -> bool:
    return compile_bounded(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {key for key in instance
              if key not in properties and not any(_matches(p, key) for p in patterns)}
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = sorted(extras, key=str)
        if patterns:
            verb = "does" if len(names) == 1 else "do"
            yield ValidationError(f"{', '.join(map(repr, names))} {verb} not match any of the regexes: "
                                  f"{', '.join(map(repr, sorted(patterns)))}")
        else:
            verb = "was" if len(names) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({', '.join(map(repr, names))} {verb} "
                                  "unexpected)")


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> set[str]:
    """The properties of `instance` that `schema`'s keywords evaluate (draft 2020-12's
    annotations, as jsonschema collects them for `unevaluatedProperties`)."""
    if not isinstance(schema, dict):
        return set()
    _charge()
    keys: set[str] = set()
    for keyword in _REFERENCES:
        ref = schema.get(keyword)
        if isinstance(ref, str):
            resolved = validator._resolver.lookup(ref)
            keys |= _evaluated_keys(validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                                    instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if keyword in schema and schema[keyword] is not None:
            keys |= {key for key, value in instance.items()
                     if next(validator.descend(value, schema[keyword]), None) is None}
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        keys |= {key for key in instance if any(_matches(p, key) for p in patterns)}
    dependent = schema.get("dependentSchemas")
    if isinstance(dependent, dict):
        for name, subschema in dependent.items():
            if name in instance:
                keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in _IN_PLACE_MANY:
        for subschema in schema.get(keyword, []):
            if next(validator.descend(instance, subschema), None) is None:
                keys |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(validator: Any, unevaluated: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    failed = [key for key in instance if key not in evaluated
              and next(validator.descend(instance[key], unevaluated, path=key, schema_path=key), None) is not None]
    if failed:
        verb = "was" if len(failed) == 1 else "were"
        if unevaluated is False:
            names = ", ".join(map(repr, sorted(failed, key=str)))
            yield ValidationError(f"Unevaluated properties are not allowed ({names} {verb} unexpected)")
        else:
            names = ", ".join(map(repr, failed))
            yield ValidationError(f"Unevaluated properties are not valid under the given schema ({names} {verb} "
                                  "unevaluated and invalid)")


def _identity(value: Any) -> Any:
    """A hashable key equal for values JSON Schema calls equal (1 and 1.0; not true and 1)."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_identity(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _identity(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        key = _identity(item)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


def _bounded_class() -> Any:
    keywords = {name: _charged(fn) for name, fn in Draft202012Validator.VALIDATORS.items()}
    keywords.update({
        "pattern": _charged(_pattern), "patternProperties": _charged(_pattern_properties),
        "additionalProperties": _charged(_additional_properties),
        "unevaluatedProperties": _charged(_unevaluated_properties), "uniqueItems": _charged(_unique_items),
    })
    cls = extend(Draft202012Validator, validators=keywords)
    init_fields = [(f.name, f.alias) for f in attrs.fields(cls) if f.init]

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema's own evolve picks a class by a subschema's `$schema`, leaving these
        # keywords (and their bounds) behind; the whole schema is draft 2020-12 here.
        changes.setdefault("schema", self.schema)
        for name, alias in init_fields:
            changes.setdefault(alias, getattr(self, name))
        return cls(**changes)

    cls.evolve = evolve
    return cls


_Bounded = _bounded_class()


def validation_problems(schema: Any, instance: Any, limit: int = MAX_PROBLEMS) -> list[str]:
    """Where `instance` breaks `schema` ("path: message", at most `limit`, each cut to
    `MAX_MESSAGE`); [] when it is valid. Raises `SchemaBoundExceeded` past a bound."""
    token = _BUDGET.set(_Budget())
    try:
        validator = _Bounded(schema, registry=_REFUSING)
        problems: list[str] = []
        for error in validator.iter_errors(instance):
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            problems.append(cut(f"{where}: {error.message}"))
            if len(problems) >= limit:
                break
        return problems
    except referencing.exceptions.Unresolvable as exc:
        ref = getattr(exc, "ref", "")
        raise SchemaBoundExceeded(cut(f"the schema's reference {ref!r} does not resolve inside it "
                                      f"({type(getattr(exc, '_wrapped', exc)).__name__}); evalsite fetches "
                                      f"nothing", 400)) from None
    except PatternBoundExceeded as exc:
        raise SchemaBoundExceeded(f"a pattern of the schema: {exc}") from None
    except RecursionError:
        raise SchemaBoundExceeded("the schema and the value nest too deeply to validate") from None
    finally:
        _BUDGET.reset(token)
