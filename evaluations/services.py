"""Services: every write evalsite makes goes through a function here (`<entity>_<verb>`,
keyword-only, atomic). Views, the API and management commands only validate and call."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluations.formats import ParsedEvalSet, SourceFile, read_upload
from evaluations.models import EvalCase, EvalSet, EvalSetSource, EvalSetVersion, Project
from evaluations.schemas.evalset import EvalCase as NativeCase

DEFAULT_PROJECT_SLUG = "default"
BULK_BATCH = 1000


@dataclass
class ImportOutcome:
    evalset: EvalSet
    version: EvalSetVersion
    created: bool  # False: the same content was already this version
    format: str
    variant: str
    case_count: int
    warnings: list[str] = field(default_factory=list)

    def describe(self) -> str:
        state = "new version" if self.created else "unchanged: identical to the existing version"
        return (
            f"eval set {self.evalset.eval_set_id!r} ({self.evalset.display_name}), "
            f"version {self.version.number} ({state}), format {self.format} [{self.variant}], "
            f"{self.case_count} cases"
        )


def project_get_or_create_default() -> Project:
    project, _ = Project.objects.get_or_create(slug=DEFAULT_PROJECT_SLUG, defaults={"name": "Default"})
    return project


def evalset_import(
    *,
    project: Project,
    files: Sequence[SourceFile],
    format: str | None = None,
    user: Any = None,
) -> list[ImportOutcome]:
    """Import every eval set in an upload, all or nothing.

    Raises `EvalSetImportError` (from the readers) before anything is written; the writes
    themselves happen in one transaction.
    """
    parsed = read_upload(files, format=format)
    prepared = [_prepare(p) for p in parsed]
    with transaction.atomic():
        return [_store(project=project, prepared=p, user=user) for p in prepared]


@dataclass
class _Prepared:
    parsed: ParsedEvalSet
    cases: list[dict[str, Any]]
    content_hash: str


def _prepare(parsed: ParsedEvalSet) -> _Prepared:
    """Dump the cases once and hash the canonical content (outside the transaction)."""
    digest = hashlib.sha256()
    evalset = parsed.evalset
    header = {
        "eval_set_id": evalset.eval_set_id,
        "name": evalset.name,
        "description": evalset.description,
        "metadata": evalset.metadata,
        "default_config": parsed.default_config.model_dump(mode="json") if parsed.default_config else None,
        "evaluator_config": parsed.evaluator_config,
    }
    digest.update(_canonical(header))
    cases = []
    for case in evalset.eval_cases:
        dumped = case.model_dump(mode="json")
        digest.update(_canonical(dumped))
        cases.append(dumped)
    return _Prepared(parsed=parsed, cases=cases, content_hash=digest.hexdigest())


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _store(*, project: Project, prepared: _Prepared, user: Any) -> ImportOutcome:
    parsed = prepared.parsed
    native = parsed.evalset
    evalset, _ = EvalSet.objects.get_or_create(
        project=project,
        eval_set_id=native.eval_set_id,
        defaults={"name": native.name, "description": native.description},
    )
    # Lock the eval set so concurrent uploads number their versions one after the other.
    evalset = EvalSet.objects.select_for_update().get(pk=evalset.pk)
    existing = evalset.versions.filter(content_hash=prepared.content_hash).first()
    if existing is not None:
        return ImportOutcome(evalset, existing, False, existing.source_format, existing.source_variant,
                             existing.case_count, list(existing.warnings))

    number = (evalset.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    tags = sorted({t for c in native.eval_cases for t in c.tags})
    version = EvalSetVersion.objects.create(
        evalset=evalset,
        number=number,
        content_hash=prepared.content_hash,
        source_format=parsed.format,
        source_variant=parsed.variant,
        source_filename=parsed.source.name[:255],
        name=native.name,
        description=native.description,
        metadata=native.metadata,
        default_config=parsed.default_config.model_dump(mode="json") if parsed.default_config else None,
        evaluator_config=parsed.evaluator_config,
        warnings=parsed.warnings,
        case_count=len(native.eval_cases),
        turn_count=sum(len(c.conversation) for c in native.eval_cases),
        tool_call_count=sum(len(i.expected_tool_trajectory) for c in native.eval_cases for i in c.conversation),
        tags=tags,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    filename, content_type, data = _original(parsed)
    EvalSetSource.objects.create(version=version, filename=filename, content_type=content_type, data=data)

    batch: list[EvalCase] = []
    for position, (case, dumped) in enumerate(zip(native.eval_cases, prepared.cases, strict=True)):
        batch.append(_case_row(version, position, case, dumped))
        if len(batch) >= BULK_BATCH:
            EvalCase.objects.bulk_create(batch)
            batch = []
    if batch:
        EvalCase.objects.bulk_create(batch)

    EvalSet.objects.filter(pk=evalset.pk).update(
        name=native.name or F("name"),
        description=native.description,
        latest_version=version,
        updated_at=timezone.now(),
    )
    evalset.refresh_from_db()
    return ImportOutcome(evalset, version, True, parsed.format, parsed.variant, version.case_count, parsed.warnings)


def _case_row(version: EvalSetVersion, position: int, case: NativeCase, dumped: dict[str, Any]) -> EvalCase:
    first_user = case.conversation[0].user_content.get_text() if case.conversation else ""
    if not first_user and case.conversation_scenario:
        first_user = case.conversation_scenario.starting_prompt or case.conversation_scenario.conversation_plan
    return EvalCase(
        version=version,
        position=position,
        eval_id=case.eval_id,
        name=case.name[:255],
        tags=case.tags,
        tags_text="|" + "|".join(case.tags) + "|" if case.tags else "",
        metadata=dumped["metadata"],
        session_input=dumped["session_input"],
        conversation=dumped["conversation"],
        conversation_scenario=dumped["conversation_scenario"],
        rubrics=dumped["rubrics"],
        criteria=dumped["criteria"],
        turn_count=len(case.conversation),
        tool_call_count=sum(len(i.expected_tool_trajectory) for i in case.conversation),
        search_text=first_user[:2000],
    )


def _original(parsed: ParsedEvalSet) -> tuple[str, str, bytes]:
    """The bytes to keep for download: the file itself, or a zip with its companions."""
    if not parsed.companions_used:
        content_type = "text/csv" if parsed.source.suffix == "csv" else "application/json"
        if parsed.source.suffix == "jsonl":
            content_type = "application/jsonl"
        return parsed.source.basename, content_type, parsed.source.data
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in [parsed.source, *parsed.companions_used]:
            info = zipfile.ZipInfo(f.name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, f.data)
    stem = parsed.source.basename.rsplit(".", 1)[0]
    return f"{stem}.zip", "application/zip", buffer.getvalue()
