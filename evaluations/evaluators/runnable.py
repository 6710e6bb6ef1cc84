"""Criteria a run cannot compute here, known before any case is scored: they are recorded as
"not runnable" with the reason on every score, at once (no network timeouts first), and the
rest of the run goes on. A case whose criteria are all not runnable is itself `not_runnable`.

- a UiPath custom evaluator (`evaluatorTypeId: "file://types/x.json"`): its scoring is the
  user's own Python class, which evalsite does not run;
- an LLM-judged criterion when no judge model is configured: neither `EVALSITE_LLM_BASE_URL`
  nor `EVALSITE_LLM_API_KEY` is set (the default endpoint, api.openai.com, needs a key).
"""

from __future__ import annotations

import os

from evaluations.evaluators.base import Evaluator
from evaluations.evaluators.llm import ChatClient

NOT_RUNNABLE = "not runnable: "

CUSTOM_UIPATH = ("a UiPath custom evaluator ({name}): its scoring is the project's own Python class, which "
                 "evalsite does not run")
NO_JUDGE = ("an LLM judge, and no judge model is configured: set EVALSITE_LLM_BASE_URL (an OpenAI-compatible "
            "endpoint), EVALSITE_LLM_MODEL and, if it needs one, EVALSITE_LLM_API_KEY")


def is_custom_uipath(evaluator_name: str) -> bool:
    return evaluator_name.startswith("file://")


def judge_configured(client: ChatClient) -> bool:
    return bool(client._base_url or client._transport is not None or os.environ.get("EVALSITE_LLM_BASE_URL")
                or client.api_key)


def not_runnable_reason(evaluator_name: str, evaluator: Evaluator | None) -> str:
    """"not runnable: why", or "" when the criterion can be computed."""
    if is_custom_uipath(evaluator_name):
        return NOT_RUNNABLE + CUSTOM_UIPATH.format(name=evaluator_name)
    client = getattr(evaluator, "client", None)
    if isinstance(client, ChatClient) and not judge_configured(client):
        return NOT_RUNNABLE + NO_JUDGE
    return ""
