"""The run pages: home, runs list, new run, run detail with its cases table, live progress,
cancel and retry.

Runs are made the way the engine makes them: `runs.run_create(..., enqueue=False)` and then
`runs.run_execute_here`, so the pages read exactly what a queued run writes.

People, besides conftest's alice (member of acme) and bob (member of globex):
- carol: a viewer of acme; she may read its runs and nothing more.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.models import CaseResult, EvaluationConfig, Membership, Project, Run, Score
from evaluations.runs import services as runs
from evaluations.schemas.outputs import AgentOutput
from evaluations.units import fmt_duration
from evaluations.web.templatetags.evalsite import plotly_bundle
from tests.conftest import DATA
from tests.engine_helpers import import_demo, perfect_outputs, regressed_outputs

XSS = '<img src=x onerror="window.__xss=1">'


# --- Building runs ----------------------------------------------------------------------------


def uploaded_run(project: Project, raw: list[dict[str, Any]], *, execute: bool = True, version: Any = None,
                 **kwargs: Any) -> Run:
    version = version or import_demo(project)
    run = runs.run_create(project=project, version=version, target_kind="uploaded",
                          outputs=[AgentOutput.model_validate(o) for o in raw], enqueue=False, **kwargs)
    return runs.run_execute_here(run.pk) if execute else run


def generated_version(project: Project, count: int, *, eval_set_id: str = "generated") -> Any:
    """A native eval set of `count` one-turn cases, every third tagged "slow", else "fast"."""
    cases = [{"eval_id": f"case_{i:04d}", "name": f"Case {i}", "tags": ["slow"] if i % 3 == 0 else ["fast"],
              "conversation": [{"invocation_id": "turn_1",
                                "user_content": {"role": "user", "content": f"Look up item {i}"},
                                "expected_tool_trajectory": [{"name": "lookup", "args": {"id": i}}],
                                "expected_final_response": {"role": "assistant", "content": f"Item {i} found"}}]}
             for i in range(count)]
    doc = {"eval_set_id": eval_set_id, "name": f"Generated {count}", "eval_cases": cases}
    [outcome] = evalset_import(project=project, files=[SourceFile(f"{eval_set_id}.evalset.json",
                                                                  json.dumps(doc).encode())])
    return outcome.version


def generated_outputs(count: int, *, fail_every: int = 4) -> list[dict[str, Any]]:
    """Every `fail_every`-th case calls its tool with a wrong id; latency grows with the case."""
    return [{"eval_id": f"case_{i:04d}",
             "turns": [{"invocation_id": "turn_1", "final_response": f"Item {i} found",
                        "tool_calls": [{"name": "lookup", "args": {"id": -1 if i % fail_every == 0 else i}}],
                        "latency_seconds": round(0.1 + i / 100, 3),
                        "usage": {"prompt_tokens": 10, "completion_tokens": 2}}]}
            for i in range(count)]


def generated_run(project: Project, count: int, **kwargs: Any) -> Run:
    version = generated_version(project, count, eval_set_id=f"generated_{count}")
    return uploaded_run(project, generated_outputs(count), version=version, **kwargs)


@pytest.fixture
def carol(acme: Project) -> Any:
    user = get_user_model().objects.create_user("carol", "carol@example.com", "carol-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.VIEWER)
    return user


@pytest.fixture
def carol_client(carol: Any) -> Client:
    client = Client()
    client.force_login(carol)
    return client


@pytest.fixture
def regressed(acme: Project, alice: Any) -> Run:
    return uploaded_run(acme, regressed_outputs(), user=alice, name="nightly regressed",
                        labels={"model": "gpt-x", "branch": "main", "git_commit": "abc123def456", "tags": ["nightly"]})


def html(response: Any) -> str:
    return response.content.decode()


def rows_of(page: str) -> list[str]:
    """The eval ids of the cases table, in order."""
    table = page.split('id="results-table"', 1)[1]
    return re.findall(r'<td class="mono"><a href="/runs/\d+/cases/\d+/"[^>]*>([^<]+)</a>', table)


# --- Access -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["home", "run_list", "run_new", "run_detail", "run_progress"])
def test_every_run_page_sends_anonymous_visitors_to_the_login_page(regressed: Run, name: str) -> None:
    url = reverse(name, args=[regressed.pk]) if name in {"run_detail", "run_progress"} else reverse(name)
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


@pytest.mark.parametrize(("name", "method"), [("run_detail", "get"), ("run_progress", "get"),
                                               ("run_cancel", "post"), ("run_retry", "post")])
def test_another_projects_run_is_not_found(regressed: Run, bob_client: Client, name: str, method: str) -> None:
    response = getattr(bob_client, method)(reverse(name, args=[regressed.pk]))
    assert response.status_code == 404


def test_another_projects_runs_are_not_listed(regressed: Run, bob_client: Client) -> None:
    page = html(bob_client.get(reverse("run_list")))
    assert "nightly regressed" not in page
    assert "nightly regressed" not in html(bob_client.get(reverse("home")))


def test_a_viewer_reads_a_run_but_cannot_start_cancel_or_retry_one(regressed: Run, carol_client: Client) -> None:
    page = html(carol_client.get(reverse("run_detail", args=[regressed.pk])))
    assert "nightly regressed" in page
    assert "Retry failed" not in page
    assert carol_client.get(reverse("run_new")).status_code == 403
    assert carol_client.post(reverse("run_new"), {"version": regressed.evalset_version_id}).status_code == 403
    assert carol_client.post(reverse("run_retry", args=[regressed.pk])).status_code == 403
    queued = uploaded_run(regressed.project, perfect_outputs(), execute=False, version=regressed.evalset_version)
    assert carol_client.post(reverse("run_cancel", args=[queued.pk])).status_code == 403
    queued.refresh_from_db()
    assert queued.status == Run.Status.QUEUED
    assert Run.objects.count() == 2


def test_cancel_and_retry_only_take_posts(regressed: Run, alice_client: Client) -> None:
    assert alice_client.get(reverse("run_cancel", args=[regressed.pk])).status_code == 405
    assert alice_client.get(reverse("run_retry", args=[regressed.pk])).status_code == 405


def test_cancel_needs_the_csrf_token(regressed: Run, alice: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("run_retry", args=[regressed.pk])).status_code == 403
    regressed.refresh_from_db()
    assert regressed.status == Run.Status.COMPLETED


# --- Run detail: header, summary, charts, tables ----------------------------------------------


def test_the_run_page_shows_status_labels_eval_set_and_who_started_it(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    assert ('<h1>nightly regressed <span id="run-status" data-testid="run-status"><span class="st st-completed">'
            '✓ completed</span></span></h1>') in page
    assert "Demo travel agent v1" in page
    assert f'href="{reverse("evalset_detail", args=[regressed.evalset_version.evalset_id])}?version=1"' in page
    assert "started by alice" in page
    for label in ("gpt-x", "main", "abc123def456", "nightly"):
        assert label in page
    assert "uploaded outputs" in page


def test_the_summary_cards_come_from_the_run_summary(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    cards = page.split('aria-label="Summary"', 1)[1].split("</section>", 1)[0]
    assert '<div class="card-value">75%</div>' in cards
    assert "6 of 8 judged cases" in cards
    trajectory = cards.split('title="trajectory_match"', 1)[1].split("</div>\n  </div>", 1)[0]
    assert "0.75" in trajectory and "75% pass" in trajectory and "n=8" in trajectory
    latency = regressed.summary["latency"]
    # a latency reads with its unit, milliseconds under a second
    assert f'{fmt_duration(latency["p50"])} <span class="card-unit">p50</span>' in cards
    assert f"p95 {fmt_duration(latency['p95'])} · max" in cards
    assert fmt_duration(0.00079) == "790 µs" and fmt_duration(0.5) == "500 ms"
    assert "1,440" in cards  # tokens: 12 turns x 120
    assert "$0.0120" in cards
    assert "0 errors" in cards and "0 not fully scored" in cards and "0 missing" in cards and "0 not runnable" in cards


def test_the_per_tool_table_lists_calls_cases_and_failures(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    tools = page.split('id="tools-heading"', 1)[1].split("</table>", 1)[0]
    weather = tools.split(">get_weather<", 1)[1].split("</tr>", 1)[0]
    # Calls, failures, cases: Tokyo (now Kyoto), Paris, and Rome + Oslo in one case.
    assert re.findall(r'<td class="num">(\d+)</td>', weather)[:3] == ["4", "0", "3"]
    order = tools.split(">get_order<", 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="num">(\d+)</td>', order)[:1] == ["1"]  # order_status lost its call


def test_a_traced_run_shows_the_per_node_table(acme: Project, alice_client: Client) -> None:
    raw = perfect_outputs()
    for output in raw:
        for turn in output["turns"]:
            for call in turn["tool_calls"]:
                call["node"] = "planner"
    run = uploaded_run(acme, raw)
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    nodes = page.split('id="nodes-heading"', 1)[1].split("</table>", 1)[0]
    planner = nodes.split(">planner<", 1)[1].split("</tr>", 1)[0]
    # No NODE steps in these trajectories; every expected call of the demo set, in 7 cases.
    assert re.findall(r'<td class="num">(\d+)</td>', planner)[:4] == ["0", "11", "0", "7"]


def test_the_run_page_renders_three_charts_with_plotly_served_locally(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    assert page.count('class="plotly-graph-div"') == 3
    assert f'<meta name="evalsite-plotly" content="/static/{plotly_bundle()}">' in page  # fetched by figures.js
    assert "cdn.plot.ly" not in page
    assert "Score distribution per criterion" in page and "Latency per result" in page and "Pass rate by tag" in page


def figures(page: str) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """(data, layout) of each plotly figure on the page, read from its JSON data block."""
    found = []
    for match in re.finditer(r'<script type="application/json" class="plotly-figure"[^>]*>(.*?)</script>', page,
                             re.DOTALL):
        figure = json.loads(match.group(1))
        found.append((figure["data"], figure["layout"]))
    return found


def test_the_charts_carry_the_runs_bin_counts(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    (scores, score_layout), (latency, _), (tags, _) = figures(page)
    titles = [a["text"] for a in score_layout["annotations"]]
    axis = "x" if titles.index("trajectory_match") == 0 else "x2"
    by_axis = {(t["name"], t["xaxis"]): t["y"] for t in scores}
    assert sum(by_axis[("failed", axis)]) == 2
    assert sum(by_axis[("passed", axis)]) == 6
    assert by_axis[("failed", axis)][0] == 2  # both regressions scored 0
    assert sum(latency[0]["y"]) == 8
    rates = dict(zip(tags[0]["y"], tags[0]["x"], strict=True))
    assert rates["smalltalk"] == 1.0
    assert rates["orders"] == 0.5  # order_status failed, order_cancel passed
    assert rates["weather"] == pytest.approx(2 / 3)


def _score_aggregates(queries: Any) -> list[str]:
    """The queries that count a run's scores or results into bins (what the kept bins spare)."""
    return [q["sql"] for q in queries.captured_queries if "GROUP BY" in q["sql"] or "FLOOR" in q["sql"].upper()]


def test_a_completed_run_keeps_its_chart_bins_and_its_page_reads_them_not_its_scores(
        regressed: Run, alice_client: Client) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from evaluations.runs.bins import CHART_BINS_VERSION

    run = Run.objects.get(pk=regressed.pk)
    kept = run.chart_bins
    assert kept["version"] == CHART_BINS_VERSION and kept["finished_at"] == run.finished_at.isoformat()
    assert sum(kept["scores"]["trajectory_match"]["failed"]) == 2 and sum(kept["latency_counts"]) == 8
    cache.clear()  # no cached chart HTML: the page draws them again, from the kept bins
    with CaptureQueriesContext(connection) as queries:
        page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert page.count('class="plotly-graph-div"') == 3
    assert _score_aggregates(queries) == []
    _, (latency, _), (tags, _) = figures(page)
    assert sum(latency[0]["y"]) == 8 and dict(zip(tags[0]["y"], tags[0]["x"], strict=True))["orders"] == 0.5


def test_a_run_without_kept_bins_counts_them_on_its_first_view_and_keeps_them(
        regressed: Run, alice_client: Client) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    kept = Run.objects.get(pk=regressed.pk).chart_bins
    Run.objects.filter(pk=regressed.pk).update(chart_bins=None)  # finished before bins were kept
    cache.clear()
    with CaptureQueriesContext(connection) as first:
        before = figures(html(alice_client.get(reverse("run_detail", args=[regressed.pk]))))
    assert _score_aggregates(first)  # counted now...
    assert Run.objects.get(pk=regressed.pk).chart_bins == kept  # ...and kept, the same as at completion
    cache.clear()
    with CaptureQueriesContext(connection) as second:
        after = figures(html(alice_client.get(reverse("run_detail", args=[regressed.pk]))))
    assert _score_aggregates(second) == [] and after == before


def test_bins_of_an_earlier_finish_are_counted_again(regressed: Run, alice_client: Client) -> None:
    from django.core.cache import cache

    run = Run.objects.get(pk=regressed.pk)
    stale = {**run.chart_bins, "finished_at": (run.finished_at - timedelta(hours=1)).isoformat(),
             "latency_counts": [999]}
    Run.objects.filter(pk=run.pk).update(chart_bins=stale)
    cache.clear()
    (_, _), (latency, _), (_, _) = figures(html(alice_client.get(reverse("run_detail", args=[run.pk]))))
    assert sum(latency[0]["y"]) == 8
    assert Run.objects.get(pk=run.pk).chart_bins["finished_at"] == run.finished_at.isoformat()


def test_a_queued_run_shows_no_summary_or_charts_yet(acme: Project, alice_client: Client) -> None:
    run = uploaded_run(acme, perfect_outputs(), execute=False)
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert 'aria-label="Summary"' not in page
    assert "plotly-graph-div" not in page
    assert f"/static/{plotly_bundle()}" in page  # loaded ahead: the charts come in when the run finishes
    assert "<strong>0</strong> of 8 results settled" in page


# --- Run detail: the cases table --------------------------------------------------------------


def test_the_cases_table_lists_every_result_with_scores_status_and_the_agents_answer(
    regressed: Run, alice_client: Client
) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    assert rows_of(page)[:3] == ["weather_tokyo", "weather_paris_followup", "flight_search_lis"]
    tokyo = page.split('id="results-table"', 1)[1].split(">weather_tokyo</a>", 1)[1].split("</tr>", 1)[0]
    assert '<span class="st st-failed">✗ failed</span>' in tokyo
    assert 'score-fail">0.00' in tokyo
    assert "It is 22°C and clear in Tokyo." in tokyo


def test_each_row_links_to_the_case_drill_down(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    result = CaseResult.objects.get(run=regressed, case__eval_id="order_status")
    assert f'href="/runs/{regressed.pk}/cases/{result.pk}/"' in page


@pytest.mark.parametrize(("query", "expected"), [
    ("status=failed", ["weather_tokyo", "order_status"]),
    ("status=passed&tag=orders", ["order_cancel"]),
    ("tag=multi-turn", ["weather_paris_followup", "flight_book_after_search", "order_cancel"]),
    ("criterion=trajectory_match", ["weather_tokyo", "order_status"]),
    ("criterion=response_match", []),
    ("q=flight", ["flight_search_lis", "flight_book_after_search"]),
    ("status=error", []),
])
def test_the_cases_table_filters_by_status_tag_criterion_and_text(
    regressed: Run, alice_client: Client, query: str, expected: list[str]
) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk]) + "?" + query))
    assert rows_of(page) == expected
    if not expected:
        assert "No results match these filters." in page


def test_unknown_filter_values_are_ignored_rather_than_refused(regressed: Run, alice_client: Client) -> None:
    response = alice_client.get(reverse("run_detail", args=[regressed.pk]) + "?status=bogus&criterion=nope&sort=x")
    assert response.status_code == 200
    assert len(rows_of(html(response))) == 8


def test_the_cases_table_sorts_by_latency_score_status_and_eval_id(acme: Project, alice_client: Client) -> None:
    run = generated_run(acme, 12)
    url = reverse("run_detail", args=[run.pk])
    assert rows_of(html(alice_client.get(url + "?sort=-latency")))[:3] == ["case_0011", "case_0010", "case_0009"]
    assert rows_of(html(alice_client.get(url + "?sort=latency")))[:2] == ["case_0000", "case_0001"]
    worst_first = rows_of(html(alice_client.get(url + "?sort=score.trajectory_match")))
    assert set(worst_first[:3]) == {"case_0000", "case_0004", "case_0008"}
    best_first = rows_of(html(alice_client.get(url + "?sort=-score.trajectory_match")))
    assert set(best_first[-3:]) == {"case_0000", "case_0004", "case_0008"}
    assert rows_of(html(alice_client.get(url + "?sort=-eval_id")))[0] == "case_0011"
    by_status = rows_of(html(alice_client.get(url + "?sort=status")))
    assert by_status[:3] == ["case_0000", "case_0004", "case_0008"]  # "failed" < "passed"


def test_the_sort_headers_flip_direction_and_keep_the_filters(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk]) + "?status=passed&sort=latency"))
    head = page.split('id="results-table"', 1)[1].split("<thead", 1)[1].split("</thead>", 1)[0]
    assert 'aria-sort="ascending"' in head
    assert 'href="?status=passed&amp;sort=-latency"' in head
    assert 'href="?status=passed&amp;sort=score.trajectory_match"' in head


def test_the_cases_table_is_paginated_by_fifty(acme: Project, alice_client: Client) -> None:
    run = generated_run(acme, 120)
    url = reverse("run_detail", args=[run.pk])
    first = html(alice_client.get(url))
    assert len(rows_of(first)) == 50
    assert "Showing 1\u201350 of 120 results" in " ".join(first.split())
    assert 'href="?page=2"' in first
    last = html(alice_client.get(url + "?page=3&sort=eval_id"))
    assert rows_of(last) == [f"case_{i:04d}" for i in range(100, 120)]


def test_an_htmx_request_returns_only_the_cases_table(regressed: Run, alice_client: Client) -> None:
    response = alice_client.get(reverse("run_detail", args=[regressed.pk]) + "?status=failed",
                                HTTP_HX_REQUEST="true")
    fragment = html(response)
    assert fragment.startswith('<div id="results-table">')
    assert "<html" not in fragment and "Summary" not in fragment and "plotly" not in fragment
    assert rows_of(fragment) == ["weather_tokyo", "order_status"]
    assert "HX-Request" in response["Vary"]


def test_an_htmx_history_restore_gets_the_whole_page(regressed: Run, alice_client: Client) -> None:
    response = alice_client.get(reverse("run_detail", args=[regressed.pk]), HTTP_HX_REQUEST="true",
                                HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in html(response)


@pytest.mark.parametrize("htmx", [False, True])
def test_the_run_page_makes_as_many_queries_for_300_cases_as_for_5(
    acme: Project, alice_client: Client, django_assert_num_queries: Any, htmx: bool
) -> None:
    small, large = generated_run(acme, 5), generated_run(acme, 300)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    for run in (small, large):  # settle the session and each finished run's cached charts
        alice_client.get(reverse("run_detail", args=[run.pk]), **headers)
    counts = []
    for run in (small, large):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            response = alice_client.get(reverse("run_detail", args=[run.pk]) + "?sort=-score.trajectory_match",
                                        **headers)
        assert response.status_code == (286 if htmx else 200)  # 286: a finished run's table stops polling
        counts.append(len(queries))
    assert counts[0] == counts[1]
    # session, user, run; then for the page: projects, role, the run's history (the chart
    # GROUP BYs ran once, on the first view of the finished run); then page and scores (no
    # count: an unfiltered table's count is the run's cases_total); and the default baseline
    # (one query: the latest earlier run, its own branch and like for like first); and the run's
    # causes (whether they are grouped, then the first of them).
    expected = 5 if htmx else 11
    with django_assert_num_queries(expected):
        alice_client.get(reverse("run_detail", args=[large.pk]) + "?sort=-score.trajectory_match", **headers)


def test_agent_output_labels_and_names_are_shown_as_text(acme: Project, alice_client: Client) -> None:
    raw = perfect_outputs()
    raw[0]["turns"][0]["final_response"] = XSS
    run = uploaded_run(acme, raw, name="<script>alert(1)</script>",
                       labels={"model": XSS, "branch": "<b>b</b>", "tags": ["<i>t</i>"]})
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert XSS not in page
    assert "&lt;img src=x onerror=&quot;window.__xss=1&quot;&gt;" in page
    assert "<script>alert(1)</script>" not in page
    assert "<b>b</b>" not in page and "<i>t</i>" not in page
    listing = html(alice_client.get(reverse("run_list")))
    assert XSS not in listing and "<script>alert(1)</script>" not in listing


# --- Live progress, cancel, retry -------------------------------------------------------------


def test_a_queued_run_polls_its_progress_every_two_seconds(acme: Project, alice_client: Client) -> None:
    run = uploaded_run(acme, perfect_outputs(), execute=False)
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    block = page.split('id="run-progress"', 1)[1].split(">", 1)[0]
    assert f'hx-get="{reverse("run_progress", args=[run.pk])}"' in block
    assert 'hx-trigger="every 2s"' in block
    fragment = alice_client.get(reverse("run_progress", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert 'hx-trigger="every 2s"' in html(fragment)
    assert "HX-Refresh" not in fragment


def test_the_progress_fragment_moves_and_turns_the_status_badge_to_completed_when_the_run_finishes(
    acme: Project, alice_client: Client, settings: Any
) -> None:
    settings.EVALSITE_BATCH_SIZE = 3
    run = uploaded_run(acme, regressed_outputs(), execute=False)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    pks = list(CaseResult.objects.filter(run=run).order_by("pk").values_list("pk", flat=True))
    runs.run_batch(run.pk, pks[0], pks[2])
    middle = alice_client.get(reverse("run_progress", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert "<strong>3</strong> of 8 results settled" in html(middle)
    assert "HX-Refresh" not in middle
    # The page head's badge is swapped out of band: running now.
    assert re.search(r'<span id="run-status" data-testid="run-status" hx-swap-oob="true"><span class="st st-running">',
                     html(middle))
    runs.run_execute_here(run.pk)
    done = alice_client.get(reverse("run_progress", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert "HX-Refresh" not in done  # the run page stays: its badge and panel say it is done
    assert "<strong>8</strong> of 8 results settled" in html(done)
    assert 'hx-trigger="every' not in html(done)  # the polling stops
    assert re.search(r'hx-swap-oob="true"><span class="st st-completed">', html(done))
    assert 'data-testid="run-finished">The run has finished.' in html(done)
    # ...and brings in the page's summary and charts by swapping its <main>, no reload
    assert (f'hx-get="/runs/{run.pk}/" hx-trigger="load delay:500ms" hx-select="#main" hx-target="#main" '
            'hx-swap="outerHTML"') in html(done)
    whole = alice_client.get(reverse("run_detail", args=[run.pk]), HTTP_HX_REQUEST="true", HTTP_HX_TARGET="main")
    assert '<main id="main"' in html(whole) and 'aria-label="Summary"' in html(whole)
    # The compare page's verdict waits for the run: it asks for a reload, with no badge to swap.
    compare = alice_client.get(reverse("run_progress", args=[run.pk]) + "?reload=1", HTTP_HX_REQUEST="true")
    assert compare["HX-Refresh"] == "true" and "hx-swap-oob" not in html(compare)
    assert 'id="run-progress"' not in html(alice_client.get(reverse("run_detail", args=[run.pk])))


def test_a_member_cancels_a_running_run(acme: Project, alice_client: Client) -> None:
    run = uploaded_run(acme, perfect_outputs(), execute=False)
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert f'action="{reverse("run_cancel", args=[run.pk])}"' in page
    response = alice_client.post(reverse("run_cancel", args=[run.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("run_detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    after = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert "Run cancelled." in after
    assert f'action="{reverse("run_cancel", args=[run.pk])}"' not in after


def test_a_member_retries_only_the_failed_results(acme: Project, alice_client: Client,
                                                   django_capture_on_commit_callbacks: Any) -> None:
    # An agent that is asked again can answer differently: its run offers the retry.
    run = runs.run_create(project=acme, version=import_demo(acme), target_kind="python", enqueue=False,
                          target={"callable": "evaluations.demo.agent:respond",
                                  "metadata": {"faults": {"wrong_argument": True, "rate": 1.0}}})
    run = runs.run_execute_here(run.pk)
    failed = run.cases_failed + run.cases_errored
    assert failed > 0
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert f"Retry failed ({failed})" in page and 'data-testid="no-retry"' not in page
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(reverse("run_retry", args=[run.pk]))
    assert response.status_code == 302
    assert len(callbacks) == 1  # queued once the transaction commits
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert CaseResult.objects.filter(run=run, status="pending").count() == failed
    assert f"Retrying {failed} failed or errored results." in html(alice_client.get(reverse("run_detail",
                                                                                        args=[run.pk])))


def test_uploaded_outputs_are_not_offered_a_retry_that_cannot_change_them(regressed: Run, alice_client: Client,
                                                                          carol_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    assert "Retry failed" not in page.split('data-testid="no-retry"')[0]  # no button
    assert f'action="{reverse("run_retry", args=[regressed.pk])}"' not in page
    note = page.split('data-testid="no-retry">', 1)[1].split("</p>", 1)[0]
    assert "this run scored uploaded outputs, and the same outputs score the same again" in note
    assert 'href="/runs/new/"' in note
    assert 'data-testid="no-retry"' not in html(carol_client.get(reverse("run_detail", args=[regressed.pk])))


def test_a_run_without_failures_offers_no_retry(acme: Project, alice_client: Client) -> None:
    run = uploaded_run(acme, perfect_outputs())
    assert "Retry failed" not in html(alice_client.get(reverse("run_detail", args=[run.pk])))


# --- Runs list --------------------------------------------------------------------------------


@pytest.fixture
def three_runs(acme: Project, alice: Any) -> list[Run]:
    version = import_demo(acme)
    other = generated_version(acme, 4, eval_set_id="other_set")
    first = uploaded_run(acme, perfect_outputs(), version=version, user=alice, name="first",
                         labels={"model": "gpt-a", "branch": "main", "git_commit": "aaa111", "tags": ["nightly"]})
    second = uploaded_run(acme, regressed_outputs(), version=version, name="second",
                          labels={"model": "gpt-b", "branch": "feature/x", "git_commit": "bbb222", "tags": ["pr"]})
    third = uploaded_run(acme, generated_outputs(4), version=other, execute=False, name="third",
                         labels={"model": "gpt-a", "branch": "main"})
    Run.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(days=10))
    return [first, second, third]


def listed(client: Client, query: str = "") -> list[str]:
    page = html(client.get(reverse("run_list") + ("?" + query if query else "")))
    return re.findall(r'<td class="nowrap"><a href="/runs/\d+/">([^<]+)</a></td>', page)


def test_the_runs_list_shows_newest_first_with_pass_rate_and_labels(three_runs: list[Run],
                                                                    alice_client: Client) -> None:
    # grouped by eval set (newest activity first), each eval set's default branch first
    assert listed(alice_client) == ["third", "first", "second"]
    page = html(alice_client.get(reverse("run_list")))
    second = page.split(">second</a>", 1)[1].split("</tr>", 1)[0]
    assert "75% <span class=\"muted\">n=8</span>" in second
    assert "gpt-b" in second and "feature/x" in second and ">pr<" in second
    third = page.split(">third</a>", 1)[1].split("</tr>", 1)[0]
    assert "queued" in third


@pytest.mark.parametrize(("query", "expected"), [
    ("status=queued", ["third"]),
    ("model=gpt-a", ["third", "first"]),
    ("branch=feature/x", ["second"]),
    ("commit=bbb", ["second"]),
    ("tag=nightly", ["first"]),
    ("status=completed&model=gpt-a", ["first"]),
])
def test_the_runs_list_filters_by_label_and_status(three_runs: list[Run], alice_client: Client, query: str,
                                                   expected: list[str]) -> None:
    assert listed(alice_client, query) == expected


def test_the_runs_list_filters_by_eval_set_and_date(three_runs: list[Run], alice_client: Client) -> None:
    other = three_runs[2].evalset_version.evalset_id
    assert listed(alice_client, f"evalset={other}") == ["third"]
    today = timezone.now().date()
    assert listed(alice_client, f"from={today.isoformat()}") == ["third", "second"]
    assert listed(alice_client, f"to={(today - timedelta(days=5)).isoformat()}") == ["first"]
    assert listed(alice_client, "from=not-a-date") == ["third", "first", "second"]


def test_the_runs_list_keeps_its_filters_in_the_form_and_serves_an_htmx_fragment(
    three_runs: list[Run], alice_client: Client
) -> None:
    page = html(alice_client.get(reverse("run_list") + "?model=gpt-a&tag=nightly"))
    assert '<option value="gpt-a" selected>' in page
    assert 'name="tag" value="nightly"' in page
    fragment = html(alice_client.get(reverse("run_list") + "?model=gpt-b", HTTP_HX_REQUEST="true"))
    assert fragment.startswith('<div id="runs-table">') and "<html" not in fragment
    assert ">second</a>" in fragment and ">first</a>" not in fragment


def test_the_runs_list_is_paginated(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    for i in range(32):
        Run.objects.create(project=acme, evalset_version=version, name=f"r{i:02d}", target_kind="uploaded",
                           created_at=timezone.now() - timedelta(minutes=i))
    assert len(listed(alice_client)) == 30
    assert listed(alice_client, "page=2") == ["r30", "r31"]


def test_the_runs_list_makes_a_fixed_number_of_queries(acme: Project, alice_client: Client,
                                                       django_assert_num_queries: Any) -> None:
    version = import_demo(acme)
    for i in range(25):
        Run.objects.create(project=acme, evalset_version=version, name=f"r{i}", target_kind="uploaded",
                           summary={"latency": {"p95": 1.0}})
    alice_client.get(reverse("run_list"))
    with django_assert_num_queries(10):  # + the page's eval sets' branches and pinned baselines (default first)
        alice_client.get(reverse("run_list"))


def test_compare_takes_two_ticked_runs_with_the_older_as_baseline(three_runs: list[Run],
                                                                  alice_client: Client) -> None:
    first, second, _ = three_runs
    page = html(alice_client.get(reverse("run_list")))
    assert f'action="{reverse("run_compare_pick")}"' in page
    assert f'name="run" value="{first.pk}"' in page
    response = alice_client.get(reverse("run_compare_pick") + f"?run={second.pk}&run={first.pk}")
    assert response.status_code == 302
    assert response["Location"] == f"/compare/?baseline={first.pk}&candidate={second.pk}"


def test_compare_needs_two_runs(three_runs: list[Run], alice_client: Client) -> None:
    response = alice_client.get(reverse("run_compare_pick") + f"?run={three_runs[0].pk}", follow=True)
    assert response.redirect_chain[0][0] == reverse("run_list")
    assert "Pick two to eight runs to compare." in html(response)


def test_compare_three_runs_side_by_side(three_runs: list[Run], alice_client: Client) -> None:
    query = "&".join(f"run={r.pk}" for r in reversed(three_runs))
    response = alice_client.get(reverse("run_compare_pick") + "?" + query)
    assert response.status_code == 302
    oldest_first = sorted(three_runs, key=lambda r: (r.created_at, r.pk))
    assert response["Location"] == reverse("nway_compare") + "?runs=" + "%2C".join(str(r.pk) for r in oldest_first)


def test_compare_cannot_reach_another_projects_run(three_runs: list[Run], bob: Any, bob_client: Client,
                                                   globex: Project) -> None:
    mine = uploaded_run(globex, perfect_outputs())
    response = bob_client.get(reverse("run_compare_pick") + f"?run={mine.pk}&run={three_runs[0].pk}")
    assert response["Location"] == reverse("run_list")


# --- New run ----------------------------------------------------------------------------------


@pytest.fixture
def demo_version(acme: Project) -> Any:
    return import_demo(acme)


def start(client: Client, version: Any, **fields: Any) -> Any:
    data = {"version": version.pk, "config_source": "default", "target_kind": "demo", "iterations": 1,
            "warmups": 0, **fields}
    return client.post(reverse("run_new"), data)


def test_the_new_run_form_offers_every_version_and_prefills_its_default_config(
    demo_version: Any, alice_client: Client
) -> None:
    page = html(alice_client.get(reverse("run_new")))
    assert f'<option value="{demo_version.pk}" data-default-config=' in page
    assert "Demo travel agent · v1 · 8 cases · latest" in page
    editor = page.split("data-config-editor>", 1)[1].split("</textarea>", 1)[0]
    assert json.loads(editor.replace("&quot;", '"')) == {
        "criteria": {"trajectory_match": {"threshold": 0.8}, "response_match": {"threshold": 0.5}}}


def test_the_config_editor_starts_from_the_versions_own_config(acme: Project, alice_client: Client) -> None:
    with_config = DATA / "adk" / "with_config"
    [outcome] = evalset_import(project=acme, files=[SourceFile(p.name, p.read_bytes())
                                                    for p in sorted(with_config.iterdir())])
    own = outcome.version.default_config["criteria"]
    page = html(alice_client.get(reverse("run_new") + f"?version={outcome.version.pk}"))
    editor = json.loads(page.split("data-config-editor>", 1)[1].split("</textarea>", 1)[0].replace("&quot;", '"'))
    assert set(editor["criteria"]) == set(own) != {"trajectory_match", "response_match"}
    for name, criterion in own.items():
        assert editor["criteria"][name]["threshold"] == criterion["threshold"]


def test_a_demo_run_starts_and_redirects_to_its_live_page(demo_version: Any, alice: Any,
                                                          alice_client: Client) -> None:
    response = start(alice_client, demo_version, demo_faults=["missing_call"], demo_rate="1", model="demo-1",
                     branch="main", tags="smoke, demo", name="demo run")
    assert response.status_code == 302, html(response)
    run = Run.objects.get()
    assert response["Location"] == reverse("run_detail", args=[run.pk])
    assert (run.target_kind, run.target["callable"]) == ("python", "evaluations.demo.agent:respond")
    assert run.target["metadata"]["faults"] == {"missing_call": True, "rate": 1.0}
    assert (run.name, run.model, run.branch, run.tags, run.created_by) == ("demo run", "demo-1", "main",
                                                                           ["smoke", "demo"], alice)
    runs.run_execute_here(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert run.cases_failed > 0  # the missing calls fail the trajectory


def test_a_run_of_uploaded_outputs_reads_the_file(demo_version: Any, alice_client: Client) -> None:
    upload = SimpleUploadedFile("outputs.json", json.dumps(regressed_outputs()).encode(), "application/json")
    response = start(alice_client, demo_version, target_kind="uploaded", outputs_file=upload)
    assert response.status_code == 302, html(response)
    run = runs.run_execute_here(Run.objects.get().pk)
    assert (run.target_kind, run.cases_total, run.cases_failed) == ("uploaded", 8, 2)


def test_a_bad_outputs_file_is_refused_with_located_problems_and_nothing_written(
    demo_version: Any, alice_client: Client
) -> None:
    bad = (DATA / "outputs" / "bad_outputs.json").read_bytes()
    response = start(alice_client, demo_version, target_kind="uploaded",
                     outputs_file=SimpleUploadedFile("bad_outputs.json", bad))
    assert response.status_code == 400
    page = html(response)
    assert "The run was not started." in page
    panel = page.split('class="error-panel"', 1)[1].split("</section>", 1)[0]
    assert "bad_outputs.json" in panel
    assert re.search(r'<td class="mono num">\d+(:\d+)?</td>', panel)  # a line (and column)
    assert Run.objects.count() == 0 and CaseResult.objects.count() == 0


def test_an_outputs_file_for_unknown_cases_is_refused(demo_version: Any, alice_client: Client) -> None:
    outputs = [{"eval_id": "no_such_case", "turns": []}]
    response = start(alice_client, demo_version, target_kind="uploaded",
                     outputs_file=SimpleUploadedFile("o.json", json.dumps(outputs).encode()))
    assert response.status_code == 400
    assert "no_such_case" in html(response)
    assert Run.objects.count() == 0


def test_an_uploaded_run_needs_its_file(demo_version: Any, alice_client: Client) -> None:
    response = start(alice_client, demo_version, target_kind="uploaded")
    assert response.status_code == 400
    assert "Choose the outputs file." in html(response)
    assert Run.objects.count() == 0


def test_an_http_run_keeps_its_headers_but_never_shows_their_values(demo_version: Any,
                                                                    alice_client: Client) -> None:
    response = start(alice_client, demo_version, target_kind="http", http_url="http://127.0.0.1:9/agent",
                     http_headers="Authorization: Bearer s3cret-token\n\nX-Team:  evals ", http_timeout="5")
    assert response.status_code == 302, html(response)
    run = Run.objects.get()
    assert run.target_kind == "http"
    assert run.target["url"] == "http://127.0.0.1:9/agent"
    assert run.target["headers"] == {"Authorization": "Bearer s3cret-token", "X-Team": "evals"}
    assert run.target["timeout_seconds"] == 5.0
    page = html(alice_client.get(reverse("run_detail", args=[run.pk])))
    assert "s3cret-token" not in page
    assert "headers: Authorization, X-Team" in page


@pytest.mark.parametrize(("fields", "message"), [
    ({"http_url": "ftp://example.com/agent"}, "must be an http:// or https:// URL"),
    ({"http_url": "http://127.0.0.1:9/", "http_headers": "Authorization Bearer x"}, "line 1: expected"),
    ({"http_url": "http://127.0.0.1:9/", "http_headers": "ok: 1\nbad header: 2"}, "line 2: expected"),
])
def test_bad_http_targets_are_refused_with_what_is_wrong(demo_version: Any, alice_client: Client,
                                                         fields: dict[str, str], message: str) -> None:
    response = start(alice_client, demo_version, target_kind="http", **fields)
    assert response.status_code == 400
    assert message in html(response)
    assert Run.objects.count() == 0


def test_a_python_callable_run_stores_the_callable(demo_version: Any, alice_client: Client) -> None:
    response = start(alice_client, demo_version, target_kind="python",
                     python_callable="evaluations.demo.agent:respond", iterations=2, warmups=1)
    assert response.status_code == 302, html(response)
    run = Run.objects.get()
    assert (run.target, run.iterations, run.warmups, run.cases_total) == (
        {"callable": "evaluations.demo.agent:respond"}, 2, 1, 16)


def test_a_malformed_callable_is_refused(demo_version: Any, alice_client: Client) -> None:
    response = start(alice_client, demo_version, target_kind="python", python_callable="not a callable")
    assert response.status_code == 400
    assert "callable: String should match pattern" in html(response)
    assert Run.objects.count() == 0


def test_bad_json_in_the_config_is_refused_with_its_line_and_column(demo_version: Any,
                                                                     alice_client: Client) -> None:
    response = start(alice_client, demo_version, config_source="custom",
                     config_json='{"criteria": {\n  "trajectory_match": {"threshold": 0.9,}\n}}')
    assert response.status_code == 400
    assert "Not valid JSON: line 2, column" in html(response)
    assert Run.objects.count() == 0


def test_an_invalid_config_is_refused_with_the_path_of_each_problem(demo_version: Any,
                                                                     alice_client: Client) -> None:
    response = start(alice_client, demo_version, config_source="custom",
                     config_json=json.dumps({"criteria": {"trajectory_match": {"threshold": "high", "colour": 1}}}))
    assert response.status_code == 400
    page = html(response)
    assert "criteria → trajectory_match → threshold: Input should be a valid number" in page
    assert "criteria → trajectory_match → colour: Extra inputs are not permitted" in page
    assert Run.objects.count() == 0


def test_a_config_naming_an_unknown_evaluator_is_refused(demo_version: Any, alice_client: Client) -> None:
    response = start(alice_client, demo_version, config_source="custom",
                     config_json=json.dumps({"criteria": {"mystery": {"threshold": 0.5}}}))
    assert response.status_code == 400
    assert "criterion &#x27;mystery&#x27;" in html(response)
    assert Run.objects.count() == 0 and CaseResult.objects.count() == 0


def test_an_edited_config_is_the_one_the_run_uses(demo_version: Any, alice_client: Client) -> None:
    config = {"criteria": {"trajectory_match": {"threshold": 0.3, "match_type": "ANY_ORDER"}}}
    response = start(alice_client, demo_version, config_source="custom", config_json=json.dumps(config))
    assert response.status_code == 302, html(response)
    used = Run.objects.get().config["criteria"]
    assert list(used) == ["trajectory_match"]
    assert (used["trajectory_match"]["threshold"], used["trajectory_match"]["match_type"]) == (0.3, "ANY_ORDER")


def test_a_saved_config_is_the_one_the_run_uses(demo_version: Any, acme: Project, globex: Project,
                                                alice_client: Client) -> None:
    preset = EvaluationConfig.objects.create(project=acme, name="strict",
                                             config={"criteria": {"exact_match": {"threshold": 1.0}}})
    foreign = EvaluationConfig.objects.create(project=globex, name="theirs", config={"criteria": {}})
    page = html(alice_client.get(reverse("run_new")))
    assert ">strict<" in page and ">theirs<" not in page
    refused = start(alice_client, demo_version, config_source="preset", preset=foreign.pk)
    assert refused.status_code == 400
    assert Run.objects.count() == 0
    response = start(alice_client, demo_version, config_source="preset", preset=preset.pk)
    assert response.status_code == 302, html(response)
    run = Run.objects.get()
    assert run.config_preset == preset and list(run.config["criteria"]) == ["exact_match"]


def test_a_version_of_another_project_cannot_be_chosen(demo_version: Any, globex: Project,
                                                       alice_client: Client) -> None:
    theirs = import_demo(globex)
    response = start(alice_client, theirs)
    assert response.status_code == 400
    assert Run.objects.count() == 0


@pytest.mark.parametrize(("fields", "message"), [
    ({"iterations": 0}, "Iterations: "), ({"warmups": -1}, "Warm-ups: "),
    ({"demo_faults": ["wrong_tool"], "demo_rate": 2}, "Share of cases affected: "),
])
def test_out_of_range_numbers_are_refused(demo_version: Any, alice_client: Client, fields: dict[str, Any],
                                          message: str) -> None:
    response = start(alice_client, demo_version, **fields)
    assert response.status_code == 400
    assert message in html(response)
    assert Run.objects.count() == 0


# --- Home -------------------------------------------------------------------------------------


def test_home_shows_each_eval_sets_latest_run_with_its_pass_rate_change_and_sparkline(
    acme: Project, alice_client: Client
) -> None:
    version = import_demo(acme)
    older = uploaded_run(acme, perfect_outputs(), version=version, name="older")
    Run.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(hours=1))
    uploaded_run(acme, regressed_outputs(), version=version, name="newer", labels={"model": "gpt-x"})
    generated_version(acme, 3, eval_set_id="never_run")
    page = html(alice_client.get(reverse("home")))
    block = page.split('<span class="home-set-name">Demo travel agent</span>', 1)[1]
    row = block.split('data-branch=""', 1)[1].split("</tr>", 1)[0]
    assert ">newer</a>" in row and ">older</a>" not in row
    assert "75% <span class=\"muted\">n=8</span>" in row
    assert "▼ -25 pt" in row
    points = re.search(r'<polyline points="([^"]+)"', row)
    assert points is not None and len(points.group(1).split()) == 2
    assert "gpt-x" in row
    idle = page.split('id="idle-heading"', 1)[1]
    assert "Generated 3" in idle and "Start a run" in idle


def test_home_polls_the_runs_in_progress_until_none_is_left(acme: Project, alice_client: Client) -> None:
    run = uploaded_run(acme, perfect_outputs(), execute=False, name="busy")
    page = html(alice_client.get(reverse("home")))
    block = page.split('id="active-runs"', 1)[1].split("</section>", 1)[0]
    assert 'hx-trigger="every 2s"' in block and ">busy</a>" in block and "0 / 8" in block
    # The latest-runs table shows its status too, watched by the poll until it has finished.
    assert f'hx-get="/?watch={run.pk}"' in block
    assert f'<span id="run-status-{run.pk}"><span class="st st-queued">' in page
    runs.run_execute_here(run.pk)
    fragment = html(alice_client.get(reverse("home"), {"watch": f"{run.pk},x,999999"}, HTTP_HX_REQUEST="true"))
    assert fragment.startswith('<section id="active-runs"')
    assert "hx-trigger" not in fragment and "busy" not in fragment.split("</section>", 1)[0]
    assert f'<span id="run-status-{run.pk}" hx-swap-oob="true"><span class="st st-completed">' in fragment


def test_home_of_a_project_without_eval_sets_points_at_upload(acme: Project, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("home")))
    assert "No eval sets in Acme yet" in page
    assert f'href="{reverse("evalset_upload")}"' in page


def test_home_makes_a_fixed_number_of_queries(acme: Project, alice_client: Client,
                                              django_assert_num_queries: Any) -> None:
    version = import_demo(acme)
    for i in range(25):
        Run.objects.create(project=acme, evalset_version=version, name=f"r{i}", target_kind="uploaded",
                           status=Run.Status.COMPLETED if i % 2 else Run.Status.RUNNING, cases_total=8,
                           cases_done=8)
    alice_client.get(reverse("home"))
    with django_assert_num_queries(10):  # + the branches (one GROUP BY), the pinned baselines' branches, the monitors
        alice_client.get(reverse("home"))


def test_the_header_links_to_runs_and_new_run(acme: Project, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_list")))
    nav = page.split('aria-label="Main"', 1)[1].split("</nav>", 1)[0]
    assert f'<a href="{reverse("run_list")}" aria-current="page">Runs</a>' in nav
    assert f'href="{reverse("run_new")}"' in nav and ">New run</a>" in nav


def test_scores_table_is_unaffected_by_interaction_level_scores(regressed: Run, alice_client: Client) -> None:
    # Per-turn scores exist too; the table shows the conversation-level one only.
    assert Score.objects.filter(run=regressed, applies_to="interaction").exists()
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk]) + "?tag=multi-turn"))
    paris = page.split(">weather_paris_followup</a>", 1)[1].split("</tr>", 1)[0]
    assert paris.count('class="num score') == 2


def test_the_export_menu_downloads_every_shape_of_the_run(regressed: Run, alice_client: Client) -> None:
    page = html(alice_client.get(reverse("run_detail", args=[regressed.pk])))
    menu = page.split('<summary class="button">Export</summary>', 1)[1].split("</details>", 1)[0]
    links = [href.replace("&amp;", "&") for href in re.findall(r'<a href="([^"]+)" download>', menu)]
    assert len(links) == 4
    bodies = {}
    for href in links:
        response = alice_client.get(href)
        assert response.status_code == 200, href
        body = b"".join(response.streaming_content) if response.streaming else response.content
        bodies[href.split("?")[0].rstrip("/").rsplit("/", 1)[-1]] = body.decode()
    csv_lines = bodies["results.csv"].splitlines()
    assert csv_lines[0].startswith("eval_id") and len(csv_lines) == 1 + CaseResult.objects.filter(run=regressed).count()
    assert json.loads(bodies["report"])["eval_set_id"]
    records = json.loads(bodies["metrics.json"])
    assert len(records) == Score.objects.filter(run=regressed).count()
    assert {"name", "value", "applies_to", "conversation_id", "passed"} <= set(records[0])
    assert json.loads(bodies["upsonic"])
