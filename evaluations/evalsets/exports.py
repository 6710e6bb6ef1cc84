"""A version in the format of the tool its eval set came from: ADK, UiPath or DeepEval.

An uploaded version can always be downloaded as its original bytes, and any version as native
`.evalset.json`. This module writes the others: a version of an eval set whose upload came from
ADK, UiPath or DeepEval (edited or not) as that tool's own file, so the eval set can go back
to the tool it came from.

Exact or refused: each writer inverts its reader (`evaluations.interop`), and every
export is read back with that reader before it is handed out. The header and every case must
come back as the stored native content (the same content hash, so re-uploading the download
finds the same version); when something cannot be said in the tool's format (tags in ADK or
UiPath, a tool call's id in DeepEval, ...) the export raises `ExportLossError` listing each case
and field that would be lost, instead of dropping it silently.

The tool is the `source_format` of the newest upload at or before the version (an edit keeps
the header of the version it began from, so that is where the format-specific header came from).
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evaluations.evalsets.curation import CASE_FIELDS, case_native
from evaluations.interop import read_upload, writers
from evaluations.interop.base import EvalSetImportError, SourceFile
from evaluations.interop.writing import Header, Loss
from evaluations.models import EvalCase, EvalSetVersion

# The tools evalsite writes eval sets for: each reader that has a writer beside it.
TOOL_FORMATS = tuple(w.name for w in writers())
TOOL_LABELS = {w.name: w.label for w in writers()}
MAX_REPORTED_LOSSES = 50


class ExportUnavailable(Exception):
    """The version's eval set did not come from this tool (or the format is unknown)."""


class ExportLossError(Exception):
    """The export would lose content; `losses` says which cases and fields."""

    def __init__(self, fmt: str, losses: Sequence[Loss], total: int | None = None) -> None:
        self.format = fmt
        self.total = total if total is not None else len(losses)
        self.losses = list(losses)[:MAX_REPORTED_LOSSES]
        cases = sorted({loss.case for loss in losses if loss.case is not None})
        self.cases = cases
        super().__init__(
            f"This version cannot be written as {TOOL_LABELS.get(fmt, fmt)} without losing content: "
            f"{self.total} field(s)" + (f" in {len(cases)} case(s)" if cases else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": "export_loses_content",
            "format": self.format,
            "message": str(self),
            "losses": [loss.as_dict() for loss in self.losses],
            "loss_count": self.total,
        }


@dataclass
class ToolExport:
    filename: str
    content_type: str
    data: bytes


def origin(version: EvalSetVersion) -> tuple[str, str] | None:
    """(tool, variant) of the upload the version's header comes from, when that is a tool
    this module writes; None for a native or plain eval set."""
    if version.how_created == EvalSetVersion.How.UPLOAD:
        found: tuple[str, str] | None = (version.source_format, version.source_variant)
    else:
        found = (
            EvalSetVersion.objects.filter(
                evalset_id=version.evalset_id, number__lt=version.number, how_created=EvalSetVersion.How.UPLOAD
            )
            .order_by("-number")
            .values_list("source_format", "source_variant")
            .first()
        )
    if found is None or found[0] not in TOOL_FORMATS:
        return None
    return found


def export_formats(version: EvalSetVersion) -> list[str]:
    """The formats a version downloads in: always native, plus its tool's when it has one."""
    found = origin(version)
    return ["native", found[0]] if found else ["native"]


def tool_formats(evalset_id: int, versions: Iterable[tuple[int, str, str]] | None = None) -> dict[int, str]:
    """{version number: its tool's format} for every version of an eval set that has one.
    `versions` ((number, how_created, source_format) of them all) saves the query when the
    page has them already."""
    if versions is None:
        versions = EvalSetVersion.objects.filter(evalset_id=evalset_id).values_list(
            "number", "how_created", "source_format"
        )
    out: dict[int, str] = {}
    current: str | None = None
    for number, how, fmt in sorted(versions):
        if how == EvalSetVersion.How.UPLOAD:
            current = fmt if fmt in TOOL_FORMATS else None
        if current:
            out[number] = current
    return out


def tool_export(version: EvalSetVersion, fmt: str) -> ToolExport:
    """The version as `fmt` (adk, uipath, deepeval), read back and checked; raises
    `ExportUnavailable` or `ExportLossError`."""
    found = origin(version)
    if fmt not in TOOL_FORMATS:
        raise ExportUnavailable(f"unknown format {fmt!r}: one of native, {', '.join(TOOL_FORMATS)}")
    if found is None or found[0] != fmt:
        where = f"{TOOL_LABELS[found[0]]}" if found else "a native or plain file"
        raise ExportUnavailable(
            f"this eval set came from {where}, not {TOOL_LABELS[fmt]}: "
            f"download it as native .evalset.json or in its own format"
        )
    header = _header(version)
    rows = (
        EvalCase.objects.in_version(version)
        .order_by("position")
        .only(*CASE_FIELDS, "position")
        .iterator(chunk_size=500)
    )
    # The stored JSON is the native model's dump (all fields, defaults filled): used as it is.
    cases = [case_native(row) for row in rows]
    losses: list[Loss] = []
    files = next(w for w in writers() if w.name == fmt).write(header, cases, found[1], losses)
    if not losses:
        losses = _check(fmt, header, cases, files)
    if losses:
        raise ExportLossError(fmt, losses)
    return _package(files)


# --- Header ------------------------------------------------------------------------------------


def _header(version: EvalSetVersion) -> Header:
    return Header(
        eval_set_id=version.evalset.eval_set_id,
        name=version.name,
        description=version.description,
        metadata=dict(version.metadata or {}),
        default_config=version.default_config,
        evaluator_config=version.evaluator_config,
    )


def _package(files: list[SourceFile]) -> ToolExport:
    if len(files) == 1:
        return ToolExport(files[0].basename, "application/json", files[0].data)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            info = zipfile.ZipInfo(f.name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, f.data)
    return ToolExport(files[0].name.split("/", 1)[0] + ".zip", "application/zip", buffer.getvalue())


# --- Checking by reading back -------------------------------------------------------------------


def _check(fmt: str, header: Header, cases: list[dict[str, Any]], files: list[SourceFile]) -> list[Loss]:
    """Read the export back with the tool's reader; every difference from the stored content
    is a loss, with its path."""
    try:
        parsed = read_upload([SourceFile(f.name, f.data) for f in files], format=fmt)
    except EvalSetImportError as exc:
        return [Loss(p.case, p.path or "", f"the export does not read back: {p.message}") for p in exc.problems]
    if len(parsed) != 1:  # pragma: no cover - one main file is written
        return [Loss(None, "", f"the export reads back as {len(parsed)} eval sets")]
    back = parsed[0]
    losses: list[Loss] = []
    evalset = back.evalset
    for name, mine, theirs in (
        ("eval_set_id", header.eval_set_id, evalset.eval_set_id),
        ("name", header.name, evalset.name),
        ("description", header.description, evalset.description),
        ("metadata", header.metadata, evalset.metadata),
        (
            "default_config",
            header.default_config,
            back.default_config.model_dump(mode="json") if back.default_config else None,
        ),
        ("evaluator_config", header.evaluator_config, back.evaluator_config),
    ):
        losses += [Loss(None, path, message) for path, message in _differences(name, _plain(mine), _plain(theirs))]
    returned = evalset.eval_cases or (back.sink.cases if back.sink is not None else [])
    if [c.eval_id for c in returned] != [c["eval_id"] for c in cases]:
        ids = {c.eval_id for c in returned}
        missing = [c["eval_id"] for c in cases if c["eval_id"] not in ids]
        for eval_id in missing:
            losses.append(Loss(eval_id, "eval_id", "the case's id cannot be written (it comes back as another)"))
        if not missing:
            losses.append(Loss(None, "eval_cases", "the cases come back in another order"))
        return losses
    for mine_case, their_case in zip(cases, returned, strict=True):
        for path, message in _differences("", mine_case, their_case.model_dump(mode="json")):
            losses.append(Loss(mine_case["eval_id"], path, message))
    return losses


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value)) if value is not None else None


def _differences(path: str, mine: Any, theirs: Any) -> Iterable[tuple[str, str]]:
    """(path, what happens to it) for each leaf where the read-back differs."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in [*mine, *[k for k in theirs if k not in mine]]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in theirs:
                yield sub, "not expressible in this format (it would be dropped)"
            elif key not in mine:
                yield sub, "would be added on re-import"
            else:
                yield from _differences(sub, mine[key], theirs[key])
        return
    if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
        for index, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            yield from _differences(f"{path}[{index}]", a, b)
        return
    if mine != theirs:
        yield path or "(value)", f"would change from {_short(mine)} to {_short(theirs)}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
