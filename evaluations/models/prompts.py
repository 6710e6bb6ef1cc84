"""Prompts (a system message and a user template, versioned like eval sets) and experiments
(one eval set run by several variants of model, prompt version and parameters at once)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from evaluations.models.accounts import Project
from evaluations.models.evalsets import EvalSet, EvalSetVersion
from evaluations.models.runs import Run


class PromptQuerySet(models.QuerySet["Prompt"]):
    def visible_to(self, user: Any) -> PromptQuerySet:
        return self.filter(project__in=Project.objects.visible_to(user))


class Prompt(models.Model):
    """A named prompt of a project; its text lives in immutable, numbered versions."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="prompts")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True, default="")
    latest_version = models.ForeignKey("PromptVersion", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    objects = PromptQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="prompt_unique_name")]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("prompt_detail", args=[self.pk])


class PromptVersion(models.Model):
    """One immutable text of a prompt. Saving the latest text again makes no new version."""

    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    system = models.TextField(blank=True, default="")
    user = models.TextField(blank=True, default="")
    content_hash = models.CharField(max_length=64)  # sha256 of the canonical (system, user)
    note = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["prompt", "-number"]
        constraints = [models.UniqueConstraint(fields=["prompt", "number"], name="prompt_version_unique_number")]

    def __str__(self) -> str:
        return f"{self.prompt} v{self.number}"


class Experiment(models.Model):
    """2-8 variants of a model target started together on one eval-set version."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="experiments")
    evalset = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="experiments")
    evalset_version = models.ForeignKey(EvalSetVersion, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=255, blank=True, default="")
    base = models.JSONField(default=dict, blank=True)  # what every variant's target shares (no key)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["project", "-created_at"], name="experiment_project_time")]

    def __str__(self) -> str:
        return self.name or f"experiment {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("experiment_detail", args=[self.pk])


class ExperimentVariant(models.Model):
    """One variant of an experiment and the run that carries it out (None once deleted)."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="variants")
    position = models.PositiveSmallIntegerField()
    label = models.CharField(max_length=200)
    model = models.CharField(max_length=200)
    prompt_version = models.ForeignKey(PromptVersion, null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+")
    parameters = models.JSONField(default=dict, blank=True)
    run = models.OneToOneField(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="variant")

    class Meta:
        ordering = ["experiment", "position"]
        constraints = [models.UniqueConstraint(fields=["experiment", "position"], name="variant_unique_position")]

    def __str__(self) -> str:
        return self.label
