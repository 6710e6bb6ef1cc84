"""Experiment pages: the project's experiments, the form that starts one (an eval set and
2-8 variants of model, prompt version and parameters), and one experiment's runs, which
lands on the N-way comparison once every run has completed. The API twin is
`/api/v1/experiments/` (evaluations/api/experiments.py), on the same service."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods
from pydantic import ValidationError

from evaluations.audit import record_experiment
from evaluations.converters import parse_id, whole_number
from evaluations.models import EvalSet, Experiment, Project
from evaluations.prompts.selectors import version_choices
from evaluations.runs import experiments
from evaluations.runs.services import RunError
from evaluations.schemas.model_target import MAX_VARIANTS, ExperimentSpec
from evaluations.web.views.common import current_project, enter_project

EXAMPLE_SYSTEM = "You are a helpful assistant. Use the tools when they help; answer briefly."


@login_required
@require_GET
def experiment_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    rows = experiments.experiment_rows(Experiment.objects.filter(project=project)) if project else []
    return render(request, "evaluations/experiments/list.html", {
        "project": project, "rows": rows, "can_write": bool(project and project.can_write(request.user))})


def _blank_fields(request: HttpRequest, choices: list[tuple[str, str]]) -> dict[str, Any]:
    chosen = request.GET.get("prompt", "")
    first = next((value for value, _ in choices if value.split(":")[0] == chosen), "")
    return {"evalset": request.GET.get("evalset", ""), "name": "", "base_url": "", "api_key_env": "OPENAI_API_KEY",
            "max_steps": "10", "simulate_with_llm": False, "tool_instructions": "", "system": EXAMPLE_SYSTEM,
            "user": "{{input}}",
            "variants": [{"label": "", "model": "", "prompt": first, "temperature": "", "max_tokens": ""}
                         for _ in range(MAX_VARIANTS)]}


def _posted_fields(post: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {key: post.get(key, "") for key in ("evalset", "name", "base_url", "api_key_env",
                                                                 "max_steps", "tool_instructions", "system", "user")}
    fields["simulate_with_llm"] = bool(post.get("simulate_with_llm"))
    fields["variants"] = [{key: post.get(f"v{i}-{key}", "") for key in ("label", "model", "prompt", "temperature",
                                                                        "max_tokens")}
                          for i in range(MAX_VARIANTS)]
    return fields


def _number(text: str, kind: type[int] | type[float], where: str, problems: list[str]) -> Any:
    try:
        return kind(text)
    except ValueError:
        problems.append(f"{where}: {text!r} is not a number")
        return None


def _spec(fields: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """The form's fields as an ExperimentSpec's dict; rows left empty are no variants."""
    base: dict[str, Any] = {"base_url": fields["base_url"].strip(), "prompt": {"system": fields["system"],
                                                                            "user": fields["user"]},
                            "simulate_with_llm": fields["simulate_with_llm"],
                            "tool_instructions": fields["tool_instructions"]}
    if fields["api_key_env"].strip():
        base["api_key_env"] = fields["api_key_env"].strip()
    if fields["max_steps"].strip():
        base["max_steps"] = _number(fields["max_steps"].strip(), int, "max steps", problems)
    variants = []
    for i, row in enumerate(fields["variants"]):
        if not any(str(v).strip() for k, v in row.items() if k != "prompt") and not row["prompt"]:
            continue
        variant: dict[str, Any] = {"label": row["label"].strip(), "model": row["model"].strip() or None,
                                   "parameters": {}}
        if row["prompt"]:
            prompt_id, _, number = row["prompt"].partition(":")
            prompt_pk, version = parse_id(prompt_id), whole_number(number, minimum=1, maximum=2**31 - 1)
            if prompt_pk is not None and version is not None:
                variant["prompt"] = {"prompt_id": prompt_pk, "version": version}
            else:
                problems.append(f"variant {i + 1} prompt: choose one of the listed prompt versions")
        if row["temperature"].strip():
            variant["parameters"]["temperature"] = _number(row["temperature"].strip(), float,
                                                           f"variant {i + 1} temperature", problems)
        if row["max_tokens"].strip():
            variant["parameters"]["max_tokens"] = _number(row["max_tokens"].strip(), int,
                                                          f"variant {i + 1} max tokens", problems)
        if variant["model"] is None:
            problems.append(f"variant {i + 1}: give its model")
        variants.append(variant)
    return {"name": fields["name"].strip(), "base": base, "variants": variants}


@login_required
@require_http_methods(["GET", "POST"])
def experiment_new(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None or not project.can_write(request.user):
        raise PermissionDenied("only members and admins of a project start experiments")
    evalsets = list(EvalSet.objects.filter(project=project, latest_version__isnull=False)
                    .order_by("name", "eval_set_id"))
    choices = version_choices(project)
    fields = _blank_fields(request, choices)
    problems: list[str] = []
    if request.method == "POST":
        fields = _posted_fields(request.POST)
        evalset = next((e for e in evalsets if str(e.pk) == fields["evalset"]), None)
        if evalset is None:
            problems.append("eval set: choose one")
        raw = _spec(fields, problems)
        spec = None
        if not problems:
            try:
                spec = ExperimentSpec.model_validate(raw)
            except ValidationError as exc:
                problems += [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)]
        if spec is not None and evalset is not None and evalset.latest_version is not None:
            try:
                started = experiments.experiment_start(project=project, version=evalset.latest_version, spec=spec,
                                                       user=request.user)
            except RunError as exc:
                problems.append(str(exc))
            else:
                record_experiment(experiment=started.experiment, runs=started.runs, actor=request.user,
                                  via="the experiments page")
                return HttpResponseRedirect(reverse("experiment_detail", args=[started.experiment.pk]) + "?land=1")
    return render(request, "evaluations/experiments/new.html", {
        "project": project, "evalsets": evalsets, "choices": choices, "fields": fields, "problems": problems,
        "max_variants": MAX_VARIANTS,
        "more_filled": any(any(str(v).strip() for v in row.values()) for row in fields["variants"][3:])},
        status=400 if problems else 200)


def _experiment(request: HttpRequest, pk: int) -> Experiment:
    experiment = get_object_or_404(Experiment.objects.select_related("project", "evalset", "evalset_version",
                                                                     "created_by"),
                                   pk=pk, project__in=Project.objects.visible_to(request.user))
    enter_project(request, experiment.project)
    return experiment


@login_required
@require_GET
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = _experiment(request, pk)
    return render(request, "evaluations/experiments/detail.html", {
        "experiment": experiment, "view": experiments.experiment_view(experiment),
        "land": bool(request.GET.get("land"))})


@login_required
@require_GET
def experiment_status(request: HttpRequest, pk: int) -> HttpResponse:
    """The runs' progress, polled every 2 s until they finish; with `?land=1`, once every run
    has completed, the browser goes on to the N-way comparison."""
    experiment = _experiment(request, pk)
    view = experiments.experiment_view(experiment)
    land = bool(request.GET.get("land"))
    response = render(request, "evaluations/experiments/_status.html", {"experiment": experiment, "view": view,
                                                                        "land": land})
    if land and view.comparable and request.htmx:  # type: ignore[attr-defined]
        response["HX-Redirect"] = view.compare_url
    return response
