"""Reading prompts for the pages, the API and the runs: the list, one prompt's versions, one
version's text, and the line diff of two versions. Each returns dataclasses."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, QuerySet

from evaluations.models import Project, Prompt, PromptVersion
from evaluations.schemas.prompt_template import template_variables


@dataclass(frozen=True)
class PromptRow:
    pk: int
    name: str
    description: str
    project: str
    latest: int | None
    versions: int
    updated_at: datetime


def prompt_rows(prompts: QuerySet[Prompt]) -> list[PromptRow]:
    """The prompts, newest change first: one query."""
    rows = (prompts.annotate(n=Count("versions")).order_by("-updated_at", "-pk")
            .values_list("pk", "name", "description", "project__slug", "latest_version__number", "n", "updated_at"))
    return [PromptRow(*row) for row in rows]


@dataclass(frozen=True)
class VersionView:
    pk: int
    prompt_id: int
    number: int
    system: str
    user: str
    note: str
    author: str
    created_at: datetime
    short_hash: str

    @property
    def variables(self) -> list[str]:
        return template_variables(self.system + "\n" + self.user)

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "system": self.system, "user": self.user, "note": self.note,
                "author": self.author or None, "created_at": self.created_at.isoformat(),
                "content_hash": self.short_hash, "variables": self.variables}


_VERSION_FIELDS = ("pk", "prompt_id", "number", "system", "user", "note", "created_by__username", "created_at",
                   "content_hash")


def _view(row: tuple[Any, ...]) -> VersionView:
    pk, prompt_id, number, system, user, note, author, created_at, digest = row
    return VersionView(pk, prompt_id, number, system, user, note, author or "", created_at, digest[:12])


def prompt_versions(*, prompt: Prompt) -> list[VersionView]:
    """Every version, newest first: one query."""
    return [_view(row) for row in prompt.versions.order_by("-number").values_list(*_VERSION_FIELDS)]


def prompt_version_get(*, project: Project, prompt_id: int, number: int | None = None) -> VersionView | None:
    """One version of a prompt of the project (the latest when `number` is None)."""
    versions = PromptVersion.objects.filter(prompt_id=prompt_id, prompt__project=project)
    versions = versions.filter(number=number) if number is not None else versions.order_by("-number")
    row = versions.values_list(*_VERSION_FIELDS).first()
    return _view(row) if row is not None else None


@dataclass(frozen=True)
class DiffLine:
    kind: str  # same / removed / added
    text: str
    old: int | None  # line numbers, 1-based
    new: int | None


@dataclass(frozen=True)
class PromptDiff:
    before: VersionView
    after: VersionView
    system: list[DiffLine]
    user: list[DiffLine]

    @property
    def changed(self) -> bool:
        return any(line.kind != "same" for line in self.system + self.user)


def line_diff(before: str, after: str) -> list[DiffLine]:
    """Line by line: unchanged lines, then what was removed and added, in order."""
    old, new = before.splitlines(), after.splitlines()
    lines: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag == "equal":
            lines += [DiffLine("same", old[i], i + 1, j1 + k + 1) for k, i in enumerate(range(i1, i2))]
            continue
        lines += [DiffLine("removed", old[i], i + 1, None) for i in range(i1, i2)]
        lines += [DiffLine("added", new[j], None, j + 1) for j in range(j1, j2)]
    return lines


def prompt_diff(*, prompt: Prompt, before: int, after: int) -> PromptDiff | None:
    """The two versions' texts, diffed line by line; None when either does not exist."""
    found = {v.number: v for v in (_view(row) for row in prompt.versions.filter(number__in=[before, after])
                                   .values_list(*_VERSION_FIELDS))}
    if before not in found or after not in found:
        return None
    a, b = found[before], found[after]
    return PromptDiff(a, b, line_diff(a.system, b.system), line_diff(a.user, b.user))


def version_choices(project: Project, *, per_prompt: int = 10) -> list[tuple[str, str]]:
    """("<prompt id>:<version>", "support v3") for the latest `per_prompt` versions of each of
    the project's prompts, for the forms that pick one: one query."""
    choices = []
    seen: dict[int, int] = {}
    for prompt_id, name, number in (PromptVersion.objects.filter(prompt__project=project)
                                    .order_by("prompt__name", "-number")
                                    .values_list("prompt_id", "prompt__name", "number")):
        seen[prompt_id] = seen.get(prompt_id, 0) + 1
        if seen[prompt_id] <= per_prompt:
            choices.append((f"{prompt_id}:{number}", f"{name} v{number}"))
    return choices
