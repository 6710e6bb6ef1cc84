"""NUL characters in untrusted text.

PostgreSQL stores no NUL (U+0000) in `text` or `jsonb`, and SQLite does; a NUL in an eval
set or in what an agent said is never meant to be read. So every eval case and every agent
output has its NULs replaced by U+FFFD (the replacement character) as it is validated: both
databases keep the same text, and no upload or run fails on the write.

Walking every string of every case costs a quarter of a large import, and NULs are rare.
So the text a model is validated from is scanned once, as raw bytes (`may_hold_nul`), and
inside `nul_free()` the validators skip the walk; a file with a NUL, raw or escaped as
`\\u0000`, is walked as before.

The walk is a `mode="before"` model validator (`_no_nul`). Even when it returns at once, such
a hook makes pydantic turn a JSON document into Python objects to hand it over, then validate
those objects: for the queue workers, which read every case and stored output of a run again
from the JSON the run stored, that costs more than the validation. `validate_json(Model, text)`
validates NUL-free text with the model's fields' validator, straight from the JSON, and makes
the model as pydantic does (`model_construct`'s attributes): the same model, about 1.7 times
faster. Text that may hold a NUL, and a model whose schema is not the shape expected here, go
through `model_validate_json` as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from typing import Any, TypeVar, cast

from pydantic import BaseModel
from pydantic_core import SchemaValidator

M = TypeVar("M", bound=BaseModel)

# The name of the models' NUL hook (a `mode="before"` model validator).
NUL_HOOK = "_no_nul"

NUL = "\x00"
REPLACEMENT = "\ufffd"

# Set while validating data known to hold no NUL (see `nul_free`).
_NUL_FREE: ContextVar[bool] = ContextVar("evalsite_nul_free", default=False)


def may_hold_nul(data: bytes | str) -> bool:
    """Whether JSON (or CSV) text could hold a NUL once parsed: a raw NUL or the escape
    `\\u0000` (its hex digits have no case). A false alarm only costs the walk."""
    if isinstance(data, str):
        return NUL in data or "\\u0000" in data
    return b"\x00" in data or b"\\u0000" in data


@contextmanager
def nul_free(texts: Iterable[bytes | str]) -> Iterator[bool]:
    """Within the block, `without_nul` trusts its input when none of `texts` (everything the
    validated data is parsed from) may hold a NUL. Yields whether it trusts it."""
    if any(may_hold_nul(text) for text in texts):
        yield False
        return
    token = _NUL_FREE.set(True)
    try:
        yield True
    finally:
        _NUL_FREE.reset(token)


def nul_trusted() -> bool:
    """Whether this is inside `nul_free()` with text that holds no NUL: validation then
    changes no string, and what a model was validated from equals its dump."""
    return _NUL_FREE.get()


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(has_nul(v) for v in value)
    if isinstance(value, BaseModel):  # readers that build a case from models (plain, DeepEval)
        return has_nul(value.__dict__)
    return False


def without_nul(value: Any) -> Any:
    """`value` (JSON-like data) with every NUL in its strings, keys included, replaced;
    the value itself when it has none (no copy on the common path)."""
    if _NUL_FREE.get() or not has_nul(value):
        return value
    return _replace(value)


def _replace(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(NUL, REPLACEMENT)
    if isinstance(value, dict):
        return {_replace(k): _replace(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace(v) for v in value]
    if isinstance(value, BaseModel):  # validated again from its (replaced) fields
        return _replace(value.model_dump(exclude_unset=True))
    return value


def validate_json(model: type[M], text: str | bytes) -> M:
    """`model.model_validate_json(text)`: the same model, or the same `ValidationError`, made
    faster for text that holds no NUL (see the module's docstring)."""
    if may_hold_nul(text):
        return model.model_validate_json(text)
    fields = fields_validator(model)
    if fields is None:
        with nul_free([text]):
            return model.model_validate_json(text)
    values, extra, fields_set = fields(text)
    made = model.__new__(model)
    _set = object.__setattr__
    _set(made, "__dict__", values)
    _set(made, "__pydantic_fields_set__", fields_set)
    _set(made, "__pydantic_extra__", extra)
    _set(made, "__pydantic_private__", None)
    return made


@cache
def fields_validator(model: type[BaseModel]) -> Callable[[str | bytes], tuple[dict[str, Any], Any, set[str]]] | None:
    """The JSON validator of the model's fields, less its NUL hook: it returns the fields'
    values, the extra ones and the names set. None unless the model is a plain one (not a root
    model, no `__init__`, no private attributes or `model_post_init`) whose core schema is a
    model around the NUL hook around its fields, as pydantic 2 builds it."""
    if (model.__pydantic_root_model__ or model.__pydantic_post_init__ is not None
            or model.__private_attributes__):
        return None
    schema: Any = model.__pydantic_core_schema__
    definitions = None
    if isinstance(schema, dict) and schema.get("type") == "definitions":
        definitions, schema = schema.get("definitions"), schema.get("schema")
    if (not isinstance(schema, dict) or schema.get("type") != "model" or schema.get("cls") is not model
            or schema.get("custom_init") or schema.get("root_model")):
        return None
    hook = schema.get("schema")
    if not isinstance(hook, dict) or hook.get("type") != "function-before":
        return None
    function = (hook.get("function") or {}).get("function")
    if getattr(function, "__name__", None) != NUL_HOOK or getattr(function, "__self__", None) is not model:
        return None
    fields = hook.get("schema")
    if not isinstance(fields, dict) or fields.get("type") != "model-fields":
        return None
    if definitions is not None:
        fields = {"type": "definitions", "schema": fields, "definitions": definitions}
    validator = SchemaValidator(cast(Any, fields), schema.get("config"))
    return cast(Callable[[str | bytes], tuple[dict[str, Any], Any, set[str]]], validator.validate_json)
