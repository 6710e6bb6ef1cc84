"""Services: new versions of an eval set from edits (the browser, the API, promotions).

`evalset_edit` applies a `VersionEdit` (see `schemas/curation.py`) to the latest version and
writes one new immutable version. Versions share unchanged cases: a case row carries the
range of version numbers it belongs to (`EvalCase.valid_from` / `valid_to`), so a save
writes rows only for the cases it adds or changes, and ends the range of the rows it
replaces or deletes. The new version's content hash is built from the cases' own hashes
(`services.version_content_hash`), the same way an upload's is, so its native export
re-imports to the same hash.

Everything is checked before anything is written; a problem raises `CurationError` with
every problem found and the path of each from the top of the request."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from evaluations.bulk import insert_rows
from evaluations.evalsets.services import (
    _CASE_COLUMNS,
    _CASE_JSON_COLUMNS,
    _JSON_AT,
    _case_row,
    case_content_hash,
    version_content_hash,
)
from evaluations.interop.base import format_path
from evaluations.models import OPEN_VERSION, EvalCase, EvalSet, EvalSetVersion
from evaluations.schemas.curation import (
    READ_ONLY_CASE_FIELDS,
    DeleteCases,
    DuplicateCase,
    MoveCases,
    PutCase,
    TagCases,
    VersionEdit,
)
from evaluations.schemas.evalset import EvalCase as NativeCase

# The stored fields of a native case, in the native model's order.
CASE_FIELDS = (
    "eval_id",
    "name",
    "description",
    "conversation",
    "session_input",
    "metadata",
    "tags",
    "conversation_scenario",
    "rubrics",
    "criteria",
)
_CLOSE_BATCH = 500


@dataclass(frozen=True)
class Problem:
    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "message": self.message}


class CurationError(Exception):
    """What is wrong with an edit, and where; nothing was written. `conflict` says the eval
    set has a newer version than the one the edit began from."""

    def __init__(self, problems: Sequence[Problem], *, conflict: bool = False) -> None:
        self.problems = list(problems)
        self.conflict = conflict
        super().__init__("; ".join(f"{p.path}: {p.message}" if p.path else p.message for p in self.problems))


def validation_problems(exc: ValidationError, prefix: Iterable[str | int] = ()) -> list[Problem]:
    """Pydantic's errors as problems, each with its path from the top of the request."""
    return [Problem(format_path([*prefix, *err["loc"]]), err["msg"]) for err in exc.errors(include_url=False)]


_OPS = {"put", "delete", "duplicate", "tag", "untag", "move"}


def parse_edit(data: Any) -> VersionEdit:
    """A `VersionEdit` from JSON-like data, or `CurationError` with the paths of what is wrong."""
    try:
        return VersionEdit.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            loc = list(err["loc"])
            if len(loc) >= 4 and loc[0] == "changes" and loc[2] in _OPS:
                del loc[2]  # the union's tag (the change's `op`), not a field of the request
            problems.append(Problem(format_path(loc), err["msg"]))
        raise CurationError(problems) from None


def case_native(case: EvalCase) -> dict[str, Any]:
    """The native case dict of a stored row (the dict the import dumped: no description when
    it has none)."""
    return {name: getattr(case, name) for name in CASE_FIELDS if name != "description" or case.description}


@dataclass
class _Entry:
    """One case of the version being made: an unchanged row (`pk`), or new content."""

    eval_id: str
    position: int
    content_hash: str
    turns: int
    tool_calls: int
    tags: list[str]
    pk: int | None = None  # the row it keeps; None: a new row
    row: tuple[Any, ...] | None = None  # the new row's columns (`_CASE_COLUMNS`)


@dataclass
class EditOutcome:
    version: EvalSetVersion
    added: int = 0
    changed: int = 0
    removed: int = 0
    other_versions: list[EvalSetVersion] = field(default_factory=list)  # made in the targets of `move`

    def describe(self) -> str:
        return f"version {self.version.number}: {self.added} added, {self.changed} changed, {self.removed} removed"


class _Working:
    """The latest version's cases, read once as small columns, and the edits applied to them."""

    def __init__(self, evalset: EvalSet, latest: EvalSetVersion) -> None:
        self.evalset = evalset
        self.latest = latest
        self.entries: dict[str, _Entry] = {}
        for pk, eval_id, position, content_hash, turns, tool_calls, tags_text in (
            EvalCase.objects.in_version(latest)
            .order_by("position")
            .values_list("pk", "eval_id", "position", "content_hash", "turn_count", "tool_call_count", "tags_text")
        ):
            self.entries[eval_id] = _Entry(
                eval_id, position, content_hash, turns, tool_calls, [t for t in tags_text.split("|") if t], pk=pk
            )
        self.original_pks = {e.eval_id: e.pk for e in self.entries.values()}
        self.next_position = max((e.position for e in self.entries.values()), default=-1) + 1
        self.native: dict[str, NativeCase] = {}  # content of the cases an edit reads

    def load(self, eval_ids: Iterable[str]) -> None:
        """The content of the cases an edit needs (tag, duplicate, move), read in one query."""
        pks = {self.entries[e].pk: e for e in eval_ids if e in self.entries and e not in self.native}
        pks.pop(None, None)
        if not pks:
            return
        for case in EvalCase.objects.filter(pk__in=list(pks)).only(*CASE_FIELDS):
            self.native[case.eval_id] = NativeCase.model_validate(case_native(case))

    def set(self, case: NativeCase, *, position: int | None = None) -> None:
        if position is None:
            position = self.next_position
            self.next_position += 1
        row = _case_row(position, case.model_dump(mode="json"))
        content_hash = case_content_hash(case.eval_id, case.name, row[_JSON_AT : _JSON_AT + len(_CASE_JSON_COLUMNS)],
                                         case.description)
        self.entries[case.eval_id] = _Entry(
            case.eval_id, position, content_hash, row[-2], row[-1], list(case.tags), row=row
        )
        self.native[case.eval_id] = case


def _apply(work: _Working, edit: VersionEdit, problems: list[Problem]) -> dict[int, list[NativeCase]]:
    """Applies the changes in order; returns the cases each `move` takes, by target eval set."""
    moves: dict[int, list[NativeCase]] = {}
    work.load(
        e
        for c in edit.changes
        if isinstance(c, DuplicateCase | TagCases | MoveCases)
        for e in ([c.eval_id] if isinstance(c, DuplicateCase) else c.eval_ids)
    )

    def known(eval_id: str, path: str) -> bool:
        if eval_id in work.entries:
            return True
        problems.append(Problem(path, f"no case {eval_id!r} in the eval set"))
        return False

    for i, change in enumerate(edit.changes):
        at = f"changes[{i}]"
        if isinstance(change, PutCase):
            try:
                case = NativeCase.model_validate(
                    {key: value for key, value in change.case.items() if key not in READ_ONLY_CASE_FIELDS})
            except ValidationError as exc:
                problems.extend(validation_problems(exc, ["changes", i, "case"]))
                continue
            if not case.eval_id.strip():
                problems.append(Problem(f"{at}.case.eval_id", "the eval id must not be empty"))
                continue
            position = None
            if change.eval_id:
                if not known(change.eval_id, f"{at}.eval_id"):
                    continue
                position = work.entries[change.eval_id].position
                if case.eval_id != change.eval_id:
                    if case.eval_id in work.entries:
                        problems.append(Problem(f"{at}.case.eval_id", f"a case {case.eval_id!r} already exists"))
                        continue
                    del work.entries[change.eval_id]
            elif case.eval_id in work.entries:
                problems.append(Problem(f"{at}.case.eval_id", f"a case {case.eval_id!r} already exists"))
                continue
            work.set(case, position=position)
        elif isinstance(change, DeleteCases):
            for j, eval_id in enumerate(change.eval_ids):
                if known(eval_id, f"{at}.eval_ids[{j}]"):
                    del work.entries[eval_id]
        elif isinstance(change, DuplicateCase):
            if not known(change.eval_id, f"{at}.eval_id"):
                continue
            work.load([change.eval_id])
            new_id = change.new_eval_id or _free_id(f"{change.eval_id}-copy", work.entries)
            if new_id in work.entries:
                problems.append(Problem(f"{at}.new_eval_id", f"a case {new_id!r} already exists"))
                continue
            # shallow copies: nothing nested is ever changed in place, only dumped
            work.set(work.native[change.eval_id].model_copy(update={"eval_id": new_id}))
        elif isinstance(change, TagCases):
            for j, eval_id in enumerate(change.eval_ids):
                if not known(eval_id, f"{at}.eval_ids[{j}]"):
                    continue
                work.load([eval_id])
                case = work.native[eval_id]
                tags = [t for t in case.tags if t != change.tag]
                if change.op == "tag":
                    tags.append(change.tag)
                if tags != case.tags:
                    work.set(case.model_copy(update={"tags": tags}), position=work.entries[eval_id].position)
        elif isinstance(change, MoveCases):
            if change.target_evalset == work.evalset.pk:
                problems.append(Problem(f"{at}.target_evalset", "the cases are already in this eval set"))
                continue
            for j, eval_id in enumerate(change.eval_ids):
                if known(eval_id, f"{at}.eval_ids[{j}]"):
                    work.load([eval_id])
                    moves.setdefault(change.target_evalset, []).append(work.native[eval_id])
                    del work.entries[eval_id]
    return moves


def _free_id(wanted: str, taken: dict[str, Any]) -> str:
    candidate, n = wanted, 2
    while candidate in taken:
        candidate, n = f"{wanted}-{n}", n + 1
    return candidate


def _latest(evalset: EvalSet) -> EvalSetVersion:
    latest = evalset.versions.order_by("-number").first()
    if latest is None:
        raise CurationError([Problem("", "the eval set has no version yet: upload one first")])
    return latest


def evalset_edit(
    *,
    evalset: EvalSet,
    edit: VersionEdit,
    user: Any = None,
    how: str = EvalSetVersion.How.EDIT,
) -> EditOutcome:
    """A new version of `evalset`: `edit`'s changes applied to its latest version, which
    must be `edit.base_version` (else `CurationError(conflict=True)`). All or nothing."""
    with transaction.atomic():
        evalset = EvalSet.objects.select_for_update().get(pk=evalset.pk)
        latest = _latest(evalset)
        if edit.base_version != latest.number:
            raise CurationError(
                [
                    Problem(
                        "base_version",
                        f"version {latest.number} was saved after version "
                        f"{edit.base_version}: reload it and edit again",
                    )
                ],
                conflict=True,
            )
        work = _Working(evalset, latest)
        problems: list[Problem] = []
        moves = _apply(work, edit, problems)
        targets: dict[int, EvalSet] = {}
        if moves:
            found = {
                e.pk: e
                for e in EvalSet.objects.select_for_update().filter(pk__in=list(moves), project_id=evalset.project_id)
            }
            for i, change in enumerate(edit.changes):
                if isinstance(change, MoveCases) and change.target_evalset not in found:
                    problems.append(
                        Problem(f"changes[{i}].target_evalset", f"no eval set {change.target_evalset} in this project")
                    )
            targets = found
        if problems:
            raise CurationError(problems)
        outcome = _write(work, note=edit.note, user=user, how=how)
        for target_pk, cases in moves.items():
            target = targets[target_pk]
            target_work = _Working(target, _latest(target))
            for j, case in enumerate(cases):
                if case.eval_id in target_work.entries:
                    problems.append(Problem(f"move[{j}]", f"{target.display_name} already has a case {case.eval_id!r}"))
                    continue
                target_work.set(case)
            if problems:
                raise CurationError(problems)
            note = f"moved {len(cases)} case(s) from {evalset.display_name}" + (f": {edit.note}" if edit.note else "")
            outcome.other_versions.append(_write(target_work, note=note, user=user, how=how).version)
        return outcome


def _write(work: _Working, *, note: str, user: Any, how: str) -> EditOutcome:
    latest, evalset = work.latest, work.evalset
    entries = sorted(work.entries.values(), key=lambda e: e.position)
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.content_hash.encode())
    content_hash = version_content_hash(
        eval_set_id=evalset.eval_set_id,
        name=latest.name,
        description=latest.description,
        metadata=latest.metadata,
        default_config=latest.default_config,
        evaluator_config=latest.evaluator_config,
        cases_digest=digest.hexdigest(),
    )
    if content_hash == latest.content_hash:
        raise CurationError([Problem("changes", f"nothing changed: the result is version {latest.number} as it is")])
    kept = {e.pk for e in entries if e.pk is not None}
    closed = [pk for pk in work.original_pks.values() if pk not in kept]
    new_rows = [(*e.row, e.content_hash) for e in entries if e.row is not None]
    changed = sum(1 for e in entries if e.row is not None and e.eval_id in work.original_pks)
    number = latest.number + 1
    version = EvalSetVersion.objects.create(
        evalset=evalset,
        number=number,
        content_hash=content_hash,
        source_format="native",
        source_variant=how,
        source_filename="",
        name=latest.name,
        description=latest.description,
        metadata=latest.metadata,
        default_config=latest.default_config,
        default_criteria_order=latest.default_criteria_order,
        evaluator_config=latest.evaluator_config,
        warnings=[],
        case_count=len(entries),
        turn_count=sum(e.turns for e in entries),
        tool_call_count=sum(e.tool_calls for e in entries),
        tags=sorted({t for e in entries for t in e.tags}),
        created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
        how_created=how,
        note=note,
        based_on=latest,
    )
    for start in range(0, len(closed), _CLOSE_BATCH):
        EvalCase.objects.filter(pk__in=closed[start : start + _CLOSE_BATCH]).update(valid_to=number)
    head = (version.pk, evalset.pk, number, OPEN_VERSION)
    insert_rows(
        EvalCase,
        ["version_id", "evalset_id", "valid_from", "valid_to", *_CASE_COLUMNS, "content_hash"],
        [(*head, *row) for row in new_rows],
        json_columns=set(_CASE_JSON_COLUMNS),
    )
    EvalSet.objects.filter(pk=evalset.pk).update(latest_version=version, updated_at=timezone.now())
    return EditOutcome(version=version, added=len(new_rows) - changed, changed=changed, removed=len(closed) - changed)
