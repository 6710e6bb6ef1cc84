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


def _warm_worker(sender: Any, proc_name: str = "", **kwargs: Any) -> None:
    """A queue worker imports the engine and every evaluator as it starts (rouge's nltk alone
    takes half a second), not inside the first batch it is given."""
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

