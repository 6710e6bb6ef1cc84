"""Evaluators: one module per family, registered by name (see `base`)."""

from evaluations.evaluators import base
from evaluations.evaluators.base import (
    Evaluator,
    Level,
    ScoreResult,
    Threshold,
    aligned_turns,
    get_evaluator_class,
    register,
    registry,
    text_of,
)

# Modules whose import registers the built-in evaluators (imported on first registry use).
base._BUILTIN_MODULES.extend([
    "evaluations.evaluators.output",
    "evaluations.evaluators.uipath",
    "evaluations.evaluators.rouge",
    "evaluations.evaluators.trajectory",
    "evaluations.evaluators.tool_calls",
    "evaluations.evaluators.reliability",
    "evaluations.evaluators.judge",
    "evaluations.evaluators.performance",
    "evaluations.evaluators.nodes",
    "evaluations.evaluators.deepeval",
    "evaluations.evaluators.agentflow",
    "evaluations.evaluators.adk_judges",
    "evaluations.evaluators.promptfoo",
    "evaluations.evaluators.online",
    "evaluations.evaluators.deepeval_judged.rag",
    "evaluations.evaluators.deepeval_judged.safety",
    "evaluations.evaluators.deepeval_judged.geval",
    "evaluations.evaluators.deepeval_judged.agentic",
    "evaluations.evaluators.deepeval_judged.conversational",
])

__all__ = [
    "Evaluator",
    "Level",
    "ScoreResult",
    "Threshold",
    "aligned_turns",
    "get_evaluator_class",
    "register",
    "registry",
    "text_of",
]
