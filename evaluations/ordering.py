"""Criteria in the order their config gave them, on every database.

A config's `criteria` is a JSON object. SQLite keeps a JSON object's keys in the order they
were written; PostgreSQL's jsonb does not (it sorts them, shortest first). So the order is
stored beside the config as a list (`Run.criteria_order`, `EvaluationConfig.criteria_order`,
`EvalSetVersion.default_criteria_order`), and everything that lists criteria (the run page,
the wide CSV's columns, the run summary, the API) goes through these helpers: the same run
shows and exports identically on both databases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any


def ordered_keys(mapping: Iterable[str], order: Sequence[str] | None) -> list[str]:
    """`mapping`'s keys: those named in `order` first, in its order, then any others as they
    come (rows stored before the order was)."""
    keys = list(mapping)
    present = set(keys)
    first = [k for k in (order or []) if k in present]
    seen = set(first)
    return first + [k for k in keys if k not in seen]


def ordered_dict(mapping: Mapping[str, Any], order: Sequence[str] | None) -> dict[str, Any]:
    return {k: mapping[k] for k in ordered_keys(mapping, order)}


def config_in_order(config: Mapping[str, Any] | None, order: Sequence[str] | None) -> dict[str, Any]:
    """An EvalConfig document with its criteria in `order`."""
    doc = dict(config or {})
    if isinstance(doc.get("criteria"), Mapping):
        doc["criteria"] = ordered_dict(doc["criteria"], order)
    return doc


def summary_in_order(summary: Mapping[str, Any] | None, order: Sequence[str] | None) -> dict[str, Any] | None:
    """A run summary (`runs.run_summary`'s shape) with its criteria in `order`."""
    if summary is None:
        return None
    doc = dict(summary)
    if isinstance(doc.get("criteria"), Mapping):
        doc["criteria"] = ordered_dict(doc["criteria"], order)
    return doc
