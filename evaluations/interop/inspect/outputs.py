"""Inspect AI eval logs read as uploaded outputs (`interop/outputs.py` is the registry): each
sample and epoch is the output of its case and iteration (`samples.to_output`: the messages past
the input, tool calls with their results, the completion, usage and time), for a run that scores
them with evalsite's own criteria against an eval set already in the project."""

from __future__ import annotations

from typing import Any

from evaluations.interop.base import SourceFile
from evaluations.interop.inspect.results import read_log
from evaluations.interop.outputs import OutputsFormat, Problems, ReadOutput, Text


def _read_file(file: SourceFile) -> list[ReadOutput] | None:
    parsed = read_log(file)
    if parsed is None:
        return None
    return [ReadOutput(case.output, file, Text(None, None), case.path) for case in parsed.cases
            if case.output is not None]


def _claims(doc: dict[str, Any]) -> bool:
    return False  # never parsed whole: `_read_file` reads the file as it is


def _read(doc: dict[str, Any], file: SourceFile, where: Text, problems: Problems) -> list[ReadOutput]:
    return []  # pragma: no cover - `_claims` takes no document


outputs_format = OutputsFormat("inspect", _claims, _read, read_file=_read_file)
