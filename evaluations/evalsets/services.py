"""Services: every write evalsite makes goes through a function here (`<entity>_<verb>`,
keyword-only, atomic). Views, the API and management commands only validate and call."""

from __future__ import annotations

import hashlib
import io
import marshal
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluations.bulk import insert_rows
from evaluations.interop import ParsedEvalSet, SourceFile, read_upload
from evaluations.interop.base import CaseSink, Problem, gc_paused, schema_error
from evaluations.interop.limits import current_expansion
from evaluations.jsonschemas import criteria_schema_problems
from evaluations.models import OPEN_VERSION, EvalCase, EvalSet, EvalSetSource, EvalSetVersion, Project
from evaluations.safejson import canonical_fast, compact_encoder
from evaluations.schemas.evalset import EvalCase as NativeCase
from evaluations.schemas.evalset import content_text

DEFAULT_PROJECT_SLUG = "default"
BULK_BATCH = 1000
# What an upload's rows may take in memory before they go to a temporary file.
ROWS_IN_MEMORY = 1 << 20


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
    # Each file's bytes are compressed for keeping on a second thread while this one parses
    # them (zlib lets go of the GIL): the copy kept for download costs no wall time.
    with gc_paused(), ThreadPoolExecutor(max_workers=1) as pool:
        compressed = {id(f.data): (f.data, pool.submit(EvalSetSource.compress, f.data)) for f in files
                      if not (f.suffix == "zip" or f.data[:4] == b"PK\x03\x04")}
        parsed = read_upload(files, format=format, sink_factory=_CaseRows)
        _check_schemas(parsed)
        with transaction.atomic():
            return [_store(project=project, parsed=p, user=user, compressed=compressed) for p in parsed]


def _check_schemas(parsed: Sequence[ParsedEvalSet]) -> None:
    """An eval set's own config with a JSON Schema that refers outside itself (a URL, a file)
    or is too big to run is refused, as a run's config is: nothing is written."""
    problems = []
    for p in parsed:
        if p.default_config is not None:
            # The config came with the eval set (its companion files, else the file itself).
            where = ", ".join(c.name for c in p.companions_used) or p.source.name
            problems += [Problem(f"the evaluation config's {message}", file=where)
                         for message in criteria_schema_problems(p.default_config.criteria)]
    if problems:
        raise schema_error(problems)


class _SpooledRows:
    """The rows of an upload, from the moment each case is read until they are inserted, kept
    a batch at a time (`BULK_BATCH`, as they are inserted) in a temporary file: they take two
    to three times the file, and held in memory they were most of an import's peak. The file
    stays in memory up to ROWS_IN_MEMORY (a small upload never touches the disk)."""

    def __init__(self) -> None:
        self._file = tempfile.SpooledTemporaryFile(max_size=ROWS_IN_MEMORY)  # noqa: SIM115 - closed by `batches`
        self._batch: list[tuple[Any, ...]] = []
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def append(self, row: tuple[Any, ...]) -> None:
        self._batch.append(row)
        self._count += 1
        if len(self._batch) >= BULK_BATCH:
            marshal.dump(self._batch, self._file)
            self._batch = []

    def batches(self) -> Iterator[list[tuple[Any, ...]]]:
        """The rows, BULK_BATCH at a time, in order; once."""
        written = self._count - len(self._batch)
        self._file.seek(0)
        while written > 0:
            batch: list[tuple[Any, ...]] = marshal.load(self._file)  # noqa: S302 - what `append` wrote
            written -= len(batch)
            yield batch
        if self._batch:
            yield self._batch
        self._batch = []
        self._file.close()


class _CaseRows(CaseSink):
    """Turns each case into an unsaved row the moment the reader hands it over, hashing the
    canonical content on the way; the pydantic case is dropped right after."""

    def __init__(self) -> None:
        super().__init__()
        self.rows = _SpooledRows()  # _CASE_COLUMNS and the case's content hash
        self.digest = hashlib.sha256()
        self.tags: set[str] = set()
        self.turns = 0
        self.tool_calls = 0
        self.budget = current_expansion()  # the upload's: made by read_upload while it reads

    takes_dumps = True  # rows are made from the dump

    def keep(self, position: int, case: NativeCase, dumped: dict[str, Any] | None = None) -> None:
        self.keep_dump(position, case.model_dump(mode="json") if dumped is None else dumped)

    def keep_dump(self, position: int, dumped: dict[str, Any], *, exact: bool = False) -> None:
        row = _case_row(position, dumped, canonical_fast if exact else _encode)
        # Every row is kept until the upload is read whole: what they hold is counted.
        self.budget.store(sum(len(v) for v in row if isinstance(v, str)), file=self.source_name,
                          case=dumped["eval_id"])
        # The whole name (the row's column keeps 255 characters of it), as curation hashes it.
        case_hash = case_content_hash(dumped["eval_id"], dumped["name"],
                                      row[_JSON_AT:_JSON_AT + len(_CASE_JSON_COLUMNS)], row[_DESCRIPTION_AT])
        self.digest.update(case_hash.encode())
        self.rows.append((*row, case_hash))
        self.tags.update(dumped["tags"])
        self.turns += row[-2]
        self.tool_calls += row[-1]


def case_content_hash(eval_id: str, name: str, json_texts: Sequence[str], description: str = "") -> str:
    """sha256 of one case's canonical content: its id, name (and description, when it has
    one: cases without one hash as they did before it existed) and JSON columns' texts (in
    `_CASE_JSON_COLUMNS` order). A version's hash is built from these, so a save of edits
    hashes only the cases it changes."""
    digest = hashlib.sha256(_canonical([eval_id, name, description] if description else [eval_id, name]))
    # One text encoded once: the same bytes as a column at a time.
    digest.update("".join([f"\0{column}\0{text}" for column, text in zip(_CASE_JSON_COLUMNS, json_texts,
                                                                          strict=True)]).encode())
    return digest.hexdigest()


def version_content_hash(*, eval_set_id: str, name: str, description: str, metadata: Any,
                         default_config: Any, evaluator_config: Any, cases_digest: str) -> str:
    """sha256 over the canonical native content: the header, and the digest of the cases'
    own hashes in order. The same eval set in another layout, key order or even another
    format is the same content."""
    header = {
        "eval_set_id": eval_set_id,
        "name": name,
        "description": description,
        "metadata": metadata,
        "default_config": default_config,
        "evaluator_config": evaluator_config,
        "cases": cases_digest,
    }
    return hashlib.sha256(_canonical(header)).hexdigest()


def _content_hash(parsed: ParsedEvalSet, rows: _CaseRows) -> str:
    evalset = parsed.evalset
    return version_content_hash(
        eval_set_id=evalset.eval_set_id, name=evalset.name, description=evalset.description,
        metadata=evalset.metadata,
        default_config=parsed.default_config.model_dump(mode="json") if parsed.default_config else None,
        evaluator_config=parsed.evaluator_config, cases_digest=rows.digest.hexdigest())


# The canonical text: sorted keys, compact, not ASCII-escaped (what migration 0010 hashed).
_encode = compact_encoder(sort_keys=True)


def _canonical(value: Any) -> bytes:
    return _encode(value).encode()


def _store(*, project: Project, parsed: ParsedEvalSet, user: Any,
           compressed: dict[int, tuple[bytes, Future[bytes]]]) -> ImportOutcome:
    native = parsed.evalset
    assert isinstance(parsed.sink, _CaseRows)
    sink = parsed.sink
    content_hash = _content_hash(parsed, sink)
    evalset, _ = EvalSet.objects.get_or_create(
        project=project,
        eval_set_id=native.eval_set_id,
        defaults={"name": native.name, "description": native.description},
    )
    # Lock the eval set so concurrent uploads number their versions one after the other.
    evalset = EvalSet.objects.select_for_update().get(pk=evalset.pk)
    existing = evalset.versions.filter(content_hash=content_hash).order_by("-number").first()
    if existing is not None:
        return ImportOutcome(evalset, existing, False, existing.source_format, existing.source_variant,
                             existing.case_count, list(existing.warnings))


    number = (evalset.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    version = EvalSetVersion.objects.create(
        evalset=evalset,
        number=number,
        content_hash=content_hash,
        source_format=parsed.format,
        source_variant=parsed.variant,
        source_filename=parsed.source.name[:255],
        name=native.name,
        description=native.description,
        metadata=native.metadata,
        default_config=parsed.default_config.model_dump(mode="json") if parsed.default_config else None,
        default_criteria_order=list(parsed.default_config.criteria) if parsed.default_config else [],
        evaluator_config=parsed.evaluator_config,
        warnings=parsed.warnings,
        case_count=sink.count,
        turn_count=sink.turns,
        tool_call_count=sink.tool_calls,
        tags=sorted(sink.tags),
        created_by=user if user is not None and user.is_authenticated else None,
    )
    filename, content_type, data = _original(parsed)
    early = compressed.get(id(data))
    packed = early[1].result() if early is not None and early[0] is data else EvalSetSource.compress(data)
    EvalSetSource.objects.create(version=version, filename=filename, content_type=content_type, size=len(data),
                                 data=packed)

    # The cases of the version before end where this one begins.
    EvalCase.objects.filter(evalset_id=evalset.pk, valid_to=OPEN_VERSION).update(valid_to=number)
    head = (version.pk, evalset.pk, number, OPEN_VERSION)
    for rows in sink.rows.batches():
        batch = [(*head, *row) for row in rows]
        del rows
        insert_rows(EvalCase, ["version_id", "evalset_id", "valid_from", "valid_to", *_CASE_COLUMNS, "content_hash"],
                    batch, json_columns=set(_CASE_JSON_COLUMNS))

    EvalSet.objects.filter(pk=evalset.pk).update(
        name=native.name or F("name"),
        description=native.description,
        latest_version=version,
        updated_at=timezone.now(),
    )
    evalset.refresh_from_db()
    return ImportOutcome(evalset, version, True, parsed.format, parsed.variant, sink.count, parsed.warnings)


# The native EvalCase fields stored as JSON columns, in hashing order.
_CASE_JSON_COLUMNS = ("tags", "metadata", "session_input", "conversation", "conversation_scenario", "rubrics",
                      "criteria")
# The columns of a case row, in the order `_case_row` gives them (the version goes first).
_CASE_COLUMNS = ("position", "eval_id", "name", "description", "tags_text", *_CASE_JSON_COLUMNS, "search_text",
                 "turn_count", "tool_call_count")
_DESCRIPTION_AT = _CASE_COLUMNS.index("description")
_JSON_AT = _CASE_COLUMNS.index(_CASE_JSON_COLUMNS[0])
# The JSON text of the fields most cases leave empty, without encoding them each time.
_EMPTY_TEXT = {"[]": "[]", "{}": "{}", "None": "null"}


def _case_row(position: int, dumped: dict[str, Any],
              encode: Callable[[Any], str] | None = None) -> tuple[Any, ...]:
    """A row (see `_CASE_COLUMNS`) from a case's `model_dump(mode="json")`, whose JSON
    columns hold canonical text (sorted keys, compact), written once and used both for the
    content hash and for the insert. `encode`: `safejson.canonical_fast` for a dump with no
    NaN or infinity (the same text, faster)."""
    if encode is None:
        encode = _encode
    conversation = dumped["conversation"]
    first_user = content_text(conversation[0]["user_content"]["content"]) if conversation else ""
    scenario = dumped["conversation_scenario"]
    if not first_user and scenario:
        first_user = scenario["starting_prompt"] or scenario["conversation_plan"]
    texts = [(None if dumped[name] else _EMPTY_TEXT.get(repr(dumped[name]))) or encode(dumped[name])
             for name in _CASE_JSON_COLUMNS]
    tags = dumped["tags"]
    return (position, dumped["eval_id"], dumped["name"][:255], dumped.get("description", ""),
            "|" + "|".join(tags) + "|" if tags else "", *texts, first_user[:2000], len(conversation),
            sum(len(i["expected_tool_trajectory"]) for i in conversation))


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


NAME_MAX = 255  # EvalSet.name


class RenameError(ValueError):
    """A name that cannot be an eval set's: the message says why, for the `name` field."""


def evalset_rename(*, evalset: EvalSet, name: str) -> str | None:
    """Give the eval set a name people read (its `eval_set_id`, which uploads match on, and
    its versions stay as they are). Returns the name it had, or None when it already has this
    one; raises RenameError for a blank, over-long or control-character name, writing nothing.
    The caller records the activity event (`audit.record_rename`) in the same transaction."""
    cleaned = " ".join(str(name).split())
    if not cleaned:
        raise RenameError("give a name")
    if len(cleaned) > NAME_MAX:
        raise RenameError(f"at most {NAME_MAX} characters ({len(cleaned)} given)")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in cleaned):
        raise RenameError("no control characters")
    with transaction.atomic():
        locked = EvalSet.objects.select_for_update().get(pk=evalset.pk)
        before = locked.display_name
        if locked.name == cleaned:
            return None
        locked.name = cleaned
        locked.updated_at = timezone.now()
        locked.save(update_fields=["name", "updated_at"])
    evalset.name, evalset.updated_at = locked.name, locked.updated_at
    return before
