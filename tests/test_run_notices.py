"""A criterion that cannot run (an LLM judge with no judge model) or whose evaluator raises is a
run-level notice, never a cause (issue 41, 1): the run page, the compare page, the API, the
CLI, JUnit and the notification say which criterion, why, on how many cases, and whether the
baseline had the same; no cause, no "new" cause, no regression comes of it; the runs list's
"Errors" and the run's errors agree.

The issue's scenario: a trajectory judge with no judge model on every case of both runs, and
two real regressions (a tool call) in the candidate. Real runs of the demo eval set."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import jsonschema
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evaluations.evaluators import Evaluator, ScoreResult, register
from evaluations.models import AuditEvent, NotifyMessage, Project, Run
from evaluations.notify import services as notify_services
from evaluations.review import comparison
from evaluations.review.causes import run_causes
from evaluations.runs import services as runs
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from evaluations.schemas.outputs import AgentOutput
from tests.engine_helpers import DEMO, import_demo, perfect_outputs, regressed_outputs

pytestmark = pytest.mark.django_db
SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "notify-webhook.schema.json").read_text())
CONFIG = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.8),
                              "trajectory_judge": CriterionConfig(evaluator="llm_judge", threshold=0.7)})


@pytest.fixture(autouse=True)
def no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("EVALSITE_LLM_BASE_URL", "EVALSITE_LLM_API_KEY", "EVALSITE_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _run(project: Project, outputs: list[dict[str, Any]], name: str) -> Run:
    run = runs.run_create(project=project, version=import_demo(project), target_kind="uploaded", config=CONFIG,
                          enqueue=False, name=name, labels={"branch": "main"},
                          outputs=[AgentOutput.model_validate(o) for o in outputs])
    return Run.objects.select_related("project", "evalset_version__evalset").get(pk=runs.run_execute_here(run.pk).pk)


class Raising(Evaluator):
    name = "test_notice_raising"
    group = "output"

    def score(self, case: Any, output: Any, config: Any, criterion: str) -> list[ScoreResult]:
        raise KeyError("order 8812 not in the fixture")


register(Raising)


@pytest.fixture
def pair(acme: Project, django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Run, Run]:
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)  # django-q2 runs the notification task where it is queued
    inbox = notify_services.channel_save(project=acme, actor=None, values={"name": "inbox", "kind": "inapp"})
    notify_services.rule_save(project=acme, actor=None, values={"name": "runs", "kind": "run_finished"},
                              channels=[inbox.pk])
    with django_capture_on_commit_callbacks(execute=True):
        baseline = _run(acme, perfect_outputs(), "baseline")
        candidate = _run(acme, regressed_outputs(), "candidate")
    return baseline, candidate


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def section(page: str, testid: str) -> str:
    return page.split(f'data-testid="{testid}"', 1)[1].split("</section>", 1)[0]


NOTICE = "trajectory_judge could not run on 8 cases: an LLM judge, and no judge model is configured"


def test_a_judge_without_a_model_is_a_notice_on_the_run_page_never_a_cause(pair: tuple[Run, Run],
                                                                          alice_client: Client) -> None:
    _, candidate = pair
    assert candidate.cases_unscored == 6 and candidate.cases_failed == 2 and candidate.cases_errored == 0
    page = alice_client.get(reverse("run_detail", args=[candidate.pk])).content.decode()
    notices = text(section(page, "notices"))
    assert NOTICE in notices
    assert "the same on the baseline (8 cases)" in notices
    causes = text(section(page, "causes"))
    assert "judge" not in causes and "not runnable" not in causes and "evaluator error" not in causes
    assert "missing get_order" in causes  # the real failure is a cause
    # the pass rate says what it leaves out
    assert "6 not fully scored left out" in text(page.split('data-testid="pass-rate-basis"', 1)[1][:200])


def test_the_runs_list_errors_and_the_runs_errors_agree(pair: tuple[Run, Run], alice_client: Client) -> None:
    _, candidate = pair
    listed = alice_client.get(reverse("run_list")).content.decode()
    row = listed.split(f'href="/runs/{candidate.pk}/"', 1)[1].split("</tr>", 1)[0]
    errors = text(row.split('data-testid="list-errors"', 1)[1].split("</td>", 1)[0])
    page = alice_client.get(reverse("run_detail", args=[candidate.pk])).content.decode()
    run_errors = text(page.split('data-testid="run-errors"', 1)[1].split("</a>", 1)[0])
    assert errors.split()[0].lstrip(">") == "0" and run_errors.strip().lstrip(">").strip() == "0 errors"
    assert "6 not fully scored" in errors
    assert "6 not fully scored" in text(section(page, "notices") + page.split('data-testid="not-judged"', 1)[1][:800])


def test_the_compare_page_and_the_api_say_the_notice_once_and_count_no_regression_for_it(
        pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    url = reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}"
    page = alice_client.get(url).content.decode()
    notices = text(section(page, "notices"))
    assert NOTICE in notices and "the same on the baseline (8 cases)" in notices
    causes = section(page, "causes")
    rows = causes.split('data-testid="cause-row"')[1:]
    assert rows and all("judge" not in row and "not runnable" not in row for row in rows)
    headline = text(page.split('data-testid="headline">', 1)[1].split("</p>", 1)[0])
    assert headline.startswith("2 regressions, 0 improvements, 6 not fully scored")
    body = alice_client.get("/api/v1/compare/", {"candidate": candidate.pk, "baseline": baseline.pk}).json()
    [notice] = body["notices"]
    assert (notice["criterion"], notice["kind"], notice["cases"], notice["on_baseline"], notice["baseline_cases"]) \
        == ("trajectory_judge", "not_runnable", 8, "same", 8)
    assert body["counts"]["regressed"] == 2 and body["counts"]["unscored"] == 6
    assert all("judge" not in c["signature"] for c in body["causes"]["items"])
    summary = alice_client.get(f"/api/v1/runs/{candidate.pk}/summary/").json()
    assert summary["not_fully_scored"] == 6 and summary["judged"] == 2 and summary["notices"][0]["text"] == \
        summary["notices"][0]["text"] and NOTICE in summary["notices"][0]["text"]


def test_the_activity_and_the_notification_say_no_new_cause_and_carry_the_notice(pair: tuple[Run, Run]) -> None:
    _, candidate = pair
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.RUN_FINISHED, object_id=str(candidate.pk))
    assert event.data["new_causes"] == 2  # the two real causes (missing get_order, the city argument)
    assert "1 criterion not scored (1 the same on" in event.summary
    message = NotifyMessage.objects.filter(payload__items__0__run__id=candidate.pk).get()
    [item] = message.payload["items"]
    assert item["new_causes"] == 2 and all("judge" not in c["signature"] for c in item["causes"])
    [notice] = item["notices"]
    assert notice["criterion"] == "trajectory_judge" and notice["on_baseline"] == "same" and notice["cases"] == 8
    assert item["baseline"]["branch"] == "main" and item["baseline"]["evalset_version"] == 1
    assert item["run"]["evalset_version"] == 1 and item["run"]["branch"] == "main"
    body = {"schema_version": 1, "id": "5b0f7a8e-0c1d-4a43-9f0b-2f3f4c7d1e21", "created_at": "2026-01-01T00:00:00Z",
            **message.payload}
    jsonschema.validate(body, SCHEMA)


def test_the_cli_and_junit_carry_the_notice_and_skip_the_criterion(pair: tuple[Run, Run], acme: Project,
                                                                   tmp_path: Path, capsys: Any) -> None:
    baseline, _ = pair
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(regressed_outputs()))
    config = tmp_path / "config.json"
    config.write_text(CONFIG.model_dump_json())
    junit = tmp_path / "junit.xml"
    with pytest.raises(SystemExit):
        call_command("eval", str(DEMO), "--outputs", str(outputs), "--config", str(config), "--baseline",
                     str(baseline.pk), "--junit", str(junit), "--project", acme.slug, "--branch", "main")
    out = capsys.readouterr().out
    assert "not scored (1 criterion; those cases are not fully scored, never passed):" in out
    assert NOTICE in out and "(the same on the baseline: 8 cases)" in out
    assert "6 not fully scored" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert NOTICE in properties["notice_1"]
    judge = [case for case in suite.iter("testcase") if case.get("name") == "trajectory_judge"]
    assert judge and all(case.find("skipped") is not None and case.find("error") is None for case in judge)


def test_an_evaluator_that_raises_in_the_candidate_only_is_a_new_notice_not_a_regression(acme: Project) -> None:
    version = import_demo(acme)
    config = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.8)})
    baseline = runs.run_execute_here(runs.run_create(
        project=acme, version=version, target_kind="uploaded", config=config, enqueue=False,
        outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()]).pk)
    broken = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.8),
                                  "boom": CriterionConfig(evaluator="test_notice_raising", threshold=0.5)})
    candidate = runs.run_execute_here(runs.run_create(
        project=acme, version=version, target_kind="uploaded", config=broken, enqueue=False,
        outputs=[AgentOutput.model_validate(o) for o in perfect_outputs()]).pk)
    summary = comparison.comparison_get(baseline=baseline, candidate=candidate)
    assert summary["counts"][comparison.REGRESSED] == 0  # every case passed in the baseline, has no verdict now
    assert summary["counts"][comparison.UNSCORED] == 8
    from evaluations.review.notices import compared_notices

    [notice] = compared_notices(baseline=baseline, candidate=candidate)
    assert notice.on_baseline == "new" and notice.baseline_text == "new: not on the baseline"
    # its messages fold into one reason, volatile parts as placeholders; the example keeps them
    assert notice.text == "boom errored on 8 cases: KeyError: <value>" and "8812" in notice.example
    found = run_causes(candidate)
    assert found is not None and found.rows == []
