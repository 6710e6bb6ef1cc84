"""The structured replies DeepEval 4.3.1's LLM metrics ask their judge for: the same class
names (sent as the `response_format` json_schema's name), field names, types and defaults, so
a judge answers evalsite's questions in the very shape it answers DeepEval's. The JSON schema
of each is checked against DeepEval's own in tests/differential/test_deepeval_judged.py."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, create_model


class Verdict(str, Enum):
    YES = "yes"
    NO = "no"
    BORDERLINE = "borderline"

    def __str__(self) -> str:
        return self.value


YesNo = Literal[Verdict.YES, Verdict.NO]
YesNoBorderline = Literal[Verdict.YES, Verdict.NO, Verdict.BORDERLINE]
YES_NO: tuple[Verdict, ...] = (Verdict.YES, Verdict.NO)
YES_NO_BORDERLINE: tuple[Verdict, ...] = (Verdict.YES, Verdict.NO, Verdict.BORDERLINE)


def verdicts_of(item: type[BaseModel], name: str = "Verdicts") -> type[BaseModel]:
    """DeepEval's wrapper `{verdicts: [item]}` (most metrics call theirs `Verdicts`)."""
    model: type[BaseModel] = create_model(name, __module__=__name__, verdicts=(list[item], ...))  # type: ignore[valid-type]
    return model


# --- Lists extracted from a text -----------------------------------------------------------------


class Statements(BaseModel):
    statements: list[str]


class Truths(BaseModel):
    truths: list[str]


class Claims(BaseModel):
    claims: list[str]


class Opinions(BaseModel):
    opinions: list[str]


class Questions(BaseModel):
    questions: list[str]


class Answers(BaseModel):
    answers: list[str]


class Steps(BaseModel):
    steps: list[str]


class UserIntentions(BaseModel):
    intentions: list[str]


# --- Verdicts ------------------------------------------------------------------------------------


class AnswerRelevancyVerdict(BaseModel):
    verdict: YesNoBorderline
    reason: str | None = Field(default=None)


class FaithfulnessVerdict(BaseModel):
    verdict: YesNoBorderline
    reason: str | None = Field(default=None)


class ContextualPrecisionVerdict(BaseModel):
    verdict: YesNo
    reason: str


class ContextualRecallVerdict(BaseModel):
    verdict: YesNo
    reason: str


class ContextualRelevancyVerdict(BaseModel):
    statement: str
    verdict: YesNo
    reason: str | None = Field(default=None)


class HallucinationVerdict(BaseModel):
    verdict: YesNo
    reason: str


class BiasVerdict(BaseModel):
    verdict: YesNo
    reason: str | None = Field(default=None)


class ToxicityVerdict(BaseModel):
    verdict: YesNo
    reason: str | None = Field(default=None)


class SummarizationAlignmentVerdict(BaseModel):
    verdict: YesNoBorderline
    reason: str | None = Field(default=None)


class ArgumentCorrectnessVerdict(BaseModel):
    verdict: YesNo
    reason: str | None = Field(default=None)


class TurnRelevancyVerdict(BaseModel):
    verdict: YesNo
    reason: str | None = Field(default=None)


class KnowledgeRetentionVerdict(BaseModel):
    verdict: YesNo
    reason: str | None = None
    model_config = ConfigDict(extra="forbid")


class ConversationCompletenessVerdict(BaseModel):
    verdict: YesNo
    reason: str | None = Field(default=None)


AnswerRelevancyVerdicts = verdicts_of(AnswerRelevancyVerdict)
FaithfulnessVerdicts = verdicts_of(FaithfulnessVerdict)
ContextualPrecisionVerdicts = verdicts_of(ContextualPrecisionVerdict)
ContextualRecallVerdicts = verdicts_of(ContextualRecallVerdict)
ContextualRelevancyVerdicts = verdicts_of(ContextualRelevancyVerdict, "ContextualRelevancyVerdicts")
HallucinationVerdicts = verdicts_of(HallucinationVerdict)
BiasVerdicts = verdicts_of(BiasVerdict)
ToxicityVerdicts = verdicts_of(ToxicityVerdict)
SummarizationVerdicts = verdicts_of(SummarizationAlignmentVerdict)
ArgumentCorrectnessVerdicts = verdicts_of(ArgumentCorrectnessVerdict)


# --- Scores and reasons --------------------------------------------------------------------------


class ReasonScore(BaseModel):  # G-Eval
    reason: str
    score: float


class TaskAndOutcome(BaseModel):
    task: str
    outcome: str


class TaskCompletionVerdict(BaseModel):
    verdict: float
    reason: str | None = Field(default=None)


class ToolSelectionScore(BaseModel):
    score: float
    reason: str


class ArgumentCorrectnessScore(BaseModel):
    score: float
    reason: str


class Knowledge(BaseModel):
    data: dict[str, str | list[str]] | None = None
    model_config = ConfigDict(extra="forbid")


class OutOfCharacterResponseVerdict(BaseModel):
    index: int
    reason: str
    ai_message: str | None = Field(default=None)


class OutOfCharacterResponseVerdicts(BaseModel):
    verdicts: list[OutOfCharacterResponseVerdict]


def _reason(name: str, *, forbid: bool = False) -> type[BaseModel]:
    config = ConfigDict(extra="forbid") if forbid else None
    model: type[BaseModel] = create_model(name, __module__=__name__, __config__=config, reason=(str, ...))
    return model


Reason = _reason("Reason")
AnswerRelevancyScoreReason = _reason("AnswerRelevancyScoreReason")
FaithfulnessScoreReason = _reason("FaithfulnessScoreReason")
ContextualPrecisionScoreReason = _reason("ContextualPrecisionScoreReason")
ContextualRecallScoreReason = _reason("ContextualRecallScoreReason")
ContextualRelevancyScoreReason = _reason("ContextualRelevancyScoreReason")
HallucinationScoreReason = _reason("HallucinationScoreReason")
BiasScoreReason = _reason("BiasScoreReason")
ToxicityScoreReason = _reason("ToxicityScoreReason")
SummarizationScoreReason = _reason("SummarizationScoreReason")
ArgumentCorrectnessScoreReason = _reason("ArgumentCorrectnessScoreReason")
TurnRelevancyScoreReason = _reason("TurnRelevancyScoreReason")
KnowledgeRetentionScoreReason = _reason("KnowledgeRetentionScoreReason", forbid=True)
RoleAdherenceScoreReason = _reason("RoleAdherenceScoreReason")
ConversationCompletenessScoreReason = _reason("ConversationCompletenessScoreReason")
