"""What a grading-queue item is graded against, laid out as the drill-down lays it out: each
turn's user message, the expected and actual final responses, for a tool-call criterion the
step-aligned calls (matched ones folded), and the automatic score's justification.

Built from what `evaluations.review.grades.queue_page` loaded for the whole page (no query
here), with the drill-down's own turn pairing and diff (`turn_pairs`, `drilldown.turn_view`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from evaluations.review.drilldown import Row, justification_rows, result_output, turn_pairs
from evaluations.review.grades import ItemSource
from evaluations.review.selectors import trajectory_settings
from evaluations.runs.engine import native_case
from evaluations.web.views import drilldown

TRAJECTORY = "trajectory"  # the evaluator group of the tool-call criteria


@dataclass(frozen=True)
class GradingContext:
    turns: list[drilldown.TurnView]
    tool_calls: bool  # a tool-call criterion: its aligned calls are shown
    match_type: str
    args_mode: str
    output_error: str | None
    score_error: str
    justification: list[Row] = field(default_factory=list)


# a result's turns, match type, argument mode and output error (a string: `drilldown` may
# still be importing when this module is)
Laid: TypeAlias = "tuple[list[drilldown.TurnView], str, str, str | None]"


def grading_context(source: ItemSource | None, seen: dict[int, Laid] | None = None) -> GradingContext | None:
    """The item's context, or None when its result could not be loaded. `seen` keeps each
    result's turns for the page's other items of the same result (its other criteria)."""
    if source is None:
        return None
    result = source.result
    laid = seen.get(result.pk) if seen is not None else None
    if laid is None:
        laid = _turns(source)
        if seen is not None:
            seen[result.pk] = laid
    turns, match_type, args_mode, output_error = laid
    return GradingContext(
        turns=turns,
        tool_calls=source.family == TRAJECTORY,
        match_type=match_type,
        args_mode=args_mode,
        output_error=output_error,
        score_error=source.score_error,
        justification=justification_rows(source.justification) if source.justification else [],
    )


def _turns(source: ItemSource) -> Laid:
    result = source.result
    output, output_error = result_output(result)
    match_type, rules = trajectory_settings(source.config)
    turns = [drilldown.turn_view(index, invocation, turn, match_type, rules, anchors=False, diff_responses=False)
             for index, (invocation, turn) in enumerate(turn_pairs(native_case(result.case), output))]
    return turns, match_type.value, rules.mode, output_error
