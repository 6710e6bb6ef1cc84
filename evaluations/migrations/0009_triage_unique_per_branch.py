from django.db import migrations, models


class Migration(migrations.Migration):
    """A triage decision is unique per case of an eval set and branch (the rows were merged
    per branch in 0007); the audit log knows "run finished" events."""

    dependencies = [
        ('evaluations', '0008_triage_per_branch'),
    ]

    operations = [
        migrations.AlterField(
            model_name='auditevent',
            name='verb',
            field=models.CharField(choices=[('evalset.uploaded', 'Evalset Uploaded'), ('run.started', 'Run Started'), ('run.cancelled', 'Run Cancelled'), ('run.retried', 'Run Retried'), ('baseline.pinned', 'Baseline Pinned'), ('triage.changed', 'Triage Changed'), ('run.finished', 'Run Finished'), ('comment.added', 'Comment Added'), ('member.added', 'Member Added'), ('member.changed', 'Member Changed'), ('member.removed', 'Member Removed'), ('token.created', 'Token Created'), ('token.revoked', 'Token Revoked')], max_length=32),
        ),
        migrations.AddConstraint(
            model_name='triage',
            constraint=models.UniqueConstraint(fields=('evalset', 'eval_id', 'branch'), name='triage_unique_case_branch'),
        ),
    ]
