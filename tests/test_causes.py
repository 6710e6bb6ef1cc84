"""Failures grouped by cause (evaluations/review/causes.py): signatures read from the stored
tool-call diff, answers, errors and limits; real eval sets with injected failures whose
causes are known; stored when the run completes, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections import Counter
from html import unescape
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.models import AuditEvent, CauseSet, Project, ResultCause, Run, RunCause, Triage
from evaluations.review import causes
from evaluations.review.causes import Part
from tests.causes_helpers import CONFIG, import_real, inject, make_run, perfect, runs_with_injected
from tests.compare_helpers import generated_outputs, generated_version
from tests.engine_helpers import DEMO, perfect_outputs, regressed_outputs


@pytest.mark.parametrize("key", ["deepeval-goldens", "uipath-weather", "adk-ecommerce"])
def test_a_real_eval_sets_injected_failures_come_back_as_their_causes_with_exact_counts(
        acme: Project, key: str) -> None:
    _, candidate, injected = runs_with_injected(acme, key)
    found = causes.run_causes(candidate, limit=None)
    assert found is not None
    assert Counter({row.signature: row.cases for row in found.rows}) == injected.causes
    assert found.failing_cases == sum(injected.causes.values())


def _table(html: str) -> Counter[str]:
    """The Causes table of a page as {signature: cases}."""
    section = html.split('data-testid="causes-table"', 1)[1].split("</table>", 1)[0]
    out: Counter[str] = Counter()
    for row in section.split('data-testid="cause-row"')[1:]:
        signature = unescape(row.split('data-testid="cause-link"', 1)[1].split(">", 1)[1].split("</a>", 1)[0])
        out[signature] = int(row.split('data-testid="cause-cases">', 1)[1].split("<", 1)[0].replace(",", ""))
    return out


def _changes(html: str) -> dict[str, str]:
    section = html.split('data-testid="causes-table"', 1)[1].split("</table>", 1)[0]
    out = {}
    for row in section.split('data-testid="cause-row"')[1:]:
        signature = unescape(row.split('data-testid="cause-link"', 1)[1].split(">", 1)[1].split("</a>", 1)[0])
        out[signature] = row.split('data-testid="cause-change">', 1)[1].split("<", 1)[0]
    return out


def test_the_run_page_leads_with_the_causes_table_naming_each_injected_cause_with_its_count(
        acme: Project, alice_client: Client) -> None:
    _, candidate, injected = runs_with_injected(acme, "deepeval-goldens")
    html = alice_client.get(reverse("run_detail", args=[candidate.pk])).content.decode()
    assert _table(html) == injected.causes
    assert html.index('data-testid="causes"') < html.index('id="results-heading"')


def test_the_compare_page_marks_every_injected_cause_new_against_a_clean_baseline(
        acme: Project, alice_client: Client) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "uipath-weather")
    html = alice_client.get(reverse("compare"), {"baseline": baseline.pk, "candidate": candidate.pk}).content.decode()
    assert _table(html) == injected.causes
    assert set(_changes(html).values()) == {"new"}


def test_a_cause_that_grew_shrank_or_went_away_is_said_so_on_the_compare_page(acme: Project,
                                                                              alice_client: Client) -> None:
    version = import_real(acme, "deepeval-goldens")
    good = perfect(version)
    first = inject(good, removed=0.0, reformatted=0.0, timed_out=0.2)  # 3 time out
    second = inject(good, removed=0.2, reformatted=0.0, timed_out=0.0)  # 3 lose a call
    second.outputs[-1]["turns"], second.outputs[-1]["error"] = [], "timed out after 5 s"  # 1 times out
    baseline = make_run(acme, version, first.outputs, config=CONFIG)
    candidate = make_run(acme, version, second.outputs, config=CONFIG)
    html = alice_client.get(reverse("compare"), {"baseline": baseline.pk, "candidate": candidate.pk}).content.decode()
    changes = _changes(html)
    assert changes["timeout"] == "shrunk (was 3)"
    assert all(changes[s] == "new" for s in second.causes if s.startswith("missing"))
    assert _table(html)["timeout"] == 1


def test_a_cause_filters_the_compare_cases_table_to_its_cases(acme: Project, alice_client: Client) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "deepeval-goldens")
    found = causes.run_causes(candidate, limit=None)
    assert found is not None
    timeout = next(row for row in found.rows if row.signature == "timeout")
    html = alice_client.get(reverse("compare"), {"baseline": baseline.pk, "candidate": candidate.pk,
                                                 "status": "all", "cause": timeout.pk}).content.decode()
    table = html.split('data-testid="cases-table"', 1)[1].split("</table>", 1)[0]
    shown = {unescape(eval_id) for eval_id in re.findall(r'<td class="mono"><a href="[^"]*"[^>]*>([^<]*)</a>', table)}
    assert shown == set(injected.timed_out)
    chosen = html.split('data-testid="cause-triage"', 1)[1].split("</form>", 1)[0]
    assert chosen.count('name="case"') == len(injected.timed_out)


def test_a_cause_filters_the_run_pages_cases_table_and_a_cause_of_another_run_keeps_nothing(
        acme: Project, alice_client: Client) -> None:
    baseline, candidate, _ = runs_with_injected(acme, "deepeval-goldens")
    found = causes.run_causes(candidate, limit=None)
    assert found is not None
    missing = [row for row in found.rows if row.kind == causes.MISSING_TOOL]
    html = alice_client.get(reverse("run_detail", args=[candidate.pk]), {"cause": missing[0].pk}).content.decode()
    table = html.split('id="results-table"', 1)[1].split("</table>", 1)[0]
    assert missing[0].example_eval_id in unescape(table)
    assert table.count("<tr") == 1 + missing[0].cases  # the head and the cause's cases
    other = alice_client.get(reverse("run_detail", args=[baseline.pk]), {"cause": missing[0].pk}).content.decode()
    assert missing[0].example_eval_id not in unescape(other.split('id="results-table"', 1)[1].split("</table>", 1)[0])


def test_bulk_triage_of_a_cause_triages_its_cases_and_returns_to_the_compare_page(
        acme: Project, alice_client: Client) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "deepeval-goldens")
    found = causes.run_causes(candidate, limit=None)
    assert found is not None
    timeout = next(row for row in found.rows if row.signature == "timeout")
    back = reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}&cause={timeout.pk}"
    response = alice_client.post(reverse("triage_bulk"), {
        "status": Triage.Status.CONFIRMED, "next": back,
        "case": [f"{candidate.pk}:{baseline.pk}:{e}" for e in injected.timed_out]})
    assert response.status_code == 302 and response["Location"] == back
    assert sorted(Triage.objects.filter(candidate=candidate, status=Triage.Status.CONFIRMED)
                  .values_list("eval_id", flat=True)) == sorted(injected.timed_out)
    elsewhere = alice_client.post(reverse("triage_bulk"), {
        "status": Triage.Status.FLAKY, "next": "https://elsewhere.example/",
        "case": [f"{candidate.pk}:{baseline.pk}:{injected.timed_out[0]}"]})
    assert elsewhere["Location"] == reverse("review_queue") + "?tab=untriaged"


def test_promote_these_cases_adds_a_causes_cases_to_the_eval_set(acme: Project, alice_client: Client) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "deepeval-goldens")
    found = causes.run_causes(candidate, limit=None)
    assert found is not None
    timeout = next(row for row in found.rows if row.signature == "timeout")
    page = alice_client.get(reverse("compare"), {"baseline": baseline.pk, "candidate": candidate.pk,
                                                 "cause": timeout.pk}).content.decode()
    form = page.split('data-testid="cause-promote"', 1)[1].split("</form>", 1)[0]
    eval_ids = [unescape(v) for v in re.findall(r'name="eval_ids" value="([^"]*)"', form)]
    assert sorted(eval_ids) == sorted(injected.timed_out)
    before = candidate.evalset_version.evalset.versions.count()
    alice_client.post(reverse("run_promote_selected", args=[candidate.pk]), {"eval_ids": eval_ids, "note": "timeouts"})
    assert candidate.evalset_version.evalset.versions.count() == before + 1


# --- Signatures, without a database ---------------------------------------------------------


@pytest.mark.parametrize(("expected", "actual", "kind"), [
    ("2024-05-01", "05/01/2024", "format: date"),
    ("2024-05-01", "May 1, 2024", "format: date"),
    ("1200", "1,200.00", "format: number"),
    ("New York", "new  york", "format: case or spacing"),
    (5, "5", "type"),
    (True, "true", "type"),
    ("Rome", "Milan", "value"),
    (3, 4, "value"),
    ("2024-05-01", "2024-05-02", "value"),
])
def test_an_arguments_change_is_named_by_its_kind(expected: object, actual: object, kind: str) -> None:
    assert causes.change_kind(expected, actual) == kind


def test_volatile_parts_of_messages_fold_together() -> None:
    one = causes.error_part("error", "KeyError: order 8812 not found (req 3f2a9c1e77) at 2024-05-01T10:00:00Z")
    two = causes.error_part("error", "KeyError: order 91 not found (req 0b1c2d3e4f) at 2025-01-02T11:00:00Z")
    assert one.signature == two.signature == "agent error: KeyError"
    assert one.example != two.example  # each keeps its own words
    assert causes.normalise("order 8812 for 'alice' on 2024-05-01 (id 3f2a9c1e77)") == \
        causes.normalise("order 17 for 'bob' on 1999-12-31 (id 0b1c2d3e4f)")


@pytest.mark.parametrize(("status", "error", "signature"), [
    ("error", "Request timed out after 30 s", "timeout"),
    ("error", "httpx.ReadTimeout: read timeout", "timeout"),
    ("error", "agent answered HTTP 503: Service Unavailable", "agent error: HTTP 503"),
    ("error", "ValueError: bad city", "agent error: ValueError"),
    ("error", "the agent crashed on item 12", "agent error: the agent crashed on item <n>"),
    ("not_runnable", "scenario cases need a user simulator", "not runnable: scenario cases need a user simulator"),
    ("missing", "", "no output"),
])
def test_a_result_with_no_answer_is_grouped_by_its_error(status: str, error: str, signature: str) -> None:
    assert causes.error_part(status, error).signature == signature


def test_answers_are_grouped_as_empty_refusals_or_by_their_similarity_band() -> None:
    from evaluations.schemas.outputs import AgentOutput

    def said(text: str) -> AgentOutput:
        return AgentOutput.model_validate({"eval_id": "x", "turns": [{"final_response": text}]})

    assert causes.answer_part(None, said("  "), 0.0).signature == "empty answer"
    assert causes.answer_part(None, said("I'm sorry, I can't help with that."), 0.1).signature == "refusal"
    assert causes.answer_part(None, said("It is 21 degrees"), 0.3).signature == "answer differs (similarity 0.25 to 0.5)"
    assert causes.answer_part(None, said("It is 21 degrees"), 0.0).signature == "answer differs"


def test_a_swapped_pair_of_calls_is_an_order_difference_not_a_missing_call() -> None:
    from evaluations.schemas.evalset import EvalCase as NativeCase
    from evaluations.schemas.outputs import AgentOutput

    calls = [{"name": "search", "args": {"q": "a"}}, {"name": "book", "args": {"id": 1}}]
    case = NativeCase.model_validate({"eval_id": "x", "conversation": [{
        "invocation_id": "t1", "user_content": {"role": "user", "content": "go"}, "expected_tool_trajectory": calls}]})
    output = AgentOutput.model_validate({"eval_id": "x", "turns": [{"invocation_id": "t1",
                                                                     "tool_calls": calls[::-1]}]})
    parts = causes.tool_parts(case, output)
    assert [p.signature for p in parts] == ["order differs: search"]


def test_failures_fold_by_signature_with_the_first_case_as_the_example() -> None:
    found = causes.group([
        causes.Failure(3, "b", "trajectory_match", Part("missing x", "missing_tool", "missing x(id=2)")),
        causes.Failure(1, "a", "trajectory_match", Part("missing x", "missing_tool", "missing x(id=1)")),
        causes.Failure(1, "a", "tool_trajectory_avg_score", Part("missing x", "missing_tool", "missing x(id=1)")),
        causes.Failure(5, "c", "", Part("timeout", "timeout", "timed out")),
    ])
    assert [(c.signature, c.cases, c.criteria, c.example_eval_id, c.example) for c in found] == [
        ("missing x", 2, ["tool_trajectory_avg_score", "trajectory_match"], "a", "missing x(id=1)"),
        ("timeout", 1, [], "c", "timed out"),
    ]


# --- Stored, and read flat ----------------------------------------------------------------


def test_causes_are_stored_when_the_run_completes_and_the_activity_says_how_many_are_new(acme: Project) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "uipath-weather")
    assert CauseSet.objects.filter(run=candidate).exists()  # kept by the completion, not by a read
    assert ResultCause.objects.filter(cause__cause_set__run=candidate).count() == sum(
        2 if s != "timeout" else 1 for s in injected.causes.elements())  # two trajectory criteria, or none
    event = AuditEvent.objects.filter(verb=AuditEvent.Verb.RUN_FINISHED, object_id=str(candidate.pk)).get()
    assert f"{len(injected.causes)} new causes vs #{baseline.pk}" in event.summary
    assert event.data["new_causes"] == len(injected.causes)


def test_a_run_finished_before_causes_existed_is_grouped_on_its_first_read(acme: Project) -> None:
    _, candidate, injected = runs_with_injected(acme, "uipath-weather")
    CauseSet.objects.filter(run=candidate).delete()
    found = causes.run_causes(candidate, limit=None)
    assert found is not None and Counter({r.signature: r.cases for r in found.rows}) == injected.causes


def _pair(project: Project, count: int) -> tuple[Run, Run]:
    version = generated_version(project, count)
    baseline = make_run(project, version, generated_outputs(count))
    wrong = generated_outputs(count)
    for i, output in enumerate(wrong):
        if i % 3 == 0:
            output["turns"][0]["tool_calls"] = []
        elif i % 3 == 1:
            output["turns"][0]["tool_calls"][0]["args"]["id"] = str(i)
    candidate = make_run(project, version, wrong)
    return baseline, candidate


@pytest.mark.parametrize("count", [30, 300])
def test_the_pages_and_api_that_show_causes_cost_the_same_queries_at_any_size(
        acme: Project, alice_client: Client, count: int) -> None:
    baseline, candidate = _pair(acme, count)
    found = causes.run_causes(candidate, limit=None)
    assert found is not None
    assert {r.signature: r.cases for r in found.rows} == {"missing lookup": len(range(0, count, 3)),
                                                           "lookup.id differs (type)": len(range(1, count, 3))}
    cause = found.rows[0].pk
    urls = [reverse("run_detail", args=[candidate.pk]) + f"?cause={cause}",
            reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}&cause={cause}",
            reverse("api_run_causes", args=[candidate.pk])]
    for url in urls:
        alice_client.get(url)  # warm: sessions, caches
    counts = []
    for url in urls:
        cache.clear()  # the compare page keeps its HTML: count what building it costs
        with CaptureQueriesContext(connection) as queries:
            assert alice_client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts == _QUERIES.setdefault("counts", counts)  # the same at 30 and 300 cases


_QUERIES: dict[str, list[int]] = {}


def test_the_api_gives_a_runs_causes_and_a_comparisons_with_their_change(acme: Project, alice_client: Client) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "uipath-weather")
    body = alice_client.get(reverse("api_run_causes", args=[candidate.pk])).json()
    assert body["final"] is True and body["failing_cases"] == sum(injected.causes.values())
    assert {i["signature"]: i["cases"] for i in body["items"]} == dict(injected.causes)
    compared = alice_client.get(reverse("api_compare"), {"baseline": baseline.pk, "candidate": candidate.pk}).json()
    assert {i["signature"]: i["change"] for i in compared["causes"]["items"]} == {s: "new" for s in injected.causes}


def test_causes_and_their_examples_stay_escaped(acme: Project, alice_client: Client) -> None:
    version = import_real(acme, "uipath-weather")
    good = perfect(version)
    bad = inject(good, removed=0.0, reformatted=0.0, timed_out=0.0)
    bad.outputs[0]["turns"], bad.outputs[0]["error"] = [], "<script>alert(1)</script> crashed"
    run = make_run(acme, version, bad.outputs, config=CONFIG)
    html = alice_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    causes_html = html.split('data-testid="causes"', 1)[1].split("</section>", 1)[0]
    assert "<script>alert(1)" not in causes_html and "&lt;script&gt;alert(1)" in causes_html
    assert RunCause.objects.filter(cause_set__run=run).count() == 1


# --- Causes everywhere else: the CLI, JUnit, the CSV ---------------------------------------


@pytest.mark.django_db(transaction=True)  # --workers: threads with their own connections
def test_manage_py_eval_prints_the_top_causes_under_the_verdict_and_junit_carries_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run(name: str, outputs: list[dict[str, object]], *extra: str) -> str:
        path = tmp_path / name
        path.write_text(json.dumps(outputs))
        with contextlib.suppress(SystemExit):  # the exit code is another test's
            call_command("eval", str(DEMO), "--outputs", str(path), *extra)
        return capsys.readouterr().out

    run("perfect.json", perfect_outputs())
    baseline = Run.objects.get()
    junit = tmp_path / "junit.xml"
    out = run("regressed.json", regressed_outputs(), "--baseline", str(baseline.pk), "--junit", str(junit))
    verdict = out.index(f"vs #{baseline.pk} · ")
    assert out.index("top causes (2 failing cases, 2 causes):") > verdict
    assert "1 case   get_weather.city differs (value)  (new)" in out
    assert "1 case   missing get_order  (new)" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert {properties["cause_1"], properties["cause_2"]} == {
        "get_weather.city differs (value): 1 case (new)", "missing get_order: 1 case (new)"}


def test_the_compare_csv_ends_with_each_cases_causes(acme: Project, alice_client: Client) -> None:
    baseline, candidate, injected = runs_with_injected(acme, "uipath-weather")
    response = alice_client.get(reverse("compare_csv"), {"baseline": baseline.pk, "candidate": candidate.pk})
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][-1] == "causes"
    by_case = {row[0]: row[-1] for row in rows[1:]}
    assert {by_case[e] for e in injected.timed_out} == {"timeout"}
    assert all(by_case[e].startswith("missing ") for e in injected.removed)
    assert sum(1 for cause in by_case.values() if cause) == sum(injected.causes.values())


def test_cause_lines_leave_gone_causes_to_a_count_and_say_how_the_rest_moved() -> None:
    from evaluations.client import cause_lines

    lines = cause_lines({"failing_cases": 7, "total": 3, "items": [
        {"signature": "missing search_flights", "cases": 5, "change": "grown", "baseline_cases": 2},
        {"signature": "timeout", "cases": 2, "change": "new", "baseline_cases": None},
        {"signature": "refusal", "cases": 0, "change": "gone", "baseline_cases": 4}]})
    assert lines == ["  top causes (7 failing cases, 3 causes):",
                     "        5 cases  missing search_flights  (grown, was 2)",
                     "        2 cases  timeout  (new)",
                     "    and 1 cause of the baseline gone"]
    assert cause_lines(None) == [] and cause_lines({"failing_cases": 0, "total": 0, "items": []}) == []


# --- Across runs: N-way and the trend -------------------------------------------------------


def test_n_way_shows_which_runs_each_cause_appears_in(acme: Project, alice_client: Client) -> None:
    version = import_real(acme, "uipath-weather")
    good = perfect(version)
    clean = make_run(acme, version, good, config=CONFIG)
    slow = make_run(acme, version, inject(good, removed=0.0, reformatted=0.0, timed_out=0.4).outputs, config=CONFIG)
    both = inject(good, removed=0.4, reformatted=0.0, timed_out=0.2)
    mixed = make_run(acme, version, both.outputs, config=CONFIG)
    html = alice_client.get(reverse("nway_compare"), {"runs": f"{clean.pk},{slow.pk},{mixed.pk}"}).content.decode()
    table = html.split('data-testid="nway-causes-table"', 1)[1].split("</table>", 1)[0]
    rows = {}
    for row in table.split('data-testid="nway-cause-row"')[1:]:
        signature = unescape(row.split('class="cause-signature">', 1)[1].split(" <span", 1)[0])
        cells = re.findall(r'<td class="num"[^>]*>(.*?)</td>', row)
        rows[signature] = ["—" if "not in this run" in c else c for c in cells]
    assert rows["timeout"] == ["—", "2", "1"]
    for signature in both.causes:
        if signature.startswith("missing"):
            assert rows[signature] == ["—", "—", str(both.causes[signature])]


def test_the_trend_says_since_which_run_a_cause_has_been_on_the_branch(acme: Project, alice_client: Client) -> None:
    version = import_real(acme, "uipath-weather")
    good = perfect(version)
    broken = inject(good, removed=0.4, reformatted=0.0, timed_out=0.0)
    main = {"branch": "main"}
    make_run(acme, version, broken.outputs, config=CONFIG, labels=main)  # an old episode, fixed since
    make_run(acme, version, good, config=CONFIG, labels=main)
    first = make_run(acme, version, broken.outputs, config=CONFIG, labels=main)
    make_run(acme, version, good, config=CONFIG, labels={"branch": "feature"})  # another branch: not in the walk
    make_run(acme, version, broken.outputs, config=CONFIG, labels=main)
    html = alice_client.get(reverse("evalset_trend", args=[version.evalset_id])).content.decode()
    section = html.split('data-testid="causes-since-table"', 1)[1].split("</table>", 1)[0]
    since = {unescape(row.split('class="cause-signature">', 1)[1].split(" <span", 1)[0]):
             re.search(r"since #(\d+)", row).group(1)  # type: ignore[union-attr]
             for row in section.split('data-testid="since-row"')[1:]}
    assert since == {s: str(first.pk) for s in broken.causes}


@pytest.mark.django_db
def test_a_failing_result_s_cause_row_keeps_two_indexes_both_led_by_its_cause() -> None:
    """Each failing (result, criterion) of a run writes a ResultCause row: it maintains the two
    indexes its lookups use, not a third on the cause alone (migration 0024)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, ResultCause._meta.db_table)
    indexes = {tuple(c["columns"]) for c in found.values() if c["index"] and not c["primary_key"]}
    assert indexes == {("cause_id", "eval_id"), ("cause_id", "result_id")}
