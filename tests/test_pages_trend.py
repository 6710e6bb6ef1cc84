"""An eval set's trend page: pass rate and p95 latency over its runs, and the case x run
heatmap with where each failing case started failing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from evaluations.models import CaseResult, EvalSetVersion, Project, Run
from tests.compare_helpers import (
    baseline_and_candidate,
    generated_outputs,
    generated_version,
    import_demo,
    make_run,
    perfect_outputs,
    regressed_outputs,
)

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    return response.content.decode()


def trend_url(version: EvalSetVersion, **params: Any) -> str:
    url = reverse("evalset_trend", args=[version.evalset_id])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


@pytest.fixture
def pair(acme: Project) -> tuple[Run, Run]:
    return baseline_and_candidate(acme)


def test_anonymous_visitors_are_sent_to_log_in(pair: tuple[Run, Run]) -> None:
    response = Client().get(trend_url(pair[0].evalset_version))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_another_projects_eval_set_is_not_found(pair: tuple[Run, Run], bob_client: Client) -> None:
    assert bob_client.get(trend_url(pair[0].evalset_version)).status_code == 404


def test_the_eval_set_page_links_to_its_trend(pair: tuple[Run, Run], alice_client: Client) -> None:
    version = pair[0].evalset_version
    page = html(alice_client.get(reverse("evalset_detail", args=[version.evalset_id])))
    assert f'href="{trend_url(version)}"' in page


def test_the_trend_charts_every_completed_run_oldest_first(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    Run.objects.create(project=candidate.project, evalset_version=candidate.evalset_version, target_kind="uploaded")
    page = html(alice_client.get(trend_url(baseline.evalset_version)))
    assert "The last 2 completed runs, oldest first" in page  # the queued run is left out
    for testid in ("pass-rate-trend", "latency-trend", "heatmap"):
        assert f'data-testid="{testid}"' in page
    chart = page.split('data-testid="pass-rate-trend"', 1)[1].split("</details>", 1)[0]
    # drawn by the server (no plotly.js for the first screen), on a date axis: a point per run,
    # a line per model (agent-v1, agent-v2)
    assert "plotly-figure" not in chart and '<svg class="svg-chart"' in chart and ">run date</text>" in chart
    titles = re.findall(r"<title>([^<]*)</title>", chart.split('<div class="svg-wide">', 1)[0])
    assert len(titles) == 2 and titles[0].endswith("pass rate 100.0%") and titles[1].endswith("pass rate 75.0%")
    # and the exact values in its data table, with when each run was made
    assert f"<td>{baseline.created_at.isoformat()}</td><td>1</td>" in chart
    assert f"<td>{candidate.created_at.isoformat()}</td><td>0.75</td>" in chart


def test_the_heatmap_shows_where_each_failing_case_started_failing(pair: tuple[Run, Run], acme: Project,
                                                                    alice_client: Client) -> None:
    baseline, candidate = pair
    still = make_run(acme, candidate.evalset_version, regressed_outputs(), name="still broken")
    page = html(alice_client.get(trend_url(baseline.evalset_version)))
    failing = page.split('class="table trend-failing"', 1)[1].split("</table>", 1)[0]
    assert "weather_tokyo" in failing and "order_status" in failing
    assert f"since #{candidate.pk}<" in failing and f"since #{still.pk}" not in failing
    tokyo = CaseResult.objects.get(run=candidate, case__eval_id="weather_tokyo")
    link = reverse("run_case", args=[candidate.pk, tokyo.pk]) + f"?baseline={baseline.pk}&amp;status=all"
    assert link in failing  # the first failing result, compared with the run before it
    assert re.search(r"weather_tokyo</a></td>.*?<td class=\"num\">2</td>", failing, re.S)  # failing for two runs
    # the row opens the case in the latest run, against the run before it
    now = CaseResult.objects.get(run=still, case__eval_id="weather_tokyo")
    assert (f'<a href="{reverse("run_case", args=[still.pk, now.pk])}?baseline={candidate.pk}&amp;status=all" '
            'class="eid">weather_tokyo</a>') in failing
    # and every heatmap cell carries its drill-down for a click
    heatmap = page.split('data-testid="heatmap"', 1)[1].split("</script>", 1)[0]
    assert "data-click-open" in page.split('data-testid="heatmap"', 1)[0][-80:]
    assert f'\\u002fruns\\u002f{still.pk}\\u002fcases\\u002f{now.pk}\\u002f' in heatmap or \
        f"/runs/{still.pk}/cases/{now.pk}/" in heatmap


def test_failing_only_keeps_the_cases_that_fail_in_the_latest_run(pair: tuple[Run, Run],
                                                                  alice_client: Client) -> None:
    page = html(alice_client.get(trend_url(pair[0].evalset_version, failing=1)))
    assert "Cases 1\u20132 of 2" in page


@pytest.mark.parametrize("count", [5, 120])
def test_cases_are_paginated_and_the_query_count_does_not_grow(count: int, acme: Project, alice_client: Client,
                                                              django_assert_num_queries: Any) -> None:
    version = generated_version(acme, count)
    make_run(acme, version, generated_outputs(count))
    make_run(acme, version, generated_outputs(count, wrong={2}))
    url = trend_url(version)
    alice_client.get(url)  # the session learns the project
    # session, user, projects, eval set, the branches and models (for the filters), runs (with
    # their version's case count), one page of case ids (from the version's cases, not distinct
    # over every run's results), their case rows, their results; and the latest run's causes:
    # which runs of its branch have causes, its causes, and which of those runs have them
    with django_assert_num_queries(12) as captured:
        page = html(alice_client.get(url))
    assert f"Cases 1\u2013{min(count, 50)} of {count}" in page
    if count > 50:
        assert "Page 1 of 3" in page
        assert "case_0049" in page and "case_0050" not in page.split('data-testid="heatmap"', 1)[1]
    # nothing counts or reads every result of the runs: that grew with runs x cases
    queries = [q["sql"] for q in captured.captured_queries]
    assert not [q for q in queries if "DISTINCT" in q and "caseresult" in q.lower()]  # the filters' DISTINCT is over runs
    assert not [q for q in queries if "COUNT(" in q]


def test_an_eval_set_without_runs_says_so(acme: Project, alice_client: Client) -> None:
    version = generated_version(acme, 3)
    page = html(alice_client.get(trend_url(version)))
    assert "No completed runs yet." in page and 'class="plotly-figure"' not in page


def test_the_trend_has_a_line_per_branch_and_model_and_filters_them(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    main = make_run(acme, version, perfect_outputs(), labels={"branch": "main", "model": "m1"})
    canary = make_run(acme, version, regressed_outputs(), labels={"branch": "feat/x", "model": "m2"})
    page = html(alice_client.get(trend_url(version)))
    chart = page.split('data-testid="pass-rate-trend"', 1)[1].split('<div class="svg-wide">', 1)[0]
    assert "<li>" in chart and "main · m1</li>" in chart and "feat/x · m2</li>" in chart  # the legend
    # two series in two colours (one point each), not one zigzag line
    assert len(set(re.findall(r'<circle cx="[^"]+" cy="[^"]+" r="4" fill="([^"]+)"', chart))) == 2
    assert '<option value="feat/x">feat/x</option>' in page
    only = html(alice_client.get(trend_url(version) + "?branch=main"))
    assert "The last 1 completed run, oldest first" in only
    heatmap_runs = only.split('data-testid="heatmap"', 1)[1].split("</thead>", 1)[0]  # its data table's head
    day = f"{timezone.localtime(main.created_at):%m-%d}"
    # One branch and model shown: the column says the run and its day (the filters say the rest).
    assert f'<th scope="col">#{main.pk} · {day}</th>' in heatmap_runs and f"#{canary.pk} " not in heatmap_runs
    both = html(alice_client.get(trend_url(version))).split('data-testid="heatmap"', 1)[1].split("</thead>", 1)[0]
    assert f'<th scope="col">#{main.pk} · {day} · main · m1</th>' in both
    assert f'<th scope="col">#{canary.pk} · {day} · feat/x · m2</th>' in both
    assert '<option value="main" selected>main</option>' in only
