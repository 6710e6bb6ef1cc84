"""The API's run `config` takes what ADK's test_config.json takes (so does remote `--config`,
which sends it): thresholds as numbers or objects, `match_type` by name or number,
`ignore_args`; a config that is neither shape is a 400 naming the problem."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from evaluations.models import Project, Run
from tests.engine_helpers import import_demo, perfect_outputs


@pytest.mark.django_db
def test_an_adk_test_config_is_a_run_config(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    config = {"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "match_type": 1, "ignore_args": True},
                           "response_match_score": 0.6}}
    payload = {"evalset": version.evalset_id, "outputs": perfect_outputs(), "config": config}
    response = alice_client.post("/api/v1/runs/", data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 201, response.content
    criteria = Run.objects.get().config["criteria"]
    assert criteria["tool_trajectory_avg_score"]["match_type"] == "IN_ORDER"
    assert criteria["tool_trajectory_avg_score"]["options"] == {"ignore_args": True}
    assert criteria["response_match_score"]["threshold"] == 0.6


@pytest.mark.django_db
def test_a_config_of_neither_shape_is_a_400(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    payload = {"evalset": version.evalset_id, "outputs": perfect_outputs(),
               "config": {"criteria": {"tool_trajectory_avg_score": {"threshold": "high"}}}}
    response = alice_client.post("/api/v1/runs/", data=json.dumps(payload), content_type="application/json")
    assert response.status_code == 400
    assert "threshold" in json.dumps(response.json())
    assert not Run.objects.exists()
