"""Experiments: one eval set run by 2-8 variants of a model target at once (model x prompt
version x parameters), then read side by side on the N-way comparison.

`experiment_start` checks every variant first (its target as a run keeps it: the prompt's
text from the stored version, the URLs through the egress policy), so a bad variant creates
nothing; then, in one transaction, the experiment, its variants and one run per variant,
queued together when it commits. The runs share what the N-way comparison needs: the same
eval-set version, evaluation config, cases and iterations; the tools are inferred from the
eval set once, so every variant offers the model the same list. A run's name is its
variant's label and its model label the variant's model, so the comparison's columns tell
them apart; each run is tagged `experiment:<id>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db import transaction
from django.db.models import Count, QuerySet
from django.urls import reverse

from evaluations.models import (
    EvalCase,
    EvalSetVersion,
    EvaluationConfig,
    Experiment,
    ExperimentVariant,
    Project,
    Prompt,
    PromptVersion,
    Run,
)
from evaluations.runs.services import RunError, config_for, model_target_prepare, native_case, run_create
from evaluations.runs.targets.model import inferred_tools
from evaluations.schemas.evalset import EvalConfig
from evaluations.schemas.model_target import ExperimentSpec, PromptRef, PromptText, VariantSpec


@dataclass(frozen=True)
class Started:
    experiment: Experiment
    runs: list[Run]


def _label(variant: VariantSpec, prompt: dict[str, Any], prompt_names: dict[int, str]) -> str:
    """The variant's own label, else its prompt version and parameters (the run's model label
    says the model), else its model's name."""
    if variant.label.strip():
        return variant.label.strip()
    parts = []
    if prompt.get("prompt_id") is not None:
        parts.append(f"{prompt_names.get(prompt['prompt_id'], 'prompt')} v{prompt['version']}")
    parts += [f"{key} {value}" for key, value in sorted(variant.parameters.items()) if not isinstance(value, dict)]
    return " · ".join(parts)[:120]


def _labels(spec: ExperimentSpec, targets: list[dict[str, Any]], names: dict[int, str]) -> list[str]:
    """One distinct label per variant: its own, else what sets it apart; the model is added
    where that alone does not."""
    labels = [_label(v, t.get("prompt", {}), names) or t["model"]
              for v, t in zip(spec.variants, targets, strict=True)]
    labels = [label if labels.count(label) == 1 or label == t["model"] else f"{label} · {t['model']}"
              for label, t in zip(labels, targets, strict=True)]
    return [label if labels.count(label) == 1 else f"{label} ({i + 1})" for i, label in enumerate(labels)]


def _variant_target(base: dict[str, Any], variant: VariantSpec) -> dict[str, Any]:
    target = {**base, **variant.parameters}
    if variant.model is not None:
        target["model"] = variant.model
    if isinstance(variant.prompt, PromptRef | PromptText):
        target["prompt"] = variant.prompt.model_dump(exclude_none=True)
    return target


def experiment_start(*, project: Project, version: EvalSetVersion, spec: ExperimentSpec,
                     config: EvalConfig | None = None, preset: EvaluationConfig | None = None,
                     user: Any = None) -> Started:
    """Create the experiment and its runs (queued once it commits). RunError says which
    variant is wrong and why; nothing is created then."""
    if version.evalset.project_id != project.pk:
        raise RunError("the eval set version belongs to another project")
    base = dict(spec.base)
    if base.get("tools") is None:  # inferred once: the same list for every variant and case
        cases = (native_case(row) for row in EvalCase.objects.in_version(version).order_by("position").iterator(500))
        base["tools"] = [tool.model_dump(mode="json", exclude_none=True) for tool in inferred_tools(cases)]
        base["tools_inferred"] = True
    targets: list[dict[str, Any]] = []
    for index, variant in enumerate(spec.variants):
        try:
            targets.append(model_target_prepare(project=project, version=version,
                                                target=_variant_target(base, variant)))
        except RunError as exc:
            raise RunError(f"variants[{index}]: {exc}") from None
    prompt_ids = {t["prompt"]["prompt_id"] for t in targets if t.get("prompt", {}).get("prompt_id")}
    names = dict(Prompt.objects.filter(pk__in=prompt_ids, project=project).values_list("pk", "name"))
    labels = _labels(spec, targets, names)
    used = config_for(version, config, preset)
    with transaction.atomic():
        experiment = Experiment.objects.create(project=project, evalset=version.evalset, evalset_version=version,
                                               name=spec.name, base=_shown(base), created_by=_user(user))
        runs: list[Run] = []
        for position, (variant, target, label) in enumerate(zip(spec.variants, targets, labels, strict=True)):
            run = run_create(project=project, version=version, target_kind=Run.TargetKind.MODEL, target=target,
                             config=used, preset=preset, iterations=spec.iterations, eval_ids=spec.eval_ids or None,
                             name=label, user=user,
                             labels={"model": target["model"], "branch": spec.branch,
                                     "tags": [*spec.tags, f"experiment:{experiment.pk}"]})
            prompt = target.get("prompt", {})
            ExperimentVariant.objects.create(
                experiment=experiment, position=position, label=label, model=target["model"],
                prompt_version_id=_version_pk(prompt), parameters=variant.parameters, run=run)
            runs.append(run)
    return Started(experiment, runs)


def _version_pk(prompt: dict[str, Any]) -> int | None:
    if prompt.get("prompt_id") is None:
        return None
    return PromptVersion.objects.filter(prompt_id=prompt["prompt_id"], number=prompt["version"]).values_list(
        "pk", flat=True).first()


def _shown(base: dict[str, Any]) -> dict[str, Any]:
    """The base as the experiment keeps it for its page: the tools by name only."""
    kept = {k: v for k, v in base.items() if k != "tools"}
    kept["tools"] = [t.get("function", {}).get("name") for t in base.get("tools") or [] if isinstance(t, dict)]
    return kept


def _user(user: Any) -> Any:
    return user if user is not None and getattr(user, "is_authenticated", False) else None


# --- Reading --------------------------------------------------------------------------------


def compare_url(run_ids: list[int]) -> str:
    """The N-way comparison of the runs (`/compare/runs/?runs=1,2,3`)."""
    return reverse("nway_compare") + "?" + urlencode({"runs": ",".join(str(pk) for pk in run_ids)})


@dataclass(frozen=True)
class VariantView:
    position: int
    label: str
    model: str
    prompt: str  # "support v2", or "" for text given with the experiment
    prompt_pk: int | None
    parameters: dict[str, Any]
    run: Run | None

    @property
    def done(self) -> int:
        run = self.run
        return 0 if run is None else run.cases_done + run.cases_not_runnable + run.cases_missing

    @property
    def percent(self) -> int:
        run = self.run
        return 100 if run is None or not run.cases_total else min(100, round(100 * self.done / run.cases_total))


@dataclass(frozen=True)
class ExperimentView:
    experiment: Experiment
    variants: list[VariantView]

    @property
    def run_ids(self) -> list[int]:
        return [v.run.pk for v in self.variants if v.run is not None]

    @property
    def finished(self) -> bool:
        return all(v.run is not None and v.run.status in (Run.Status.COMPLETED, Run.Status.CANCELLED,
                                                           Run.Status.FAILED) for v in self.variants)

    @property
    def comparable(self) -> bool:
        """Every variant's run completed: the N-way comparison can be read."""
        return len(self.run_ids) >= 2 and all(v.run is not None and v.run.status == Run.Status.COMPLETED
                                              for v in self.variants)

    @property
    def compare_url(self) -> str:
        return compare_url(self.run_ids)


def experiment_view(experiment: Experiment) -> ExperimentView:
    """The experiment with its variants and their runs' progress: one query."""
    rows = (ExperimentVariant.objects.filter(experiment=experiment).order_by("position")
            .select_related("run", "prompt_version__prompt")
            .defer("run__target", "run__config", "run__summary", "run__chart_bins", "run__input_overrides"))
    variants = [VariantView(v.position, v.label, v.model,
                            f"{v.prompt_version.prompt.name} v{v.prompt_version.number}" if v.prompt_version else "",
                            v.prompt_version.prompt_id if v.prompt_version else None, v.parameters, v.run)
                for v in rows]
    return ExperimentView(experiment, variants)


@dataclass(frozen=True)
class ExperimentRow:
    pk: int
    name: str
    evalset: str
    evalset_pk: int
    version: int
    variants: int
    created_at: datetime
    author: str


def experiment_rows(experiments: QuerySet[Experiment], limit: int = 100) -> list[ExperimentRow]:
    """The newest experiments: one query."""
    rows = (experiments.annotate(n=Count("variants")).order_by("-created_at", "-pk")
            .values_list("pk", "name", "evalset__name", "evalset__eval_set_id", "evalset_id",
                         "evalset_version__number", "n", "created_at", "created_by__username")[:limit])
    return [ExperimentRow(pk, name, evalset_name or eval_set_id, evalset_pk, number, n, created, author or "")
            for pk, name, evalset_name, eval_set_id, evalset_pk, number, n, created, author in rows]
