"""Page-shaped reads for the run pages: home, runs list, run detail and its cases table.

Each function runs a fixed number of queries, whatever the size of the run, and returns
plain dataclasses: aggregates come from `Run.summary` (written once when the run completes)
or from GROUP BY queries; only one page of case results is ever loaded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from evaluations.evaluators.base import Level
from evaluations.models import EvalSetVersion, EvaluationConfig, Project, Run, Score
from evaluations.ordering import summary_in_order
from evaluations.runs.bins import kept_chart_bins
from evaluations.runs.chart_data import ScoreBins, TagRate
from evaluations.runs.engine import STORED_OUTPUTS
from evaluations.schemas.evalset import EvalConfig
from evaluations.units import fmt_seconds

SHORT_TEXT = 140
DEMO_CALLABLE = "evaluations.demo.agent:respond"
ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING)
# Filter choices, most useful first.
RESULT_STATUSES = ["passed", "failed", "not_fully_scored", "error", "missing", "not_runnable", "pending"]


# --- Access -----------------------------------------------------------------------------------


def runs_visible_to(user: Any) -> QuerySet[Run]:
    return Run.objects.filter(project__in=Project.objects.visible_to(user))


class Seconds(float):
    """A duration in seconds that prints with two significant digits (`fmt_seconds`), so
    templates show `{{ value }}` and sort or compare it as the number it is."""

    def __str__(self) -> str:
        return fmt_seconds(self)



def seconds(value: float | None) -> Seconds | None:
    return None if value is None else Seconds(value)


def shorten(text: str, limit: int = SHORT_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


# --- One run: header and progress -------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    total: int
    done: int  # evaluated: passed, failed or errored
    failed: int
    errored: int
    missing: int
    not_runnable: int
    iterations: int = 1  # results per case: `total` counts results, `cases` the cases
    unscored: int = 0  # not fully scored: counted in `done`, neither passed nor failed

    @property
    def cases(self) -> int:
        return self.total // max(self.iterations, 1)

    @property
    def settled(self) -> int:
        return self.done + self.missing + self.not_runnable

    @property
    def passed(self) -> int:
        return self.done - self.failed - self.errored - self.unscored

    @property
    def judged(self) -> int:
        """The pass rate's denominator: passed + failed (errored and not fully scored are out)."""
        return self.done - self.errored - self.unscored

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def percent(self) -> int:
        return int(100 * self.settled / self.total) if self.total else 100


@dataclass(frozen=True)
class JudgeSpend:
    """What the run's LLM judges cost: the estimate made at its creation, and what was spent."""

    estimate: dict[str, Any] | None
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None


def judge_spend_of(run: Run) -> JudgeSpend | None:
    if not run.judge_estimate and not run.judge_calls:
        return None
    return JudgeSpend(estimate=run.judge_estimate or None, calls=run.judge_calls, prompt_tokens=run.judge_prompt_tokens,
                      completion_tokens=run.judge_completion_tokens, cost_usd=run.judge_cost_usd)


@dataclass(frozen=True)
class RunView:
    pk: int
    title: str
    status: str
    is_active: bool
    project_pk: int
    evalset_pk: int
    evalset_name: str
    version_number: int
    target_kind: str
    target_label: str
    iterations: int
    warmups: int
    model: str
    git_commit: str
    branch: str
    tags: list[str]
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str
    progress: Progress
    judge: JudgeSpend | None = None

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return seconds((self.finished_at - self.started_at).total_seconds())
        return None

    @property
    def can_retry(self) -> bool:
        return not self.is_active and (self.progress.failed + self.progress.errored + self.progress.unscored) > 0

    @property
    def retry_changes_nothing(self) -> bool:
        """A finished run of stored outputs (uploaded, or traces received) would score the same
        outputs the same way again: the page does not offer a retry that only looks useful.
        A cancelled one still has pending results that a retry finishes."""
        return self.target_kind in STORED_OUTPUTS and self.status != Run.Status.CANCELLED


def target_label(kind: str, target: dict[str, Any]) -> str:
    """What the run talked to, for people. Header values (tokens) are never shown."""
    if kind == Run.TargetKind.UPLOADED:
        return "uploaded outputs"
    if kind == Run.TargetKind.TRACES:
        return "traces sent to /v1/traces"
    if kind == Run.TargetKind.HTTP:
        names = ", ".join(sorted(str(k) for k in (target.get("headers") or {})))
        return f"HTTP {target.get('url', '')}" + (f" (headers: {names})" if names else "")
    if kind == Run.TargetKind.MODEL:
        raw = target.get("prompt")
        prompt: dict[str, Any] = raw if isinstance(raw, dict) else {}
        which = f", prompt {prompt['prompt_id']} v{prompt.get('version')}" if prompt.get("prompt_id") else ""
        return f"model {target.get('model', '')} at {target.get('base_url', '')}{which}, tools simulated"
    path = str(target.get("callable", ""))
    if path == DEMO_CALLABLE:
        faults = (target.get("metadata") or {}).get("faults")
        return "demo agent" + (f" with faults {_faults_text(faults)}" if faults else "")
    return f"Python {path}"


def _faults_text(faults: Any) -> str:
    if isinstance(faults, dict):
        names = [k for k, v in faults.items() if k != "rate" and v]
        rate = faults.get("rate")
        return ", ".join(names) + (f" at rate {rate}" if rate is not None else "")
    if isinstance(faults, list):
        return ", ".join(str(f) for f in faults)
    return str(faults)


def progress_of(run: Run) -> Progress:
    return Progress(total=run.cases_total, done=run.cases_done, failed=run.cases_failed,
                    errored=run.cases_errored, missing=run.cases_missing, not_runnable=run.cases_not_runnable,
                    iterations=run.iterations, unscored=run.cases_unscored)


def run_view(run: Run) -> RunView:
    """`run` comes with its eval-set version, eval set and creator loaded."""
    version = run.evalset_version
    return RunView(
        pk=run.pk,
        title=run.name or f"Run #{run.pk}",
        status=run.status,
        is_active=run.status in ACTIVE,
        project_pk=run.project_id,
        evalset_pk=version.evalset_id,
        evalset_name=version.evalset.display_name,
        version_number=version.number,
        target_kind=run.target_kind,
        target_label=target_label(run.target_kind, run.target or {}),
        iterations=run.iterations,
        warmups=run.warmups,
        model=run.model,
        git_commit=run.git_commit,
        branch=run.branch,
        tags=[str(t) for t in run.tags or []],
        created_by=run.created_by.get_username() if run.created_by else "",
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        error=run.error,
        progress=progress_of(run),
        judge=judge_spend_of(run),
    )


def run_for_page(user: Any, pk: int) -> Run | None:
    return (runs_visible_to(user)
            .select_related("project", "evalset_version__evalset", "created_by")
            .filter(pk=pk).first())


# --- One run: summary -------------------------------------------------------------------------


@dataclass(frozen=True)
class CriterionStat:
    name: str
    count: int
    mean: float | None
    median: float | None
    min: float | None
    max: float | None
    std_dev: float | None
    pass_rate: float | None
    passed: int
    errors: int


@dataclass(frozen=True)
class ToolStat:
    tool: str
    node: str
    calls: int
    failures: int
    cases: int
    latency_seconds: float | None  # summed over the calls

    @property
    def mean_latency(self) -> float | None:
        return seconds(self.latency_seconds / self.calls) if self.latency_seconds is not None and self.calls else None

    @property
    def failure_rate(self) -> float | None:
        return self.failures / self.calls if self.calls else None


@dataclass(frozen=True)
class NodeStat:
    node: str
    executions: int  # NODE steps of the trajectories
    tool_calls: int
    failures: int
    cases: int
    latency_seconds: float | None


@dataclass(frozen=True)
class RunSummary:
    pass_rate: float | None
    passed: int
    judged: int
    errored: int
    missing: int
    not_runnable: int
    latency_count: int
    latency_mean: float | None
    latency_p50: float | None
    latency_p95: float | None
    latency_max: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    cost_usd: float | None
    criteria: list[CriterionStat]
    tools: list[ToolStat]
    nodes: list[NodeStat]
    unscored: int = 0  # not fully scored: left out of the pass rate, as errored cases are
    notices: tuple[Notice, ...] = ()


@dataclass(frozen=True)
class Notice:
    """A criterion that could not be scored on some of the run's cases (`summary.criterion_notices`)."""

    criterion: str
    kind: str  # not_runnable / evaluator_error
    reason: str
    example: str
    cases: int
    results: int
    on_baseline: str = ""  # on a comparison: "same", "new" (review.notices)
    baseline_cases: int | None = None

    @property
    def text(self) -> str:
        """`trajectory_judge could not run on 10 cases: an LLM judge, and no judge model ...`
        (`errored on` for an evaluator error): the one wording of a notice."""
        verb = "could not run" if self.kind == "not_runnable" else "errored"
        return f"{self.criterion} {verb} on {self.cases:,} case{'' if self.cases == 1 else 's'}: {self.reason}"

    @property
    def baseline_text(self) -> str:
        """How the baseline compares: "the same on the baseline (10 cases)", "new: not on the
        baseline", or "" off a comparison."""
        if self.on_baseline == "same":
            was = self.baseline_cases or 0
            return f"the same on the baseline ({was:,} case{'' if was == 1 else 's'})"
        if self.on_baseline == "new":
            return "new: not on the baseline"
        return ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"criterion": self.criterion, "kind": self.kind, "reason": self.reason,
                               "example": self.example, "cases": self.cases, "results": self.results,
                               "text": self.text}
        if self.on_baseline:
            out["on_baseline"] = self.on_baseline
            out["baseline_cases"] = self.baseline_cases
        return out


def notice_views(raw: Any) -> tuple[Notice, ...]:
    """Notices as the summary keeps them (`runs.summary.criterion_notices`), for the pages."""
    out = []
    for n in raw or ():
        if isinstance(n, dict) and isinstance(n.get("criterion"), str):
            out.append(Notice(n["criterion"], str(n.get("kind") or ""), str(n.get("reason") or ""),
                              str(n.get("example") or ""), _int(n.get("cases")), _int(n.get("results"))))
    return tuple(out)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def run_summary_view(summary: dict[str, Any] | None, order: Sequence[str] | None = None) -> RunSummary | None:
    """The run's stored aggregates (`runs.run_summary`'s shape) for the page, criteria in
    `order` (the run's `criteria_order`); None until the run has completed."""
    summary = summary_in_order(summary, order)
    if not summary:
        return None
    statuses = summary.get("statuses") or {}
    latency = summary.get("latency") or {}
    tokens = summary.get("tokens") or {}
    passed, failed = _int(statuses.get("passed")), _int(statuses.get("failed"))
    criteria = [
        CriterionStat(name=str(name), count=_int(c.get("count")), mean=_num(c.get("mean")),
                      median=_num(c.get("median")), min=_num(c.get("min")), max=_num(c.get("max")),
                      std_dev=_num(c.get("std_dev")), pass_rate=_num(c.get("pass_rate")),
                      passed=_int(c.get("passed")), errors=_int(c.get("errors")))
        for name, c in (summary.get("criteria") or {}).items() if isinstance(c, dict)
    ]
    tools = [ToolStat(tool=str(t.get("tool", "")), node=str(t.get("node") or ""), calls=_int(t.get("calls")),
                      failures=_int(t.get("failures")), cases=_int(t.get("cases")),
                      latency_seconds=seconds(_num(t.get("latency_seconds"))))
             for t in summary.get("tools") or [] if isinstance(t, dict)]
    nodes = [NodeStat(node=str(n.get("node", "")), executions=_int(n.get("executions")),
                      # "calls": the shape of summaries written before node executions were counted
                      tool_calls=_int(n.get("tool_calls", n.get("calls"))), failures=_int(n.get("failures")),
                      cases=_int(n.get("cases")), latency_seconds=seconds(_num(n.get("latency_seconds"))))
             for n in summary.get("nodes") or [] if isinstance(n, dict)]
    total = tokens.get("total")
    return RunSummary(
        pass_rate=_num(summary.get("pass_rate")), passed=passed, judged=passed + failed,
        errored=_int(statuses.get("error")), missing=_int(statuses.get("missing")),
        not_runnable=_int(statuses.get("not_runnable")),
        latency_count=_int(latency.get("count")), latency_mean=seconds(_num(latency.get("mean"))),
        latency_p50=seconds(_num(latency.get("p50"))), latency_p95=seconds(_num(latency.get("p95"))),
        latency_max=seconds(_num(latency.get("max"))),
        prompt_tokens=_int(tokens["prompt"]) if tokens.get("prompt") is not None else None,
        completion_tokens=_int(tokens["completion"]) if tokens.get("completion") is not None else None,
        total_tokens=_int(total) if total is not None else None,
        cost_usd=_num(summary.get("cost_usd")),
        criteria=criteria, tools=tools, nodes=nodes,
        unscored=_int(statuses.get("not_fully_scored")), notices=notice_views(summary.get("notices")),
    )


# --- One run: chart data (GROUP BY, never a row per case) ------------------------------------


@dataclass(frozen=True)
class RunChartData:
    scores: dict[str, ScoreBins]
    latency_width: float | None
    latency_counts: list[int]
    latency_p50: float | None
    latency_p95: float | None
    tag_rates: list[TagRate]
    tags_left_out: int = 0

    @property
    def score_outcomes(self) -> list[str]:
        """The outcomes the score chart shows, for its colour key."""
        return [o for o in ("passed", "failed", "unjudged") if any(sum(getattr(b, o)) for b in self.scores.values())]


def conversation_scores(run: Run) -> QuerySet[Score]:
    return Score.objects.filter(run=run, applies_to=Level.CONVERSATION.value, turn_index=-1, node_name="")


def run_chart_data(run: Run, summary: RunSummary, criteria: list[str]) -> RunChartData:
    bins = kept_chart_bins(run, summary.latency_max)
    scores = bins["scores"]
    ordered = [c for c in criteria if c in scores] + sorted(c for c in scores if c not in criteria)
    return RunChartData(
        scores={c: ScoreBins(**scores[c]) for c in ordered},
        latency_width=bins["latency_width"],
        latency_counts=bins["latency_counts"],
        latency_p50=summary.latency_p50,
        latency_p95=summary.latency_p95,
        tag_rates=[TagRate(tag=tag, passed=passed, judged=judged) for tag, passed, judged in bins["tags"]],
        tags_left_out=bins["tags_left_out"],
    )





























































# --- New run ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionOption:
    pk: int
    label: str
    default_config: str  # the JSON the config editor starts from for this version


@dataclass(frozen=True)
class VersionGroup:
    evalset_pk: int
    name: str
    options: list[VersionOption]


@dataclass(frozen=True)
class NewRunChoices:
    versions: dict[int, EvalSetVersion]  # with their eval sets loaded
    presets: dict[int, EvaluationConfig]
    groups: list[VersionGroup]


def new_run_choices(*, project: Project) -> NewRunChoices:
    """Every eval-set version of the project (latest first within its eval set) and the
    project's saved configs: two queries."""
    from evaluations.runs.services import DEFAULT_CONFIG, config_for

    versions = list(EvalSetVersion.objects.filter(evalset__project=project).select_related("evalset")
                    .defer("evaluator_config", "warnings", "metadata", "description")
                    .order_by("evalset__name", "evalset__eval_set_id", "evalset_id", "-number"))
    groups: dict[int, VersionGroup] = {}
    for v in versions:
        group = groups.setdefault(v.evalset_id, VersionGroup(evalset_pk=v.evalset_id,
                                                             name=v.evalset.display_name, options=[]))
        latest = " · latest" if v.pk == v.evalset.latest_version_id else ""
        try:
            default = config_text(config_for(v))
        except ValueError:  # a stored default that no longer validates: start from evalsite's
            default = config_text(DEFAULT_CONFIG)
        group.options.append(VersionOption(pk=v.pk, label=f"v{v.number} · {v.case_count} cases{latest}",
                                           default_config=default))
    presets = {p.pk: p for p in EvaluationConfig.objects.filter(project=project).order_by("name")}
    return NewRunChoices(versions={v.pk: v for v in versions}, presets=presets, groups=list(groups.values()))


def config_text(config: EvalConfig) -> str:
    """A config as the JSON people edit: each criterion's threshold, and what differs from
    the defaults (the rest is implied)."""
    criteria = {name: {"threshold": c.threshold, **c.model_dump(mode="json", exclude_defaults=True)}
                for name, c in config.criteria.items()}
    doc: dict[str, Any] = {"criteria": criteria}
    if config.user_simulator_config is not None:
        doc["user_simulator_config"] = config.user_simulator_config.model_dump(mode="json")
    return json.dumps(doc, indent=2, ensure_ascii=False)
