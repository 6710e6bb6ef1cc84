"""DeepEval's conversational metrics on evalsite's judge: turn relevancy, knowledge retention,
role adherence and conversation completeness, over the case's conversation as the agent had
it (each answered turn: the user's message, then the agent's answer), a simulated one, or a
monitor's thread; step by step as DeepEval 4.3.1's synchronous `measure` takes them."""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

from pydantic import Field

from evaluations.evaluators.base import register
from evaluations.evaluators.deepeval_judged import prompts
from evaluations.evaluators.deepeval_judged import schemas as s
from evaluations.evaluators.deepeval_judged.core import (
    Judge,
    JudgedMetric,
    JudgedOptions,
    Measured,
    Turn,
    Unmeasurable,
    conversation,
    qag_score,
)
from evaluations.evaluators.deepeval_judged.rag import dumped
from evaluations.evaluators.deepeval_judged.schemas import YES_NO, Verdict
from evaluations.schemas.evalset import EvalCase
from evaluations.schemas.outputs import AgentOutput


def unit_interactions(turns: list[Turn]) -> list[list[Turn]]:
    """DeepEval's `get_unit_interactions`: the conversation cut where a user speaks after the
    assistant; a last unit that does not end with the assistant is left out."""
    units: list[list[Turn]] = []
    current: list[Turn] = []
    has_user = False
    for turn in turns:
        if current and current[-1].role == "assistant" and turn.role == "user" and has_user:
            units.append(current)
            current = [turn]
            has_user = True
            continue
        current.append(turn)
        if turn.role == "user":
            has_user = True
    if current and len(current) > 1 and current[-1].role == "assistant" and has_user:
        units.append(current)
    return units


def as_dict(turn: Turn) -> dict[str, Any]:
    return {"content": turn.content, "role": turn.role}


class _Conversational(JudgedMetric):
    conversational = True

    def turns(self, case: EvalCase, output: AgentOutput) -> list[Turn]:
        turns = conversation(case, output)
        if len(turns) == 0:
            raise Unmeasurable("'turns' in conversational test case cannot be empty.")
        return turns


class TurnRelevancyOptions(JudgedOptions):
    window_size: int = Field(10, ge=1, le=100)


@register
class TurnRelevancy(_Conversational):
    """The share of the agent's replies judged relevant, each judged with the exchanges before
    it in a sliding window of `window_size` exchanges."""

    name = "deepeval_turn_relevancy"
    deepeval_name = "TurnRelevancyMetric"
    title = "Turn Relevancy"
    Options = TurnRelevancyOptions

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        units = unit_interactions(self.turns(case, output))
        windows = [list(itertools.chain(*units[max(0, i - options.window_size + 1):i + 1])) for i in range(len(units))]
        verdicts = [judge.verdict(prompts.turn_relevancy([as_dict(t) for t in window]), s.TurnRelevancyVerdict,
                                  YES_NO) for window in windows]
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.YES,), strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            irrelevant = [{"message number": f"{i + 1}", "reason": v.reason} for i, v in enumerate(verdicts)
                          if v is not None and v.verdict is not None and v.verdict == Verdict.NO]
            reason = judge.reason(prompts.reason("turn relevancy", score, irrelevant_replies=irrelevant),
                                  s.TurnRelevancyScoreReason)
        return Measured(score, reason, steps)


@register
class KnowledgeRetention(_Conversational):
    """The share of the agent's replies (after the user has told it something) that do not
    forget what it was told."""

    name = "deepeval_knowledge_retention"
    deepeval_name = "KnowledgeRetentionMetric"
    title = "Knowledge Retention"

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        turns = self.turns(case, output)
        knowledges: list[s.Knowledge | None] = [None] * len(turns)
        for i, turn in enumerate(turns):
            if turn.role == "assistant":
                continue
            knowledges[i] = judge.extract(prompts.knowledge(turn.content, [as_dict(t) for t in turns[:i]]),
                                          s.Knowledge, lambda d: s.Knowledge(**d))
        steps["knowledge"] = [k.data if k is not None else None for k in knowledges]
        verdicts: list[Any] = []
        for i, turn in enumerate(turns):
            if turn.role != "assistant":
                continue
            known = [k.data for k in knowledges[:i] if k is not None and k.data]
            if len(known) == 0:
                continue
            verdicts.append(judge.verdict(prompts.retention_verdict(turn.content, known),
                                          s.KnowledgeRetentionVerdict, YES_NO))
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.NO,), strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            forgotten = [v.reason for v in verdicts if v.verdict == Verdict.YES]  # DeepEval: a dropped reply raises
            reason = judge.reason(prompts.reason("knowledge retention", format(score, ".2f"), forgotten=forgotten),
                                  s.KnowledgeRetentionScoreReason)
        return Measured(score, reason, steps)


class RoleAdherenceOptions(JudgedOptions):
    chatbot_role: str | None = None  # else the case's metadata `chatbot_role`


@register
class RoleAdherence(_Conversational):
    """The share of the agent's replies that stay in the role (`chatbot_role`)."""

    name = "deepeval_role_adherence"
    deepeval_name = "RoleAdherenceMetric"
    title = "Role Adherence"
    Options = RoleAdherenceOptions

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        role = options.chatbot_role or case.metadata.get("chatbot_role")
        if role is None:
            raise Unmeasurable(f"'chatbot_role' in a conversational test case cannot be empty for the "
                               f"'{self.title}' metric.")
        turns = self.turns(case, output)
        found = judge.extract(prompts.out_of_character([as_dict(t) for t in turns], str(role)),
                              s.OutOfCharacterResponseVerdicts, lambda d: s.OutOfCharacterResponseVerdicts(**d))
        for verdict in found.verdicts:
            with contextlib.suppress(Exception):  # DeepEval leaves the message out when the index is off
                verdict.ai_message = f"{turns[verdict.index].content} (turn #{verdict.index + 1})"
        steps["out_of_character"] = [v.model_dump() for v in found.verdicts]
        replies = sum(1 for t in turns if t.role == "assistant")
        if replies == 0:
            score: float = 1
        else:
            score = (replies - min(len(found.verdicts), replies)) / replies
            score = 0 if options.strict_mode and score < threshold else score
        reason = None
        if options.include_reason:
            reason = judge.reason(prompts.reason("role adherence", score, role=role,
                                                 out_of_character=[v.ai_message for v in found.verdicts]),
                                  s.RoleAdherenceScoreReason)
        return Measured(score, reason, steps)


@register
class ConversationCompleteness(_Conversational):
    """The share of the user's intentions (as the judge reads them) the conversation met."""

    name = "deepeval_conversation_completeness"
    deepeval_name = "ConversationCompletenessMetric"
    title = "Conversation Completeness"

    def measure(self, case: EvalCase, output: AgentOutput, options: Any, threshold: float, judge: Judge,
                steps: dict[str, Any]) -> Measured:
        turns = [as_dict(t) for t in self.turns(case, output)]
        intentions = judge.extract(prompts.intentions(turns), s.UserIntentions,
                                   lambda d: s.UserIntentions(**d).intentions)
        steps["intentions"] = intentions
        verdicts = [judge.verdict(prompts.completeness_verdict(turns, intention), s.ConversationCompletenessVerdict,
                                  YES_NO) for intention in intentions]
        steps["verdicts"] = dumped(verdicts)
        score = qag_score(verdicts, passing=(Verdict.YES,), strict=options.strict_mode, threshold=threshold)
        reason = None
        if options.include_reason:
            unmet = [v.reason for v in verdicts if v is not None and v.verdict is not None and v.verdict == Verdict.NO]
            reason = judge.reason(prompts.reason("conversation completeness", score, intentions=intentions,
                                                 unmet=unmet), s.ConversationCompletenessScoreReason)
        return Measured(score, reason, steps)
