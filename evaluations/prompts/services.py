"""Saving prompts: a new prompt with its first version, and a new version of a prompt.

A version is immutable and content-hashed: saving the text the latest version already has
makes no version (the answer says so). Its templates are checked first; a template that
would not render is refused with the line of each problem, and nothing is written. The
caller records the activity event (`audit.audit_record`, verb `prompt.saved`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluations.models import Project, Prompt, PromptVersion
from evaluations.schemas.model_target import MAX_PROMPT_CHARS
from evaluations.schemas.prompt_template import template_problems
from evaluations.schemas.text import without_nul


class PromptError(ValueError):
    """A prompt that cannot be saved; `problems` maps a field to what is wrong with it."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{field}: {', '.join(msgs)}" for field, msgs in problems.items()))
        self.problems = problems


@dataclass(frozen=True)
class Saved:
    prompt: Prompt
    version: PromptVersion
    created: bool  # False: the text was the latest version's already


def content_hash(system: str, user: str) -> str:
    return hashlib.sha256(json.dumps([system, user], ensure_ascii=False).encode()).hexdigest()


def _checked(system: str, user: str, note: str) -> tuple[str, str, str]:
    system, user, note = without_nul(system), without_nul(user), without_nul(note)
    problems: dict[str, list[str]] = {}
    for field, text in (("system", system), ("user", user)):
        if len(text) > MAX_PROMPT_CHARS:
            problems.setdefault(field, []).append(f"at most {MAX_PROMPT_CHARS:,} characters")
        found = template_problems(text)
        if found:
            problems.setdefault(field, []).extend(found)
    if not user.strip():
        problems.setdefault("user", []).append("the user template is empty: use {{input}} for the case's message")
    if len(note) > 500:
        problems.setdefault("note", []).append("at most 500 characters")
    if problems:
        raise PromptError(problems)
    return system, user, note


def prompt_create(*, project: Project, name: str, system: str = "", user: str = "{{input}}", description: str = "",
                  note: str = "", actor: Any = None) -> Saved:
    name = without_nul(name).strip()
    if not name or len(name) > 200:
        raise PromptError({"name": ["a name of 1 to 200 characters"]})
    system, user, note = _checked(system, user, note)
    try:
        with transaction.atomic():
            prompt = Prompt.objects.create(project=project, name=name, description=without_nul(description)[:5000])
            version = PromptVersion.objects.create(prompt=prompt, number=1, system=system, user=user,
                                                   content_hash=content_hash(system, user), note=note,
                                                   created_by=_user(actor))
            Prompt.objects.filter(pk=prompt.pk).update(latest_version=version)
    except IntegrityError:
        raise PromptError({"name": [f"the project already has a prompt named {name!r}"]}) from None
    prompt.latest_version = version
    return Saved(prompt, version, True)


def prompt_version_save(*, prompt: Prompt, system: str, user: str, note: str = "", actor: Any = None,
                        based_on: int | None = None) -> Saved:
    """A new version when the text differs from the latest's. `based_on`: the version number
    the editor began from; when it is no longer the latest, the save is refused (another save
    came first), as eval-set edits are."""
    system, user, note = _checked(system, user, note)
    digest = content_hash(system, user)
    with transaction.atomic():
        locked = Prompt.objects.select_for_update().get(pk=prompt.pk)
        latest = (PromptVersion.objects.filter(pk=locked.latest_version_id).first()
                  if locked.latest_version_id is not None else None)
        if based_on is not None and latest is not None and latest.number != based_on:
            raise PromptError({"based_on": [f"version {latest.number} was saved since version {based_on}: "
                                            "open the latest and edit that"]})
        if latest is not None and latest.content_hash == digest:
            return Saved(locked, latest, False)
        version = PromptVersion.objects.create(prompt=locked, number=(latest.number if latest else 0) + 1,
                                               system=system, user=user, content_hash=digest, note=note,
                                               created_by=_user(actor))
        Prompt.objects.filter(pk=locked.pk).update(latest_version=version, updated_at=timezone.now())
        locked.latest_version = version
    return Saved(locked, version, True)


def _user(actor: Any) -> Any:
    return actor if actor is not None and getattr(actor, "is_authenticated", False) else None
