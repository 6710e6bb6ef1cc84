"""Inspect AI eval logs (`.eval` and `.json`), read for `results_import` (`interop/results.py` is
the registry).

A log is a completed run: each sample (and epoch: epoch n is iteration n - 1) a case result,
each of its scorers a score kept as inspect recorded it: the scorer's name as the criterion, the
value as a number where inspect's `value_to_float` reads one (C 1, I 0, P 0.5, N 0, booleans,
numbers), pass/fail where the value says it (C passes; I and N fail; booleans), and in the
justification the value itself (a letter, a list, a dict), the answer, the explanation and the
metadata. A dict value also gives one score per key (`scorer/key`, a number with no verdict: a
part of a score, not a test), as inspect's metrics read them. The messages past the input are
the case's output (`samples.to_output`): tool calls with their arguments and results, answers,
token usage, time; a sample's error is the case's error.

The log carries its samples, so without a chosen eval set one is created from them (an Inspect
dataset, named after the task: `samples.to_case`). The log's model and git commit are the run's
labels; its task and token usage are tags (`inspect-task:<task>`, `tokens:<total>`, ...).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import ValidationError

from evaluations.interop.base import EvalSetImportError, PathPart, Problem, SourceFile, format_path
from evaluations.interop.inspect.log import ZIP_MAGIC, InspectLog, LogSample, looks_like_json_log, open_log
from evaluations.interop.inspect.samples import (
    KEPT,
    LoggedSample,
    sample_key,
    to_case,
    to_output,
    validation_problems,
    value_to_float,
    verdict,
)
from evaluations.interop.results import ImportedCase, ImportedScore, ParsedResults, Reader, ResultsFormat, unit
from evaluations.interop.writing import safe_name
from evaluations.schemas.outputs import MAX_ITERATIONS, AgentOutput

MAX_PROBLEMS = 20


def read_log(file: SourceFile) -> ParsedResults | None:
    """The log as results; None for a file that is not an Inspect log (a zip always is one,
    or is refused as one: no other results format comes zipped)."""
    if file.data[:4] != ZIP_MAGIC and looks_like_json_log(file) is not None:
        return None
    log = open_log(file)
    cases: list[ImportedCase] = []
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    problems: list[Problem] = []
    for position, item in enumerate(log.samples()):
        try:
            case, row = _case(item, position)
        except EvalSetImportError as exc:
            problems.extend(exc.problems)
            if len(problems) >= MAX_PROBLEMS:
                break
            continue
        if case.key not in seen:
            seen.add(case.key)
            rows.append(row)
        cases.append(case)
    if problems:
        raise EvalSetImportError("schema", problems)
    twice = [k for k, n in Counter((c.key, c.iteration) for c in cases).items() if n > 1]
    if twice:
        raise EvalSetImportError("duplicate_outputs", [
            Problem(f"two samples with this id in epoch {iteration + 1}", file=file.name, case=key)
            for key, iteration in twice])
    name = safe_name(log.task)
    dataset = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    return ParsedResults("inspect", file, name, cases, labels=_labels(log, cases), details=_details(log),
                         evalset_file=SourceFile(f"{name}.jsonl", dataset), evalset_format="inspect")


def _case(item: LogSample, position: int) -> tuple[ImportedCase, dict[str, Any]]:
    raw = item.data
    key = sample_key(raw, position)
    prefix: tuple[PathPart, ...] = item.prefix
    try:
        sample = LoggedSample.model_validate(raw)
    except ValidationError as exc:
        raise validation_problems(exc, file=item.where, prefix=prefix, case=key) from None
    if sample.epoch > MAX_ITERATIONS:
        raise EvalSetImportError("schema", [Problem(f"epoch {sample.epoch}: evalsite keeps at most "
                                                    f"{MAX_ITERATIONS} epochs", file=item.where, case=key,
                                                    path=format_path((*prefix, "epoch")))])
    to_case(sample, key, file=item.where, prefix=prefix, raw=raw)  # a located error for a sample no case can hold
    path = prefix or (item.where.rsplit("/", 1)[-1],)
    case = ImportedCase(key, path, iteration=sample.epoch - 1, latency=sample.total_time,
                        output=to_output(sample, key))
    if sample.error is not None:
        case.error = sample.error.message or "the sample failed"
    for name, score in (sample.scores or {}).items():
        justification: dict[str, Any] = {"imported_from": "inspect", "value": score.value}
        for extra in ("answer", "explanation", "metadata"):
            if getattr(score, extra) is not None:
                justification[extra] = getattr(score, extra)
        value = score.value
        number = None if isinstance(value, dict | list) else value_to_float(value)
        case.scores.append(ImportedScore(name, number, unit(number), verdict(value), None, justification))
        if isinstance(value, dict):
            for part, sub in value.items():
                number = value_to_float(sub)
                case.scores.append(ImportedScore(f"{name}/{part}", number, unit(number), None, None,
                                                 {"imported_from": "inspect", "value": sub, "of": name}))
    row = {k: raw[k] for k in ("id", "input", "target", "metadata", *KEPT) if raw.get(k) is not None}
    return case, row


def _usage(log: InspectLog, cases: list[ImportedCase]) -> dict[str, int]:
    stats = log.header.get("stats")
    usage = stats.get("model_usage") if isinstance(stats, dict) else None
    totals = Counter[str]()
    if isinstance(usage, dict) and usage:
        for entry in usage.values():
            if isinstance(entry, dict):
                for key in ("input_tokens", "output_tokens", "total_tokens"):
                    if isinstance(entry.get(key), int):
                        totals[key] += entry[key]
        return dict(totals)
    for case in cases:  # a log still being written has no stats: the samples' own
        if isinstance(case.output, AgentOutput):  # Inspect's are models (DeepEval's alone are kept as JSON)
            used = case.output.usage()
            totals["input_tokens"] += used.prompt_tokens or 0
            totals["output_tokens"] += used.completion_tokens or 0
            totals["total_tokens"] += used.total_tokens or 0
    return {k: v for k, v in totals.items() if v}


def _labels(log: InspectLog, cases: list[ImportedCase]) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    model = log.eval.get("model")
    if isinstance(model, str):
        labels["model"] = model[:200]
    revision = log.eval.get("revision")
    if isinstance(revision, dict) and isinstance(revision.get("commit"), str):
        labels["git_commit"] = revision["commit"][:64]
    usage = _usage(log, cases)
    tags = [f"inspect-task:{log.task}"[:100]]
    for key, tag in (("total_tokens", "tokens"), ("input_tokens", "input-tokens"),
                     ("output_tokens", "output-tokens")):
        if key in usage:
            tags.append(f"{tag}:{usage[key]}")
    labels["tags"] = tags
    return labels


def _details(log: InspectLog) -> dict[str, Any]:
    details: dict[str, Any] = {"status": log.header.get("status")}
    for key in ("task", "task_id", "eval_id", "run_id", "created", "model"):
        if isinstance(log.eval.get(key), str):
            details[key] = log.eval[key]
    stats = log.header.get("stats")
    if isinstance(stats, dict) and isinstance(stats.get("model_usage"), dict):
        details["model_usage"] = stats["model_usage"]
    packages = log.eval.get("packages")
    if isinstance(packages, dict) and isinstance(packages.get("inspect_ai"), str):
        details["inspect_ai"] = packages["inspect_ai"]
    return {"inspect": details}


def _claims(doc: Any) -> bool:
    return False  # never parsed whole: `read_log` reads the file as it is (a zip, or streamed JSON)


def _read(reader: Reader) -> ParsedResults:  # pragma: no cover - `_claims` takes no document
    raise EvalSetImportError("unknown_format", [Problem("not an Inspect AI eval log", file=reader.file.name)])


results_format = ResultsFormat("inspect", _claims, _read, read_file=read_log)
