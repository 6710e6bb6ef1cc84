"""What evalsite knows of other tools' files: one package per tool (`adk/`, `uipath/`,
`deepeval/`, `agentflow/`, `inspect/`, `promptfoo/`, `plain/`, `otel/`).

This face hands on the names the rest of evalsite uses; the logic lives in `upload.py` (an
upload's files gathered, its format detected and its eval sets read: `read_upload()`),
`base.py` (shared primitives), `limits.py` (what an upload may expand to) and `writing.py` (the
writers' shared parts).
"""

from __future__ import annotations

from evaluations.interop.base import CaseSink, EvalSetImportError, ParsedEvalSet, Problem, SourceFile
from evaluations.interop.upload import (
    READER_MODULES,
    WRITER_MODULES,
    check_size,
    expand,
    files_from_paths,
    get_reader,
    max_upload_bytes,
    read_upload,
    reader_names,
    readers,
    writers,
)

__all__ = [
    "READER_MODULES",
    "WRITER_MODULES",
    "CaseSink",
    "EvalSetImportError",
    "ParsedEvalSet",
    "Problem",
    "SourceFile",
    "check_size",
    "expand",
    "files_from_paths",
    "get_reader",
    "max_upload_bytes",
    "read_upload",
    "reader_names",
    "readers",
    "writers",
]
