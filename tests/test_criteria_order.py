"""Criteria keep the order their config gave them, on SQLite and on PostgreSQL (whose jsonb
sorts an object's keys, shortest first): the run page, the wide CSV's columns, the run
summary and the API list them the same way on both. Run this file on both databases
(DATABASE_URL=postgres://... for the second)."""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest
from django.test import Client

from evaluations.models import Project, Run
from evaluations.runs import services as runs
from evaluations.runs.page import run_criteria
from tests.engine_helpers import import_demo, regressed_outputs

pytestmark = pytest.mark.django_db

# Neither written nor jsonb order (shortest key first) nor alphabetical.
ORDER = ["trajectory_match", "response_match", "total_tokens", "exact_match"]
CONFIG = {"criteria": {name: {"threshold": 0.5} for name in ORDER}}


def _run(client: Client, acme: Project, **how: Any) -> int:
    version = import_demo(acme)
    response = client.post("/api/v1/runs/", data=json.dumps(
        {"evalset": version.evalset_id, "outputs": regressed_outputs(), **how}), content_type="application/json")
    assert response.status_code == 201, response.content
    run_id = int(response.json()["id"])
    runs.run_execute_here(run_id)
    return run_id


def _everywhere(client: Client, run_id: int) -> None:
    run = Run.objects.get(pk=run_id)  # read back from the database: what jsonb kept
    assert run_criteria(run) == ORDER
    header = next(csv.reader(io.StringIO(b"".join(
        client.get(f"/api/v1/runs/{run_id}/results.csv").streaming_content).decode())))
    assert [c for c in header if c in ORDER] == ORDER
    summary = client.get(f"/api/v1/runs/{run_id}/summary/").json()
    assert [c["name"] for c in summary["criteria"]] == ORDER
    detail = client.get(f"/api/v1/runs/{run_id}/").json()
    assert list(detail["summary"]["criteria"]) == ORDER
    assert list(detail["config"]["criteria"]) == ORDER
    assert client.get(f"/api/v1/runs/{run_id}/wide/").json()["metrics"] == ORDER
    report = json.loads(b"".join(client.get(f"/api/v1/runs/{run_id}/report/").streaming_content))
    assert list(report["summary"]["criterion_stats"]) == ORDER
    assert list(report["config_used"]["criteria"]) == ORDER
    page = client.get(f"/runs/{run_id}/").content.decode()
    # The notes on criteria named after other tools' (issue 21) name only those, in order too.
    notes = re.search(r'<details class="parity-notes".*?</details>', page, re.S)
    if notes:
        named = re.findall(r'<strong class="mono">(\w+)</strong>', notes.group(0))
        assert named == [c for c in ORDER if c in named]
        page = page.replace(notes.group(0), "")
    shown = [name for name in re.findall(r"\b(" + "|".join(ORDER) + r")\b", page)]
    assert list(dict.fromkeys(shown)) == ORDER


def test_a_run_keeps_the_order_of_the_config_it_was_given(alice_client: Client, acme: Project) -> None:
    _everywhere(alice_client, _run(alice_client, acme, config=CONFIG))


def test_a_run_from_a_saved_config_keeps_its_order(alice_client: Client, acme: Project) -> None:
    saved = alice_client.post("/api/v1/configs/", data=json.dumps({"project": "acme", "name": "ordered",
                                                                   "config": CONFIG}),
                              content_type="application/json")
    assert saved.status_code == 201, saved.content
    assert list(alice_client.get("/api/v1/configs/").json()["results"][0]["config"]["criteria"]) == ORDER
    _everywhere(alice_client, _run(alice_client, acme, preset=saved.json()["id"]))
