"""Runs scored by a real LLM judge (the fake chat-completions server on 127.0.0.1) for the
grading and calibration tests: `judged_run` runs the engine with the `llm_judge` criterion on
a generated eval set; the judge passes every case but those in `fails`."""

from __future__ import annotations

import re
from typing import Any

import pytest

from evaluations.models import EvalSetVersion, Project, Run
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from tests.compare_helpers import generated_outputs, make_run
from tests.llm_server import Behaviour, FakeLLM, reply_json

ITEM = re.compile(r"Look up item (\d+)")


def judge_config(*, model: str = "judge-a", guidelines: str = "") -> EvalConfig:
    return EvalConfig(
        criteria={
            "llm_judge": CriterionConfig(threshold=0.5, judge_model=model, options={"guidelines": guidelines}),
            "trajectory_match": CriterionConfig(threshold=0.8),
        }
    )


def judged_run(
    project: Project,
    version: EvalSetVersion,
    llm: FakeLLM,
    monkeypatch: pytest.MonkeyPatch,
    *,
    count: int,
    fails: set[int],
    model: str = "judge-a",
    guidelines: str = "",
    **kwargs: Any,
) -> Run:
    monkeypatch.setenv("EVALSITE_LLM_BASE_URL", llm.url)
    monkeypatch.setenv("EVALSITE_LLM_API_KEY", "test-key")

    def respond(body: dict[str, Any]) -> Behaviour:
        found = ITEM.search("\n".join(str(m.get("content")) for m in body.get("messages", [])))
        score = 1 if found and int(found.group(1)) in fails else 10
        return reply_json({"reasoning": "checked", "score": score, "is_met": score > 5, "critique": "none"})

    llm.responder = respond
    return make_run(
        project, version, generated_outputs(count), config=judge_config(model=model, guidelines=guidelines), **kwargs
    )
