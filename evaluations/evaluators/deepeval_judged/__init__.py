"""DeepEval's LLM-judged metrics, computed by evalsite's judge (`evaluators/llm.py`) with
DeepEval 4.3.1's semantics, as criteria named `deepeval_<metric>`.

Each metric takes DeepEval's steps in DeepEval's order (extract statements, claims, truths,
opinions or intentions; judge each; score the verdicts; ask for a reason), asks for DeepEval's
structured replies (`schemas.py`, sent as the `response_format` json_schema), reads them as
DeepEval reads a text reply (`core.py`) and turns verdicts into a score the way DeepEval does;
only the prompts' wording is evalsite's own (`prompts.py`). Given the same judge replies, the
scores, verdicts and errors are DeepEval's: tests/differential/test_deepeval_judged.py runs
DeepEval's own metrics against the same replies.

Modules: `rag.py` (answer relevancy, faithfulness, contextual precision / recall / relevancy,
hallucination), `safety.py` (bias, toxicity, summarization), `geval.py`, `agentic.py` (task
completion, argument correctness, tool use), `conversational.py` (turn relevancy, knowledge
retention, role adherence, conversation completeness); `interop/deepeval/metrics.py` maps
DeepEval's metric names and classes to these criteria.
"""
