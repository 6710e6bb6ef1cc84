"""A version in the format of the tool its eval set came from: ADK, UiPath or DeepEval.

An uploaded version can always be downloaded as its original bytes, and any version as native
`.evalset.json`. This module writes the others: a version of an eval set whose upload came from
ADK, UiPath or DeepEval (edited or not) as that tool's own file, so the eval set can go back
to the tool it came from.

Exact or refused: each writer inverts its reader (`evaluations.evalsets.formats`), and every
export is read back with that reader before it is handed out. The header and every case must
come back as the stored native content (the same content hash, so re-uploading the download
finds the same version); when something cannot be said in the tool's format (tags in ADK or
UiPath, a tool call's id in DeepEval, ...) the export raises `ExportLossError` listing each case
and field that would be lost, instead of dropping it silently.

The tool is the `source_format` of the newest upload at or before the version (an edit keeps
the header of the version it began from, so that is where the format-specific header came from).
"""

from __future__ import annotations

import csv
import io
import json
import posixpath
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evaluations.evalsets.curation import CASE_FIELDS, case_native
from evaluations.evalsets.formats import read_upload
from evaluations.evalsets.formats.base import EvalSetImportError, SourceFile, stem
from evaluations.evalsets.formats.deepeval import LIST_DELIMITER, derive_eval_ids
from evaluations.models import EvalCase, EvalSetVersion

TOOL_FORMATS = ("adk", "uipath", "deepeval")
TOOL_LABELS = {"adk": "ADK", "uipath": "UiPath", "deepeval": "DeepEval"}
MAX_REPORTED_LOSSES = 50


@dataclass(frozen=True)
class Loss:
    """One thing the tool's format cannot hold: in a case (`case`) or the eval set's header."""

    case: str | None
    path: str
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "path": self.path, "message": self.message}

    def __str__(self) -> str:
        where = f"case {self.case!r}, {self.path}" if self.case is not None else self.path
        return f"{where}: {self.message}"


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
    writer = _WRITERS[fmt]
    losses: list[Loss] = []
    files = writer(header, cases, found[1], losses)
    if not losses:
        losses = _check(fmt, header, cases, files)
    if losses:
        raise ExportLossError(fmt, losses)
    return _package(files)


# --- Header ------------------------------------------------------------------------------------


@dataclass
class _Header:
    eval_set_id: str
    name: str
    description: str
    metadata: dict[str, Any]
    default_config: dict[str, Any] | None
    evaluator_config: dict[str, Any] | None


def _header(version: EvalSetVersion) -> _Header:
    return _Header(
        eval_set_id=version.evalset.eval_set_id,
        name=version.name,
        description=version.description,
        metadata=dict(version.metadata or {}),
        default_config=version.default_config,
        evaluator_config=version.evaluator_config,
    )


PRETTY_CASES = 2_000  # larger exports are written compact: json's indenting encoder is pure Python


def _dump(value: Any, cases: int = 0) -> bytes:
    indent = 2 if cases <= PRETTY_CASES else None
    return (json.dumps(value, ensure_ascii=False, indent=indent) + "\n").encode()


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


def _safe_name(value: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in value).strip("._")
    return keep[:100] or "evalset"


# --- Checking by reading back -------------------------------------------------------------------


def _check(fmt: str, header: _Header, cases: list[dict[str, Any]], files: list[SourceFile]) -> list[Loss]:
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


# --- ADK -----------------------------------------------------------------------------------------


def _adk_content(
    message: dict[str, Any] | None, path: str, case: str, losses: list[Loss], *, role: str | None = None
) -> dict[str, Any] | None:
    """A native MessageContent dict as a genai Content ({role, parts})."""
    if message is None:
        return None
    if message.get("metadata"):
        losses.append(Loss(case, f"{path}.metadata", "ADK content has no metadata"))
    content = message["content"]
    parts = ([{"text": content}] if content else []) if isinstance(content, str) else list(content)
    out_role = role or message["role"]
    return {"role": "model" if out_role == "assistant" else out_role, "parts": parts}


def _adk_rubrics(
    rubrics: list[dict[str, Any]], types: dict[str, Any], path: str, case: str, losses: list[Loss]
) -> list[dict[str, Any]]:
    out = []
    for index, rubric in enumerate(rubrics):
        if rubric.get("weight", 1.0) != 1.0:
            losses.append(Loss(case, f"{path}[{index}].weight", "ADK rubrics have no weight"))
        item: dict[str, Any] = {"rubric_id": rubric["name"], "rubric_content": {"text_property": rubric["description"]}}
        if rubric.get("scoring_guide"):
            item["description"] = rubric["scoring_guide"]
        if rubric["name"] in types:
            item["type"] = types[rubric["name"]]
        out.append(item)
    return out


def _adk_invocation(inv: dict[str, Any], path: str, case: str, losses: list[Loss]) -> dict[str, Any]:
    metadata = dict(inv.get("metadata") or {})
    types = metadata.pop("rubric_types", {}) if inv.get("rubrics") else {}
    out: dict[str, Any] = {
        "invocation_id": inv["invocation_id"],
        "user_content": _adk_content(inv["user_content"], f"{path}.user_content", case, losses),
    }
    final = _adk_content(inv.get("expected_final_response"), f"{path}.expected_final_response", case, losses)
    if final is not None:
        out["final_response"] = final
    uses, responses, intermediate = [], [], []
    for call in inv.get("expected_tool_trajectory") or []:
        use: dict[str, Any] = {"name": call["name"], "args": call.get("args") or {}}
        if call.get("call_id") is not None:
            use["id"] = call["call_id"]
        uses.append(use)
        if call.get("result") is not None:
            response: dict[str, Any] = {"name": call["name"], "response": call["result"]}
            if call.get("call_id") is not None:
                response["id"] = call["call_id"]
            responses.append(response)
    for index, message in enumerate(inv.get("expected_intermediate_responses") or []):
        where = f"{path}.expected_intermediate_responses[{index}]"
        meta = message.get("metadata") or {}
        if set(meta) - {"author"} or message.get("role") != "assistant":
            losses.append(Loss(case, where, "ADK keeps an intermediate response as [author, parts] only"))
        content = message["content"]
        parts = [{"text": content}] if isinstance(content, str) else list(content)
        intermediate.append([meta.get("author", ""), parts])
    if uses or responses or intermediate:
        out["intermediate_data"] = {
            "tool_uses": uses,
            "tool_responses": responses,
            "intermediate_responses": intermediate,
        }
    if inv.get("rubrics"):
        out["rubrics"] = _adk_rubrics(inv["rubrics"], types, f"{path}.rubrics", case, losses)
    out.update(metadata)
    return out


def _adk_case(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    if raw["tags"]:
        losses.append(Loss(eid, "tags", "ADK eval cases have no tags"))
    if raw["criteria"]:
        losses.append(Loss(eid, "criteria", "ADK eval cases have no per-case criteria"))
    metadata = dict(raw["metadata"])
    types = metadata.pop("rubric_types", {}) if raw["rubrics"] else {}
    out: dict[str, Any] = {
        "eval_id": eid,
        "name": raw["name"],
        "conversation": [
            _adk_invocation(inv, f"conversation[{i}]", eid, losses) for i, inv in enumerate(raw["conversation"])
        ],
    }
    session = raw["session_input"]
    if session is not None:
        adk_session = dict(session["config"])
        if session["thread_id"] is not None:
            adk_session["session_id"] = session["thread_id"]
        adk_session["state"] = session["initial_state"]
        out["session_input"] = adk_session
    scenario = raw["conversation_scenario"]
    if scenario is not None:
        if scenario.get("expected_outcome") is not None:
            losses.append(
                Loss(
                    eid, "conversation_scenario.expected_outcome", "ADK conversation scenarios have no expected outcome"
                )
            )
        out["conversation_scenario"] = {
            "starting_prompt": scenario["starting_prompt"],
            "conversation_plan": scenario["conversation_plan"],
            "user_persona": scenario["user_persona"],
            **scenario["metadata"],
        }
        if not raw["conversation"]:
            del out["conversation"]
    if raw["rubrics"]:
        out["rubrics"] = _adk_rubrics(raw["rubrics"], types, "rubrics", eid, losses)
    out.update(metadata)
    return out


def _adk_config(config: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    """The native EvalConfig as ADK's test_config.json."""
    criterion_default = {"enabled": True, "match_type": "EXACT", "judge_model": "gpt-4o-mini", "rubrics": []}
    criteria: dict[str, Any] = {}
    custom: dict[str, Any] = {}
    for name, criterion in config.get("criteria", {}).items():
        where = f"default_config.criteria.{name}"
        if criterion.get("evaluator") not in (None, name):
            losses.append(Loss(None, f"{where}.evaluator", "an ADK criterion is named by its evaluator"))
        if not criterion.get("enabled", True):
            losses.append(Loss(None, f"{where}.enabled", "ADK criteria cannot be disabled"))
        options = dict(criterion.get("options") or {})
        if "custom_metric" in options:
            custom[name] = options.pop("custom_metric")
        judge = options.get("judge_model_options")
        if criterion.get("judge_model", "gpt-4o-mini") != (judge or {}).get("judge_model", "gpt-4o-mini"):
            losses.append(Loss(None, f"{where}.judge_model", "ADK names the judge model in judge_model_options"))
        rest = {k: criterion.get(k, v) for k, v in criterion_default.items()}
        if rest == criterion_default and not options:
            criteria[name] = criterion["threshold"]
            continue
        item: dict[str, Any] = {"threshold": criterion["threshold"], "match_type": criterion.get("match_type", "EXACT")}
        if criterion.get("rubrics"):
            item["rubrics"] = _adk_rubrics(
                criterion["rubrics"], options.pop("rubric_types", {}), f"{where}.rubrics", "", losses
            )
        item.update(options)
        criteria[name] = item
    out: dict[str, Any] = {"criteria": criteria}
    if custom:
        out["custom_metrics"] = custom
    simulator = config.get("user_simulator_config")
    if simulator is not None:
        sim = {
            "model": simulator["model"],
            "max_allowed_invocations": simulator["max_turns"],
            **simulator.get("options", {}),
        }
        out["user_simulator_config"] = sim
    return out


def _write_adk(header: _Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    doc: dict[str, Any] = {
        "eval_set_id": header.eval_set_id,
        "name": header.name,
        "description": header.description,
        "eval_cases": [_adk_case(c, losses) for c in cases],
        **header.metadata,
    }
    if header.evaluator_config:
        losses.append(Loss(None, "evaluator_config", "ADK eval sets carry no evaluator definitions"))
    base = _safe_name(header.eval_set_id)
    if header.default_config is None:
        return [SourceFile(f"{base}.evalset.json", _dump(doc, len(cases)))]
    config = _adk_config(header.default_config, losses)
    return [
        SourceFile(f"{base}/{base}.evalset.json", _dump(doc, len(cases))),
        SourceFile(f"{base}/test_config.json", _dump(config)),
    ]


# --- UiPath --------------------------------------------------------------------------------------


def _uipath_value(message: dict[str, Any] | None, path: str, case: str, losses: list[Loss]) -> tuple[bool, Any]:
    """(present, value) of a one-JSON-part MessageContent (how UiPath inputs and outputs are kept)."""
    if message is None:
        return False, None
    content = message["content"]
    if (
        isinstance(content, list)
        and len(content) == 1
        and set(content[0]) == {"type", "json"}
        and content[0]["type"] == "json"
        and not message.get("metadata")
    ):
        return True, content[0]["json"]
    losses.append(Loss(case, path, "UiPath holds inputs and expected outputs as JSON values; this is text"))
    return False, None


def _uipath_case(case: dict[str, Any], variant: str, losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    for key, message in (
        ("tags", "UiPath evaluations have no tags"),
        ("rubrics", "UiPath evaluations have no rubrics"),
        ("session_input", "UiPath evaluations have no session input"),
        ("conversation_scenario", "UiPath evaluations have no conversation scenario"),
    ):
        if raw[key]:
            losses.append(Loss(eid, key, message))
    if len(raw["conversation"]) != 1:
        losses.append(
            Loss(eid, "conversation", f"a UiPath evaluation is one turn (this case has {len(raw['conversation'])})")
        )
        return {"id": eid}
    inv = raw["conversation"][0]
    _, inputs = _uipath_value(inv["user_content"], "conversation[0].user_content", eid, losses)
    has_output, output = _uipath_value(
        inv.get("expected_final_response"), "conversation[0].expected_final_response", eid, losses
    )
    if inv["expected_intermediate_responses"]:
        losses.append(
            Loss(
                eid,
                "conversation[0].expected_intermediate_responses",
                "UiPath evaluations have no intermediate responses",
            )
        )
    if inv["metadata"] or inv["rubrics"] or inv["invocation_id"] != "turn_1":
        for key in ("metadata", "rubrics"):
            if inv[key]:
                losses.append(Loss(eid, f"conversation[0].{key}", "UiPath evaluations have none"))
        if inv["invocation_id"] != "turn_1":
            losses.append(Loss(eid, "conversation[0].invocation_id", "a UiPath evaluation's turn is always turn_1"))
    criteria = _uipath_criteria(raw["criteria"], inv["expected_tool_trajectory"], eid, losses)
    out: dict[str, Any] = {"id": eid}
    if raw["name"]:
        out["name"] = raw["name"]
    if variant == "uipath-evaluation-items":
        out["agentInput"] = inputs
        out["evaluations"] = [{"evaluatorId": k, "evaluationCriteria": v} for k, v in criteria.items()]
    else:
        out["inputs"] = inputs
        out["evaluationCriterias"] = criteria
        if has_output:
            out["expectedOutput"] = output
    metadata = {k: v for k, v in raw["metadata"].items() if k not in out}
    out.update(metadata)
    # (The evaluation-items shape has no expectedOutput of its own: the reader takes it from
    # the criteria, and the read-back check reports an expected output they do not hold.)
    return out


def _uipath_criteria(
    criteria: dict[str, Any], trajectory: list[dict[str, Any]], case: str, losses: list[Loss]
) -> dict[str, Any]:
    """The stored criteria, as they are: UiPath reads a case's expected tool calls from them
    (the first `toolCalls` list, else `toolCallsOrder`; `toolOutputs` for results), so an
    expected trajectory that says something else cannot be written, and is reported."""
    path = "conversation[0].expected_tool_trajectory"
    if any(c.get("call_id") for c in trajectory):
        losses.append(Loss(case, path, "UiPath tool calls have no ids"))
    wanted = [(c["name"], c.get("args") or {}) for c in trajectory]
    holder = _holder(criteria, ("toolCalls", "tool_calls"))
    if holder is not None:
        key, calls = holder
        implied = [(c.get("name"), c.get("args") or {}) for c in calls if isinstance(c, dict)]
        where = f"criteria.{key}"
    else:
        order = _holder(criteria, ("toolCallsOrder", "tool_calls_order"))
        implied = [(name, {}) for name in order[1]] if order else []
        where = f"criteria.{order[0]}" if order else "criteria"
    if implied != wanted:
        losses.append(
            Loss(
                case,
                path,
                f"UiPath reads the expected tool calls from the criteria ({where}), which "
                "say otherwise: change the criteria to match (or the trajectory back)",
            )
        )
    return criteria


def _holder(criteria: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, list[Any]] | None:
    """(evaluator.key, list) of the first criterion holding one of `keys` as a list."""
    for evaluator, value in criteria.items():
        if isinstance(value, dict):
            for key in keys:
                if isinstance(value.get(key), list):
                    return f"{evaluator}.{key}", value[key]
    return None


def _write_uipath(header: _Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    items_key = "evaluationItems" if variant == "uipath-evaluation-items" else "evaluations"
    if variant == "uipath-legacy":
        # A legacy evaluation's criteria are implied by its expectedOutput; edited ones are
        # written in the current shape, whose criteria are explicit (read as current by the
        # per-evaluation criteria, as UiPath's own converter produces them).
        variant = "uipath-current"
    doc: dict[str, Any] = {"id": header.eval_set_id}
    if header.name:
        doc["name"] = header.name
    if header.description:
        doc["description"] = header.description
    doc.update(header.metadata)
    doc[items_key] = [_uipath_case(c, variant, losses) for c in cases]
    folder = _safe_name(header.eval_set_id)
    files = [SourceFile(f"{folder}/eval-sets/{folder}.json", _dump(doc, len(cases)))]
    config = dict(header.evaluator_config or {})
    types = config.pop("$types", {}) if isinstance(config.get("$types"), dict) else {}
    for index, (ref, definition) in enumerate(config.items()):
        files.append(SourceFile(f"{folder}/evaluators/{index + 1:02d}-{_safe_name(ref)}.json", _dump(definition)))
    for type_id, type_doc in types.items():
        relative = posixpath.normpath(str(type_id)[len("file://") :]).lstrip("/")
        if relative.startswith(".."):
            losses.append(Loss(None, f"evaluator_config.$types.{type_id}", "a type file outside the project"))
            continue
        files.append(SourceFile(f"{folder}/evaluators/{relative}", _dump(type_doc)))
    return files if len(files) > 1 else [SourceFile(f"{folder}.json", files[0].data)]


# --- DeepEval ------------------------------------------------------------------------------------


def _text_of(message: dict[str, Any] | None, path: str, case: str, losses: list[Loss]) -> str | None:
    if message is None:
        return None
    if not isinstance(message["content"], str):
        losses.append(Loss(case, f"{path}.content", "DeepEval turns are text; this content has parts"))
        return None
    return message["content"]


def _deepeval_tools(
    calls: list[dict[str, Any]], notes: list[dict[str, Any]], path: str, case: str, losses: list[Loss]
) -> list[dict[str, Any]]:
    out = []
    for index, call in enumerate(calls):
        if call.get("call_id") is not None:
            losses.append(Loss(case, f"{path}[{index}].call_id", "DeepEval tool calls have no ids"))
        tool: dict[str, Any] = {"name": call["name"], "input_parameters": call.get("args") or {}}
        if call.get("result") is not None:
            tool["output"] = call["result"]
        if index < len(notes):
            tool.update(notes[index])
        out.append(tool)
    return out


def _stored_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metadata `tools_called` entries ({name, args, result, ...notes}) back as DeepEval tools."""
    out = []
    for tool in tools:
        item = {k: v for k, v in tool.items() if k not in ("args", "result")}
        item["input_parameters"] = tool.get("args") or {}
        if tool.get("result") is not None:
            item["output"] = tool["result"]
        out.append(item)
    return out


_SHARED = ("context", "comments", "additional_metadata", "custom_column_key_values")


def _golden_common(raw: dict[str, Any], golden: dict[str, Any], metadata: dict[str, Any]) -> None:
    if raw["name"]:
        golden["name"] = raw["name"]
    if raw["tags"]:
        golden["tags"] = raw["tags"]
    for key in _SHARED:
        if key in metadata:
            golden[key] = metadata.pop(key)
    extra = metadata.pop("extra", None)
    if isinstance(extra, dict):
        golden.update({k: v for k, v in extra.items() if k not in golden})


def _single_golden(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    for key in ("session_input", "conversation_scenario", "rubrics", "criteria"):
        if raw[key]:
            losses.append(Loss(eid, key, f"a single-turn DeepEval golden has no {key}"))
    if len(raw["conversation"]) != 1:
        losses.append(
            Loss(eid, "conversation", f"a single-turn golden is one turn (this case has {len(raw['conversation'])})")
        )
        return {"input": ""}
    inv = raw["conversation"][0]
    golden: dict[str, Any] = {"input": _text_of(inv["user_content"], "conversation[0].user_content", eid, losses)}
    expected = _text_of(inv.get("expected_final_response"), "conversation[0].expected_final_response", eid, losses)
    if expected is not None:
        golden["expected_output"] = expected
    metadata = dict(raw["metadata"])
    inv_meta = dict(inv["metadata"])
    notes = inv_meta.pop("expected_tools_notes", [])
    if inv["expected_tool_trajectory"]:
        golden["expected_tools"] = _deepeval_tools(
            inv["expected_tool_trajectory"], notes, "conversation[0].expected_tool_trajectory", eid, losses
        )
    for key in ("retrieval_context", "actual_output", "source_file"):
        if key in metadata:
            golden[key] = metadata.pop(key)
    if "tools_called" in metadata:
        golden["tools_called"] = _stored_tools(metadata.pop("tools_called"))
    _golden_common(raw, golden, metadata)
    return golden


def _turn(message: dict[str, Any], role: str) -> dict[str, Any]:
    meta = dict(message.get("metadata") or {})
    turn: dict[str, Any] = {"role": role, "content": message["content"]}
    if "tools_called" in meta:
        turn["tools_called"] = _stored_tools(meta.pop("tools_called"))
    notes = meta.pop("tools_called_notes", None)
    turn.update(meta)
    if notes is not None:
        turn["_notes"] = notes
    return turn


def _multi_golden(case: dict[str, Any], losses: list[Loss]) -> dict[str, Any]:
    raw = case
    eid = case["eval_id"]
    for key in ("session_input", "rubrics", "criteria"):
        if raw[key]:
            losses.append(Loss(eid, key, f"a conversational DeepEval golden has no {key}"))
    scenario = raw["conversation_scenario"] or {}
    golden: dict[str, Any] = {"scenario": scenario.get("conversation_plan", "")}
    if scenario.get("starting_prompt") is not None:
        losses.append(Loss(eid, "conversation_scenario.starting_prompt", "DeepEval scenarios have no starting prompt"))
    if scenario.get("expected_outcome") is not None:
        golden["expected_outcome"] = scenario["expected_outcome"]
    if scenario.get("user_persona") is not None:
        golden["user_description"] = scenario["user_persona"]
    if (scenario.get("metadata") or {}).get("persona") is not None:
        golden["persona"] = scenario["metadata"]["persona"]
    metadata = dict(raw["metadata"])
    turns: list[dict[str, Any]] = [dict(t) for t in metadata.pop("opening_assistant_turns", [])]
    for index, inv in enumerate(raw["conversation"]):
        where = f"conversation[{index}]"
        if inv["invocation_id"] != f"turn_{index + 1}":
            losses.append(Loss(eid, f"{where}.invocation_id", "DeepEval turns have no ids"))
        inv_meta = dict(inv["metadata"])
        if inv["rubrics"]:
            losses.append(Loss(eid, f"{where}.rubrics", "DeepEval turns have no rubrics"))
        user = _turn(inv["user_content"], "user")
        if inv_meta.get("user_retrieval_context"):
            user["retrieval_context"] = inv_meta.pop("user_retrieval_context")
        turns.append(user)
        replies = [*inv["expected_intermediate_responses"]]
        if inv.get("expected_final_response") is not None:
            replies.append(inv["expected_final_response"])
        if not replies and (inv["expected_tool_trajectory"] or inv_meta.get("retrieval_context")):
            losses.append(
                Loss(
                    eid,
                    f"{where}.expected_tool_trajectory",
                    "a DeepEval turn's tools belong to an assistant reply; this turn has none",
                )
            )
        written = [_turn(r, "assistant") for r in replies]
        if written:
            last = written[-1]
            if inv["expected_tool_trajectory"]:
                notes = last.pop("_notes", [])
                earlier = [t for t in written[:-1] if "tools_called" in t]
                if earlier:
                    losses.append(
                        Loss(
                            eid, f"{where}.expected_tool_trajectory", "the tool calls are split between several replies"
                        )
                    )
                last["tools_called"] = _deepeval_tools(
                    inv["expected_tool_trajectory"], notes, f"{where}.expected_tool_trajectory", eid, losses
                )
            if "retrieval_context" in inv_meta:
                last["retrieval_context"] = inv_meta.pop("retrieval_context")
        for turn in written:
            if "_notes" in turn:
                losses.append(Loss(eid, f"{where}", "tool notes of a reply without tool calls"))
                turn.pop("_notes")
        if inv_meta:
            for key in inv_meta:
                losses.append(Loss(eid, f"{where}.metadata.{key}", "DeepEval turns have no such field"))
        turns.extend(written)
    if turns:
        golden["turns"] = turns
    _golden_common(raw, golden, metadata)
    return golden


def _write_deepeval(header: _Header, cases: list[dict[str, Any]], variant: str, losses: list[Loss]) -> list[SourceFile]:
    multi = variant == "deepeval-multi-turn"
    goldens = [_multi_golden(c, losses) if multi else _single_golden(c, losses) for c in cases]
    # Goldens carry no ids: the reader derives them (id, else a unique name, else golden-<n>).
    # An id is written only where the derivation would not give the case's own.
    derived = derive_eval_ids([[None, g.get("name")] for g in goldens], "golden")
    for golden, case, guess in zip(goldens, cases, derived, strict=True):
        if guess != case["eval_id"]:
            golden["id"] = case["eval_id"]
    csv_file = header.metadata.get("file_type") == "csv"
    filename = f"{_safe_name(header.eval_set_id)}.{'csv' if csv_file else 'json'}"
    if stem(filename) != header.eval_set_id:
        losses.append(Loss(None, "eval_set_id", "a DeepEval dataset's id is its file name; this id is not a file name"))
    return [SourceFile(filename, _deepeval_csv(goldens) if csv_file else _dump(goldens, len(cases)))]


_LIST_CELLS = {"context", "retrieval_context", "tags"}


def _deepeval_csv(goldens: list[dict[str, Any]]) -> bytes:
    """Goldens as DeepEval's CSV: list cells joined with `|`, objects and tool lists as JSON."""
    columns = list(dict.fromkeys(key for golden in goldens for key in golden))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for golden in goldens:
        row = []
        for column in columns:
            value = golden.get(column)
            if value is None:
                row.append("")
            elif isinstance(value, str):
                row.append(value)
            elif column in _LIST_CELLS and isinstance(value, list) and all(isinstance(v, str) for v in value):
                row.append(LIST_DELIMITER.join(value))
            else:
                row.append(json.dumps(value, ensure_ascii=False))
        writer.writerow(row)
    return buffer.getvalue().encode()


_WRITERS = {"adk": _write_adk, "uipath": _write_uipath, "deepeval": _write_deepeval}
