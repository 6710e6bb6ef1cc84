from typing import Any

from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "evaluations"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        # A run that completes stores its comparison with the default baseline in the same
        # transaction, then tells the activity feed and ends the triage of cases that pass
        # again. The hook is wired here so that runs never import review (the data flows
        # runs -> review; see docs/ARCHITECTURE.md).
        from evaluations.runs import engine

        if _on_run_completion not in engine.completion_hooks:
            engine.completion_hooks.append(_on_run_completion)

        from django_q.signals import post_spawn

        post_spawn.connect(_warm_worker, dispatch_uid="evalsite-warm-worker")
        # The marks the hang watch reads (evaluations/management/clusters.py).
        from django_q.signals import post_execute_in_worker, pre_execute

        from evaluations.management.clusters import on_task_done, on_task_taken, on_worker_started

        pre_execute.connect(on_task_taken, dispatch_uid="evalsite-task-taken")
        post_execute_in_worker.connect(on_task_done, dispatch_uid="evalsite-task-done")
        post_spawn.connect(on_worker_started, dispatch_uid="evalsite-worker-started")

        # Notification rules hear of runs finished, triage assigned and comments through the
        # activity feed (evaluations/notify/events.py), so no other package imports notify.
        from django.db.models.signals import post_save

        from evaluations.models import AuditEvent

        post_save.connect(_on_audit_event, sender=AuditEvent, dispatch_uid="evalsite-notify")
        # ... and of a monitor's scores (issue 31), to check its "below a threshold" rules.
        from evaluations.monitors.signals import monitor_scored

        monitor_scored.connect(_on_monitor_scored, dispatch_uid="evalsite-notify-monitor")
        # Issue 34: the sign-in log hears of failed passwords, and of SSO sign-ins (roles too).
        from allauth.account.signals import user_logged_in as sso_logged_in
        from django.contrib.auth.signals import user_login_failed

        from evaluations.accounts.signins import on_login_failed
        from evaluations.accounts.sso import on_sso_login

        user_login_failed.connect(on_login_failed, dispatch_uid="evalsite-signin-failed")
        from django.core import checks

        from evaluations.accounts.roles_map import role_map_check

        checks.register(role_map_check, "evalsite")
        sso_logged_in.connect(on_sso_login, dispatch_uid="evalsite-sso-login")


def _warm_worker(sender: Any, proc_name: str = "", **kwargs: Any) -> None:
    """A queue worker imports the engine and every evaluator as it starts (rouge's nltk alone
    takes half a second), not inside the first batch it is given; and what a run's completion
    imports (the comparison and its statistics, the notification rules and what they read:
    0.2 s), not while the run's last batch completes it."""
    import evaluations.notify.events
    import evaluations.review.completion
    import evaluations.tasks  # noqa: F401
    from evaluations.evaluators import registry
    from evaluations.evaluators.rouge import warm_up

    registry()
    warm_up()  # rouge-score and nltk are imported on first use


def _on_run_completion(run: Any) -> Any:
    """review.completion.on_run_completion, imported on a run's completion rather than at
    start-up: it brings numpy and the statistics, which a web process or an import that never
    finishes a run need not load (about 20 MB of every process's memory)."""
    from evaluations.review.completion import on_run_completion

    return on_run_completion(run)



def _on_audit_event(sender: Any, **kwargs: Any) -> None:
    """evaluations.notify.events.on_audit_event, imported on the first event."""
    from evaluations.notify.events import on_audit_event

    on_audit_event(sender, **kwargs)


def _on_monitor_scored(sender: Any, monitor_id: int, **kwargs: Any) -> None:
    """evaluations.notify.events.on_monitor_scored, imported on the first batch scored."""
    from evaluations.notify.events import on_monitor_scored

    on_monitor_scored(monitor_id)
