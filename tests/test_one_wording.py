"""One wording per fact (issue 41, 9): each test reads the two places that described one thing
two ways and holds them to the same true words.

- the run page's "vs #4 · previous on main" and the compare page its link opens;
- the trend's causes "since #8" and its failing-cases table ("started failing in #10");
- the compare headline's "n≈10 cases would be needed" and the criterion rows' "6 or more";
- "refusal" listed as a cause under `response_match` on a case that passed it, the failing turn
  not named.
(The runs list's "Errors" and the run's errors: tests/test_run_notices.py.)"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import Project, Run
from evaluations.schemas.evalset import CriterionConfig, EvalConfig
from tests.compare_helpers import generated_outputs, generated_version, make_run
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs

pytestmark = pytest.mark.django_db


def text(html: str) -> str:
    import html as entities

    return entities.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


def between(page: str, start: str, end: str) -> str:
    return page.split(start, 1)[1].split(end, 1)[0]


def test_the_run_page_and_the_compare_page_it_opens_name_the_baseline_alike(acme: Project,
                                                                            alice_client: Client) -> None:
    version = import_demo(acme)
    first = make_run(acme, version, perfect_outputs(), labels={"branch": "main"})
    make_run(acme, version, perfect_outputs(), labels={"branch": "feature-x"})  # later, another branch
    second = make_run(acme, version, regressed_outputs(), labels={"branch": "main"})
    run_page = alice_client.get(reverse("run_detail", args=[second.pk])).content.decode()
    named = text(between(run_page, 'data-testid="vs-named">', "</p>"))
    assert f"vs #{first.pk} · previous on main" in named  # main's own previous run, not feature-x's
    link = between(run_page, 'href="', '" data-testid="vs-baseline"').rsplit('href="', 1)[-1].replace("&amp;", "&")
    compare = alice_client.get(link).content.decode()
    header = text(between(compare, 'data-testid="baseline-named">', "</p>"))
    assert header == f"vs #{first.pk} · previous on main"
    api = alice_client.get("/api/v1/compare/", {"candidate": second.pk, "baseline": first.pk}).json()
    assert api["baseline_named"]["text"] == header and api["baseline_named"]["reason"] == "previous"
    # a baseline picked by hand that is not the default still says so
    other = Run.objects.get(branch="feature-x")
    picked = alice_client.get(reverse("compare") + f"?baseline={other.pk}&candidate={second.pk}").content.decode()
    assert text(between(picked, 'data-testid="baseline-named">', "</p>")) == f"vs #{other.pk} · feature-x · chosen"


def test_the_trend_says_since_the_same_run_for_a_cause_and_its_case(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    make_run(acme, version, perfect_outputs(), labels={"branch": "main"})
    started = make_run(acme, version, regressed_outputs(), labels={"branch": "main"})
    make_run(acme, version, perfect_outputs(), labels={"branch": "feature-x"})  # passes, on another branch
    make_run(acme, version, regressed_outputs(), labels={"branch": "main"})
    page = alice_client.get(reverse("evalset_trend", args=[version.evalset_id])).content.decode()
    causes = between(page, 'data-testid="causes-since-table"', "</table>")
    missing = next(row for row in causes.split('data-testid="since-row"')[1:] if "missing get_order" in row)
    assert f"since #{started.pk}" in text(missing) and "on main" in text(missing)
    table = between(page, '<table class="table trend-failing">', "</table>")
    order = next(row for row in table.split('data-testid="failing-row"')[1:] if "order_status" in row)
    assert f"since #{started.pk}" in text(order)
    assert "Failing on main" in text(table)
    api = alice_client.get(f"/api/v1/evalsets/{version.evalset_id}/trend/").json()
    assert next(c for c in api["cases"] if c["eval_id"] == "order_status")["failing_since"] == started.pk


@pytest.mark.parametrize(("count", "wrong", "said"), [
    (5, {0, 1}, "too few cases to call (n = 5; 6 or more needed)"),
    (8, {0, 1}, "not distinguishable from chance across 8 cases"),
])
def test_the_compare_headline_and_its_rows_say_the_same_about_too_few_cases(
        count: int, wrong: set[int], said: str, acme: Project, alice_client: Client) -> None:
    version = generated_version(acme, count)
    baseline = make_run(acme, version, generated_outputs(count))
    candidate = make_run(acme, version, generated_outputs(count, wrong=wrong))
    page = alice_client.get(reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}").content.decode()
    headline = text(between(page, 'data-testid="headline">', "</p>"))
    row = text(next(tr for tr in between(page, 'class="table cmp-criteria"', "</table>").split("<tr>")
                    if ">trajectory_match<" in tr))
    assert said in headline and said in row
    assert "cases would be needed" not in headline  # the old wording that disagreed with the rows


def _four_turns(project: Project) -> Any:
    turns = [{"invocation_id": f"t{i}", "user_content": {"role": "user", "content": f"question {i}"},
              "expected_tool_trajectory": [{"name": "lookup", "args": {"i": i}}],
              "expected_final_response": {"role": "assistant", "content": f"The answer to question {i} is {i}."}}
             for i in range(1, 5)]
    doc = {"eval_set_id": "four", "eval_cases": [{"eval_id": "talk", "conversation": turns},
                                                 {"eval_id": "talk2", "conversation": turns}]}
    [outcome] = evalset_import(project=project, files=[SourceFile("four.evalset.json", json.dumps(doc).encode())])
    return outcome.version


def _outputs(refuse_turn: int | None, wrong_call: bool, eval_id: str) -> dict[str, Any]:
    turns = []
    for i in range(1, 5):
        answer = "I'm sorry, I can't help with that." if i == refuse_turn else f"The answer to question {i} is {i}."
        turns.append({"invocation_id": f"t{i}", "final_response": answer,
                      "tool_calls": [{"name": "lookup", "args": {"i": 99 if wrong_call and i == 1 else i}}]})
    return {"eval_id": eval_id, "turns": turns}


def test_a_turn_that_failed_a_criterion_the_case_passed_is_no_cause_and_a_failing_turn_is_named(
        acme: Project, alice_client: Client) -> None:
    version = _four_turns(acme)
    config = EvalConfig(criteria={"trajectory_match": CriterionConfig(threshold=0.9),
                                  "response_match": CriterionConfig(threshold=0.5)})
    # talk: turn 4 refuses (its response_match fails) but the conversation's mean passes; the
    # case fails on its tool call. talk2: turns 2-4 refuse: response_match fails, first at turn 2.
    outputs = [_outputs(4, True, "talk"), {**_outputs(None, False, "talk2"), "turns": [
        _outputs(None, False, "x")["turns"][0], *[_outputs(i, False, "x")["turns"][i - 1] for i in (2, 3, 4)]]}]
    run = make_run(acme, version, outputs, config=config)
    page = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    rows = between(page, 'data-testid="causes-table"', "</table>").split('data-testid="cause-row"')[1:]
    by_criteria = {text(row.split('data-label="Criteria">', 1)[1].split("</td>", 1)[0]): text(row) for row in rows}
    # talk passed response_match (0.8 of turns): it is listed only under its failing tool call
    assert "response_match" not in by_criteria.get("trajectory_match", "")
    refusal = by_criteria["response_match"]
    assert "refusal" in refusal and "talk2" in refusal and "turn 2: I'm sorry" in refusal
    assert "talk " not in refusal.replace("talk2", "")
    # the drill-down of talk says the same: response_match passed for the conversation
    talk = run.results.get(case__eval_id="talk")
    drill = alice_client.get(reverse("run_case", args=[run.pk, talk.pk])).content.decode()
    scores = between(drill, '<table class="table scores">', "</table>").split("<tr>")
    conversation = next(text(tr) for tr in scores if ">response_match<" in tr and ">conversation<" in tr)
    turn4 = next(text(tr) for tr in scores if ">response_match<" in tr and ">turn 4<" in tr)
    assert "passed" in conversation and "failed" in turn4
