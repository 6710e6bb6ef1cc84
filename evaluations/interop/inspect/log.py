"""Inspect AI eval logs, opened as `inspect_ai` writes them, without importing it.

Two formats (inspect_ai's `log_format`):

- `.eval`: a zip. `header.json` holds the log without its samples (`version`, `status`, `eval`,
  `plan`, `results`, `stats`); each sample is a member of its own, `samples/<id>_epoch_<n>.json`;
  a log still being written has `_journal/start.json` instead of the header. inspect_ai 0.3.1xx
  and later compress the members with zstd (zip method 93, which `zipfile` reads only from
  Python 3.14), older ones with deflate: both are read, one member at a time, each inflated a
  chunk at a time and never past the size its header claims. A large log is never held
  inflated as a whole: `samples()` yields one sample, then the next.
- `.json`: the same log as one JSON document with a `samples` list, streamed by ijson one
  sample at a time.

Long strings inside a sample may be stored once in its `attachments` and referred to as
`attachment://<hash>`: they are put back. Everything wrong is an `EvalSetImportError` naming the
file (and the zip member), the sample and the field path.

What a log stands for is counted against the upload's budget (`interop.base.Expansion`) before
it is built: the sizes its members claim (header and samples, all together) before any is
inflated, and each attachment's bytes every time one is put back.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import ijson
import zstandard

from evaluations import safejson
from evaluations.converters import whole_number
from evaluations.interop.base import EvalSetImportError, Problem, SourceFile, format_path
from evaluations.interop.limits import current_expansion

ZSTD = 93
CHUNK = 1 << 20
ZIP_MAGIC = b"PK\x03\x04"
_LOCAL_HEADER = struct.Struct("<4s5H3I2H")
TOP_KEYS = {"version", "status", "eval", "plan", "results", "stats", "error", "invalidated", "tags", "metadata",
            "samples", "reductions", "location", "etag", "log_updates"}
ATTACHMENT = "attachment://"


@dataclass
class LogSample:
    """One sample of a log as plain JSON, and where it came from (for errors)."""

    data: dict[str, Any]
    where: str  # the file, or the file and its zip member
    prefix: tuple[str | int, ...]  # the sample's path inside `where`


@dataclass
class InspectLog:
    file: SourceFile
    header: dict[str, Any]
    members: list[zipfile.ZipInfo] = field(default_factory=list)

    @property
    def is_zip(self) -> bool:
        return self.file.data[:4] == ZIP_MAGIC

    @property
    def eval(self) -> dict[str, Any]:
        value = self.header.get("eval")
        return value if isinstance(value, dict) else {}

    @property
    def task(self) -> str:
        return str(self.eval.get("task") or "inspect_eval")

    def samples(self) -> Iterator[LogSample]:
        if self.is_zip:
            yield from self._zip_samples()
        else:
            yield from self._json_samples()

    def _zip_samples(self) -> Iterator[LogSample]:
        with zipfile.ZipFile(_Bytes(self.file.data)) as zf:
            for info in self.members:
                where = f"{self.file.name}/{info.filename}"
                doc = _json(member_bytes(self.file.data, zf, info, where), where)
                if not isinstance(doc, dict):
                    raise EvalSetImportError("schema", [Problem("a sample is a JSON object", file=where)])
                yield LogSample(resolve_attachments(doc, where), where, ())

    def _json_samples(self) -> Iterator[LogSample]:
        for index, item in enumerate(_stream(self.file, "samples.item")):
            if not isinstance(item, dict):
                raise EvalSetImportError("schema", [Problem("a sample is a JSON object", file=self.file.name,
                                                            path=f"samples[{index}]")])
            yield LogSample(resolve_attachments(item, self.file.name, ("samples", index)), self.file.name,
                            ("samples", index))


_IJSON_PYTHON = ijson.get_backend("python")


def _stream(file: SourceFile, prefix: str, kv: bool = False) -> Iterator[Any]:
    """ijson's `items` (or `kvitems`) of `file` at `prefix`. Its C backend refuses an integer
    beyond 64 bits, which is valid JSON (a 20-digit id in a tool call's arguments): the
    pure-Python backend reads on from there. What neither reads is refused with json's located
    error (an integer Python will not read, NaN, a syntax error)."""
    given = 0
    try:
        for item in (ijson.kvitems if kv else ijson.items)(file.data, prefix, use_float=True):
            given += 1
            yield item
        return
    except (ijson.JSONError, ValueError):
        pass
    try:
        events = (_IJSON_PYTHON.kvitems if kv else _IJSON_PYTHON.items)(file.data, prefix, use_float=True)
        for position, item in enumerate(events):
            if position >= given:
                yield item
    except (ijson.JSONError, ValueError) as exc:
        _ = file.json  # the located invalid_json error
        raise EvalSetImportError("invalid_json", [Problem(f"not valid JSON: {exc}", file=file.name)]) from None


class _Bytes:
    """A read-only file over bytes without the copy `io.BytesIO(data)` makes of them."""

    def __init__(self, data: bytes) -> None:
        self.view, self.pos = memoryview(data), 0

    def read(self, n: int = -1) -> bytes:
        end = len(self.view) if n is None or n < 0 else min(len(self.view), self.pos + n)
        out = bytes(self.view[self.pos:end])
        self.pos = end
        return out

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = offset if whence == 0 else (self.pos + offset if whence == 1 else len(self.view) + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def seekable(self) -> bool:
        return True


def is_eval_zip(file: SourceFile) -> bool:
    return file.data[:4] == ZIP_MAGIC and file.suffix in {"eval", "zip"} and _has_header(file.data)


def _has_header(data: bytes) -> bool:
    try:
        names = set(zipfile.ZipFile(_Bytes(data)).namelist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return False
    return bool(names & {"header.json", "_journal/start.json"})


def looks_like_json_log(file: SourceFile) -> str | None:
    """None when the JSON document's first members are an Inspect log's (`version`, `status`,
    `eval` with a `task`); otherwise why not. Reads no further than `eval`.

    Runs on every .json upload, before any reader has checked its depth: it reads ijson's
    basic events (no prefixes: ijson's prefixed events cost as much as the depth each, so
    200 KB of `[` took 19 s) and stops at MAX_DEPTH, like every other reader."""
    if file.data[:4] == ZIP_MAGIC:
        return "a zip, not a JSON log"
    depth, member = 0, None  # member: the top-level member being read
    try:
        for event, value in ijson.basic_parse(file.data, use_float=True):
            if event == "start_map" or event == "start_array":
                if depth == 0 and event == "start_array":
                    return "not a JSON object"
                depth += 1
                if depth > safejson.MAX_DEPTH:
                    return "not valid JSON"
            elif event == "end_map" or event == "end_array":
                depth -= 1
                if depth == 1 and member == "eval":
                    return "its `eval` names no task"
            elif depth == 0:
                return "not a JSON object"
            elif event == "map_key" and depth == 1:
                if value not in TOP_KEYS:
                    return f"has a top-level {value!r}, which Inspect logs do not"
                member = value
            elif event == "map_key" and depth == 2 and member == "eval" and value == "task":
                return None
    except (ijson.JSONError, ValueError, UnicodeDecodeError):
        return "not valid JSON"
    return "no `eval` member" if member != "eval" else "its `eval` names no task"


def open_log(file: SourceFile) -> InspectLog:
    """The log's header and (for a zip) its sample members in dataset order; raises a located
    error for a file that is not an Inspect log."""
    if file.data[:4] == ZIP_MAGIC:
        return _open_zip(file)
    reason = looks_like_json_log(file)
    if reason is not None:
        if reason == "not valid JSON":
            _ = file.json  # the located invalid_json error
        raise EvalSetImportError("unknown_format", [Problem(f"not an Inspect AI eval log: {reason}",
                                                            file=file.name)])
    try:
        safejson.check_depth(file.data)
    except safejson.TooDeep as exc:
        raise EvalSetImportError("invalid_json", [Problem(exc.msg, file=file.name, line=exc.lineno,
                                                          column=exc.colno)]) from None
    header: dict[str, Any] = {}
    for key, value in _stream(file, "", kv=True):
        if key == "samples":
            continue  # streamed by `samples()`; kvitems builds it, so stop before it
        header[key] = value
        if key == "stats":
            break
    return InspectLog(file, header)


def _open_zip(file: SourceFile) -> InspectLog:
    try:
        zf = zipfile.ZipFile(_Bytes(file.data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise EvalSetImportError("invalid_zip", [Problem("not a valid zip archive", file=file.name)]) from None
    with zf:
        infos = {i.filename: i for i in zf.infolist()}
        name = "header.json" if "header.json" in infos else "_journal/start.json"
        if name not in infos:
            raise EvalSetImportError("unknown_format", [Problem(
                "not an Inspect AI eval log: the zip holds neither header.json nor _journal/start.json",
                file=file.name)])
        _count_members(file, infos, name)
        where = f"{file.name}/{name}"
        header = _json(member_bytes(file.data, zf, infos[name], where), where)
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise EvalSetImportError("schema", [Problem("the log's header has no `eval` object", file=where,
                                                        path="eval")])
        if name != "header.json":
            header.setdefault("status", "started")
        order = {str(sid): index for index, sid in enumerate(
            (header["eval"].get("dataset") or {}).get("sample_ids") or [])}
        members = [i for n, i in infos.items() if n.startswith("samples/") and n.endswith(".json")]
        members.sort(key=lambda i: _member_order(i.filename, order))
        return InspectLog(file, header, members)


def _count_members(file: SourceFile, infos: dict[str, zipfile.ZipInfo], header: str) -> None:
    """Count what the log's header and samples inflate to, all together, before any is inflated
    (the sizes the directory claims: no member is read past its claim); once per log."""
    read = [infos[header], *(i for n, i in infos.items() if n.startswith("samples/") and n.endswith(".json"))]
    current_expansion().unpack(sum(i.file_size for i in read), file=file.name,
                               what=f"the log's header and {len(read) - 1:,} sample{'s' if len(read) != 2 else ''} "
                               "inflate", key=file.data)


def _member_order(name: str, order: dict[str, int]) -> tuple[int, int, str]:
    stem = name[len("samples/"):-len(".json")]
    sample, sep, epoch = stem.rpartition("_epoch_")
    number = whole_number(epoch, maximum=(1 << 30) - 1) if sep else None
    if number is None:
        return (1 << 30, 0, name)
    return (number, order.get(sample, 1 << 29), name)


def member_bytes(data: bytes, zf: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    """One member, inflated a chunk at a time, never past the size its header claims (a
    forged header costs one chunk), and checked against its CRC. What the claims add up to is
    counted first (`_count_members`)."""
    chunks: list[bytes] = []
    read = crc = 0
    try:
        for chunk in _inflate(data, zf, info):
            read += len(chunk)
            if read > info.file_size:
                raise EvalSetImportError("invalid_zip", [Problem(
                    f"the member inflates past the {info.file_size:,} bytes its header claims", file=where)])
            crc = zlib.crc32(chunk, crc)
            chunks.append(chunk)
    except (zipfile.BadZipFile, zlib.error, zstandard.ZstdError, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError) as exc:
        raise EvalSetImportError("invalid_zip", [Problem(f"the member cannot be read: {exc}", file=where)]) from None
    if read != info.file_size or crc != info.CRC:
        raise EvalSetImportError("invalid_zip", [Problem(
            "the member is damaged (its size or checksum is not what the zip's directory says)", file=where)])
    return b"".join(chunks)


def _inflate(data: bytes, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[bytes]:
    if info.compress_type != ZSTD:
        with zf.open(info) as entry:
            while chunk := entry.read(min(CHUNK, info.file_size + 1)):
                yield chunk
        return
    start = info.header_offset
    fields = _LOCAL_HEADER.unpack_from(data, start)
    if fields[0] != ZIP_MAGIC:
        raise zipfile.BadZipFile("no local header where the directory points")
    begin = start + _LOCAL_HEADER.size + fields[9] + fields[10]
    raw = memoryview(data)[begin:begin + info.compress_size]
    if len(raw) != info.compress_size:
        raise EOFError("the member is cut short")
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    while chunk := reader.read(min(CHUNK, info.file_size + 1)):
        yield chunk


def _json(data: bytes, where: str) -> Any:
    try:
        return safejson.loads(data)
    except ValueError as exc:  # json.JSONDecodeError, TooDeep, TooLongNumber, UnicodeDecodeError
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        message = getattr(exc, "msg", None) or str(exc)
        too_long = isinstance(exc, safejson.TooLongNumber)
        raise EvalSetImportError("invalid_json", [Problem(message if too_long else f"not valid JSON: {message}",
                                                          file=where, line=line, column=column)],
                                 final=too_long) from None


def resolve_attachments(sample: dict[str, Any], where: str = "", prefix: tuple[str | int, ...] = ()) -> dict[str, Any]:
    """The sample with every `attachment://<hash>` string replaced by the text it stands for,
    each time counted against the upload's expansion budget (the text is shared, not copied,
    but every case, output and score made of it holds it again)."""
    attachments = sample.get("attachments")
    if not isinstance(attachments, dict) or not attachments:
        return sample
    budget = current_expansion()
    sizes: dict[str, int] = {}

    def put_back(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(ATTACHMENT):
            key = value[len(ATTACHMENT):]
            found = attachments.get(key)
            if not isinstance(found, str):
                return value
            size = sizes.get(key)
            if size is None:
                size = sizes[key] = len(found) if found.isascii() else len(found.encode("utf-8", "surrogatepass"))
            budget.expand(size, file=where or None, case=str(sample.get("id", "")) or None,
                          path=format_path((*prefix, "attachments", key)), what="the attachments put back")
            return found
        if isinstance(value, list):
            return [put_back(v) for v in value]
        if isinstance(value, dict):
            return {k: put_back(v) for k, v in value.items()}
        return value

    out = dict(sample)
    for key in ("input", "target", "messages", "output", "scores", "metadata"):
        if key in out:
            out[key] = put_back(out[key])
    out.pop("attachments")
    return out
