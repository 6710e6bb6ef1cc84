"""How many judge calls a judged criterion makes on a case, and what they may cost: the
estimate a run shows before it starts. The counts follow each metric's steps (a reason call
unless `include_reason` is off, a call per retrieved document for contextual relevancy, per
exchange for the conversational ones); the tokens are the case's text at about four
characters a token plus each prompt's own words, and a short reply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluations.evaluators.base import text_of
from evaluations.evaluators.llm import call_cost
from evaluations.schemas.evalset import EvalCase

PROMPT_TOKENS = 250  # a prompt's own words
REPLY_TOKENS = 90  # a verdict list or a reason


def _reason(options: dict[str, Any]) -> int:
    return 0 if options.get("include_reason") is False else 1


def _exchanges(case: EvalCase) -> int:
    return max(1, len(case.conversation))


def _chunks(case: EvalCase) -> int:
    found = case.metadata.get("retrieval_context")
    return max(1, len(found)) if isinstance(found, list) else 1


CALLS: dict[str, Any] = {
    "deepeval_answer_relevancy": lambda c, o: 2 + _reason(o),
    "deepeval_faithfulness": lambda c, o: 3 + _reason(o),
    "deepeval_contextual_precision": lambda c, o: 1 + _reason(o),
    "deepeval_contextual_recall": lambda c, o: 1 + _reason(o),
    "deepeval_contextual_relevancy": lambda c, o: _chunks(c) + _reason(o),
    "deepeval_hallucination": lambda c, o: 1 + _reason(o),
    "deepeval_bias": lambda c, o: 2 + _reason(o),
    "deepeval_toxicity": lambda c, o: 2 + _reason(o),
    "deepeval_summarization": lambda c, o: (5 if o.get("assessment_questions") else 6) + _reason(o),
    "deepeval_g_eval": lambda c, o: 1 if o.get("evaluation_steps") else 2,
    "deepeval_task_completion": lambda c, o: 2,
    "deepeval_argument_correctness": lambda c, o: 1 + _reason(o),
    "deepeval_tool_use": lambda c, o: 2 * _exchanges(c) + 2,
    "deepeval_turn_relevancy": lambda c, o: _exchanges(c) + _reason(o),
    "deepeval_knowledge_retention": lambda c, o: 2 * _exchanges(c) + _reason(o),
    "deepeval_role_adherence": lambda c, o: 1 + _reason(o),
    "deepeval_conversation_completeness": lambda c, o: 3 + _reason(o),
}


@dataclass
class Estimate:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None

    def add(self, calls: int, case_tokens: int, model: str, times: int = 1) -> None:
        prompt = calls * (PROMPT_TOKENS + case_tokens) * times
        completion = calls * REPLY_TOKENS * times
        self.calls += calls * times
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        cost = call_cost(model, {"prompt_tokens": prompt, "completion_tokens": completion})
        if cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd}


def case_tokens(case: EvalCase) -> int:
    """The case's text as a judge reads it, in tokens (about four characters each); an
    agent's answer is taken to be as long as the expected one."""
    chars = len(text_of(case.metadata.get("retrieval_context"))) + len(text_of(case.metadata.get("context")))
    for invocation in case.conversation:
        chars += len(invocation.user_content.get_text())
        if invocation.expected_final_response is not None:
            chars += 2 * len(invocation.expected_final_response.get_text())
    return chars // 4


def expected_calls(evaluator: str, case: EvalCase, options: dict[str, Any]) -> int:
    """The judge calls one criterion makes on one case (1 for a judge this module does not know)."""
    count = CALLS.get(evaluator)
    return int(count(case, options)) if count is not None else 1
