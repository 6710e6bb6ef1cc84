"""promptfoo's assertions as its files write them: which evalsite scores (`SCORED_TYPES`, the
`promptfoo_*` criteria of `evaluators/promptfoo.py`), the criterion key each gets in a case, and
the CSV notation (`contains-any:a,b`, `not-regex:...`, `levenshtein(3):...`)."""

from __future__ import annotations

import re
from typing import Any

# JavaScript's whitespace (`\\s`, `String.prototype.trim`).
_WHITESPACE = ("\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
               "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")

# Deterministic base types evalsite computes (evaluators/promptfoo.py) and what it cannot.
SCORED_TYPES = ("equals", "contains", "icontains", "contains-any", "icontains-any", "contains-all",
                "icontains-all", "regex", "starts-with", "is-json", "contains-json", "levenshtein", "tool-call-f1")
NEUTRAL_KEYS = {"type", "value", "weight", "threshold", "metric", "description", "config"}
# promptfoo's assertion types, for the `type:value` notation of CSV columns (0.123.1's list).
ASSERTION_TYPES = (
    "agent-rubric", "answer-relevance", "bleu", "classifier", "contains", "contains-all", "contains-any",
    "contains-html", "contains-json", "contains-sql", "contains-xml", "context-faithfulness", "context-recall",
    "context-relevance", "conversation-relevance", "cost", "equals", "factuality", "finish-reason", "g-eval", "gleu",
    "guardrails", "icontains", "icontains-all", "icontains-any", "is-html", "is-json", "is-refusal", "is-sql",
    "is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call", "is-xml", "javascript",
    "latency", "levenshtein", "llm-rubric", "pi", "meteor", "model-graded-closedqa", "model-graded-factuality",
    "moderation", "perplexity", "perplexity-score", "python", "regex", "rouge-n", "ruby", "similar", "similar:cosine",
    "similar:dot", "similar:euclidean", "starts-with", "tool-call-f1", "skill-used", "trajectory:goal-success",
    "trajectory:tool-args-match", "trajectory:step-count", "trajectory:tool-sequence", "trajectory:tool-used",
    "trace-error-spans", "trace-span-count", "trace-span-duration", "search-rubric", "webhook", "word-count",
)
_CSV_ASSERTION = re.compile(
    r"^(not-)?(" + "|".join(re.escape(t) for t in ASSERTION_TYPES) + r")(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?\Z")
_THRESHOLD_TYPES = {"answer-relevance", "classifier", "context-faithfulness", "context-recall", "context-relevance",
                    "cost", "latency", "levenshtein", "perplexity-score", "perplexity", "rouge-n", "similar",
                    "starts-with"}


def base_type(kind: str) -> tuple[str, bool]:
    return (kind[4:], True) if kind.startswith("not-") else (kind, False)


def criterion_key(kind: str) -> str:
    return "promptfoo_" + kind.replace("-", "_").replace(":", "_")


def not_scored_reason(assertion: dict[str, Any]) -> str | None:
    """None when evalsite computes the assertion exactly as promptfoo does; otherwise why not."""
    kind = assertion["type"]
    base, _ = base_type(kind)
    if base not in SCORED_TYPES:
        return f"{kind} is not a deterministic assertion evalsite computes"
    extra = sorted(set(assertion) - NEUTRAL_KEYS)
    if extra:
        return f"its {', '.join(extra)} change what promptfoo computes"
    value = assertion.get("value")
    if base in ("is-json", "contains-json") and value not in (None, "", False, 0):
        return f"{kind} with a JSON schema is validated by ajv, which evalsite does not reproduce"
    values = value if isinstance(value, list) else [value]
    if any(isinstance(v, str) and v.startswith(("file://", "package:")) for v in values):
        return "its value is read from a file or a package"
    return None


def assertion_from_string(expected: str) -> dict[str, Any]:
    """promptfoo's `assertionFromString` (a CSV `__expected` cell)."""
    if expected.startswith(("javascript:", "fn:", "eval:")):
        cut = 11 if expected.startswith("javascript:") else 3 if expected.startswith("fn:") else 5
        return {"type": "javascript", "value": expected[cut:].strip()}
    if expected.startswith("file://") and expected[7:].rsplit(".", 1)[-1] in ("js", "cjs", "mjs", "ts", "cts", "mts"):
        return {"type": "javascript", "value": expected.strip()}
    if expected.startswith(("grade:", "llm-rubric:")):
        return {"type": "llm-rubric", "value": expected[6 if expected.startswith("grade:") else 11:]}
    if expected.startswith("python:") or (expected.startswith("file://") and (
            expected.endswith(".py") or ".py:" in expected)):
        return {"type": "python", "value": expected[7:].strip()}
    match = _CSV_ASSERTION.match(expected)
    if not match:
        return {"type": "equals", "value": expected}
    negated, kind, threshold_text, value = match.groups()
    full = f"not-{kind}" if negated else kind
    threshold = float(threshold_text) if threshold_text else None
    if threshold is not None and threshold.is_integer():
        threshold = int(threshold)
    out: dict[str, Any] = {"type": full}
    if kind in ("contains-all", "contains-any", "icontains-all", "icontains-any"):
        out["value"] = comma_values(value) if value else value
    elif kind in ("contains-json", "is-json"):
        out["value"] = value
    elif kind in _THRESHOLD_TYPES:
        out["value"] = value.strip() if value is not None else None
        out["threshold"] = threshold if threshold is not None else (0.75 if kind != "similar" else 0.8)
    else:
        out["value"] = value.strip() if value is not None else None
    if out.get("value") is None:
        out.pop("value", None)
    return out


def comma_values(value: str) -> list[str]:
    """promptfoo's `parseCommaSeparatedValues` / `parseCommaSeparatedAssertionValues` (one rule):
    fields split on commas, trimmed; a quoted field keeps its commas (`\\"` and `""` escape a
    quote). Raises ValueError where promptfoo's invariant fails."""
    results: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and (value[i] == "," or value[i] in _WHITESPACE):
            i += 1
        if i >= n:
            break
        if value[i] == '"':
            field, i = _quoted(value, i)
            while i < n and value[i] in _WHITESPACE:
                i += 1
            if i < n and value[i] != ",":
                raise ValueError("Expected comma after quoted field in contains assertion value")
        else:
            start = i
            while i < n and value[i] != ",":
                i += 1
            field = value[start:i].strip(_WHITESPACE)
        results.append(field)
    return results


def _quoted(value: str, start: int) -> tuple[str, int]:
    i, field = start + 1, []
    while i < len(value):
        if value[i] == "\\" and i + 1 < len(value) and value[i + 1] in '"\\':
            field.append(value[i + 1])
            i += 2
        elif value[i] == '"' and i + 1 < len(value) and value[i + 1] == '"':
            field.append('"')
            i += 2
        elif value[i] == '"':
            return "".join(field), i + 1
        else:
            field.append(value[i])
            i += 1
    raise ValueError("Unterminated quoted field in contains assertion value")
