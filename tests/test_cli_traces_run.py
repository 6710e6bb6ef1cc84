"""`manage.py traces_run`: a run waiting for its cases' traces, with the exporter's settings."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from evaluations.models import Project, Run
from tests.engine_helpers import import_demo


@pytest.mark.django_db
def test_traces_run_creates_a_waiting_run_and_says_how_to_send(acme: Project,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    import_demo(acme)
    call_command("traces_run", "demo_travel_agent", "--project", "acme", "--deadline-minutes", "5",
                 "--eval-id", "weather_tokyo", "--branch", "main")
    run = Run.objects.get()
    out = capsys.readouterr().out
    assert run.target_kind == "traces" and run.status == "queued" and run.cases_total == 1
    assert run.target["deadline_seconds"] == 300 and run.branch == "main"
    assert f"run {run.pk}: waiting for 1 traces" in out
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=<server>/v1/traces" in out and f"evalsite.run_id={run.pk}" in out


@pytest.mark.django_db
def test_traces_run_refuses_an_unknown_eval_set(acme: Project, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        call_command("traces_run", "nope", "--project", "acme")
    assert "no eval set 'nope'" in capsys.readouterr().err
    assert not Run.objects.exists()
