"""evalsite's schema as of 0025, in one migration: a fresh database creates its tables at once
instead of walking 25 migrations (issue 39). A database at any step of the old chain still
upgrades through it: the replaced migrations stay in this folder, and Django uses them while
some but not all are applied (tests/test_migration_squash.py).

Edit nothing here; a schema change is a new migration after this one."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import evaluations.models.evalsets
from evaluations.migrations._bulk import CreateTables

# The queue's schedules the old chain made (0003 and 0019); the monitors' sweeps are made by
# evaluations.monitors.queue when the first monitor is saved.
SCHEDULES = [
    ("evalsite: resume stalled runs", "evaluations.tasks.resume_stalled_runs"),
    ("evalsite: notifications sweep", "evaluations.tasks.notify_sweep"),
]


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    for name, func in SCHEDULES:
        Schedule.objects.update_or_create(
            name=name, defaults={"func": func, "schedule_type": "I", "minutes": 1, "repeats": -1})


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name__in=[name for name, _ in SCHEDULES]).delete()


class Migration(migrations.Migration):

    replaces = [
        ('evaluations', '0001_initial'),
        ('evaluations', '0002_run_engine'),
        ('evaluations', '0003_resume_schedule'),
        ('evaluations', '0004_comparison'),
        ('evaluations', '0005_team_review'),
        ('evaluations', '0006_comparison_walk'),
        ('evaluations', '0007_criteria_order'),
        ('evaluations', '0008_triage_per_branch'),
        ('evaluations', '0009_triage_unique_per_branch'),
        ('evaluations', '0010_curation'),
        ('evaluations', '0011_human_grades'),
        ('evaluations', '0012_otlp'),
        ('evaluations', '0013_speed'),
        ('evaluations', '0014_case_description'),
        ('evaluations', '0015_i28_platform'),
        ('evaluations', '0016_i30_causes'),
        ('evaluations', '0017_i27_ops'),
        ('evaluations', '0018_i28_pages'),
        ('evaluations', '0019_i32_notify'),
        ('evaluations', '0020_i34_sso'),
        ('evaluations', '0021_i31_monitors'),
        ('evaluations', '0022_i28_grading'),
        ('evaluations', '0023_trace_list_indexes'),
        ('evaluations', '0024_result_cause_no_own_cause_index'),
        ('evaluations', '0025_run_chart_bins'),
    ]

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        CreateTables(
            migrations.CreateModel(
                name='Run',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(blank=True, max_length=255)),
                    ('config', models.JSONField(default=dict)),
                    ('criteria_order', models.JSONField(blank=True, default=list)),
                    ('target_kind', models.CharField(choices=[('uploaded', 'Uploaded'), ('http', 'Http'), ('python', 'Python'), ('traces', 'Traces')], max_length=16)),
                    ('target', models.JSONField(default=dict)),
                    ('iterations', models.PositiveIntegerField(default=1)),
                    ('warmups', models.PositiveIntegerField(default=0)),
                    ('eval_ids', models.JSONField(blank=True, default=list)),
                    ('input_overrides', models.JSONField(blank=True, default=dict)),
                    ('model', models.CharField(blank=True, max_length=200)),
                    ('git_commit', models.CharField(blank=True, max_length=64)),
                    ('branch', models.CharField(blank=True, max_length=255)),
                    ('tags', models.JSONField(blank=True, default=list)),
                    ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=16)),
                    ('error', models.TextField(blank=True)),
                    ('cases_total', models.PositiveIntegerField(default=0)),
                    ('cases_done', models.PositiveIntegerField(default=0)),
                    ('cases_failed', models.PositiveIntegerField(default=0)),
                    ('cases_errored', models.PositiveIntegerField(default=0)),
                    ('cases_missing', models.PositiveIntegerField(default=0)),
                    ('cases_not_runnable', models.PositiveIntegerField(default=0)),
                    ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                    ('lease_owner', models.CharField(blank=True, max_length=100)),
                    ('summary', models.JSONField(blank=True, null=True)),
                    ('chart_bins', models.JSONField(blank=True, editable=False, null=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('started_at', models.DateTimeField(blank=True, null=True)),
                    ('finished_at', models.DateTimeField(blank=True, null=True)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'ordering': ['-created_at'],
                },
            ),
            migrations.CreateModel(
                name='Comparison',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('baseline_finished_at', models.DateTimeField(blank=True, null=True)),
                    ('candidate_finished_at', models.DateTimeField(blank=True, null=True)),
                    ('computed_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('summary', models.JSONField(default=dict)),
                    ('version', models.PositiveSmallIntegerField(default=0)),
                    ('counts', models.JSONField(default=dict)),
                    ('walk', models.TextField(blank=True, default='')),
                    ('head', models.TextField(blank=True, default='')),
                    ('baseline', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.run')),
                    ('candidate', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.run')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('baseline', 'candidate'), name='comparison_unique_pair')],
                },
            ),
            migrations.CreateModel(
                name='EvalCase',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('valid_from', models.PositiveIntegerField()),
                    ('valid_to', models.PositiveIntegerField(default=2147483647)),
                    ('content_hash', models.CharField(blank=True, default='', max_length=64)),
                    ('position', models.PositiveIntegerField()),
                    ('eval_id', models.CharField(max_length=255)),
                    ('name', models.CharField(blank=True, max_length=255)),
                    ('description', models.TextField(blank=True, default='')),
                    ('tags', evaluations.models.evalsets.CaseJSONField(blank=True, default=list)),
                    ('tags_text', models.TextField(blank=True, default='')),
                    ('metadata', evaluations.models.evalsets.CaseJSONField(blank=True, default=dict)),
                    ('session_input', evaluations.models.evalsets.CaseJSONField(blank=True, null=True)),
                    ('conversation', evaluations.models.evalsets.CaseJSONField(blank=True, default=list)),
                    ('conversation_scenario', evaluations.models.evalsets.CaseJSONField(blank=True, null=True)),
                    ('rubrics', evaluations.models.evalsets.CaseJSONField(blank=True, default=list)),
                    ('criteria', evaluations.models.evalsets.CaseJSONField(blank=True, default=dict)),
                    ('turn_count', models.PositiveIntegerField(default=0)),
                    ('tool_call_count', models.PositiveIntegerField(default=0)),
                    ('search_text', models.TextField(blank=True, default='')),
                ],
                options={
                    'ordering': ['version', 'position'],
                },
            ),
            migrations.CreateModel(
                name='EvalSetVersion',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('number', models.PositiveIntegerField()),
                    ('content_hash', models.CharField(max_length=64)),
                    ('source_format', models.CharField(max_length=32)),
                    ('source_variant', models.CharField(blank=True, max_length=64)),
                    ('source_filename', models.CharField(max_length=255)),
                    ('name', models.CharField(blank=True, max_length=255)),
                    ('description', models.TextField(blank=True)),
                    ('metadata', models.JSONField(blank=True, default=dict)),
                    ('default_config', models.JSONField(blank=True, null=True)),
                    ('default_criteria_order', models.JSONField(blank=True, default=list)),
                    ('evaluator_config', models.JSONField(blank=True, null=True)),
                    ('warnings', models.JSONField(blank=True, default=list)),
                    ('case_count', models.PositiveIntegerField(default=0)),
                    ('turn_count', models.PositiveIntegerField(default=0)),
                    ('tool_call_count', models.PositiveIntegerField(default=0)),
                    ('tags', models.JSONField(blank=True, default=list)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('how_created', models.CharField(choices=[('upload', 'Upload'), ('edit', 'Edit'), ('promotion', 'Promotion'), ('api', 'Api')], default='upload', max_length=16)),
                    ('note', models.TextField(blank=True, default='')),
                    ('based_on', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='evaluations.evalsetversion')),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'ordering': ['evalset', '-number'],
                },
            ),
            migrations.CreateModel(
                name='EvaluationConfig',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200)),
                    ('description', models.TextField(blank=True)),
                    ('config', models.JSONField(default=dict)),
                    ('criteria_order', models.JSONField(blank=True, default=list)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                ],
            ),
            migrations.CreateModel(
                name='Project',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('slug', models.SlugField(max_length=64, unique=True)),
                    ('name', models.CharField(max_length=200)),
                    ('description', models.TextField(blank=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('archived_at', models.DateTimeField(blank=True, null=True)),
                ],
                options={
                    'ordering': ['name'],
                },
            ),
            migrations.CreateModel(
                name='RunCause',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('rank', models.PositiveIntegerField()),
                    ('signature', models.CharField(max_length=500)),
                    ('kind', models.CharField(max_length=32)),
                    ('cases', models.IntegerField(default=0)),
                    ('criteria', models.JSONField(default=list)),
                    ('example_eval_id', models.CharField(max_length=255)),
                    ('example_result_id', models.BigIntegerField(null=True)),
                    ('example', models.CharField(blank=True, max_length=500)),
                ],
            ),
            migrations.CreateModel(
                name='ApiToken',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100)),
                    ('prefix', models.CharField(max_length=12)),
                    ('digest', models.CharField(max_length=64, unique=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('last_used_at', models.DateTimeField(blank=True, null=True)),
                    ('revoked_at', models.DateTimeField(blank=True, null=True)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'ordering': ['-created_at'],
                },
            ),
            migrations.CreateModel(
                name='AuditEvent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('verb', models.CharField(choices=[('evalset.uploaded', 'Evalset Uploaded'), ('run.started', 'Run Started'), ('run.cancelled', 'Run Cancelled'), ('run.retried', 'Run Retried'), ('baseline.pinned', 'Baseline Pinned'), ('triage.changed', 'Triage Changed'), ('run.finished', 'Run Finished'), ('comment.added', 'Comment Added'), ('member.added', 'Member Added'), ('member.changed', 'Member Changed'), ('member.removed', 'Member Removed'), ('token.created', 'Token Created'), ('token.revoked', 'Token Revoked'), ('grade.added', 'Grade Added'), ('grade.changed', 'Grade Changed'), ('evalset.edited', 'Evalset Edited'), ('project.created', 'Project Created'), ('project.archived', 'Project Archived'), ('run.deleted', 'Run Deleted'), ('evalset.deleted', 'Evalset Deleted'), ('evalset.renamed', 'Evalset Renamed'), ('notify.changed', 'Notify Changed'), ('signin.succeeded', 'Sign-in succeeded'), ('signin.failed', 'Sign-in failed'), ('twofactor.enabled', 'Second factor set up'), ('twofactor.disabled', 'Second factor turned off'), ('sso.roles_changed', 'SSO roles changed'), ('monitor.created', 'Monitor Created'), ('monitor.edited', 'Monitor Edited'), ('monitor.backfilled', 'Monitor Backfilled'), ('retention.changed', 'Retention Changed')], max_length=32)),
                    ('object_type', models.CharField(blank=True, max_length=32)),
                    ('object_id', models.CharField(blank=True, max_length=64)),
                    ('summary', models.CharField(max_length=500)),
                    ('data', models.JSONField(blank=True, default=dict)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='evaluations.project')),
                ],
                options={
                    'ordering': ['-created_at', '-pk'],
                    'indexes': [models.Index(fields=['project', '-created_at'], name='event_project_time'), models.Index(fields=['object_type', 'object_id'], name='event_object')],
                },
            ),
            migrations.CreateModel(
                name='CauseSet',
                fields=[
                    ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='cause_set', serialize=False, to='evaluations.run')),
                    ('version', models.PositiveSmallIntegerField(default=0)),
                    ('run_finished_at', models.DateTimeField(blank=True, null=True)),
                    ('computed_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('failing_cases', models.IntegerField(default=0)),
                ],
            ),
            migrations.CreateModel(
                name='ComparisonSummary',
                fields=[
                    ('comparison', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='full', serialize=False, to='evaluations.comparison')),
                    ('summary', models.JSONField(default=dict)),
                ],
            ),
            migrations.CreateModel(
                name='ComparisonCase',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('position', models.PositiveIntegerField()),
                    ('eval_id', models.CharField(max_length=255)),
                    ('status', models.CharField(max_length=16)),
                    ('baseline_passed', models.IntegerField(null=True)),
                    ('baseline_repeats', models.IntegerField(default=0)),
                    ('baseline_outcome', models.CharField(max_length=8, null=True)),
                    ('candidate_passed', models.IntegerField(null=True)),
                    ('candidate_repeats', models.IntegerField(default=0)),
                    ('candidate_outcome', models.CharField(max_length=8, null=True)),
                    ('baseline_result_id', models.BigIntegerField(null=True)),
                    ('candidate_result_id', models.BigIntegerField(null=True)),
                    ('scores', models.TextField(default='{}')),
                    ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='case_rows', to='evaluations.comparison')),
                ],
                options={
                    'indexes': [models.Index(fields=['comparison', 'status', 'position'], name='comparison_case_status'), models.Index(fields=['comparison', 'eval_id'], name='comparison_case_eval_id')],
                    'constraints': [models.UniqueConstraint(fields=('comparison', 'position'), name='comparison_case_position')],
                },
            ),
            migrations.CreateModel(
                name='ComparisonScatter',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('criterion', models.CharField(max_length=200)),
                    ('points', models.TextField(default='[]')),
                    ('scored', models.IntegerField(default=0)),
                    ('comparison', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scatters', to='evaluations.comparison')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('comparison', 'criterion'), name='comparison_scatter_unique')],
                },
            ),
            migrations.CreateModel(
                name='CaseResult',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('iteration', models.PositiveIntegerField(default=0)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('passed', 'Passed'), ('failed', 'Failed'), ('error', 'Error'), ('not_runnable', 'Not Runnable'), ('missing', 'Missing')], default='pending', max_length=16)),
                    ('output', models.JSONField(blank=True, null=True)),
                    ('error', models.TextField(blank=True)),
                    ('latency_seconds', models.FloatField(blank=True, null=True)),
                    ('prompt_tokens', models.PositiveIntegerField(blank=True, null=True)),
                    ('completion_tokens', models.PositiveIntegerField(blank=True, null=True)),
                    ('cost_usd', models.FloatField(blank=True, null=True)),
                    ('attempts', models.PositiveIntegerField(default=0)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='evaluations.run')),
                    ('case', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='evaluations.evalcase')),
                ],
                options={
                    'indexes': [models.Index(fields=['run', 'status'], name='result_run_status'), models.Index(fields=['run', 'id'], name='result_run_order')],
                    'constraints': [models.UniqueConstraint(fields=('run', 'case', 'iteration'), name='result_unique')],
                },
            ),
            migrations.CreateModel(
                name='EvalSet',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('eval_set_id', models.CharField(max_length=255)),
                    ('name', models.CharField(blank=True, max_length=255)),
                    ('description', models.TextField(blank=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('baseline_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='evaluations.run')),
                    ('latest_version', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='evaluations.evalsetversion')),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='evalsets', to='evaluations.project')),
                ],
                options={
                    'ordering': ['-updated_at'],
                    'constraints': [models.UniqueConstraint(fields=('project', 'eval_set_id'), name='evalset_unique_id')],
                },
            ),
            migrations.AddField(
                model_name='evalcase',
                name='evalset',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.evalset'),
            ),
            migrations.AddField(
                model_name='run',
                name='evalset_version',
                field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='evaluations.evalsetversion'),
            ),
            migrations.AddField(
                model_name='evalsetversion',
                name='evalset',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='evaluations.evalset'),
            ),
            migrations.CreateModel(
                name='EvalSetSource',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('filename', models.CharField(max_length=255)),
                    ('content_type', models.CharField(max_length=100)),
                    ('size', models.PositiveBigIntegerField(default=0)),
                    ('data', models.BinaryField()),
                    ('version', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='source', to='evaluations.evalsetversion')),
                ],
            ),
            migrations.AddField(
                model_name='evalcase',
                name='version',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='cases', to='evaluations.evalsetversion'),
            ),
            migrations.AddField(
                model_name='run',
                name='config_preset',
                field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='evaluations.evaluationconfig'),
            ),
            migrations.CreateModel(
                name='Monitor',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=200)),
                    ('level', models.CharField(choices=[('trace', 'Each trace'), ('thread', 'Each thread')], default='trace', max_length=8)),
                    ('version', models.PositiveIntegerField(default=1)),
                    ('filters', models.JSONField(blank=True, default=dict)),
                    ('sample_rate', models.FloatField(default=1.0)),
                    ('criteria', models.JSONField(default=dict)),
                    ('idle_seconds', models.PositiveIntegerField(default=300)),
                    ('enabled', models.BooleanField(default=True)),
                    ('threads_swept_to', models.DateTimeField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='monitors', to='evaluations.project')),
                ],
                options={
                    'ordering': ['name', 'pk'],
                    'constraints': [models.UniqueConstraint(fields=('project', 'name'), name='monitor_unique_name')],
                },
            ),
            migrations.CreateModel(
                name='MonitorBucket',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('version', models.PositiveIntegerField()),
                    ('hour', models.DateTimeField()),
                    ('environment', models.CharField(blank=True, max_length=100)),
                    ('criterion', models.CharField(blank=True, max_length=100)),
                    ('total', models.PositiveIntegerField(default=0)),
                    ('passed', models.PositiveIntegerField(default=0)),
                    ('scored', models.PositiveIntegerField(default=0)),
                    ('score_sum', models.FloatField(default=0)),
                    ('traces', models.PositiveIntegerField(default=0)),
                    ('tokens_sum', models.FloatField(default=0)),
                    ('cost_sum', models.FloatField(default=0)),
                    ('monitor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='buckets', to='evaluations.monitor')),
                ],
                options={
                    'indexes': [models.Index(fields=['monitor', 'criterion', 'hour'], name='monitor_bucket_hour')],
                    'constraints': [models.UniqueConstraint(fields=('monitor', 'version', 'hour', 'environment', 'criterion'), name='monitor_bucket_unique')],
                },
            ),
            migrations.CreateModel(
                name='MonitorLatencyBucket',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('version', models.PositiveIntegerField()),
                    ('hour', models.DateTimeField()),
                    ('environment', models.CharField(blank=True, max_length=100)),
                    ('bin', models.PositiveSmallIntegerField()),
                    ('count', models.PositiveIntegerField(default=0)),
                    ('monitor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='latency_buckets', to='evaluations.monitor')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('monitor', 'version', 'hour', 'environment', 'bin'), name='monitor_latency_unique')],
                },
            ),
            migrations.CreateModel(
                name='MonitorResult',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('version', models.PositiveIntegerField()),
                    ('thread_id', models.CharField(blank=True, max_length=200)),
                    ('at', models.DateTimeField()),
                    ('environment', models.CharField(blank=True, max_length=100)),
                    ('end_user', models.CharField(blank=True, max_length=200)),
                    ('passed', models.BooleanField()),
                    ('failed', models.JSONField(blank=True, default=list)),
                    ('traces', models.PositiveIntegerField(default=1)),
                    ('latency_seconds', models.FloatField(blank=True, null=True)),
                    ('tokens', models.FloatField(blank=True, null=True)),
                    ('cost_usd', models.FloatField(blank=True, null=True)),
                    ('scored_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('monitor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='evaluations.monitor')),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.project')),
                ],
                options={
                    'indexes': [models.Index(fields=['monitor', 'version', 'at'], name='monitor_result_at'), models.Index(fields=['monitor', 'version', 'passed', 'at'], name='monitor_result_failing'), models.Index(fields=['monitor', 'version', 'end_user', 'at'], name='monitor_result_user'), models.Index(fields=['project', 'at'], name='monitor_result_project_at')],
                },
            ),
            migrations.CreateModel(
                name='MonitorScore',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('criterion', models.CharField(max_length=100)),
                    ('passed', models.BooleanField(null=True)),
                    ('score', models.FloatField(blank=True, null=True)),
                    ('value', models.FloatField(blank=True, null=True)),
                    ('error', models.CharField(blank=True, max_length=500)),
                    ('detail', models.JSONField(blank=True, default=dict)),
                    ('result', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scores', to='evaluations.monitorresult')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('result', 'criterion'), name='monitor_score_unique')],
                },
            ),
            migrations.CreateModel(
                name='MonitorVersion',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('number', models.PositiveIntegerField()),
                    ('spec', models.JSONField(default=dict)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('monitor', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='evaluations.monitor')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('monitor', 'number'), name='monitor_version_unique')],
                },
            ),
            migrations.CreateModel(
                name='NotifyChannel',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100)),
                    ('kind', models.CharField(choices=[('webhook', 'Webhook'), ('slack', 'Slack'), ('email', 'E-mail'), ('inapp', 'In-app')], max_length=16)),
                    ('url', models.URLField(blank=True, max_length=1000)),
                    ('secret', models.CharField(blank=True, max_length=100)),
                    ('emails', models.TextField(blank=True)),
                    ('enabled', models.BooleanField(default=True)),
                    ('paused_at', models.DateTimeField(blank=True, null=True)),
                    ('pause_reason', models.CharField(blank=True, max_length=300)),
                    ('failures_in_row', models.PositiveIntegerField(default=0)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notify_channels', to='evaluations.project')),
                ],
                options={
                    'ordering': ['name', 'pk'],
                    'constraints': [models.UniqueConstraint(fields=('project', 'name'), name='notify_channel_unique_name')],
                },
            ),
            migrations.CreateModel(
                name='NotifyDelivery',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('idempotency_id', models.UUIDField(unique=True)),
                    ('status', models.CharField(choices=[('pending', 'Pending'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed')], default='pending', max_length=8)),
                    ('attempts', models.PositiveIntegerField(default=0)),
                    ('next_attempt_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('leased_until', models.DateTimeField(blank=True, null=True)),
                    ('owner', models.CharField(blank=True, max_length=100)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('sent_at', models.DateTimeField(blank=True, null=True)),
                    ('last_error', models.CharField(blank=True, max_length=500)),
                    ('channel', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='evaluations.notifychannel')),
                ],
                options={
                    'indexes': [models.Index(fields=['status', 'next_attempt_at'], name='notify_delivery_due')],
                },
            ),
            migrations.CreateModel(
                name='NotifyAttempt',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('ok', models.BooleanField()),
                    ('status_code', models.PositiveIntegerField(blank=True, null=True)),
                    ('latency_ms', models.FloatField()),
                    ('excerpt', models.CharField(blank=True, max_length=500)),
                    ('channel', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='log', to='evaluations.notifychannel')),
                    ('delivery', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='log', to='evaluations.notifydelivery')),
                ],
                options={
                    'ordering': ['-at', '-pk'],
                    'indexes': [models.Index(fields=['channel', '-at'], name='notify_attempt_channel')],
                },
            ),
            migrations.CreateModel(
                name='NotifyEvent',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('done_at', models.DateTimeField(blank=True, null=True)),
                    ('audit', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.auditevent')),
                ],
                options={
                    'indexes': [models.Index(fields=['done_at', 'created_at'], name='notify_event_todo')],
                },
            ),
            migrations.CreateModel(
                name='NotifyMessage',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('event', models.CharField(max_length=20)),
                    ('subject', models.CharField(max_length=300)),
                    ('payload', models.JSONField(default=dict)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('recipient', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notify_messages', to='evaluations.project')),
                ],
                options={
                    'ordering': ['-created_at', '-pk'],
                },
            ),
            migrations.AddField(
                model_name='notifydelivery',
                name='message',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='evaluations.notifymessage'),
            ),
            migrations.CreateModel(
                name='NotifyRule',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('name', models.CharField(max_length=100)),
                    ('kind', models.CharField(choices=[('run_finished', 'run finished'), ('monitor', 'monitor below threshold'), ('triage_assigned', 'triage assigned'), ('mention', '@mention in a comment'), ('digest', 'digest')], max_length=20)),
                    ('enabled', models.BooleanField(default=True)),
                    ('condition', models.CharField(choices=[('any', 'any'), ('regressions', 'with regressions vs its default baseline'), ('new_causes', 'with new failure causes'), ('pass_rate_below', 'pass rate below')], default='any', max_length=20)),
                    ('pass_rate_below', models.FloatField(blank=True, null=True)),
                    ('branch', models.CharField(blank=True, max_length=255)),
                    ('model', models.CharField(blank=True, max_length=200)),
                    ('monitor_id', models.BigIntegerField(blank=True, null=True)),
                    ('criterion', models.CharField(blank=True, max_length=100)),
                    ('threshold', models.FloatField(blank=True, null=True)),
                    ('window_minutes', models.PositiveIntegerField(default=60)),
                    ('min_count', models.PositiveIntegerField(default=20)),
                    ('period', models.CharField(choices=[('daily', 'Daily'), ('weekly', 'Weekly')], default='daily', max_length=8)),
                    ('cooldown_minutes', models.PositiveIntegerField(default=0)),
                    ('last_fired_at', models.DateTimeField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('channels', models.ManyToManyField(blank=True, related_name='rules', to='evaluations.notifychannel')),
                    ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('evalset', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.evalset')),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notify_rules', to='evaluations.project')),
                ],
                options={
                    'ordering': ['name', 'pk'],
                    'indexes': [models.Index(fields=['project', 'kind', 'enabled'], name='notify_rule_kind'), models.Index(fields=['monitor_id'], name='notify_rule_monitor')],
                },
            ),
            migrations.AddField(
                model_name='notifymessage',
                name='rule',
                field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='messages', to='evaluations.notifyrule'),
            ),
            migrations.CreateModel(
                name='NotifyAlert',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key', models.CharField(max_length=200)),
                    ('data', models.JSONField(default=dict)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('recipient', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('message', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='alerts', to='evaluations.notifymessage')),
                    ('rule', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='alerts', to='evaluations.notifyrule')),
                ],
                options={
                    'indexes': [models.Index(fields=['rule', 'message'], name='notify_alert_pending')],
                    'constraints': [models.UniqueConstraint(fields=('rule', 'key'), name='notify_alert_once')],
                },
            ),
            migrations.AddField(
                model_name='run',
                name='project',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='evaluations.project'),
            ),
            migrations.CreateModel(
                name='Notification',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('read_at', models.DateTimeField(blank=True, null=True)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to=settings.AUTH_USER_MODEL)),
                    ('message', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.notifymessage')),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.project')),
                ],
                options={
                    'ordering': ['-created_at', '-pk'],
                    'indexes': [models.Index(fields=['user', 'read_at'], name='notification_unread')],
                    'constraints': [models.UniqueConstraint(fields=('user', 'message'), name='notification_once')],
                },
            ),
            migrations.CreateModel(
                name='Membership',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('role', models.CharField(choices=[('viewer', 'Viewer'), ('member', 'Member'), ('admin', 'Admin')], default='member', max_length=16)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='evaluations.project')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('project', 'user'), name='membership_unique')],
                },
            ),
            migrations.CreateModel(
                name='HumanGrade',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('criterion', models.CharField(max_length=100)),
                    ('passed', models.BooleanField()),
                    ('score', models.FloatField(blank=True, null=True)),
                    ('note', models.TextField(blank=True, default='')),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('grader', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grades', to=settings.AUTH_USER_MODEL)),
                    ('result', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grades', to='evaluations.caseresult')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grades', to='evaluations.run')),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grades', to='evaluations.project')),
                ],
                options={
                    'indexes': [models.Index(fields=['project', 'criterion'], name='grade_project_criterion'), models.Index(fields=['run', 'criterion'], name='grade_run_criterion')],
                    'constraints': [models.UniqueConstraint(fields=('result', 'criterion', 'grader'), name='grade_unique')],
                },
            ),
            migrations.AddField(
                model_name='evaluationconfig',
                name='project',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='eval_configs', to='evaluations.project'),
            ),
            migrations.CreateModel(
                name='Retention',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('days', models.PositiveIntegerField(blank=True, null=True)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='retention', to='evaluations.project')),
                ],
            ),
            migrations.CreateModel(
                name='RetentionSweep',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('ran_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('cutoff', models.DateTimeField()),
                    ('traces', models.PositiveIntegerField(default=0)),
                    ('results', models.PositiveIntegerField(default=0)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='retention_sweeps', to='evaluations.project')),
                ],
                options={
                    'ordering': ['-ran_at', '-pk'],
                },
            ),
            migrations.CreateModel(
                name='RunBatch',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('first_pk', models.BigIntegerField()),
                    ('last_pk', models.BigIntegerField()),
                    ('queued_at', models.DateTimeField(blank=True, null=True)),
                    ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                    ('owner', models.CharField(blank=True, max_length=100)),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='batches', to='evaluations.run')),
                ],
                options={
                    'indexes': [models.Index(fields=['run', 'first_pk'], name='batch_run_first')],
                },
            ),
            migrations.CreateModel(
                name='ResultCause',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('result_id', models.BigIntegerField()),
                    ('eval_id', models.CharField(max_length=255)),
                    ('criterion', models.CharField(blank=True, max_length=100)),
                    ('cause', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='results', to='evaluations.runcause')),
                ],
                options={
                    'indexes': [models.Index(fields=['cause', 'eval_id'], name='result_cause_eval_id'), models.Index(fields=['cause', 'result_id'], name='result_cause_result')],
                },
            ),
            migrations.CreateModel(
                name='Score',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('criterion', models.CharField(max_length=100)),
                    ('evaluator', models.CharField(blank=True, max_length=100)),
                    ('applies_to', models.CharField(choices=[('conversation', 'Conversation'), ('interaction', 'Interaction'), ('node', 'Node')], default='conversation', max_length=16)),
                    ('turn_index', models.IntegerField(default=-1)),
                    ('node_name', models.CharField(blank=True, default='', max_length=200)),
                    ('score', models.FloatField(blank=True, null=True)),
                    ('raw_value', models.FloatField(blank=True, null=True)),
                    ('passed', models.BooleanField(null=True)),
                    ('threshold', models.JSONField(blank=True, null=True)),
                    ('justification', models.JSONField(blank=True, default=dict)),
                    ('error', models.TextField(blank=True)),
                    ('result', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scores', to='evaluations.caseresult')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='scores', to='evaluations.run')),
                ],
                options={
                    'indexes': [models.Index(fields=['run', 'criterion'], name='score_run_criterion'), models.Index(condition=models.Q(('passed', True), _negated=True), fields=['run', 'result'], name='score_run_not_passed')],
                    'constraints': [models.UniqueConstraint(fields=('result', 'criterion', 'applies_to', 'turn_index', 'node_name'), name='score_unique')],
                },
            ),
            migrations.CreateModel(
                name='ToolUsage',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('tool_name', models.CharField(max_length=200)),
                    ('node_name', models.CharField(blank=True, default='', max_length=200)),
                    ('calls', models.PositiveIntegerField(default=0)),
                    ('failures', models.PositiveIntegerField(default=0)),
                    ('latency_seconds', models.FloatField(blank=True, null=True)),
                    ('result', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tool_usage', to='evaluations.caseresult')),
                    ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tool_usage', to='evaluations.run')),
                ],
                options={
                    'indexes': [models.Index(fields=['run', 'tool_name'], name='tool_usage_run_tool')],
                    'constraints': [models.UniqueConstraint(fields=('result', 'tool_name', 'node_name'), name='tool_usage_unique')],
                },
            ),
            migrations.CreateModel(
                name='Trace',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('trace_id', models.CharField(max_length=64)),
                    ('thread_id', models.CharField(blank=True, max_length=200)),
                    ('name', models.CharField(blank=True, max_length=255)),
                    ('start_ns', models.BigIntegerField(blank=True, null=True)),
                    ('end_ns', models.BigIntegerField(blank=True, null=True)),
                    ('received', models.BooleanField(default=False)),
                    ('received_at', models.DateTimeField(blank=True, null=True)),
                    ('service_name', models.CharField(blank=True, max_length=255)),
                    ('eval_id', models.CharField(blank=True, max_length=255)),
                    ('span_count', models.PositiveIntegerField(default=0)),
                    ('error_count', models.PositiveIntegerField(default=0)),
                    ('complete', models.BooleanField(default=False)),
                    ('resource', models.JSONField(blank=True, default=dict)),
                    ('end_user', models.CharField(blank=True, max_length=200)),
                    ('environment', models.CharField(blank=True, max_length=100)),
                    ('project', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='evaluations.project')),
                    ('result', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='evaluations.caseresult')),
                    ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='traces', to='evaluations.run')),
                ],
                options={
                    'indexes': [models.Index(condition=models.Q(('received', True)), fields=['project', '-start_ns', '-id'], name='trace_received_start'), models.Index(condition=models.Q(('received', True)), fields=['project', 'service_name', '-start_ns', '-id'], name='trace_received_service'), models.Index(condition=models.Q(('error_count__gt', 0), ('received', True)), fields=['project', '-start_ns', '-id'], name='trace_received_errors'), models.Index(fields=['project', 'received_at'], name='trace_project_received_at'), models.Index(condition=models.Q(('received', True)), fields=['project', 'thread_id', 'start_ns', 'id'], name='trace_received_thread'), models.Index(condition=models.Q(('received', True)), fields=['project', 'end_user', '-start_ns', '-id'], name='trace_received_end_user')],
                    'constraints': [models.UniqueConstraint(fields=('result', 'trace_id'), name='trace_unique'), models.UniqueConstraint(condition=models.Q(('received', True)), fields=('project', 'trace_id'), name='trace_received_unique')],
                },
            ),
            migrations.CreateModel(
                name='Span',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('span_id', models.CharField(max_length=32)),
                    ('parent_span_id', models.CharField(blank=True, max_length=32)),
                    ('name', models.CharField(max_length=255)),
                    ('kind', models.CharField(blank=True, max_length=32)),
                    ('start_ns', models.BigIntegerField(blank=True, null=True)),
                    ('end_ns', models.BigIntegerField(blank=True, null=True)),
                    ('status', models.CharField(blank=True, max_length=16)),
                    ('attributes', models.JSONField(blank=True, default=dict)),
                    ('trace', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='spans', to='evaluations.trace')),
                ],
                options={
                    'constraints': [models.UniqueConstraint(fields=('trace', 'span_id'), name='span_unique')],
                },
            ),
            migrations.AddField(
                model_name='monitorresult',
                name='trace',
                field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='monitor_results', to='evaluations.trace'),
            ),
            migrations.CreateModel(
                name='TraceThread',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('thread_id', models.CharField(max_length=200)),
                    ('first_at', models.DateTimeField()),
                    ('last_at', models.DateTimeField()),
                    ('traces', models.PositiveIntegerField(default=0)),
                    ('errors', models.PositiveIntegerField(default=0)),
                    ('end_user', models.CharField(blank=True, max_length=200)),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='threads', to='evaluations.project')),
                ],
                options={
                    'indexes': [models.Index(fields=['project', 'last_at'], name='trace_thread_last'), models.Index(fields=['project', 'end_user', 'last_at'], name='trace_thread_end_user')],
                    'constraints': [models.UniqueConstraint(fields=('project', 'thread_id'), name='trace_thread_unique')],
                },
            ),
            migrations.CreateModel(
                name='Triage',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('eval_id', models.CharField(max_length=255)),
                    ('branch', models.CharField(blank=True, default='', max_length=255)),
                    ('status', models.CharField(choices=[('open', 'Open'), ('confirmed', 'Confirmed regression'), ('expected', 'Expected change'), ('flaky', 'Flaky'), ('fixed', 'Fixed')], default='open', max_length=16)),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('assignee', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='assigned_triage', to=settings.AUTH_USER_MODEL)),
                    ('baseline', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='evaluations.run')),
                    ('candidate', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='triage', to='evaluations.run')),
                    ('evalset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='triage', to='evaluations.evalset')),
                    ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='triage', to='evaluations.project')),
                    ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ],
                options={
                    'indexes': [models.Index(fields=['project', 'status'], name='triage_project_status'), models.Index(fields=['assignee', 'status'], name='triage_assignee_status')],
                    'constraints': [models.UniqueConstraint(fields=('evalset', 'eval_id', 'branch'), name='triage_unique_case_branch')],
                },
            ),
            migrations.CreateModel(
                name='Comment',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('body', models.TextField()),
                    ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                    ('author', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ('parent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='replies', to='evaluations.comment')),
                    ('triage', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='comments', to='evaluations.triage')),
                ],
                options={
                    'ordering': ['created_at', 'pk'],
                },
            ),
            migrations.AddField(
                model_name='runcause',
                name='cause_set',
                field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='causes', to='evaluations.causeset'),
            ),
            migrations.AddIndex(
                model_name='evalsetversion',
                index=models.Index(fields=['evalset', 'content_hash'], name='version_content'),
            ),
            migrations.AddConstraint(
                model_name='evalsetversion',
                constraint=models.UniqueConstraint(fields=('evalset', 'number'), name='version_unique_number'),
            ),
            migrations.AddIndex(
                model_name='evalcase',
                index=models.Index(fields=['evalset', 'valid_to', 'position'], name='case_evalset_range'),
            ),
            migrations.AddConstraint(
                model_name='evalcase',
                constraint=models.UniqueConstraint(fields=('evalset', 'eval_id', 'valid_from'), name='case_unique_eval_id'),
            ),
            migrations.AddIndex(
                model_name='run',
                index=models.Index(fields=['project', 'status'], name='run_project_status'),
            ),
            migrations.AddConstraint(
                model_name='evaluationconfig',
                constraint=models.UniqueConstraint(fields=('project', 'name'), name='evalconfig_unique_name'),
            ),
            migrations.AddIndex(
                model_name='monitorresult',
                index=models.Index(condition=models.Q(('trace__isnull', True)), fields=['project', 'thread_id'], name='monitor_result_thread'),
            ),
            migrations.AddConstraint(
                model_name='monitorresult',
                constraint=models.UniqueConstraint(condition=models.Q(('trace__isnull', False)), fields=('monitor', 'version', 'trace'), name='monitor_result_trace_unique'),
            ),
            migrations.AddConstraint(
                model_name='monitorresult',
                constraint=models.UniqueConstraint(condition=models.Q(('trace__isnull', True)), fields=('monitor', 'version', 'thread_id'), name='monitor_result_thread_unique'),
            ),
            migrations.AddIndex(
                model_name='runcause',
                index=models.Index(fields=['cause_set', 'rank'], name='run_cause_rank'),
            ),
            migrations.AddConstraint(
                model_name='runcause',
                constraint=models.UniqueConstraint(fields=('cause_set', 'signature'), name='run_cause_unique'),
            ),
        ),
        migrations.RunPython(schedule, unschedule),
    ]
