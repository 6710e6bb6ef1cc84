"""Uploads: files gathered, formats detected, eval sets parsed into the native `EvalSet`.

`read_upload()` is the one entry point: it takes the uploaded files (a single file, several,
a zip, or a folder's contents), finds the eval set(s) among them, picks the reader by
detection (or the one named by `format`), and returns native eval sets. Nothing here writes.
"""

from __future__ import annotations

import importlib
import posixpath
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from io import BytesIO
from pathlib import Path

from django.conf import settings

from evaluations.interop.base import (
    CaseSink,
    EvalSetFormat,
    EvalSetImportError,
    ParsedEvalSet,
    Problem,
    SourceFile,
)
from evaluations.interop.limits import Expansion, current_expansion, expansion
from evaluations.interop.writing import EvalSetWriter
from evaluations.schemas.text import nul_free

# Detection order matters only where two readers could both accept a file: the more
# specific format goes first.
READER_MODULES = [
    "evaluations.interop.agentflow.evalset",
    "evaluations.interop.adk.evalset",
    "evaluations.interop.uipath.evalset",
    "evaluations.interop.deepeval.evalset",
    "evaluations.interop.inspect.evalset",
    "evaluations.interop.promptfoo.evalset",
    "evaluations.interop.plain.evalset",
]

# The writers that invert a reader (a version exported in its tool's own format), by the
# reader's name; `evalsets/exports.py` reads every export back with that reader.
WRITER_MODULES = [
    "evaluations.interop.adk.export",
    "evaluations.interop.uipath.export",
    "evaluations.interop.deepeval.export",
    "evaluations.interop.inspect.export",
    "evaluations.interop.promptfoo.export",
]

DATA_SUFFIXES = {"json", "jsonl", "csv", "eval", "yaml", "yml"}
# Data files that are zips themselves, read whole by their reader (Inspect AI's eval logs).
ZIPPED_DATA_SUFFIXES = {"eval"}
MAX_ZIP_MEMBERS = 5000


def readers() -> list[EvalSetFormat]:
    return [importlib.import_module(path).reader for path in READER_MODULES]


def writers() -> list[EvalSetWriter]:
    return [importlib.import_module(path).writer for path in WRITER_MODULES]


def reader_names() -> list[str]:
    return [r.name for r in readers()]


def get_reader(name: str) -> EvalSetFormat:
    for reader in readers():
        if reader.name == name:
            return reader
    raise EvalSetImportError(
        "unknown_format", f"unknown format {name!r}: choose one of {', '.join(reader_names())}"
    )


# --- Gathering files ------------------------------------------------------------------------


def max_upload_bytes() -> int:
    return int(settings.EVALSITE_MAX_UPLOAD_BYTES)


def check_size(name: str, size: int) -> None:
    limit = max_upload_bytes()
    if size > limit:
        raise EvalSetImportError(
            "too_large",
            [Problem(f"the file is {size:,} bytes, over the upload limit of {limit:,} bytes", file=name)],
        )


def _safe_member_name(name: str) -> str | None:
    """The member's normalised relative path, or None if it would escape the folder."""
    if name.startswith(("/", "\\")) or "\\" in name or (len(name) > 1 and name[1] == ":"):
        return None
    norm = posixpath.normpath(name)
    if norm.startswith("../") or norm == ".." or posixpath.isabs(norm):
        return None
    return norm


def expand_zip(archive: SourceFile) -> list[SourceFile]:
    """The data files inside a zip, refusing archives that would write outside their folder,
    hold links, or unpack past what an upload may unpack to (a zip bomb): the sizes the
    directory claims are counted before anything is inflated, and no entry is read past its
    claim."""
    try:
        zf = zipfile.ZipFile(BytesIO(archive.data))
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError):
        raise EvalSetImportError("invalid_zip", [Problem("not a valid zip archive", file=archive.name)]) from None
    members = zf.infolist()
    if len(members) > MAX_ZIP_MEMBERS:
        raise EvalSetImportError(
            "invalid_zip",
            [Problem(f"the zip holds {len(members)} entries (at most {MAX_ZIP_MEMBERS})", file=archive.name)],
        )
    unsafe = []
    for info in members:
        is_link = (info.external_attr >> 16) & 0o170000 == 0o120000
        if _safe_member_name(info.filename) is None or is_link:
            unsafe.append(info.filename)
    if unsafe:
        raise EvalSetImportError(
            "unsafe_zip",
            [
                Problem(
                    f"zip entry {name!r} points outside the archive's folder (absolute path, '..' or a link)",
                    file=archive.name,
                )
                for name in unsafe
            ],
        )
    wanted: list[tuple[str, zipfile.ZipInfo]] = []
    for info in members:
        name = _safe_member_name(info.filename)
        assert name is not None
        base = name.rsplit("/", 1)[-1]
        if info.is_dir() or base.startswith(".") or name.startswith("__MACOSX/"):
            continue
        if base.rsplit(".", 1)[-1].lower() not in DATA_SUFFIXES:
            continue
        wanted.append((name, info))
    current_expansion().unpack(sum(info.file_size for _, info in wanted), file=archive.name,
                               what=f"the zip's {len(wanted):,} data files inflate" if len(wanted) != 1
                               else "the zip's data file inflates")
    return [SourceFile(name, _read_member(zf, info, f"{archive.name}/{name}")) for name, info in wanted]


ZIP_READ_CHUNK = 1 << 20


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    """One entry's bytes, inflated a chunk at a time and never past the size its header
    claims: a header that lies (claims 1 KB, inflates to gigabytes) costs one chunk of memory,
    not the whole inflated entry. The claimed sizes were already held to the upload limit."""
    chunks: list[bytes] = []
    read = 0
    try:
        with zf.open(info) as entry:
            while True:
                chunk = entry.read(min(ZIP_READ_CHUNK, info.file_size - read + 1))
                if not chunk:
                    break
                read += len(chunk)
                if read > info.file_size:
                    raise EvalSetImportError("invalid_zip", [Problem(
                        f"the entry inflates past the {info.file_size:,} bytes its header claims "
                        "(a damaged or forged zip)", file=where)])
                chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
        # A bad CRC, a truncated stream, an encrypted entry or an unsupported compression.
        raise EvalSetImportError("invalid_zip", [Problem(f"the entry cannot be read: {exc}", file=where)]) from None
    if read != info.file_size:
        raise EvalSetImportError("invalid_zip", [Problem(
            f"the entry holds {read:,} bytes, not the {info.file_size:,} its header claims", file=where)])
    return b"".join(chunks)


def files_from_paths(paths: Sequence[str | Path]) -> list[SourceFile]:
    """Files for the CLI: each path a file (zip included) or a folder read recursively."""
    out: list[SourceFile] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            root = path.resolve()
            for child in sorted(root.rglob("*")):
                if child.is_symlink() or not child.is_file():
                    continue
                rel = child.relative_to(root).as_posix()
                if any(part.startswith(".") for part in rel.split("/")):
                    continue
                if child.suffix.lower().lstrip(".") not in DATA_SUFFIXES:
                    continue
                check_size(rel, child.stat().st_size)
                out.append(SourceFile(rel, child.read_bytes()))
        elif path.is_file():
            check_size(path.name, path.stat().st_size)
            out.append(SourceFile(path.name, path.read_bytes()))
        else:
            raise EvalSetImportError("not_found", [Problem("no such file or folder", file=str(raw))])
    return out


def expand(files: Sequence[SourceFile]) -> list[SourceFile]:
    out: list[SourceFile] = []
    for f in files:
        check_size(f.name, len(f.data))
        if f.suffix in ZIPPED_DATA_SUFFIXES:
            out.append(f)
        elif f.suffix == "zip" or f.data[:4] == b"PK\x03\x04":
            out.extend(expand_zip(f))
        else:
            out.append(f)
    return out


# --- Detection and parsing ------------------------------------------------------------------


def detect(file: SourceFile, candidates: Sequence[EvalSetFormat]) -> tuple[EvalSetFormat | None, list[Problem]]:
    refusals: list[Problem] = []
    for reader in candidates:
        why = reader.sniff(file)
        if why is None:
            return reader, []
        refusals.append(Problem(f"not {reader.label}: {why}", file=file.name))
    return None, refusals


def read_upload(
    files: Sequence[SourceFile],
    *,
    format: str | None = None,
    sink_factory: Callable[[], CaseSink] = CaseSink,
) -> list[ParsedEvalSet]:
    """Every eval set in the upload, parsed into the native model.

    Each eval set's cases go to a fresh sink from `sink_factory`; with the default sink they
    end up in `evalset.eval_cases`. Raises EvalSetImportError when anything is wrong; an
    upload is all or nothing. What the upload unpacks and expands to is counted against its
    limits (`interop.base.Expansion`) as it is read.
    """
    with expansion() as budget:
        return _read_upload(files, format, sink_factory, budget)


def _read_upload(files: Sequence[SourceFile], format: str | None, sink_factory: Callable[[], CaseSink],
                 budget: Expansion) -> list[ParsedEvalSet]:
    files = expand(files)
    budget.own += sum(len(f.data) for f in files)
    if not files:
        raise EvalSetImportError("empty", "the upload holds no eval-set file (.json, .jsonl, .csv, .yaml or .yml)")
    for f in files:
        if f.is_blank():
            raise EvalSetImportError("empty", [Problem("the file is empty", file=f.name)])
        if f.suffix not in ZIPPED_DATA_SUFFIXES:
            f.check_encoding()  # a file that is not UTF-8 fails here, with its offset and line

    candidates = [get_reader(format)] if format else readers()
    all_readers = readers()
    mains: list[tuple[SourceFile, EvalSetFormat]] = []
    companions: list[SourceFile] = []
    refusals: list[Problem] = []
    for f in files:
        if any(r.is_companion(f) for r in all_readers):
            companions.append(f)
            continue
        if format and len(files) == 1:
            mains.append((f, candidates[0]))  # an explicit format skips detection
            continue
        reader, why = detect(f, candidates)
        if reader:
            mains.append((f, reader))
        else:
            refusals.extend(why)

    if not mains:
        # A broken JSON file: say where it breaks rather than why every reader refused it.
        for f in files:
            if f.suffix == "json" and f.try_json()[1]:
                _ = f.json  # raises the located invalid_json error
            if f.suffix == "csv":
                for _ in f.iter_csv_rows():  # a CSV that cannot be read raises its located invalid_csv error
                    pass
        tried = ", ".join(r.name for r in candidates)
        raise EvalSetImportError(
            "unknown_format",
            [Problem(f"no eval set found (tried: {tried})"), *refusals],
        )

    parsed: list[ParsedEvalSet] = []
    # One scan of the raw bytes spares the validators a walk over every string (see
    # evaluations.schemas.text); only an upload with a NUL somewhere is walked.
    with nul_free([f.data for f in files]):
        for f, reader in mains:
            sink = sink_factory()
            sink.source_name = f.name
            result = reader.parse(f, companions, sink=sink)
            for case in result.evalset.eval_cases:  # readers that return the whole list
                sink.add(case)
            result.evalset.eval_cases = sink.cases
            result.sink = sink
            check_duplicate_ids(result)
            if not sink.count:
                raise EvalSetImportError("empty", [Problem("the eval set has no cases", file=f.name)])
            parsed.append(result)
    for f in files:
        f.release()
    ids = Counter(p.evalset.eval_set_id for p in parsed)
    clashes = [i for i, n in ids.items() if n > 1]
    if clashes:
        raise EvalSetImportError(
            "duplicate_ids",
            [Problem(f"several files in the upload define eval set {i!r}") for i in clashes],
        )
    return parsed


def check_duplicate_ids(result: ParsedEvalSet) -> None:
    assert result.sink is not None
    problems = [
        Problem(
            f"duplicate eval_id: cases #{first + 1} and #{position + 1} share it",
            file=result.source.name,
            case=eval_id,
        )
        for eval_id, first, position in result.sink.duplicates
    ]
    if problems:
        raise EvalSetImportError("duplicate_ids", problems)


__all__ = [
    "CaseSink",
    "EvalSetImportError",
    "ParsedEvalSet",
    "Problem",
    "SourceFile",
    "files_from_paths",
    "get_reader",
    "read_upload",
    "reader_names",
    "readers",
]
