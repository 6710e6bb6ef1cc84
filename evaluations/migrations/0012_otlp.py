"""Traces received on POST /v1/traces (per project, in its trace list) and runs whose target is
"traces" (see evaluations/ingest)."""

import django.db.models.deletion
from django.db import migrations, models


def fill_projects(apps, schema_editor):
    """Traces kept before this migration came with uploaded outputs: their run's project."""
    Trace = apps.get_model("evaluations", "Trace")
    Run = apps.get_model("evaluations", "Run")
    Trace.objects.filter(project__isnull=True).update(
        project=models.Subquery(Run.objects.filter(pk=models.OuterRef("run_id")).values("project_id")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ('evaluations', '0011_human_grades'),
    ]

    operations = [
        migrations.AddField(
            model_name='trace',
            name='complete',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='trace',
            name='error_count',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='trace',
            name='eval_id',
            field=models.CharField(blank=True, max_length=255),
        ),
        migrations.AddField(
            model_name='trace',
            name='project',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='evaluations.project'),
        ),
        migrations.AddField(
            model_name='trace',
            name='received',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='trace',
            name='received_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='trace',
            name='resource',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='trace',
            name='service_name',
            field=models.CharField(blank=True, max_length=255),
        ),
        migrations.AddField(
            model_name='trace',
            name='span_count',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name='run',
            name='target_kind',
            field=models.CharField(choices=[('uploaded', 'Uploaded'), ('http', 'Http'), ('python', 'Python'), ('traces', 'Traces')], max_length=16),
        ),
        migrations.AlterField(
            model_name='trace',
            name='result',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='evaluations.caseresult'),
        ),
        migrations.AlterField(
            model_name='trace',
            name='run',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='evaluations.run'),
        ),
        migrations.AddIndex(
            model_name='trace',
            index=models.Index(fields=['project', 'received', 'start_ns'], name='trace_project_start'),
        ),
        migrations.AddConstraint(
            model_name='trace',
            constraint=models.UniqueConstraint(condition=models.Q(('received', True)), fields=('project', 'trace_id'), name='trace_received_unique'),
        ),
        migrations.RunPython(fill_projects, migrations.RunPython.noop),
    ]
