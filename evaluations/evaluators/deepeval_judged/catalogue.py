"""DeepEval's judged metrics as the pages offer them: each criterion, what it reads, its
parameters with their defaults, and the config entry that adds it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticUndefined

from evaluations.evaluators.base import registry
from evaluations.evaluators.deepeval_judged.core import JudgedMetric


@dataclass(frozen=True)
class Parameter:
    name: str
    default: str  # as JSON, "required" when there is none


@dataclass(frozen=True)
class CatalogueEntry:
    criterion: str
    deepeval_class: str
    title: str
    summary: str
    reads: str
    threshold: float
    parameters: list[Parameter]
    snippet: str  # the criterion's config entry, as JSON


def _reads(cls: type[JudgedMetric]) -> str:
    if cls.conversational:
        return "the conversation (turns; a monitor's thread)"
    required = getattr(cls, "required", ())
    return ", ".join(required) if required else "the evaluation_params you choose"


SNIPPET_OPTIONS: dict[str, dict[str, Any]] = {
    "deepeval_g_eval": {"name": "Correctness", "criteria": "Is the actual output correct given the input?",
                        "evaluation_params": ["input", "actual_output"]},
    "deepeval_tool_use": {"available_tools": [{"name": "search", "description": "search the web"}]},
    "deepeval_role_adherence": {"chatbot_role": "a polite travel agent"},
}


def judged_metric_catalogue() -> list[CatalogueEntry]:
    entries = []
    for name, cls in sorted(registry().items()):
        if not (isinstance(cls, type) and issubclass(cls, JudgedMetric)):
            continue
        parameters = []
        for field, info in cls.Options.model_fields.items():
            if field == "temperature":
                continue
            default = info.get_default(call_default_factory=True) if info.default is not PydanticUndefined or \
                info.default_factory is not None else PydanticUndefined
            parameters.append(Parameter(field, "required" if default is PydanticUndefined else json.dumps(default)))
        snippet = {"threshold": cls.default_threshold, "options": SNIPPET_OPTIONS.get(name, {})}
        entries.append(CatalogueEntry(
            criterion=name, deepeval_class=cls.deepeval_name, title=cls.title,
            summary=(cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ").replace("`", ""), reads=_reads(cls),
            threshold=cls.default_threshold, parameters=parameters, snippet=json.dumps(snippet)))
    return entries
