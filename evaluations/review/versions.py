"""An eval set's versions: the history, and the diff between any two versions.

The diff costs three queries whatever the size of the versions: the rows of each version
that the other does not share (only those: versions share unchanged case rows, see
`EvalCase`), then the content of the changed cases on the page shown. Cases present in both
with the same content hash are unchanged even when their rows differ (two uploads). A
changed case is diffed field by field: its fields, and turn by turn the user message, the
expected answers and the expected tool calls, aligned the way the drill-down aligns calls
(`evaluators.diffing.align`), with the argument diffs of the calls that pair up."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.paginator import Paginator

from evaluations.evalsets.curation import CASE_FIELDS, case_native
from evaluations.evaluators.diffing import align
from evaluations.models import EvalCase, EvalSet, EvalSetVersion
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import Invocation, MatchType, MessageContent

DIFF_PAGE_SIZE = 50
_CASE_ONLY_FIELDS = ("name", "description", "metadata", "session_input", "conversation_scenario", "rubrics", "criteria")


@dataclass(frozen=True)
class VersionEntry:
    pk: int
    number: int
    how_created: str
    note: str
    author: str
    created_at: datetime
    case_count: int
    source_filename: str
    short_hash: str
    based_on: int | None


def version_history(*, evalset: EvalSet) -> list[VersionEntry]:
    """Every version, newest first: one query."""
    rows = evalset.versions.order_by("-number").values_list(
        "pk",
        "number",
        "how_created",
        "note",
        "created_by__username",
        "created_at",
        "case_count",
        "source_filename",
        "content_hash",
        "based_on__number",
    )
    return [
        VersionEntry(pk, number, how, note, author or "", created, count, filename, content_hash[:12], base)
        for pk, number, how, note, author, created, count, filename, content_hash, base in rows
    ]


@dataclass(frozen=True)
class FieldChange:
    field: str
    before: str  # pretty JSON or text
    after: str


@dataclass(frozen=True)
class CallChange:
    kind: str  # same / changed / removed / added
    name: str
    before: str
    after: str
    arg_diffs: list[dict[str, Any]]

    @property
    def arg_lines(self) -> list[str]:
        """The argument diffs as text for the page: `path: changed 1 → 2` (values as JSON)."""
        lines = []
        for d in self.arg_diffs:
            before = json.dumps(d["expected"], ensure_ascii=False) if "expected" in d else ""
            after = json.dumps(d["actual"], ensure_ascii=False) if "actual" in d else ""
            lines.append(f"{d['path']}: {d['kind']} {before}{' → ' if before and after else ''}{after}".rstrip())
        return lines


@dataclass
class TurnChange:
    index: int  # from 1
    kind: str  # same / changed / added / removed
    fields: list[FieldChange] = field(default_factory=list)
    calls: list[CallChange] = field(default_factory=list)


@dataclass
class CaseChange:
    eval_id: str
    kind: str  # added / removed / changed
    old_pk: int | None
    new_pk: int | None
    fields: list[FieldChange] = field(default_factory=list)
    tags_added: list[str] = field(default_factory=list)
    tags_removed: list[str] = field(default_factory=list)
    turns: list[TurnChange] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "eval_id": self.eval_id,
            "kind": self.kind,
            "old_case": self.old_pk,
            "new_case": self.new_pk,
            "fields": [vars(f) for f in self.fields],
            "tags_added": self.tags_added,
            "tags_removed": self.tags_removed,
            "turns": [
                {
                    "index": t.index,
                    "kind": t.kind,
                    "fields": [vars(f) for f in t.fields],
                    "tool_calls": [vars(c) for c in t.calls],
                }
                for t in self.turns
                if t.kind != "same"
            ],
        }


@dataclass
class VersionDiff:
    evalset: EvalSet
    old: EvalSetVersion
    new: EvalSetVersion
    added: int
    removed: int
    changed: int
    page: Any  # a Paginator page of CaseChange, the changed ones diffed in full

    def as_dict(self) -> dict[str, Any]:
        return {
            "evalset": self.evalset.pk,
            "old": self.old.number,
            "new": self.new.number,
            "counts": {"added": self.added, "removed": self.removed, "changed": self.changed},
            "page": self.page.number,
            "pages": self.page.paginator.num_pages,
            "cases": [c.as_dict() for c in self.page.object_list],
        }


def _only_in(version: EvalSetVersion, other: EvalSetVersion) -> list[tuple[int, str, str, int]]:
    """The rows of `version` that `other` does not share. A row's versions are one unbroken
    range, so for an older `version` they are the rows that end between the two (read off the
    (eval set, valid_to) index), and for a newer one the rows that began after `other`."""
    n, o = version.number, other.number
    rows = EvalCase.objects.in_version(version)
    rows = rows.filter(valid_to__lte=o) if n < o else rows.filter(valid_from__gt=o) if n > o else rows.none()
    return list(rows.order_by().values_list("pk", "eval_id", "content_hash", "position"))


def version_diff(
    *, old: EvalSetVersion, new: EvalSetVersion, page: Any = 1, page_size: int = DIFF_PAGE_SIZE
) -> VersionDiff:
    """What changed from `old` to `new` (two versions of one eval set, either order)."""
    assert old.evalset_id == new.evalset_id
    before = {eval_id: (pk, content_hash, position) for pk, eval_id, content_hash, position in _only_in(old, new)}
    after = {eval_id: (pk, content_hash, position) for pk, eval_id, content_hash, position in _only_in(new, old)}
    entries: list[tuple[int, CaseChange]] = []
    for eval_id, (pk, content_hash, position) in after.items():
        was = before.get(eval_id)
        if was is None:
            entries.append((position, CaseChange(eval_id, "added", None, pk)))
        elif was[1] != content_hash:
            entries.append((position, CaseChange(eval_id, "changed", was[0], pk)))
    for eval_id, (pk, _, position) in before.items():
        if eval_id not in after:
            entries.append((position, CaseChange(eval_id, "removed", pk, None)))
    entries.sort(key=lambda e: (e[0], e[1].kind != "removed", e[1].eval_id))
    counts = {kind: sum(1 for _, c in entries if c.kind == kind) for kind in ("added", "removed", "changed")}
    paginated = Paginator([c for _, c in entries], page_size).get_page(page)
    shown: list[CaseChange] = list(paginated.object_list)
    pks = [pk for c in shown for pk in (c.old_pk, c.new_pk) if pk is not None]
    contents = {case.pk: case_native(case) for case in EvalCase.objects.filter(pk__in=pks).only(*CASE_FIELDS)}
    for change in shown:
        _fill(
            change,
            contents.get(change.old_pk) if change.old_pk else None,
            contents.get(change.new_pk) if change.new_pk else None,
        )
    paginated.object_list = shown
    return VersionDiff(old.evalset, old, new, counts["added"], counts["removed"], counts["changed"], paginated)


def _pretty(value: Any) -> str:
    if value is None or value == {} or value == []:
        return ""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _fill(change: CaseChange, before: dict[str, Any] | None, after: dict[str, Any] | None) -> None:
    """The field-level diff; an added or removed case lists its content against nothing."""
    old = NativeCase.model_validate(before) if before else None
    new = NativeCase.model_validate(after) if after else None
    old_d = old.model_dump(mode="json") if old else {}
    new_d = new.model_dump(mode="json") if new else {}
    for name in _CASE_ONLY_FIELDS:
        if old_d.get(name) != new_d.get(name):
            change.fields.append(FieldChange(name, _pretty(old_d.get(name)), _pretty(new_d.get(name))))
    old_tags, new_tags = old_d.get("tags") or [], new_d.get("tags") or []
    change.tags_added = [t for t in new_tags if t not in old_tags]
    change.tags_removed = [t for t in old_tags if t not in new_tags]
    old_turns = old.conversation if old else []
    new_turns = new.conversation if new else []
    for i in range(max(len(old_turns), len(new_turns))):
        a = old_turns[i] if i < len(old_turns) else None
        b = new_turns[i] if i < len(new_turns) else None
        change.turns.append(_turn(i + 1, a, b))


def _text(message: MessageContent | None) -> str:
    return message.get_text() if message is not None else ""


def _turn(index: int, a: Invocation | None, b: Invocation | None) -> TurnChange:
    kind = "added" if a is None else "removed" if b is None else "same"
    turn = TurnChange(index, kind)
    pairs = [
        ("user message", _text(a.user_content) if a else "", _text(b.user_content) if b else ""),
        (
            "expected response",
            _text(a.expected_final_response) if a else "",
            _text(b.expected_final_response) if b else "",
        ),
        (
            "expected intermediate responses",
            "\n".join(_text(m) for m in a.expected_intermediate_responses) if a else "",
            "\n".join(_text(m) for m in b.expected_intermediate_responses) if b else "",
        ),
        (
            "rubrics",
            _pretty([r.model_dump(mode="json") for r in a.rubrics]) if a else "",
            _pretty([r.model_dump(mode="json") for r in b.rubrics]) if b else "",
        ),
        ("metadata", _pretty(a.metadata) if a else "", _pretty(b.metadata) if b else ""),
    ]
    turn.fields = [FieldChange(name, x, y) for name, x, y in pairs if x != y]
    alignment = align(a.expected_tool_trajectory if a else [], b.expected_tool_trajectory if b else [], MatchType.EXACT)
    for row in alignment.rows:
        kinds = {"matched": "same", "args_differ": "changed", "missing": "removed", "unexpected": "added"}
        call_kind = kinds.get(row.kind, row.kind)
        call = row.expected or row.actual
        turn.calls.append(
            CallChange(
                call_kind,
                call.name if call else "",
                _pretty(row.expected.args) if row.expected else "",
                _pretty(row.actual.args) if row.actual else "",
                [d.as_dict() for d in row.arg_diffs],
            )
        )
    if kind == "same" and (turn.fields or any(c.kind != "same" for c in turn.calls)):
        turn.kind = "changed"
    return turn
