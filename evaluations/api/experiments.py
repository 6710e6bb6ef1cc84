"""Experiments through the API: start one (an eval set and 2-8 variants of a model target),
list them, read one with its runs and the N-way comparison's link.

`POST /api/v1/experiments/` answers 201 with the runs it queued and `compare_url`
(`/compare/runs/?runs=...`), which reads once every run has completed (`comparable`).
The service is `evaluations.runs.experiments`, the one the page uses.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from pydantic import ValidationError as PydanticValidationError
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluations.api.common import query, require_writer, visible_projects
from evaluations.api.errors import READ_ERRORS, WRITE_ERRORS, ApiError, error_responses, problem
from evaluations.api.serializers.fields import id_field
from evaluations.audit import record_experiment
from evaluations.interop.adk.evalset import eval_config_from_doc
from evaluations.models import EvalSet, EvaluationConfig, Experiment
from evaluations.runs import experiments
from evaluations.runs.services import RunError
from evaluations.schemas.model_target import MAX_VARIANTS, MIN_VARIANTS, ExperimentSpec


class ExperimentQuery(serializers.Serializer):
    project = serializers.SlugField(required=False)
    evalset = id_field(required=False)


class ExperimentCreateSerializer(serializers.Serializer):
    evalset = id_field()
    version = id_field(required=False, help_text="default: the latest")
    name = serializers.CharField(required=False, default="", allow_blank=True, max_length=200)
    base = serializers.DictField(help_text="the model target every variant shares (base_url, model, api_key_env, "
                                           "prompt, tools, max_steps, ...: see docs/runs.md)")
    variants = serializers.ListField(child=serializers.DictField(), min_length=MIN_VARIANTS, max_length=MAX_VARIANTS,
                                     help_text="each {label, model, prompt: {prompt_id, version} or {system, user}, "
                                               "parameters: {temperature, top_p, max_tokens, ...}}")
    config = serializers.DictField(required=False, help_text="AgentFlow EvalConfig (default: the eval set's own)")
    preset = id_field(required=False, help_text="a saved evaluation config's id")
    iterations = serializers.IntegerField(required=False, default=1, min_value=1, max_value=100)
    eval_ids = serializers.ListField(child=serializers.CharField(max_length=255), required=False, default=list)
    branch = serializers.CharField(required=False, default="", allow_blank=True, max_length=255)
    tags = serializers.ListField(child=serializers.CharField(max_length=100), required=False, default=list,
                                 max_length=20)


class ExperimentRunOut(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()
    model = serializers.CharField()
    prompt = serializers.CharField(help_text="the stored prompt and version, e.g. `support v3`; empty for text")
    parameters = serializers.DictField()
    status = serializers.CharField()
    cases_total = serializers.IntegerField()
    cases_done = serializers.IntegerField()
    url = serializers.CharField(help_text="the run's page")


class ExperimentOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField()
    evalset = serializers.IntegerField()
    evalset_version = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    runs = ExperimentRunOut(many=True)
    comparable = serializers.BooleanField(help_text="every run completed: the comparison can be read")
    compare_url = serializers.CharField(help_text="the N-way comparison of the runs, /compare/runs/?runs=...")
    url = serializers.CharField(help_text="the experiment's page")


def experiment_json(view: experiments.ExperimentView) -> dict[str, Any]:
    experiment = view.experiment
    runs = [{"id": v.run.pk, "label": v.label, "model": v.model, "prompt": v.prompt, "parameters": v.parameters,
             "status": v.run.status, "cases_total": v.run.cases_total, "cases_done": v.done,
             "url": reverse("run_detail", args=[v.run.pk])} for v in view.variants if v.run is not None]
    return {"id": experiment.pk, "name": experiment.name, "project": experiment.project.slug,
            "evalset": experiment.evalset_id, "evalset_version": experiment.evalset_version.number,
            "created_at": experiment.created_at.isoformat(), "runs": runs, "comparable": view.comparable,
            "compare_url": view.compare_url, "url": experiment.get_absolute_url()}


def spec_problems(exc: PydanticValidationError) -> list[dict[str, Any]]:
    return [problem(e["msg"], ".".join(str(p) for p in e["loc"])) for e in exc.errors(include_url=False)]


class ExperimentList(APIView):
    @extend_schema(operation_id="experiments_list", summary="The experiments of your projects, newest first",
                   parameters=[ExperimentQuery],
                   responses={200: ExperimentOut(many=True), **error_responses(*READ_ERRORS)})
    def get(self, request: Request) -> Response:
        params = query(ExperimentQuery, request)
        found = Experiment.objects.filter(project__in=visible_projects(request))
        if params.get("project"):
            found = found.filter(project__slug=params["project"])
        if params.get("evalset"):
            found = found.filter(evalset_id=params["evalset"])
        found = found.select_related("project", "evalset_version").order_by("-created_at", "-pk")[:100]
        return Response([experiment_json(experiments.experiment_view(e)) for e in found])

    @extend_schema(summary="Start an experiment: one run per variant, together",
                   description="Every variant is checked before anything is created (its prompt, URLs through the "
                               "egress policy, parameters); a bad one is a 400 naming it (`variants.1.model`). The "
                               "answer carries the runs and `compare_url`, the N-way comparison they land on.",
                   request=ExperimentCreateSerializer, responses={201: ExperimentOut, **error_responses(*WRITE_ERRORS)})
    def post(self, request: Request) -> Response:
        form = ExperimentCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        v = form.validated_data
        evalset = get_object_or_404(EvalSet.objects.visible_to(request.user).select_related("project"), pk=v["evalset"])
        require_writer(request, evalset.project, "start experiments")
        version = evalset.versions.filter(number=v["version"]).first() if "version" in v else evalset.latest_version
        if version is None:
            raise ApiError(400, "invalid", f"eval set {evalset.pk} has no version {v.get('version')}",
                           [problem("no such version", "version")])
        try:
            spec = ExperimentSpec.model_validate({key: v[key] for key in ("name", "base", "variants", "iterations",
                                                                          "eval_ids", "branch", "tags")})
        except PydanticValidationError as exc:
            problems = spec_problems(exc)
            raise ApiError(400, "invalid", problems[0]["path"] + ": " + problems[0]["message"], problems) from None
        config = None
        if "config" in v:
            try:
                config = eval_config_from_doc(v["config"])
            except PydanticValidationError as exc:
                raise ApiError(400, "invalid", "config: not an evaluation config",
                               [problem(p["message"], f"config.{p['path']}") for p in spec_problems(exc)]) from None
        preset = None
        if "preset" in v:
            preset = get_object_or_404(EvaluationConfig, pk=v["preset"], project=evalset.project)
        try:
            started = experiments.experiment_start(project=evalset.project, version=version, spec=spec, config=config,
                                                   preset=preset, user=request.user)
        except RunError as exc:
            path = str(exc).split(":", 1)[0] if str(exc).startswith("variants[") else "base"
            raise ApiError(400, "invalid", str(exc), [problem(str(exc), path)]) from None
        record_experiment(experiment=started.experiment, runs=started.runs, actor=request.user, via="the API")
        view = experiments.experiment_view(started.experiment)
        return Response(experiment_json(view), status=status.HTTP_201_CREATED)


class ExperimentDetail(APIView):
    @extend_schema(summary="An experiment: its runs' progress and the comparison's link",
                   responses={200: ExperimentOut, **error_responses(*READ_ERRORS)})
    def get(self, request: Request, pk: int) -> Response:
        experiment = get_object_or_404(Experiment.objects.filter(project__in=visible_projects(request))
                                       .select_related("project", "evalset_version"), pk=pk)
        return Response(experiment_json(experiments.experiment_view(experiment)))
