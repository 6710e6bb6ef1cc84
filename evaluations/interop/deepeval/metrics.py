"""DeepEval's names for its metrics (the class, and the `__name__` a test run's results carry)
and the evalsite criterion that computes each."""

from __future__ import annotations

# criterion -> (DeepEval's class, the name DeepEval's results show)
METRICS: dict[str, tuple[str, str]] = {
    "deepeval_g_eval": ("GEval", "G-Eval"),
    "deepeval_answer_relevancy": ("AnswerRelevancyMetric", "Answer Relevancy"),
    "deepeval_faithfulness": ("FaithfulnessMetric", "Faithfulness"),
    "deepeval_contextual_precision": ("ContextualPrecisionMetric", "Contextual Precision"),
    "deepeval_contextual_recall": ("ContextualRecallMetric", "Contextual Recall"),
    "deepeval_contextual_relevancy": ("ContextualRelevancyMetric", "Contextual Relevancy"),
    "deepeval_hallucination": ("HallucinationMetric", "Hallucination"),
    "deepeval_bias": ("BiasMetric", "Bias"),
    "deepeval_toxicity": ("ToxicityMetric", "Toxicity"),
    "deepeval_summarization": ("SummarizationMetric", "Summarization"),
    "deepeval_task_completion": ("TaskCompletionMetric", "Task Completion"),
    "deepeval_argument_correctness": ("ArgumentCorrectnessMetric", "Argument Correctness"),
    "deepeval_tool_use": ("ToolUseMetric", "Tool Use"),
    "deepeval_turn_relevancy": ("TurnRelevancyMetric", "Turn Relevancy"),
    "deepeval_knowledge_retention": ("KnowledgeRetentionMetric", "Knowledge Retention"),
    "deepeval_role_adherence": ("RoleAdherenceMetric", "Role Adherence"),
    "deepeval_conversation_completeness": ("ConversationCompletenessMetric", "Conversation Completeness"),
    # computed without a judge (evaluators/deepeval.py)
    "deepeval_tool_correctness": ("ToolCorrectnessMetric", "Tool Correctness"),
    "deepeval_exact_match": ("ExactMatchMetric", "Exact Match"),
}

JUDGED = frozenset(name for name in METRICS if name not in ("deepeval_tool_correctness", "deepeval_exact_match"))

_BY_DEEPEVAL = {key.lower(): criterion for criterion, names in METRICS.items() for key in names}


def criterion_for(metric_name: str) -> str | None:
    """The criterion for a metric as DeepEval names it: its class (`FaithfulnessMetric`), its
    display name (`Faithfulness`), or a G-Eval's `<name> [GEval]`; None for one evalsite does
    not compute."""
    name = metric_name.strip()
    if name.endswith("[GEval]") or name.endswith("(GEval)"):
        return "deepeval_g_eval"
    return _BY_DEEPEVAL.get(name.lower())
