"""Edits to an eval set, as the browser forms, the API and `manage.py edit_evalset` send them.

A save is a list of changes applied, in order, to the latest version; it makes one new
version (and, for `move`, one in the target eval set). Cases inside `put` stay plain dicts
here: `evalsets.curation` validates them as native `EvalCase`s so an error names its path
from the top of the request (`changes[0].case.conversation[1].user_content`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_CHANGES = 10_000
# What the API's case reads add to a native case (`GET .../cases/`, a case's detail): a case
# read can be sent back in a `put` as it is; these are ignored, any other unknown key refused.
READ_ONLY_CASE_FIELDS = frozenset({"id", "position", "turn_count", "tool_call_count", "project", "evalset",
                                   "version"})
MAX_NOTE = 2_000


class _Change(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PutCase(_Change):
    """Add a case (`eval_id` empty) or replace the case `eval_id` (it may be renamed). The
    read-only fields of a case read from the API (`READ_ONLY_CASE_FIELDS`) are ignored."""

    op: Literal["put"]
    eval_id: str | None = None
    case: dict[str, Any]


class DeleteCases(_Change):
    op: Literal["delete"]
    eval_ids: list[str] = Field(min_length=1)


class DuplicateCase(_Change):
    """A copy of `eval_id` at the end, as `new_eval_id` (default: `<eval_id>-copy`)."""

    op: Literal["duplicate"]
    eval_id: str
    new_eval_id: str | None = None


class TagCases(_Change):
    op: Literal["tag", "untag"]
    eval_ids: list[str] = Field(min_length=1)
    tag: str = Field(min_length=1, max_length=200)


class MoveCases(_Change):
    """Take the cases out of this eval set and append them to another of the same project."""

    op: Literal["move"]
    eval_ids: list[str] = Field(min_length=1)
    target_evalset: int


Change = Annotated[PutCase | DeleteCases | DuplicateCase | TagCases | MoveCases, Field(discriminator="op")]


class VersionEdit(BaseModel):
    """One save: the version it starts from (it must still be the latest), a note, changes."""

    model_config = ConfigDict(extra="forbid")

    base_version: int
    note: str = Field(default="", max_length=MAX_NOTE)
    changes: list[Change] = Field(min_length=1, max_length=MAX_CHANGES)
