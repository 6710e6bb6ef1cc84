"""Schedule the watchdog that resumes runs whose work stopped (see evaluations.runs)."""

from django.db import migrations


def schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="evalsite: resume stalled runs",
        defaults={"func": "evaluations.tasks.resume_stalled_runs", "schedule_type": "I", "minutes": 1,
                  "repeats": -1},
    )


def unschedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="evalsite: resume stalled runs").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0002_run_engine"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(schedule, unschedule)]
