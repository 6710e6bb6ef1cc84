"""Page-shaped reads. Each function runs a fixed number of queries and returns plain
dataclasses (or a queryset that already holds everything a template reads), so rendering a
page never queries per row, however many cases a version has."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

from evaluations.models import EvalCase, EvalSet, EvalSetVersion, Project
from evaluations.schemas.evalset import content_text

CASES_PER_PAGE = 50
FIRST_MESSAGE_CHARS = 120
FIRST_MESSAGE_TITLE_CHARS = 600  # the hover text; the case page shows the message whole
SHORT_HASH_CHARS = 12


# --- Access -----------------------------------------------------------------------------------


def evalsets_visible_to(user: Any) -> QuerySet[EvalSet]:
    return EvalSet.objects.visible_to(user)


def versions_visible_to(user: Any) -> QuerySet[EvalSetVersion]:
    return EvalSetVersion.objects.filter(evalset__project__in=Project.objects.visible_to(user))


def cases_visible_to(user: Any) -> QuerySet[EvalCase]:
    return EvalCase.objects.filter(version__evalset__project__in=Project.objects.visible_to(user))


# --- Eval-set list ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalSetRow:
    pk: int
    name: str
    eval_set_id: str
    latest_number: int | None
    case_count: int | None
    source_format: str
    source_variant: str
    updated_at: datetime


def evalset_rows(*, project: Project) -> list[EvalSetRow]:
    evalsets = (
        EvalSet.objects.filter(project=project)
        .select_related("latest_version")
        .only(
            "pk", "name", "eval_set_id", "updated_at",
            "latest_version__number", "latest_version__case_count",
            "latest_version__source_format", "latest_version__source_variant",
        )
        .order_by("-updated_at", "pk")
    )
    rows = []
    for evalset in evalsets:
        latest = evalset.latest_version
        rows.append(
            EvalSetRow(
                pk=evalset.pk,
                name=evalset.display_name,
                eval_set_id=evalset.eval_set_id,
                latest_number=latest.number if latest else None,
                case_count=latest.case_count if latest else None,
                source_format=latest.source_format if latest else "",
                source_variant=latest.source_variant if latest else "",
                updated_at=evalset.updated_at,
            )
        )
    return rows


# --- Eval-set detail --------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionRow:
    pk: int
    number: int
    source_format: str
    source_variant: str
    content_hash: str
    case_count: int
    turn_count: int
    tool_call_count: int
    uploaded_by: str
    created_at: datetime
    source_filename: str
    warnings: list[str]
    tags: list[str]
    how_created: str = "upload"

    @property
    def short_hash(self) -> str:
        return self.content_hash[:SHORT_HASH_CHARS]


@dataclass(frozen=True)
class CaseRow:
    pk: int
    position: int
    eval_id: str
    name: str
    tags: list[str]
    turn_count: int
    tool_call_count: int
    first_message: str  # shortened for the table, ending in "…" when it was cut
    first_message_title: str  # longer, for the hover text


@dataclass(frozen=True)
class EvalSetPage:
    evalset: EvalSet
    versions: list[VersionRow]
    version: VersionRow
    cases: Page  # of CaseRow
    q: str
    tag: str

    @property
    def is_latest(self) -> bool:
        return self.version.number == self.versions[0].number

    @property
    def filtered(self) -> bool:
        return bool(self.q or self.tag)


def evalset_page(
    *, evalset: EvalSet, version_number: int | None, q: str = "", tag: str = "", page: Any = 1
) -> EvalSetPage | None:
    """The eval set's versions and one version's cases, filtered and paginated.

    None when the eval set has no version numbered `version_number`.
    """
    versions = [
        _version_row(v)
        for v in evalset.versions.select_related("created_by")
        .only(
            "pk", "number", "source_format", "source_variant", "content_hash", "case_count", "turn_count",
            "tool_call_count", "created_at", "source_filename", "warnings", "tags", "evalset_id", "how_created",
            "created_by__username",
        )
        .order_by("-number")
    ]
    if not versions:
        return None
    selected: VersionRow | None = versions[0]
    if version_number is not None:
        selected = next((v for v in versions if v.number == version_number), None)
    if selected is None:
        return None

    cases = (
        EvalCase.objects.filter(evalset_id=evalset.pk, valid_from__lte=selected.number, valid_to__gt=selected.number)
        .search(q)
        .tagged(tag)
        .only("pk", "position", "eval_id", "name", "tags", "turn_count", "tool_call_count", "search_text")
        .order_by("position")
    )
    paginated = Paginator(cases, CASES_PER_PAGE).get_page(page)
    paginated.object_list = [_case_row(c) for c in paginated.object_list]  # type: ignore[misc]
    return EvalSetPage(evalset=evalset, versions=versions, version=selected, cases=paginated, q=q, tag=tag)


def _version_row(version: EvalSetVersion) -> VersionRow:
    return VersionRow(
        pk=version.pk,
        number=version.number,
        source_format=version.source_format,
        source_variant=version.source_variant,
        content_hash=version.content_hash,
        case_count=version.case_count,
        turn_count=version.turn_count,
        tool_call_count=version.tool_call_count,
        uploaded_by=version.created_by.username if version.created_by else "",
        created_at=version.created_at,
        source_filename=version.source_filename,
        warnings=[str(w) for w in version.warnings or []],
        tags=[str(t) for t in version.tags or []],
        how_created=version.how_created,
    )


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _case_row(case: EvalCase) -> CaseRow:
    full = " ".join(case.search_text.split())
    short = _shorten(full, FIRST_MESSAGE_CHARS)
    return CaseRow(
        pk=case.pk,
        position=case.position,
        eval_id=case.eval_id,
        name=case.name,
        tags=list(case.tags or []),
        turn_count=case.turn_count,
        tool_call_count=case.tool_call_count,
        first_message=short,
        first_message_title=_shorten(full, FIRST_MESSAGE_TITLE_CHARS),
    )


# --- Case detail ------------------------------------------------------------------------------


def pretty_json(value: Any) -> str:
    """JSON for people: indented, non-ASCII kept, keys sorted (as the import stores them, and
    the same on PostgreSQL, whose jsonb reorders keys). The template escapes it like any text."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True)
class Part:
    kind: str  # "text" or "json"
    text: str


@dataclass(frozen=True)
class MessageView:
    role: str
    parts: list[Part]
    metadata_json: str | None


@dataclass(frozen=True)
class ToolCallView:
    name: str
    args_json: str
    call_id: str | None
    result_json: str | None


@dataclass(frozen=True)
class RubricView:
    name: str
    description: str
    scoring_guide: str
    weight: float


@dataclass(frozen=True)
class TurnView:
    number: int
    invocation_id: str
    user: MessageView | None
    tool_calls: list[ToolCallView]
    intermediate: list[MessageView]
    final: MessageView | None
    rubrics: list[RubricView]
    metadata_json: str | None


@dataclass(frozen=True)
class CriterionView:
    name: str
    config_json: str | None  # None: the evaluator's default criteria apply


@dataclass(frozen=True)
class CasePage:
    case: EvalCase
    evalset: EvalSet
    version: EvalSetVersion
    turns: list[TurnView]
    rubrics: list[RubricView]
    criteria: list[CriterionView]
    metadata_json: str | None
    session_input_json: str | None
    scenario_json: str | None
    position: int  # 1-based, within the version
    previous_pk: int | None
    next_pk: int | None
    tags: list[str] = field(default_factory=list)


def case_page(*, case: EvalCase) -> CasePage:
    """Everything the case page shows; `case` comes with its version and eval set loaded."""
    siblings = EvalCase.objects.in_version(case.version)
    previous_pk = (
        siblings.filter(position__lt=case.position).order_by("-position").values_list("pk", flat=True).first()
    )
    next_pk = siblings.filter(position__gt=case.position).order_by("position").values_list("pk", flat=True).first()
    return CasePage(
        case=case,
        evalset=case.version.evalset,
        version=case.version,
        turns=[_turn(i, inv) for i, inv in enumerate(case.conversation or [], start=1) if isinstance(inv, dict)],
        rubrics=_rubrics(case.rubrics),
        criteria=[
            CriterionView(name=str(name), config_json=None if config is None else pretty_json(config))
            for name, config in (case.criteria or {}).items()
        ],
        metadata_json=pretty_json(case.metadata) if case.metadata else None,
        session_input_json=pretty_json(case.session_input) if case.session_input is not None else None,
        scenario_json=pretty_json(case.conversation_scenario) if case.conversation_scenario is not None else None,
        position=case.position + 1,
        previous_pk=previous_pk,
        next_pk=next_pk,
        tags=[str(t) for t in case.tags or []],
    )


def _turn(number: int, invocation: dict[str, Any]) -> TurnView:
    return TurnView(
        number=number,
        invocation_id=str(invocation.get("invocation_id", "")),
        user=_message(invocation.get("user_content")),
        tool_calls=[_tool_call(c) for c in invocation.get("expected_tool_trajectory") or [] if isinstance(c, dict)],
        intermediate=[
            m for m in (_message(r) for r in invocation.get("expected_intermediate_responses") or []) if m
        ],
        final=_message(invocation.get("expected_final_response")),
        rubrics=_rubrics(invocation.get("rubrics")),
        metadata_json=pretty_json(invocation["metadata"]) if invocation.get("metadata") else None,
    )


def _message(message: Any) -> MessageView | None:
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    parts: list[Part] = []
    if isinstance(content, str):
        parts.append(Part("text", content))
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(Part("text", part["text"]))
            elif isinstance(part, dict) and "json" in part:
                parts.append(Part("json", pretty_json(part["json"])))
            else:  # a part type evalsite does not know: show it whole rather than drop it
                parts.append(Part("json", pretty_json(part)))
    elif content is not None:
        parts.append(Part("json", pretty_json(content)))
    metadata = message.get("metadata")
    return MessageView(
        role=str(message.get("role", "")),
        parts=parts,
        metadata_json=pretty_json(metadata) if metadata else None,
    )


def _tool_call(call: dict[str, Any]) -> ToolCallView:
    result = call.get("result")
    return ToolCallView(
        name=str(call.get("name", "")),
        args_json=pretty_json(call.get("args") or {}),
        call_id=call.get("call_id"),
        result_json=None if result is None else pretty_json(result),
    )


def _rubrics(rubrics: Any) -> list[RubricView]:
    return [
        RubricView(
            name=str(r.get("name", "")),
            description=str(r.get("description", "")),
            scoring_guide=str(r.get("scoring_guide", "")),
            weight=float(r.get("weight", 1.0)),
        )
        for r in rubrics or []
        if isinstance(r, dict)
    ]


# --- The outputs skeleton: what an uploaded-outputs run needs, with the blanks to fill in ----

SKELETON_CHUNK = 500


def outputs_skeleton_lines(version: EvalSetVersion, *, chunk_cases: int = SKELETON_CHUNK) -> Iterator[str]:
    """The version's outputs file to fill in, as JSON lines: one per case, with its eval id,
    iteration 0, and per turn its invocation id, what the user says (`metadata.user`, for
    whoever fills it in: evaluation ignores it) and an empty `final_response` and
    `tool_calls`. It uploads as it is (every case then fails: nothing was answered), so a
    script only has to fill in the blanks. Streamed: a 100,000-case set never sits in memory."""
    cases = (EvalCase.objects.in_version(version).order_by("position").only("eval_id", "conversation", "position")
             .iterator(chunk_size=chunk_cases))
    lines: list[str] = []
    for case in cases:
        turns = []
        for invocation in case.conversation or []:
            user = (invocation or {}).get("user_content") or {}
            turns.append({"invocation_id": invocation.get("invocation_id"), "final_response": "", "tool_calls": [],
                          "metadata": {"user": content_text(user.get("content") or "")}})
        lines.append(json.dumps({"eval_id": case.eval_id, "iteration": 0, "turns": turns}, ensure_ascii=False)
                     + "\n")
        if len(lines) >= chunk_cases:
            yield "".join(lines)
            lines = []
    if lines:
        yield "".join(lines)


def outputs_skeleton_filename(version: EvalSetVersion) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in version.evalset.eval_set_id)[:100] or "evalset"
    return f"{name}-v{version.number}.outputs.jsonl"
