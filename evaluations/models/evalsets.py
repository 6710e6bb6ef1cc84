"""Eval sets, their immutable content-hashed versions, cases and evaluation configs.

A case's conversation is stored as the native JSON (it is read whole, never queried into);
the columns beside it are what lists filter and sort on.
"""

from __future__ import annotations

import gzip
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from evaluations.models.accounts import Project


class EvalSetQuerySet(models.QuerySet["EvalSet"]):
    def visible_to(self, user: Any) -> EvalSetQuerySet:
        return self.filter(project__in=Project.objects.visible_to(user))


class EvalSet(models.Model):
    """A named eval set within a project; its content lives in immutable versions."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="evalsets")
    eval_set_id = models.CharField(max_length=255)  # the id inside the file
    name = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    latest_version = models.ForeignKey(
        "EvalSetVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The run new comparisons default to (pinned by a project admin; a later issue).
    baseline_run = models.ForeignKey("Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    objects = EvalSetQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["project", "eval_set_id"], name="evalset_unique_id")]

    def __str__(self) -> str:
        return self.name or self.eval_set_id

    def get_absolute_url(self) -> str:
        return reverse("evalset_detail", args=[self.pk])

    @property
    def display_name(self) -> str:
        return self.name or self.eval_set_id


class EvalSetVersion(models.Model):
    """One immutable state of an eval set: an upload, or a save of edits to the latest state.
    The same content uploaded again is the newest version with that content."""

    class How(models.TextChoices):
        UPLOAD = "upload"
        EDIT = "edit"
        PROMOTION = "promotion"
        API = "api"

    evalset = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    content_hash = models.CharField(max_length=64)  # sha256 of the canonical native content
    source_format = models.CharField(max_length=32)
    source_variant = models.CharField(max_length=64, blank=True)
    source_filename = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # AgentFlow EvalConfig the file brought (ADK test_config.json, UiPath evaluators).
    default_config = models.JSONField(null=True, blank=True)
    default_criteria_order = models.JSONField(default=list, blank=True)  # see evaluations/ordering.py
    # UiPath evaluator definitions as uploaded, keyed by evaluator id.
    evaluator_config = models.JSONField(null=True, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    case_count = models.PositiveIntegerField(default=0)
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    tags = models.JSONField(default=list, blank=True)  # every tag used, sorted: filter choices
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    # How it came to be, the change note its author gave, and the version the edits began from.
    how_created = models.CharField(max_length=16, choices=How.choices, default=How.UPLOAD)
    note = models.TextField(blank=True, default="")
    based_on = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["evalset", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["evalset", "number"], name="version_unique_number"),
        ]
        # Not unique: an edit may bring back the content of an older version (a revert).
        indexes = [models.Index(fields=["evalset", "content_hash"], name="version_content")]

    def __str__(self) -> str:
        return f"{self.evalset} v{self.number}"

    def get_absolute_url(self) -> str:
        return reverse("evalset_detail", args=[self.evalset_id]) + f"?version={self.number}"


class EvalSetSource(models.Model):
    """The original bytes of a version's upload, kept apart so lists never load them.

    Stored gzip-compressed: eval sets are JSON or CSV and shrink ten- to twentyfold, and a
    large upload then costs little in the database and in memory while it is written."""

    version = models.OneToOneField(EvalSetVersion, on_delete=models.CASCADE, related_name="source")
    filename = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField(default=0)  # of the original, uncompressed
    data = models.BinaryField()  # gzip

    def __str__(self) -> str:
        return self.filename

    def content(self) -> bytes:
        """The original bytes, exactly as uploaded."""
        return gzip.decompress(bytes(self.data))

    @staticmethod
    def compress(original: bytes) -> bytes:
        # Level 3: 0.15 s for a 50 MB eval set (level 6 doubles that for a few % less).
        return gzip.compress(original, compresslevel=3, mtime=0)


class JSONText(str):
    """JSON already serialised: the import writes each case's canonical text once, for its
    content hash and for the row, instead of keeping dicts and serialising them again."""


class CaseJSONField(models.JSONField):
    """A JSONField that also takes `JSONText` and stores it as it is."""

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if isinstance(value, JSONText):
            if connection.vendor == "postgresql":
                from psycopg.types.json import Jsonb

                return Jsonb(value, dumps=str)  # psycopg sends dumps(value): the text itself
            return str(value)
        return super().get_db_prep_value(value, connection, prepared)


# `EvalCase.valid_to` of a case still in the latest version.
OPEN_VERSION = 2_147_483_647


class EvalCaseQuerySet(models.QuerySet["EvalCase"]):
    def in_version(self, version: EvalSetVersion) -> EvalCaseQuerySet:
        """The cases of `version`: the rows whose range of version numbers holds it."""
        return self.filter(evalset_id=version.evalset_id, valid_from__lte=version.number,
                           valid_to__gt=version.number)

    def in_version_ordered_by_eval_id(self, version: EvalSetVersion) -> EvalCaseQuerySet:
        """The cases of `version` in eval_id order, walked along the (eval set, eval id) index
        so a page of them needs no sort of the whole version: the upper bound is read as an
        expression, or the planner takes the range index and sorts every case (the trend page
        of a 100,000-case eval set)."""
        return (self.filter(evalset_id=version.evalset_id, valid_from__lte=version.number)
                .alias(upper=F("valid_to") + 0).filter(upper__gt=version.number).order_by("eval_id"))

    def in_version_by_eval_id(self, version: EvalSetVersion, eval_ids: str | list[str]) -> EvalCaseQuerySet:
        """Cases of `version` by eval id, found through the (eval set, eval id) index: the
        version's upper bound is read as an expression, so no planner prefers the range index."""
        by_id = Q(eval_id=eval_ids) if isinstance(eval_ids, str) else Q(eval_id__in=eval_ids)
        return (self.filter(by_id, evalset_id=version.evalset_id, valid_from__lte=version.number)
                .alias(upper=F("valid_to") + 0).filter(upper__gt=version.number))

    def search(self, text: str) -> EvalCaseQuerySet:
        text = text.strip()
        if not text:
            return self
        return self.filter(Q(eval_id__icontains=text) | Q(name__icontains=text) | Q(search_text__icontains=text))

    def tagged(self, tag: str) -> EvalCaseQuerySet:
        # Tags are kept as "|a|b|" so one indexable LIKE works on SQLite and PostgreSQL alike
        # (SQLite has no JSON `contains`).
        return self.filter(tags_text__contains=f"|{tag}|") if tag else self


class EvalCase(models.Model):
    """One case's content, shared by every version from `valid_from` up to (not including)
    `valid_to`: a save of edits writes rows only for the cases it adds or changes and closes
    the rows it replaces, so versions share unchanged cases instead of copying them. Read a
    version's cases with `EvalCase.objects.in_version(version)`; `version` (and its reverse
    `version.cases`) is the version that introduced the row, which for an upload is all of
    its cases."""

    version = models.ForeignKey(EvalSetVersion, on_delete=models.CASCADE, related_name="cases")
    evalset = models.ForeignKey(EvalSet, on_delete=models.CASCADE, related_name="+")
    valid_from = models.PositiveIntegerField()  # version numbers
    valid_to = models.PositiveIntegerField(default=OPEN_VERSION)
    content_hash = models.CharField(max_length=64, blank=True, default="")  # sha256 of its canonical content
    position = models.PositiveIntegerField()
    eval_id = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True)
    description = models.TextField(blank=True, default="")  # AgentFlow 0.10's EvalCase.description
    tags = CaseJSONField(default=list, blank=True)
    tags_text = models.TextField(blank=True, default="")
    metadata = CaseJSONField(default=dict, blank=True)
    session_input = CaseJSONField(null=True, blank=True)
    conversation = CaseJSONField(default=list, blank=True)  # native Invocation dicts
    conversation_scenario = CaseJSONField(null=True, blank=True)
    rubrics = CaseJSONField(default=list, blank=True)
    criteria = CaseJSONField(default=dict, blank=True)  # per-case evaluator criteria
    turn_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    # The first user message, for the cases table and search.
    search_text = models.TextField(blank=True, default="")

    objects = EvalCaseQuerySet.as_manager()

    class Meta:
        ordering = ["version", "position"]
        # One row per eval id a version introduces; also the index that finds a case by eval id.
        constraints = [
            models.UniqueConstraint(fields=["evalset", "eval_id", "valid_from"], name="case_unique_eval_id"),
        ]
        indexes = [models.Index(fields=["evalset", "valid_to", "position"], name="case_evalset_range")]

    def __str__(self) -> str:
        return self.eval_id

    def get_absolute_url(self) -> str:
        return reverse("case_detail", args=[self.pk])


class EvaluationConfig(models.Model):
    """A named, reusable evaluation config of a project (DeepEval's metric collection)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="eval_configs")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    config = models.JSONField(default=dict)  # AgentFlow EvalConfig
    criteria_order = models.JSONField(default=list, blank=True)  # see evaluations/ordering.py
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="evalconfig_unique_name")]

    def __str__(self) -> str:
        return self.name
