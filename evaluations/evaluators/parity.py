"""What a criterion named after another tool's criterion means here, where its number differs
from that tool's: shown on the run page beside the scores, and in the parity table of docs/evaluators.md.

The unqualified names keep evalsite's meaning whatever format the eval set came in (a run's
numbers never change with the file's origin). AgentFlow's exact numbers are under the
`agentflow_*` evaluators; ADK's `response_match_score` and `tool_trajectory_avg_score`, UiPath's
evaluators and DeepEval's `deepeval_*` ones are the tools' own (tests/differential/).
"""

from __future__ import annotations

from typing import Any

NOTES: dict[str, str] = {
    "trajectory_match": (
        "evalsite's own trajectory score: per turn, with partial credit, args compared (options.args). "
        "AgentFlow 0.10.1's trajectory_match joins every turn's calls into one list, compares names only unless "
        "check_args, accepts any args when the expected call has none, and in EXACT ignores extra trailing calls. "
        "For AgentFlow's number use the evaluator agentflow_trajectory_match."),
    "response_match": (
        "ADK's ROUGE-1 (response_match_score, google-adk 2.13), averaged over turns. AgentFlow 0.10.1's "
        "response_match is an LLM judge, and its ROUGE (rouge_match) counts each word once, without stemming: "
        "for that number use the evaluator agentflow_rouge_match."),
    "exact_match": (
        "evalsite's exact match, per turn with an expected response. AgentFlow's exact_match compares the last "
        "response with the last expected one, stripped, and DeepEval's ExactMatchMetric does the same: use "
        "agentflow_exact_match or deepeval_exact_match for their numbers."),
}


def parity_notes(config: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(criterion, note) for each enabled criterion of a run's config that uses the evaluator
    of its own name and scores differently from the tool that uses that name."""
    notes: list[tuple[str, str]] = []
    criteria = (config or {}).get("criteria") or {}
    if not isinstance(criteria, dict):
        return notes
    for name, criterion in criteria.items():
        criterion = criterion if isinstance(criterion, dict) else {}
        if criterion.get("enabled", True) is False or (criterion.get("evaluator") or name) != name:
            continue
        if name in NOTES:
            notes.append((name, NOTES[name]))
    return notes
