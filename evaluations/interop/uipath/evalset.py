"""UiPath eval sets (seed 003), as `uipath eval` reads them, with their evaluator definitions.

Three shapes of eval-set file are read (`ParsedEvalSet.variant`):

- `uipath-current`: `{version, id, name, evaluatorRefs, evaluations: [{id, name, inputs,
  evaluationCriterias, ...}]}`. A file with `version` is current, as UiPath decides.
- `uipath-legacy`: `{fileName, id, name, batchSize, evaluatorRefs, evaluations: [{id, name,
  inputs, expectedOutput, expectedAgentBehavior, simulateTools, ...}]}`.
- `uipath-evaluation-items`: the shape in UiPath's documentation page, `{evaluatorRefs,
  evaluationItems: [{id, agentInput, evaluations: [{evaluatorId, evaluationCriteria}]}]}`.

`evaluatorConfigs` (`["id", {"ref": "id", "weight": 2}]`) replaces `evaluatorRefs` when it is
non-empty, as in UiPath.

Evaluator definitions are companion files (`is_companion()`): new-style
`{version, id, evaluatorTypeId, evaluatorConfig}`, legacy `{id, category, type, ...}`, and the
type files of custom evaluators (`{evaluatorTypeId, evaluatorConfigSchema, ...}`, referenced as
`"evaluatorTypeId": "file://types/x.json"`). A reference resolves by the `id` inside each file,
never by its file name; when several files define one id, the one in the eval set's own
project (`<project>/evaluators/` beside `<project>/eval-sets/`) wins.

Mapping into the native model, per evaluation:

- one invocation `turn_1`; `user_content` holds `inputs` as a JSON part;
- `criteria` is `evaluationCriterias` as given. UiPath's meaning is kept: a `null` criterion
  means "run this evaluator with its default criteria"; an evaluator with no key at all is not
  run for that case. A legacy evaluation has no criteria of its own, so, as UiPath converts it,
  every referenced evaluator gets `{expectedOutput, expectedAgentBehavior}`;
- `expected_final_response` is the evaluation's `expectedOutput` (legacy, or current when
  given), else the first `expectedOutput` among its criteria, else among the defaults of the
  evaluators it leaves `null`;
- `expected_tool_trajectory` comes from a `toolCalls` criterion (`[{name, args}]`), failing that
  from `toolCallsOrder` names (no args), looked up the same way; `toolOutputs` become the
  `result` of the expected calls with the same names, in order;
- every other field of the evaluation (`expectedAgentBehavior`, `mockingStrategy`,
  `simulateTools`, `toolsToSimulate`, `evalSetId`, `createdAt`, ...) goes to the case metadata
  under its own name. Eval-set fields other than id/name go to the eval set's metadata.

`ParsedEvalSet.evaluator_config` is `{evaluator id: definition JSON as uploaded}` for the
referenced evaluators that were found, plus, when custom evaluators bring type files,
`"$types": {evaluatorTypeId as written ("file://types/x.json"): type file JSON}`. The `$`
keeps it apart from evaluator ids.

`ParsedEvalSet.default_config` has one criterion per evaluator reference, keyed by the
evaluator id: `evaluator` is the `evaluatorTypeId` (`uipath-tool-call-order`,
`file://types/x.json` for a custom one) or, for a legacy definition, a name from its numeric
category and type (`uipath-legacy-exact-match`, see `legacy_evaluator_name`); `options` is
`evaluatorConfig` (with `defaultEvaluationCriteria`) or the legacy definition's settings, plus
`weight` when `evaluatorConfigs` gives one; `judge_model` is the evaluator's `model`. UiPath
itself has no thresholds, so: evaluators that check a fact (exact match, contains, the tool-call
evaluators) pass only at 1.0; similarity scores and LLM judges pass at 0.7. A reference with no
definition in the upload is a warning, and its criterion is disabled (nothing says what it is).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evaluations.interop.base import (
    TOO_LARGE_A_NUMBER,
    CaseSink,
    ParsedEvalSet,
    PathPart,
    Problem,
    SourceFile,
    as_float,
    format_path,
    locate,
    problems_from_validation_error,
    schema_error,
)
from evaluations.schemas.evalset import (
    CriterionConfig,
    EvalCase,
    EvalConfig,
    EvalSet,
    Invocation,
    MessageContent,
    ToolCall,
)

CURRENT = "uipath-current"
LEGACY = "uipath-legacy"
ITEMS = "uipath-evaluation-items"

PASS_FAIL_THRESHOLD = 1.0
SCORE_THRESHOLD = 0.7
# Evaluators whose score says whether a fact holds; everything else scores a similarity.
_FACT_EVALUATORS = {
    "uipath-exact-match",
    "uipath-contains",
    "uipath-tool-call-args",
    "uipath-tool-call-count",
    "uipath-tool-call-order",
    "uipath-tool-call-output",
    "uipath-legacy-exact-match",
    "uipath-legacy-contains",
    "uipath-legacy-regex",
    "uipath-legacy-csv-column-exact-match",
}

# uipath.eval.models.LegacyEvaluatorCategory / LegacyEvaluatorType.
LEGACY_CATEGORIES = {0: "deterministic", 1: "llm-as-a-judge", 2: "agent-scorer", 3: "trajectory"}
LEGACY_TYPES = {
    0: "unknown",
    1: "exact-match",  # "Equals"
    2: "contains",
    3: "regex",
    4: "factuality",
    5: "custom",
    6: "json-similarity",
    7: "trajectory",
    8: "context-precision",
    9: "faithfulness",
    10: "csv-column-exact-match",
}
# Legacy-definition fields that are bookkeeping rather than evaluator settings.
_LEGACY_BOOKKEEPING = {"id", "fileName", "description", "category", "type", "createdAt", "updatedAt"}
_TYPE_SCHEMA_KEYS = {"evaluatorConfigSchema", "evaluationCriteriaSchema", "justificationSchema"}

_OUTPUT_KEYS = ("expectedOutput", "expected_output")
_TOOL_CALLS_KEYS = ("toolCalls", "tool_calls")
_ORDER_KEYS = ("toolCallsOrder", "tool_calls_order")
_OUTPUTS_KEYS = ("toolOutputs", "tool_outputs")


def legacy_evaluator_name(category: Any, type_: Any) -> str:
    """The evaluator name for a legacy definition, chosen as UiPath's factory chooses the class:
    by category first (every LLM-judge and trajectory category is one evaluator), then by type."""
    if category == 3:
        return "uipath-legacy-trajectory"
    if category == 1:
        return {8: "uipath-legacy-context-precision", 9: "uipath-legacy-faithfulness"}.get(
            type_, "uipath-legacy-llm-as-a-judge"
        )
    if category == 0 and type_ in LEGACY_TYPES and type_ != 0:
        return f"uipath-legacy-{LEGACY_TYPES[type_]}"
    if category == 2:
        return "uipath-legacy-agent-scorer"
    return f"uipath-legacy-category-{category}-type-{type_}"


# --- What the files look like -------------------------------------------------------------------


class _Lenient(BaseModel):
    # UiPath's own models allow extra fields (they end up in metadata) and both spellings.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class _Item(_Lenient):
    id: str
    name: str | None = None


class _CurrentItem(_Item):
    inputs: dict[str, Any]
    evaluation_criterias: dict[str, dict[str, Any] | None] = Field(alias="evaluationCriterias")
    expected_output: Any = Field(None, alias="expectedOutput")
    expected_agent_behavior: str = Field("", alias="expectedAgentBehavior")
    mocking_strategy: dict[str, Any] | None = Field(None, alias="mockingStrategy")
    input_mocking_strategy: dict[str, Any] | None = Field(None, alias="inputMockingStrategy")


class _ToolSimulation(_Lenient):
    name: str


class _LegacyItem(_Item):
    inputs: dict[str, Any]
    expected_output: Any = Field(alias="expectedOutput")
    expected_agent_behavior: str = Field("", alias="expectedAgentBehavior")
    simulate_input: bool | None = Field(None, alias="simulateInput")
    input_generation_instructions: str | None = Field(None, alias="inputGenerationInstructions")
    simulate_tools: bool | None = Field(None, alias="simulateTools")
    simulation_instructions: str | None = Field(None, alias="simulationInstructions")
    tools_to_simulate: list[_ToolSimulation] = Field(default_factory=list, alias="toolsToSimulate")


class _ItemEvaluation(_Lenient):
    evaluator_id: str = Field(alias="evaluatorId")
    evaluation_criteria: dict[str, Any] | None = Field(None, alias="evaluationCriteria")


class _EvaluationItem(_Item):
    agent_input: dict[str, Any] = Field(alias="agentInput")
    evaluations: list[_ItemEvaluation] = Field(default_factory=list)


class _Header(_Lenient):
    id: str
    name: str | None = None
    description: str | None = None
    evaluator_refs: list[str] = Field(default_factory=list, alias="evaluatorRefs")


# Keys each item shape maps to native fields (both spellings); the rest is case metadata.
_MAPPED_KEYS = {
    CURRENT: {"id", "name", "inputs", "evaluationCriterias", "evaluation_criterias", "expectedOutput",
              "expected_output"},
    LEGACY: {"id", "name", "inputs", "expectedOutput", "expected_output"},
    ITEMS: {"id", "name", "agentInput", "agent_input", "evaluations"},
}


# --- Detection --------------------------------------------------------------------------------


def _is_evaluator_definition(doc: dict[str, Any]) -> bool:
    if not isinstance(doc.get("id"), str):
        return False
    if isinstance(doc.get("evaluatorTypeId"), str):
        return True
    return _is_int(doc.get("category")) and _is_int(doc.get("type"))


def _is_type_file(doc: dict[str, Any]) -> bool:
    return isinstance(doc.get("evaluatorTypeId"), str) and bool(_TYPE_SCHEMA_KEYS & doc.keys())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_eval_set(doc: dict[str, Any]) -> bool:
    return isinstance(doc.get("evaluations"), list) or isinstance(doc.get("evaluationItems"), list)


class UiPathReader:
    name = "uipath"
    label = "UiPath eval set"

    def sniff(self, file: SourceFile) -> str | None:
        if file.suffix != "json":
            return "not a .json file"
        doc, why = file.try_json()
        if why:
            return why
        if not isinstance(doc, dict):
            return "the document is not a JSON object with an `evaluations` list"
        if "eval_set_id" in doc or "eval_cases" in doc:
            return "it has eval_set_id / eval_cases (an AgentFlow or ADK eval set)"
        if _is_type_file(doc):
            return "it is a UiPath evaluator type schema (a companion file), not an eval set"
        if not _is_eval_set(doc) and _is_evaluator_definition(doc):
            return "it is a UiPath evaluator definition (a companion file), not an eval set"
        if "$schema" in doc or ("properties" in doc and doc.get("type") == "object"):
            return "it is a JSON Schema, not an eval set"
        if isinstance(doc.get("evaluationItems"), list):
            return None
        evaluations = doc.get("evaluations")
        if not isinstance(evaluations, list):
            return "no top-level `evaluations` list"
        if {"evaluatorRefs", "evaluatorConfigs", "fileName"} & doc.keys():
            return None
        first = next((e for e in evaluations if isinstance(e, dict)), None)
        if first is not None and {"inputs", "evaluationCriterias", "expectedOutput"} & first.keys():
            return None
        return "no evaluatorRefs, and the evaluations carry no inputs / evaluationCriterias / expectedOutput"

    def is_companion(self, file: SourceFile) -> bool:
        if file.suffix != "json":
            return False
        doc, why = file.try_outline()  # cheap on a large eval set of another format
        if why or not isinstance(doc, dict) or _is_eval_set(doc):
            return False
        return _is_evaluator_definition(doc) or _is_type_file(doc)

    def parse(
        self, file: SourceFile, companions: Sequence[SourceFile], sink: CaseSink | None = None
    ) -> ParsedEvalSet:
        doc = file.json
        if not isinstance(doc, dict):
            raise schema_error(
                [Problem("a UiPath eval set is a JSON object with an `evaluations` list", file=file.name, line=1)]
            )
        return _Parser(file, doc, [c for c in companions if self.is_companion(c)]).run()


# --- Parsing ----------------------------------------------------------------------------------


@dataclass
class _Definition:
    file: SourceFile
    doc: dict[str, Any]

    @property
    def legacy(self) -> bool:
        return "evaluatorTypeId" not in self.doc

    @property
    def config(self) -> dict[str, Any]:
        if self.legacy:
            return {k: v for k, v in self.doc.items() if k not in _LEGACY_BOOKKEEPING}
        config = self.doc.get("evaluatorConfig")
        return dict(config) if isinstance(config, dict) else {}

    @property
    def evaluator(self) -> str:
        if self.legacy:
            return legacy_evaluator_name(self.doc.get("category"), self.doc.get("type"))
        return str(self.doc["evaluatorTypeId"])

    @property
    def default_criteria(self) -> dict[str, Any] | None:
        if self.legacy:
            return None
        default = self.config.get("defaultEvaluationCriteria", self.config.get("default_evaluation_criteria"))
        return default if isinstance(default, dict) else None


@dataclass
class _Criterion:
    """One evaluator's criterion for a case, and where it sits (for problems)."""

    evaluator_id: str
    value: dict[str, Any]
    file: SourceFile
    path: list[PathPart]


class _Parser:
    def __init__(self, file: SourceFile, doc: dict[str, Any], companions: list[SourceFile]):
        self.file = file
        self.doc = doc
        self.companions = companions
        self.problems: list[Problem] = []
        self.warnings: list[str] = []
        self.variant = self._variant()
        self.items_key = "evaluationItems" if self.variant == ITEMS else "evaluations"
        self.definitions: dict[str, _Definition] = {}
        self._checked_defaults: set[str] = set()

    def _variant(self) -> str:
        if isinstance(self.doc.get("evaluationItems"), list):
            return ITEMS
        if self.doc.get("version") is not None:
            return CURRENT
        # No version: UiPath would call it legacy; an old file that already has per-evaluation
        # criteria is read as what it is.
        evaluations = self.doc.get("evaluations")
        if isinstance(evaluations, list) and any(
            isinstance(e, dict) and "evaluationCriterias" in e for e in evaluations
        ):
            return CURRENT
        return LEGACY

    def problem(self, message: str, path: Sequence[PathPart], *, case: str | None = None,
                file: SourceFile | None = None) -> None:
        file = file or self.file
        line, column = locate(file.text, path) or (None, None)
        self.problems.append(
            Problem(message, file=file.name, case=case, path=format_path(path) or None, line=line, column=column)
        )

    def run(self) -> ParsedEvalSet:
        header = self._header()
        refs, weights = self._refs()
        self._resolve(refs)
        cases = self._cases(refs)
        if self.problems:
            raise schema_error(self.problems)
        assert header is not None  # a header problem would have raised above

        used_ids = set(refs)
        self._warn_unreferenced(cases, used_ids)
        evalset = EvalSet(
            eval_set_id=header.id,
            name=header.name or "",
            description=header.description or "",
            eval_cases=cases,
            metadata={k: v for k, v in self.doc.items()
                      if k not in {"id", "name", "description", "evaluations", "evaluationItems"}},
        )
        evaluator_config, companions_used = self._evaluator_config()
        return ParsedEvalSet(
            evalset=evalset,
            format=UiPathReader.name,
            variant=self.variant,
            source=self.file,
            companions_used=companions_used,
            default_config=self._default_config(refs, weights),
            evaluator_config=evaluator_config,
            warnings=self.warnings,
        )

    # The eval set's own fields ------------------------------------------------------------

    def _header(self) -> _Header | None:
        try:
            header = _Header.model_validate(self.doc)
        except ValidationError as exc:
            self.problems.extend(problems_from_validation_error(exc, file=self.file))
            header = None
        if not isinstance(self.doc.get(self.items_key), list):
            missing = self.items_key not in self.doc
            self.problem("required field is missing" if missing else "must be a list of evaluations", [self.items_key])
        return header

    def _refs(self) -> tuple[list[str], dict[str, float]]:
        """The evaluator ids the eval set uses, in order, and any weights `evaluatorConfigs` gives."""
        configs = self.doc.get("evaluatorConfigs")
        if not configs:
            refs = self.doc.get("evaluatorRefs")
            return ([r for r in refs if isinstance(r, str)] if isinstance(refs, list) else []), {}
        if not isinstance(configs, list):
            self.problem("must be a list of evaluator ids or {ref, weight} objects", ["evaluatorConfigs"])
            return [], {}
        ids: list[str] = []
        weights: dict[str, float] = {}
        for index, entry in enumerate(configs):
            if isinstance(entry, str):
                ids.append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("ref"), str):
                ids.append(entry["ref"])
                if "weight" in entry:
                    weight = entry["weight"]
                    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
                        self.problem("weight must be a number of at least 0", ["evaluatorConfigs", index, "weight"])
                    elif (number := as_float(weight)) is None:
                        self.problem(TOO_LARGE_A_NUMBER, ["evaluatorConfigs", index, "weight"])
                    else:
                        weights[entry["ref"]] = number
            else:
                self.problem("must be an evaluator id or a {ref, weight} object", ["evaluatorConfigs", index])
        return ids, weights

    # Evaluator definitions ----------------------------------------------------------------

    def _project_root(self) -> str:
        # UiPath looks for evaluators in <eval set's folder>/../evaluators.
        return posixpath.dirname(posixpath.dirname(self.file.name))

    def _closeness(self, companion: SourceFile) -> int:
        root = self._project_root()
        if posixpath.dirname(companion.name) == posixpath.join(root, "evaluators"):
            return 2
        return 1 if not root or companion.name.startswith(root + "/") else 0

    def _resolve(self, refs: list[str]) -> None:
        wanted = set(refs)
        found: dict[str, list[_Definition]] = {}
        for companion in self.companions:
            doc = companion.json
            if _is_evaluator_definition(doc) and doc["id"] in wanted:
                found.setdefault(doc["id"], []).append(_Definition(companion, doc))
        for ref in refs:
            candidates = found.get(ref)
            if not candidates or ref in self.definitions:
                continue
            best = max(self._closeness(d.file) for d in candidates)
            nearest = [d for d in candidates if self._closeness(d.file) == best]
            chosen = nearest[0]
            others = [d.file.name for d in nearest[1:] if d.doc != chosen.doc]
            if others:
                self.warnings.append(
                    f"evaluator {ref!r} is defined by several files ({', '.join([chosen.file.name, *others])}); "
                    f"using {chosen.file.name}"
                )
            self.definitions[ref] = chosen
            self._check_definition(chosen)
        missing = [r for r in dict.fromkeys(refs) if r not in self.definitions]
        if missing:
            self.warnings.append(
                f"evaluator definitions not in the upload: {', '.join(missing)} (their criteria are kept; "
                "upload the evaluators/ folder with the eval set to run them)"
            )

    def _check_definition(self, definition: _Definition) -> None:
        doc, file = definition.doc, definition.file
        if definition.legacy:
            return  # category and type are integers, or it would not be a companion
        if "evaluatorConfig" in doc and not isinstance(doc["evaluatorConfig"], dict):
            self.problem("evaluatorConfig must be an object", ["evaluatorConfig"], file=file)
            return
        default = doc.get("evaluatorConfig", {}).get("defaultEvaluationCriteria")
        if default is not None and not isinstance(default, dict):
            self.problem("defaultEvaluationCriteria must be an object or null",
                         ["evaluatorConfig", "defaultEvaluationCriteria"], file=file)

    def _type_file(self, definition: _Definition) -> SourceFile | None:
        """The type file a custom evaluator's `file://...` evaluatorTypeId names, if uploaded."""
        type_id = str(definition.doc.get("evaluatorTypeId", ""))
        if not type_id.startswith("file://"):
            return None
        relative = posixpath.normpath(type_id[len("file://"):])
        folder = posixpath.dirname(definition.file.name)
        types = [c for c in self.companions if _is_type_file(c.json)]
        by_name = {c.name: c for c in types}
        for guess in (posixpath.join(folder, relative), posixpath.join(folder, "custom", relative)):
            if posixpath.normpath(guess) in by_name:
                return by_name[posixpath.normpath(guess)]
        for candidate in types:
            if candidate.name.endswith("/" + relative) or candidate.name == relative:
                return candidate
        base = posixpath.basename(relative)
        return next((c for c in types if c.basename == base), None)

    def _evaluator_config(self) -> tuple[dict[str, Any], list[SourceFile]]:
        config: dict[str, Any] = {}
        types: dict[str, Any] = {}
        used: list[SourceFile] = []
        for ref, definition in self.definitions.items():
            config[ref] = definition.doc
            if definition.file not in used:
                used.append(definition.file)
            type_id = definition.doc.get("evaluatorTypeId")
            if not (isinstance(type_id, str) and type_id.startswith("file://")):
                continue
            type_file = self._type_file(definition)
            if type_file is None:
                self.warnings.append(
                    f"custom evaluator {ref!r}: its type file {type_id[len('file://'):]} is not in the upload"
                )
                continue
            types[type_id] = type_file.json
            if type_file not in used:
                used.append(type_file)
        if types:
            config["$types"] = types
        return config, used

    def _default_config(self, refs: list[str], weights: dict[str, float]) -> EvalConfig:
        criteria: dict[str, CriterionConfig] = {}
        for ref in dict.fromkeys(refs):
            definition = self.definitions.get(ref)
            if definition is None:
                weight = {"weight": weights[ref]} if ref in weights else {}
                criteria[ref] = CriterionConfig(enabled=False, options=weight)
                continue
            options = definition.config
            if ref in weights:
                options["weight"] = weights[ref]
            evaluator = definition.evaluator
            extra: dict[str, Any] = {}
            if isinstance(options.get("model"), str):
                extra["judge_model"] = options["model"]
            criteria[ref] = CriterionConfig(
                evaluator=evaluator,
                options=options,
                threshold=PASS_FAIL_THRESHOLD if evaluator in _FACT_EVALUATORS else SCORE_THRESHOLD,
                **extra,
            )
        return EvalConfig(criteria=criteria)

    # Cases ---------------------------------------------------------------------------------

    def _cases(self, refs: list[str]) -> list[EvalCase]:
        items = self.doc.get(self.items_key)
        if not isinstance(items, list):
            return []
        cases: list[EvalCase] = []
        seen: dict[str, int] = {}
        for index, raw in enumerate(items):
            prefix: list[PathPart] = [self.items_key, index]
            if not isinstance(raw, dict):
                self.problem("an evaluation must be a JSON object", prefix, case=f"#{index + 1}")
                continue
            case_id = raw["id"] if isinstance(raw.get("id"), str) else f"#{index + 1}"
            if isinstance(raw.get("id"), str):
                if raw["id"] in seen:
                    self.problem(f"duplicate id: evaluations #{seen[raw['id']] + 1} and #{index + 1} share it",
                                 [*prefix, "id"], case=case_id)
                seen.setdefault(raw["id"], index)
            case = self._case(raw, prefix, case_id, refs)
            if case is not None:
                cases.append(case)
        return cases

    def _case(self, raw: dict[str, Any], prefix: list[PathPart], case_id: str, refs: list[str]) -> EvalCase | None:
        models: dict[str, type[_Item]] = {CURRENT: _CurrentItem, LEGACY: _LegacyItem, ITEMS: _EvaluationItem}
        model = models[self.variant]
        try:
            item = model.model_validate(raw)
        except ValidationError as exc:
            self.problems.extend(problems_from_validation_error(exc, file=self.file, prefix=prefix, case=case_id))
            return None

        expected_output: Any = None
        explicit: list[_Criterion] = []
        criteria: dict[str, dict[str, Any] | None]
        if isinstance(item, _CurrentItem):
            inputs = item.inputs
            criteria = item.evaluation_criterias
            expected_output = item.expected_output
            key = "evaluationCriterias" if "evaluationCriterias" in raw else "evaluation_criterias"
            explicit = [_Criterion(ev, c, self.file, [*prefix, key, ev]) for ev, c in criteria.items() if c]
        elif isinstance(item, _LegacyItem):
            inputs = item.inputs
            expected_output = item.expected_output
            # As UiPath converts a legacy evaluation: every evaluator judges it against the same
            # expected output and behaviour.
            criteria = {
                ref: {"expectedOutput": item.expected_output, "expectedAgentBehavior": item.expected_agent_behavior}
                for ref in refs
            }
        else:
            assert isinstance(item, _EvaluationItem)
            inputs = item.agent_input
            criteria = {}
            for j, evaluation in enumerate(item.evaluations):
                criteria[evaluation.evaluator_id] = evaluation.evaluation_criteria
                if evaluation.evaluation_criteria:
                    explicit.append(_Criterion(evaluation.evaluator_id, evaluation.evaluation_criteria, self.file,
                                               [*prefix, "evaluations", j, "evaluationCriteria"]))
        defaults = [self._default_criterion(ev) for ev, c in criteria.items() if c is None]
        effective = explicit + [d for d in defaults if d is not None]

        if expected_output is None:
            expected_output = next((_first(c.value, _OUTPUT_KEYS) for c in effective
                                    if _first(c.value, _OUTPUT_KEYS) is not None), None)
        problems_before = len(self.problems)
        trajectory = self._trajectory(effective, case_id)
        if len(self.problems) > problems_before:
            return None

        invocation = Invocation(
            invocation_id="turn_1",
            user_content=MessageContent.json_part("user", inputs),
            expected_tool_trajectory=trajectory,
            expected_final_response=(
                MessageContent.json_part("assistant", expected_output) if expected_output is not None else None
            ),
        )
        mapped = _MAPPED_KEYS[self.variant]
        return EvalCase(
            eval_id=item.id,
            name=item.name or "",
            conversation=[invocation],
            metadata={k: v for k, v in raw.items() if k not in mapped},
            criteria=criteria,
        )

    def _default_criterion(self, evaluator_id: str) -> _Criterion | None:
        definition = self.definitions.get(evaluator_id)
        if definition is None or definition.default_criteria is None:
            return None
        key = "defaultEvaluationCriteria" if "defaultEvaluationCriteria" in definition.config \
            else "default_evaluation_criteria"
        return _Criterion(evaluator_id, definition.default_criteria, definition.file, ["evaluatorConfig", key])

    def _trajectory(self, criteria: list[_Criterion], case_id: str) -> list[ToolCall]:
        """The expected tool calls: the first `toolCalls` list, else the first `toolCallsOrder`;
        `toolOutputs` fill in their results. Malformed entries are problems where they are."""
        calls: list[ToolCall] | None = None
        for criterion in criteria:
            found = self._tool_calls(criterion, case_id)
            if found and calls is None:
                calls = found
        if calls is None:
            for criterion in criteria:
                found = self._tool_order(criterion, case_id)
                if found and calls is None:
                    calls = found
        calls = calls or []
        for criterion in criteria:
            for name, output in self._tool_outputs(criterion, case_id):
                target = next((c for c in calls if c.name == name and c.result is None), None)
                if target is not None:
                    target.result = output
        return calls

    def _entries(self, criterion: _Criterion, keys: tuple[str, ...], case_id: str) -> list[tuple[list[PathPart], Any]]:
        """(path, entry) for each entry of the list under one of `keys`; a problem if not a list."""
        key = next((k for k in keys if k in criterion.value), None)
        if key is None:
            return []
        path = [*criterion.path, key]
        value = criterion.value[key]
        if not isinstance(value, list):
            self._criterion_problem("must be a list", path, criterion, case_id)
            return []
        return [([*path, j], entry) for j, entry in enumerate(value)]

    def _criterion_problem(self, message: str, path: list[PathPart], criterion: _Criterion, case_id: str) -> None:
        if criterion.file is not self.file:
            # A definition's default criteria are shared by many cases: report them once.
            marker = f"{criterion.file.name}:{format_path(path)}"
            if marker in self._checked_defaults:
                return
            self._checked_defaults.add(marker)
            self.problem(message, path, file=criterion.file)
        else:
            self.problem(message, path, case=case_id)

    def _tool_calls(self, criterion: _Criterion, case_id: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for path, entry in self._entries(criterion, _TOOL_CALLS_KEYS, case_id):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                self._criterion_problem("a tool call needs a string `name` (and an `args` object)", path,
                                        criterion, case_id)
            elif not isinstance(entry.get("args", {}), dict):
                self._criterion_problem("`args` must be an object", [*path, "args"], criterion, case_id)
            else:
                calls.append(ToolCall(name=entry["name"], args=entry.get("args") or {}))
        return calls

    def _tool_order(self, criterion: _Criterion, case_id: str) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for path, entry in self._entries(criterion, _ORDER_KEYS, case_id):
            if isinstance(entry, str):
                calls.append(ToolCall(name=entry))
            else:
                self._criterion_problem("a tool name must be a string", path, criterion, case_id)
        return calls

    def _tool_outputs(self, criterion: _Criterion, case_id: str) -> list[tuple[str, Any]]:
        outputs: list[tuple[str, Any]] = []
        for path, entry in self._entries(criterion, _OUTPUTS_KEYS, case_id):
            if isinstance(entry, dict) and isinstance(entry.get("name"), str) and "output" in entry:
                outputs.append((entry["name"], entry["output"]))
            else:
                self._criterion_problem("a tool output needs a string `name` and an `output`", path,
                                        criterion, case_id)
        return outputs

    def _warn_unreferenced(self, cases: list[EvalCase], refs: set[str]) -> None:
        # UiPath runs only the evaluators the eval set references and ignores other criteria.
        strays: dict[str, list[str]] = {}
        for case in cases:
            for evaluator_id in case.criteria:
                if evaluator_id not in refs:
                    strays.setdefault(evaluator_id, []).append(case.eval_id)
        for evaluator_id, case_ids in strays.items():
            shown = ", ".join(case_ids[:5]) + (f" and {len(case_ids) - 5} more" if len(case_ids) > 5 else "")
            self.warnings.append(
                f"criteria for evaluator {evaluator_id!r}, which the eval set does not reference "
                f"(cases {shown}): UiPath would not run it"
            )


def _first(value: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((value[k] for k in keys if k in value), None)


reader = UiPathReader()
