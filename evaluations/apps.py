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
        from evaluations.review.completion import on_run_completion
        from evaluations.runs import engine

        if on_run_completion not in engine.completion_hooks:
            engine.completion_hooks.append(on_run_completion)

        from django_q.signals import post_spawn

        post_spawn.connect(_warm_worker, dispatch_uid="evalsite-warm-worker")


def _warm_worker(sender: Any, proc_name: str = "", **kwargs: Any) -> None:
    """A queue worker imports the engine and every evaluator as it starts (rouge's nltk alone
    takes half a second), not inside the first batch it is given."""
    import evaluations.tasks  # noqa: F401
    from evaluations.evaluators import registry

    registry()
