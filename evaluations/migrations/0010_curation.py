import hashlib
import json

import django.db.models.deletion
from django.db import migrations, models

OPEN_VERSION = 2_147_483_647
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_JSON = ("tags", "metadata", "session_input", "conversation", "conversation_scenario", "rubrics", "criteria")


def _canonical(value):
    return _ENCODER.encode(value).encode()


def forwards(apps, schema_editor):
    """Each case row gets its eval set, its range of versions (the one version it came with)
    and its own content hash; each version's content hash is recomputed from its cases'
    hashes (the definition `evalsets.services` uses from now on)."""
    if schema_editor.connection.vendor == "postgresql":
        # Check the new foreign keys as rows change, not at commit: PostgreSQL refuses the
        # ALTER TABLEs after this step while deferred checks are pending.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    EvalSetVersion = apps.get_model("evaluations", "EvalSetVersion")
    EvalCase = apps.get_model("evaluations", "EvalCase")
    latest = {}
    for evalset_id, number in EvalSetVersion.objects.values_list("evalset_id", "number"):
        latest[evalset_id] = max(number, latest.get(evalset_id, 0))
    for version in EvalSetVersion.objects.select_related("evalset").order_by("pk").iterator():
        cases_digest = hashlib.sha256()
        updates = []
        rows = EvalCase.objects.filter(version_id=version.pk).order_by("position").values_list("pk", "eval_id", "name", *_JSON)
        for pk, eval_id, name, *values in rows.iterator(chunk_size=1000):
            digest = hashlib.sha256(_canonical([eval_id, name]))
            for column, value in zip(_JSON, values):
                digest.update(f"\0{column}\0{_ENCODER.encode(value)}".encode())
            case_hash = digest.hexdigest()
            cases_digest.update(case_hash.encode())
            updates.append(EvalCase(pk=pk, content_hash=case_hash))
        EvalCase.objects.bulk_update(updates, ["content_hash"], batch_size=500)
        valid_to = OPEN_VERSION if version.number == latest[version.evalset_id] else version.number + 1
        EvalCase.objects.filter(version_id=version.pk).update(evalset_id=version.evalset_id,
                                                              valid_from=version.number, valid_to=valid_to)
        header = {
            "eval_set_id": version.evalset.eval_set_id,
            "name": version.name,
            "description": version.description,
            "metadata": version.metadata,
            "default_config": version.default_config,
            "evaluator_config": version.evaluator_config,
            "cases": cases_digest.hexdigest(),
        }
        version.content_hash = hashlib.sha256(_canonical(header)).hexdigest()
        version.save(update_fields=["content_hash"])


class Migration(migrations.Migration):
    """Eval sets curated in the browser: versions say how they were made (upload, edit,
    promotion, API), with a note and the version they began from; a case row is shared by
    the versions in its range (`valid_from` <= number < `valid_to`) and carries its own
    content hash, so a save writes only what it changes."""

    dependencies = [
        ("evaluations", "0009_triage_unique_per_branch"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="evalsetversion", name="version_unique_content"),
        migrations.AddIndex(
            model_name="evalsetversion",
            index=models.Index(fields=["evalset", "content_hash"], name="version_content"),
        ),
        migrations.AddField(
            model_name="evalsetversion",
            name="how_created",
            field=models.CharField(choices=[("upload", "Upload"), ("edit", "Edit"), ("promotion", "Promotion"), ("api", "Api")], default="upload", max_length=16),
        ),
        migrations.AddField(
            model_name="evalsetversion",
            name="note",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="evalsetversion",
            name="based_on",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="evaluations.evalsetversion"),
        ),
        migrations.RemoveIndex(model_name="evalcase", name="case_version_position"),
        migrations.AddField(
            model_name="evalcase",
            name="evalset",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+", to="evaluations.evalset"),
        ),
        migrations.AddField(
            model_name="evalcase",
            name="valid_from",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="evalcase",
            name="valid_to",
            field=models.PositiveIntegerField(default=OPEN_VERSION),
        ),
        migrations.AddField(
            model_name="evalcase",
            name="content_hash",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="evalcase",
            name="evalset",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="evaluations.evalset"),
        ),
        migrations.AlterField(
            model_name="evalcase",
            name="valid_from",
            field=models.PositiveIntegerField(),
        ),
        migrations.AddIndex(
            model_name="evalcase",
            index=models.Index(fields=["evalset", "valid_to", "position"], name="case_evalset_range"),
        ),
        migrations.RemoveConstraint(model_name="evalcase", name="case_unique_eval_id"),
        migrations.AddConstraint(
            model_name="evalcase",
            constraint=models.UniqueConstraint(fields=("evalset", "eval_id", "valid_from"), name="case_unique_eval_id"),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="verb",
            field=models.CharField(choices=[("evalset.uploaded", "Evalset Uploaded"), ("run.started", "Run Started"), ("run.cancelled", "Run Cancelled"), ("run.retried", "Run Retried"), ("baseline.pinned", "Baseline Pinned"), ("triage.changed", "Triage Changed"), ("run.finished", "Run Finished"), ("comment.added", "Comment Added"), ("member.added", "Member Added"), ("member.changed", "Member Changed"), ("member.removed", "Member Removed"), ("token.created", "Token Created"), ("token.revoked", "Token Revoked"), ("evalset.edited", "Evalset Edited")], max_length=32),
        ),
    ]
