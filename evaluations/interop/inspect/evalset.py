"""Inspect AI eval sets: a dataset (JSONL samples, as `json_dataset()` reads them) or the
samples of an eval log (`.eval` zip or `.json`, see `log.py`).

- Dataset (variant `dataset`): one sample a line, keys `input` (required: a string or chat
  messages), `target`, `id`, `metadata`, `choices`, `sandbox`, `files`, `setup` (no other key:
  that is what tells it from a plain JSONL file, which goes to `plain`, with at least one
  `target`). The eval set is named after the file.
- Eval log (variant `log`): the samples of the log's first epoch (each sample once), named
  after the log's task (as a file name: what the dataset it exports as is called).

Each sample becomes a case as `samples.to_case` says. The writer beside it (`export.py`)
writes a version back as a dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from evaluations.interop.base import (
    CaseSink,
    EvalSetImportError,
    ParsedEvalSet,
    Problem,
    SourceFile,
    iter_json_lines,
    json_lines,
    stem,
)
from evaluations.interop.inspect.log import ZIP_MAGIC, is_eval_zip, looks_like_json_log, open_log
from evaluations.interop.inspect.samples import SAMPLE_KEYS, DatasetSample, sample_key, to_case, validation_problems
from evaluations.interop.writing import safe_name
from evaluations.schemas.evalset import EvalCase, EvalSet

MAX_PROBLEMS = 20


class InspectReader:
    name = "inspect"
    label = "Inspect AI dataset / eval log"

    def sniff(self, file: SourceFile) -> str | None:
        if file.data[:4] == ZIP_MAGIC:
            return None if is_eval_zip(file) else "a zip that is not an Inspect eval log (no header.json)"
        if file.suffix == "json":
            why = looks_like_json_log(file)
            return None if why is None else f"not an Inspect eval log: {why}"
        if file.suffix != "jsonl":
            return "not a .jsonl dataset or a .eval / .json eval log"
        rows = [row for _, row in json_lines(file, first=200)]
        if not rows or not all(isinstance(r, dict) and "input" in r for r in rows):
            return "not every line is a sample with an `input`"
        other = sorted({k for r in rows for k in r} - SAMPLE_KEYS)
        if other:
            return f"has keys Inspect samples do not ({', '.join(other[:5])})"
        if not any("target" in r for r in rows):
            return "no sample has a `target`"
        return None

    def is_companion(self, file: SourceFile) -> bool:
        return False

    def parse(self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None) -> ParsedEvalSet:
        sink = sink if sink is not None else CaseSink()
        if file.data[:4] == ZIP_MAGIC or file.suffix == "json":
            log = open_log(file)
            problems: list[Problem] = []
            seen: set[str] = set()
            for position, item in enumerate(log.samples()):
                key = sample_key(item.data, position)
                if key in seen:
                    continue  # a later epoch of the same sample
                seen.add(key)
                _add(sink, item.data, key, item.where, item.prefix, problems)
                if len(problems) >= MAX_PROBLEMS:
                    break
            _fail(problems)
            return ParsedEvalSet(evalset=EvalSet(eval_set_id=safe_name(log.task)), format=self.name, variant="log",
                                 source=file)
        problems = []
        unreadable: list[Problem] = []
        for position, (lineno, row) in enumerate(iter_json_lines(file, unreadable)):  # a line at a time
            if unreadable:
                break
            if not isinstance(row, dict):
                problems.append(Problem("a sample is a JSON object", file=file.name, line=lineno))
                continue
            before = len(problems)
            _add(sink, row, sample_key(row, position), file.name, (), problems)
            problems[before:] = [Problem(p.message, file=p.file, case=p.case, path=p.path, line=lineno)
                                 for p in problems[before:]]
            if len(problems) >= MAX_PROBLEMS:
                break
        if unreadable:
            raise EvalSetImportError("invalid_json", unreadable[:1])
        _fail(problems)
        return ParsedEvalSet(evalset=EvalSet(eval_set_id=stem(file.name)), format=self.name, variant="dataset",
                             source=file)


def _add(sink: CaseSink, raw: dict[str, Any], key: str, where: str, prefix: tuple[str | int, ...],
         problems: list[Problem]) -> None:
    try:
        sample = DatasetSample.model_validate(raw)
        case: EvalCase = to_case(sample, key, file=where, prefix=prefix, raw=raw)
    except ValidationError as exc:
        problems.extend(validation_problems(exc, file=where, prefix=prefix, case=key).problems)
        return
    except EvalSetImportError as exc:
        problems.extend(exc.problems)
        return
    sink.add(case)


def _fail(problems: list[Problem]) -> None:
    if problems:
        raise EvalSetImportError("schema", problems)


reader = InspectReader()
