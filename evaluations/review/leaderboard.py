"""The leaderboard of an eval set: the latest completed run per (model, branch, config),
ranked by one criterion's mean with its 95% interval, with cost and p95 latency beside it,
and which of them are on the Pareto front of quality against cost or latency.

Runs are read without their results: the means, cost and latency come from each run's
stored summary (`nway.criterion_means`).
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluations.models import EvalSet, Run
from evaluations.review.nway import MeanCell, config_hash, criterion_means, pareto_front

AXES = {"cost": "cost (USD)", "latency": "p95 latency (s)"}
MAX_ENTRIES = 200


@dataclass
class Entry:
    run: Run
    config: str  # short hash of the run's evaluation config
    mean: MeanCell | None
    cost_usd: float | None
    p95: float | None
    rank: int | None = None
    pareto: bool = False
    axis_value: float | None = None  # cost or p95 latency, whichever the Pareto view plots


@dataclass
class Leaderboard:
    criterion: str
    criteria: list[str]
    axis: str
    branches: list[str]
    models: list[str]
    entries: list[Entry]

    @property
    def pareto(self) -> list[Entry]:
        return [e for e in self.entries if e.pareto]


def leaderboard(evalset: EvalSet, *, criterion: str = "", branch: str = "", model: str = "",
                axis: str = "cost") -> Leaderboard:
    """The latest completed run per (model, branch, config hash), filtered by branch and model,
    ranked by `criterion` (default: the one whose means differ most, ties by name)."""
    runs = list(Run.objects.filter(evalset_version__evalset=evalset, status=Run.Status.COMPLETED)
                .only("pk", "name", "model", "branch", "git_commit", "config", "summary", "finished_at",
                      "created_at", "project_id", "evalset_version_id")
                .order_by("-finished_at", "-pk")[:MAX_ENTRIES * 5])
    branches = sorted({run.branch for run in runs if run.branch})
    models = sorted({run.model for run in runs if run.model})
    latest: dict[tuple[str, str, str], Run] = {}
    for run in runs:
        key = (run.model, run.branch, config_hash(run.config))
        latest.setdefault(key, run)
    chosen = [run for run in latest.values()
              if (not branch or run.branch == branch) and (not model or run.model == model)]
    chosen = chosen[:MAX_ENTRIES]
    means = criterion_means(chosen)
    criteria = sorted({name for _, name in means})
    if criterion not in criteria and criteria:  # default: the criterion the runs differ most on
        def spread(name: str) -> float:
            values = [cell.mean for (_, n), cell in means.items() if n == name and cell.mean is not None]
            return max(values) - min(values) if values else 0.0

        criterion = max(criteria, key=lambda name: (spread(name), [-ord(c) for c in name]))
    axis = axis if axis in AXES else "cost"
    entries = []
    for run in chosen:
        summary = run.summary or {}
        entry = Entry(run, config_hash(run.config), means.get((run.pk, criterion)), summary.get("cost_usd"),
                      (summary.get("latency") or {}).get("p95"))
        entry.axis_value = entry.cost_usd if axis == "cost" else entry.p95
        entries.append(entry)
    entries.sort(key=lambda e: (e.mean is None or e.mean.mean is None, -(e.mean.mean or 0) if e.mean else 0,
                                -e.run.pk))
    previous: float | None = None
    for position, entry in enumerate(entries, 1):  # equal means share a rank (1, 1, 3)
        if entry.mean is None or entry.mean.mean is None:
            continue
        same = previous is not None and entry.mean.mean == previous
        entry.rank = entries[position - 2].rank if same else position
        previous = entry.mean.mean
    placed = [e for e in entries if e.mean and e.mean.mean is not None and e.axis_value is not None]
    points = [(e.mean.mean, e.axis_value) for e in placed]  # type: ignore[union-attr]
    for entry, on_front in zip(placed, pareto_front(points), strict=True):  # type: ignore[arg-type]
        entry.pareto = on_front
    return Leaderboard(criterion, criteria, axis, branches, models, entries)
