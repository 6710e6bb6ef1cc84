"""The recipe of docs/recipes.md, "Traces from an instrumented agent", end to end: a run whose target is traces is
created over the API of a live server on 127.0.0.1, the agent of docs/recipes/otel_agent.py,
instrumented with the OpenTelemetry SDK, exports its traces to it over real HTTP (the SDK's
OTLP/HTTP protobuf exporter), and a real django-q2 cluster scores the run once every case
has its trace; the failing cases show their tool-call diffs."""

from __future__ import annotations

import importlib.util
import subprocess
from typing import Any

import pytest
import requests
from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.models import CaseResult, Project, Run, Trace
from tests.conftest import REPO
from tests.engine_helpers import import_demo
from tests.queue_helpers import assert_each_result_once, wait_for
from tests.test_queue_e2e import cluster  # noqa: F401 - the fixture


def _recipe() -> Any:
    spec = importlib.util.spec_from_file_location("otel_agent", REPO / "docs" / "recipes" / "otel_agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_instrumented_agent_exports_to_evalsite_and_the_run_completes(
        acme: Project, alice: Any, live_server: Any, cluster: subprocess.Popen[bytes],  # noqa: F811
        capsys: Any) -> None:
    version = import_demo(acme)
    token = token_create(user=alice, name="agent").secret
    created = requests.post(f"{live_server.url}/api/v1/runs/", timeout=30,
                            headers={"Authorization": f"Token {token}"},
                            json={"evalset": version.evalset_id, "target_kind": "traces",
                                  "target": {"deadline_seconds": 600}, "name": "instrumented agent"})
    assert created.status_code == 201, created.text
    run_id = created.json()["id"]
    assert created.json()["status"] == "queued"

    # The recipe, as its docstring says to run it (wrong arguments in half the cases, for diffs).
    assert _recipe().main(["--server", live_server.url, "--token", token, "--run", str(run_id),
                           "--faults", "wrong_argument"]) == 0
    assert f"sent 8 traces for run {run_id}" in capsys.readouterr().out

    wait_for(lambda: Run.objects.get(pk=run_id).status == "completed", 120, "the cluster did not score the run")
    run = Run.objects.get(pk=run_id)
    assert_each_result_once(run)
    assert run.cases_missing == 0 and run.cases_done == 8
    assert Trace.objects.filter(run=run, received=True, result__isnull=False).count() == 8
    failed = list(CaseResult.objects.filter(run=run, status="failed").select_related("case"))
    assert failed, "the faulty agent should fail some cases"
    assert run.cases_failed == len(failed) and CaseResult.objects.filter(run=run, status="passed").exists()

    # The drill-down of a failed case: the expected call against the agent's, argument by argument,
    # and the trace's waterfall.
    viewer = Client()
    viewer.force_login(alice)
    result = failed[0]
    html = viewer.get(f"/runs/{run_id}/cases/{result.pk}/").content.decode()
    assert "call call-args_differ" in html and "with different arguments" in html
    assert 'data-testid="waterfall"' in html
    tool_calls = [c for t in result.output["turns"] for c in t.get("tool_calls", [])]
    assert tool_calls and all(c.get("latency_seconds") is not None for c in tool_calls)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_deadline_fires_on_the_cluster_and_the_rest_are_missing(
        acme: Project, alice: Any, cluster: subprocess.Popen[bytes]) -> None:  # noqa: F811
    from django_q.models import Schedule

    from evaluations.ingest.runs import NO_TRACE, traces_run_create
    from tests.otlp_helpers import demo_requests, post

    version = import_demo(acme)
    run = traces_run_create(project=acme, version=version, user=alice, deadline_seconds=1)
    assert Schedule.objects.filter(name=f"evalsite: traces deadline of run {run.pk}").exists()
    token = token_create(user=alice, name="agent").secret
    for message in demo_requests(run_id=run.pk)[:5]:
        assert post(Client(), message, token).status_code == 200
    assert Run.objects.get(pk=run.pk).status == "queued"
    # The cluster's scheduler runs the deadline task (every 30 s or so), then scores the run.
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "completed", 150, "the deadline never settled the run")
    run = Run.objects.get(pk=run.pk)
    assert_each_result_once(run)
    assert (run.cases_done, run.cases_missing) == (5, 3)
    assert set(CaseResult.objects.filter(run=run, status="missing").values_list("error", flat=True)) == {NO_TRACE}
