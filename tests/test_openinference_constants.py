"""OpenInference's attribute names come from its own package (openinference-semantic-conventions,
pinned), not from strings repeated here: the span mapping and case promotion cannot drift from
the convention they read."""

from __future__ import annotations

from pathlib import Path

import pytest
from openinference.semconv.trace import (
    MessageAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
    ToolAttributes,
    ToolCallAttributes,
)

from evaluations.interop.otel import spans
from evaluations.review import promotion

NAMES = sorted({value for holder in (SpanAttributes, MessageAttributes, ToolAttributes, ToolCallAttributes)
                for key, value in vars(holder).items()
                if key.isupper() and isinstance(value, str) and "." in value})  # not plain words (`metadata`)


@pytest.mark.parametrize("module", [spans, promotion], ids=["interop/otel/spans.py", "review/promotion.py"])
def test_no_openinference_attribute_name_is_written_out_by_hand(module: object) -> None:
    source = Path(str(getattr(module, "__file__", ""))).read_text()
    repeated = [name for name in NAMES if f'"{name}"' in source or f'"{name}.' in source]
    assert repeated == [], f"use openinference.semconv constants for {repeated}"


def test_the_span_kinds_are_openinferences() -> None:
    assert tuple(
        k.value for k in (OpenInferenceSpanKindValues.TOOL, OpenInferenceSpanKindValues.LLM,
                          OpenInferenceSpanKindValues.AGENT, OpenInferenceSpanKindValues.CHAIN)) == (spans.TOOL, spans.LLM, spans.AGENT, spans.CHAIN)
