"""Google ADK eval sets, converted into the native `EvalSet`.

Three generations of ADK files are read:

- `adk-evalset`: the current `EvalSet` JSON (`*.evalset.json`, `*.test.json`). The top level
  is snake_case; cases and invocations are pydantic models with camelCase aliases, so files
  written by the ADK web UI spell them `evalId`, `userContent`, `intermediateData`, ...
- `adk-legacy-list`: `[{"name", "data": [{query, expected_tool_use, reference, ...}],
  "initial_session"}]`, one case per item.
- `adk-oldest-list`: a bare list of `{query, expected_tool_use, reference}` turns; like ADK's
  own converter, the whole file is one case.

An ADK `test_config.json` in the same folder as the eval-set file becomes the default
evaluation config. Problems are reported with the path as the file spells it (camelCase or
not), so the path and the line point at what the user wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import ValidationError

from evaluations.interop.adk.convert import (
    ADK_CASE_KEYS,
    ADK_INVOCATION_KEYS,
    ADK_SESSION_KEYS,
    NATIVE_INVOCATION_KEYS,
    SNIFF_CASES,
    AdkConverter,
    type_name,
)
from evaluations.interop.base import (
    CaseSink,
    ParsedEvalSet,
    PathPart,
    Problem,
    SourceFile,
    gc_paused,
    problems_from_validation_error,
    schema_error,
    stem,
)
from evaluations.schemas.evalset import EvalConfig, EvalSet

CONFIG_NAME = "test_config.json"

Path = tuple[PathPart, ...]

















def _config_path_of(file: SourceFile) -> str:
    folder = file.name.rsplit("/", 1)[0] if "/" in file.name else ""
    return f"{folder}/{CONFIG_NAME}" if folder else CONFIG_NAME




# --- Detection ------------------------------------------------------------------------------


def _list_variant(doc: list[Any]) -> str | None:
    """Which older list format `doc` is, judged on its items' keys."""
    items = doc[:SNIFF_CASES]
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    first = items[0]
    if isinstance(first.get("data"), list) and "name" in first:
        return "adk-legacy-list"
    if "query" in first and ({"expected_tool_use", "reference"} & first.keys()):
        return "adk-oldest-list"
    return None


def _evalset_evidence(doc: dict[str, Any]) -> str | None:
    """None when an eval-set object is ADK's; otherwise why not. Native files (a `content`
    in user_content, `expected_*` keys) are refused so the two readers never compete."""
    cases = doc.get("eval_cases")
    if not isinstance(cases, list):
        return "eval_cases is not a list"
    # A null name or description, or a top-level timestamp, cannot be native (it forbids them).
    adk = "creation_timestamp" in doc or doc.get("description", "") is None or doc.get("name", "") is None
    for case in cases[:SNIFF_CASES]:
        if not isinstance(case, dict):
            continue
        if ADK_CASE_KEYS & case.keys():
            adk = True
        session = case.get("session_input", case.get("sessionInput"))
        if isinstance(session, dict) and ADK_SESSION_KEYS & session.keys():
            adk = True
        conversation = case.get("conversation")
        for inv in conversation if isinstance(conversation, list) else []:
            if not isinstance(inv, dict):
                continue
            if NATIVE_INVOCATION_KEYS & inv.keys():
                return "invocations carry the native expected_* keys (an AgentFlow file)"
            user = inv.get("user_content", inv.get("userContent"))
            if isinstance(user, dict):
                if "content" in user:
                    return "user_content holds `content`, not ADK's `parts` (an AgentFlow file)"
                if "parts" in user:
                    adk = True
            if ADK_INVOCATION_KEYS & inv.keys():
                adk = True
    if adk:
        return None
    return "nothing ADK-specific in it (no `parts`, `final_response`, `intermediate_data` or session app_name)"


class AdkReader:
    name = "adk"
    label = "Google ADK eval set"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix != "json":
            return "not a .json file"
        doc, why = file.try_outline()  # a large file is not parsed whole just to sniff it
        if why:
            return why
        if isinstance(doc, list):
            if _list_variant(doc) is None:
                return "a list, but not of ADK cases ({name, data}) or turns ({query, expected_tool_use, reference})"
            return None
        if not isinstance(doc, dict):
            return "the document is neither an EvalSet object nor a list"
        if "eval_set_id" not in doc or "eval_cases" not in doc:
            return "no top-level eval_set_id and eval_cases"
        return _evalset_evidence(doc)

    def is_companion(self, file: SourceFile) -> bool:
        if file.basename != CONFIG_NAME:
            return False
        doc, why = file.try_json()
        return why is None and isinstance(doc, dict) and "criteria" in doc

    def parse(
        self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None
    ) -> ParsedEvalSet:
        """The native eval set. For memory's sake this consumes the parsed document: it drops
        the file's cached text and JSON (re-read from the bytes if asked for again) and empties
        the case list as it converts it."""
        with gc_paused():
            return self._parse(file, companions, sink)

    def _parse(self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None) -> ParsedEvalSet:
        outline = file.json_outline
        doc = outline if isinstance(outline, dict) else file.json  # the list formats are small
        converter = AdkConverter(file, sink)
        set_id = stem(file.name)
        if isinstance(doc, dict):
            variant = "adk-evalset"
            # The cases are streamed from the file one at a time (see `AdkConverter.evalset`).
            data = converter.evalset(doc)
        elif isinstance(doc, list):
            variant = _list_variant(doc) or ""
            if variant == "adk-legacy-list":
                data = converter.legacy_list(doc, set_id)
            elif variant == "adk-oldest-list":
                data = converter.oldest_list(doc, set_id)
            else:
                converter.bad((), "a list eval set holds either cases ({name, data, initial_session}) or "
                              "turns ({query, expected_tool_use, reference}), one kind per file")
                data = {"eval_set_id": set_id}
        else:
            converter.bad((), f"the document must be an EvalSet object or a list, not {type_name(doc)}")
            data, variant = {"eval_set_id": set_id}, ""
        del doc
        file.release()

        problems = converter.problems() + converter.native_problems
        warnings: list[str] = []
        config: EvalConfig | None = None
        used: list[SourceFile] = []
        companion = next((c for c in companions if c.name == _config_path_of(file) and self.is_companion(c)), None)
        if companion is not None:
            config_converter = AdkConverter(companion)
            config_data = config_converter.eval_config(companion.json, warnings)
            problems += config_converter.problems()
            if not config_converter.errors:
                config = _validate(EvalConfig.model_validate, config_data, companion, problems)
            used.append(companion)
        if problems:
            raise schema_error(problems)
        evalset = _validate(EvalSet.model_validate, data, file, problems)
        if problems:
            raise schema_error(problems)
        assert evalset is not None
        return ParsedEvalSet(evalset=evalset, format=self.name, variant=variant, source=file,
                             companions_used=used, default_config=config, warnings=warnings)


def read_test_config(file: SourceFile) -> tuple[EvalConfig | None, list[Problem], list[str]]:
    """A file in the shape of ADK's `test_config.json` (thresholds as numbers or objects,
    `match_type`, `ignore_args`, `judge_model_options`, rubrics, `custom_metrics`,
    `user_simulator_config`) as the native EvalConfig, as a `test_config.json` beside an
    eval set is read: (config or None, problems, warnings)."""
    warnings: list[str] = []
    converter = AdkConverter(file)
    data = converter.eval_config(file.json, warnings)
    problems = converter.problems()
    config = None if converter.errors else _validate(EvalConfig.model_validate, data, file, problems)
    return config, problems, warnings


def eval_config_from_doc(doc: Any) -> EvalConfig:
    """An AgentFlow EvalConfig document, else one in the shape of ADK's test_config.json
    (what `--config` and the API's `config` accept). Raises the native ValidationError when it
    is neither."""
    try:
        return EvalConfig.model_validate(doc)
    except ValidationError:
        if isinstance(doc, dict):
            config, problems, _warnings = read_test_config(SourceFile(CONFIG_NAME, json.dumps(doc).encode()))
            if config is not None and not problems:
                return config
        raise


def _validate(validate: Callable[[Any], Any], data: dict[str, Any], file: SourceFile,
              problems: list[Problem]) -> Any:
    """The native model, or None with problems appended. The conversion checks every field
    it maps, so an error here is a value the native model refuses (paths are native ones)."""
    try:
        return validate(data)
    except ValidationError as exc:
        problems += problems_from_validation_error(exc, file=file, locate_in_text=False)
        return None


reader = AdkReader()
