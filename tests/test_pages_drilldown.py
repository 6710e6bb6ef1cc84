"""The case drill-down: the conversation, the side-by-side tool-call diff, scores, the
trajectory, the trace waterfall, and the walk through a comparison's regressions."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Run
from evaluations.web.templatetags.evalsite import plotly_bundle
from tests.compare_helpers import baseline_and_candidate, import_demo, make_run, perfect_outputs
from tests.conftest import DATA

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    return response.content.decode()


def result_of(run: Run, eval_id: str) -> CaseResult:
    return CaseResult.objects.get(run=run, case__eval_id=eval_id)


def drill_url(run: Run, eval_id: str, **params: Any) -> str:
    url = reverse("run_case", args=[run.pk, result_of(run, eval_id).pk])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def calldiff(page: str, testid: str = "calldiff") -> str:
    return page.split(f'data-testid="{testid}"', 1)[1].split("</table>", 1)[0]


@pytest.fixture
def pair(acme: Project) -> tuple[Run, Run]:
    return baseline_and_candidate(acme)


# --- Access -------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(pair: tuple[Run, Run]) -> None:
    _, candidate = pair
    response = Client().get(drill_url(candidate, "weather_tokyo"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_another_projects_run_is_not_found(pair: tuple[Run, Run], bob_client: Client) -> None:
    _, candidate = pair
    response = bob_client.get(drill_url(candidate, "weather_tokyo"))
    assert response.status_code == 404
    assert "Kyoto" not in html(response)


def test_a_result_of_another_run_is_not_found(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    other = result_of(baseline, "weather_tokyo")
    response = alice_client.get(reverse("run_case", args=[candidate.pk, other.pk]))
    assert response.status_code == 404


# --- What the page shows ------------------------------------------------------------------


def test_a_changed_argument_is_shown_on_both_sides_with_the_change_marked(pair: tuple[Run, Run],
                                                                          alice_client: Client) -> None:
    _, candidate = pair
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo")))
    diff = calldiff(page)
    assert 'class="call call-args_differ"' in diff
    assert "arguments differ" in diff
    changed = re.search(r'<tr class="arg arg-changed">(.*?)</tr>', diff, re.S)
    assert changed is not None
    row = changed.group(1)
    left, right = row.split('side-right', 1)
    assert 'city:' in left and "<del>" in left and "Tokyo" in re.sub(r"</?del>", "", left)
    assert "<ins>" in right and "Kyoto" in re.sub(r"</?ins>", "", right)
    assert "<ins>" not in left and "<del>" not in right


def test_a_missing_call_leaves_a_gap_on_the_actual_side(pair: tuple[Run, Run], alice_client: Client) -> None:
    _, candidate = pair
    page = html(alice_client.get(drill_url(candidate, "order_status")))
    diff = calldiff(page)
    missing = diff.split('class="call call-missing"', 1)[1].split("</tbody>", 1)[0]
    assert "get_order" in missing
    assert 'class="side gap"' in missing and "nothing on this side" in missing
    assert "1 missing" in page


def test_an_unexpected_call_leaves_a_gap_on_the_expected_side(acme: Project, alice_client: Client) -> None:
    outputs = perfect_outputs()
    smalltalk = next(o for o in outputs if o["eval_id"] == "smalltalk_no_tools")
    smalltalk["turns"][0]["tool_calls"] = [{"name": "get_weather", "args": {"city": "Nowhere"}}]
    run = make_run(acme, import_demo(acme), outputs)
    page = html(alice_client.get(drill_url(run, "smalltalk_no_tools")))
    unexpected = calldiff(page).split('class="call call-unexpected"', 1)[1].split("</tbody>", 1)[0]
    head = unexpected.split("</tr>", 1)[0]
    assert head.index('class="side gap"') < head.index("get_weather")  # the gap is on the left


def test_nested_arguments_are_opened_only_where_they_differ(acme: Project, alice_client: Client) -> None:
    outputs = perfect_outputs()
    flights = next(o for o in outputs if o["eval_id"] == "flight_search_lis")
    args = flights["turns"][0]["tool_calls"][0]["args"]
    expected_args = json.loads(json.dumps(args))
    args["filters"] = {"cabin": "economy", "stops": {"max": 1, "via": ["MAD"]}}
    from evaluations.evalsets.services import evalset_import
    from evaluations.interop import SourceFile

    doc = json.loads((DATA.parent.parent / "evaluations" / "demo" / "travel_agent.evalset.json").read_text())
    case = next(c for c in doc["eval_cases"] if c["eval_id"] == "flight_search_lis")
    case["conversation"][0]["expected_tool_trajectory"][0]["args"] = {
        **expected_args, "filters": {"cabin": "economy", "stops": {"max": 0, "via": ["MAD"]}}}
    [outcome] = evalset_import(project=acme, files=[SourceFile("travel.evalset.json", json.dumps(doc).encode())])
    run = make_run(acme, outcome.version, outputs)
    diff = calldiff(html(alice_client.get(drill_url(run, "flight_search_lis"))))
    # "filters" and "stops" open (they hold the change); "cabin" and "via" stay one line each.
    assert re.search(r'<tr class="arg arg-nested">.*?filters:', diff, re.S)
    assert re.search(r'<tr class="arg arg-nested">.*?stops:', diff, re.S)
    changed = re.findall(r'<tr class="arg arg-changed">(.*?)</tr>', diff, re.S)
    assert len(changed) == 1 and "max:" in changed[0]
    assert "padding-left: 2.4rem" in changed[0]  # two levels deep
    assert re.search(r'<tr class="arg arg-same">.*?via:.*?\[&quot;MAD&quot;\]', diff, re.S)


def test_the_final_response_is_diffed_word_by_word(acme: Project, alice_client: Client) -> None:
    outputs = perfect_outputs()
    tokyo = next(o for o in outputs if o["eval_id"] == "weather_tokyo")
    expected = tokyo["turns"][0]["final_response"]
    tokyo["turns"][0]["final_response"] = expected.replace("Tokyo", "Osaka") + " Enjoy!"
    run = make_run(acme, import_demo(acme), outputs)
    page = html(alice_client.get(drill_url(run, "weather_tokyo")))
    diff = page.split('data-testid="worddiff">', 1)[1].split("</pre>", 1)[0]
    assert "<del>Tokyo</del>" in diff and "<ins>Osaka</ins>" in diff
    assert "<ins> Enjoy!</ins>" in diff or "<ins>Enjoy!</ins>" in diff


def test_scores_show_their_threshold_and_justification(pair: tuple[Run, Run], alice_client: Client) -> None:
    _, candidate = pair
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo")))
    scores = page.split('class="table scores"', 1)[1].split("</table>", 1)[0]
    assert "trajectory_match" in scores and "response_match" in scores
    assert "\u2265 0.8" in scores  # the threshold
    assert 'class="st st-failed"' in scores
    assert "args_differ" in scores  # the justification, whole (collapsed when long, never cut)


def test_agent_output_is_shown_as_text(acme: Project, alice_client: Client) -> None:
    outputs = perfect_outputs()
    tokyo = next(o for o in outputs if o["eval_id"] == "weather_tokyo")
    tokyo["turns"][0]["final_response"] = "<script>window.__xss=1</script><b>bold</b>"
    tokyo["turns"][0]["tool_calls"][0]["args"]["city"] = "<img src=x onerror=alert(1)>"
    run = make_run(acme, import_demo(acme), outputs)
    page = html(alice_client.get(drill_url(run, "weather_tokyo")))
    assert "<script>window.__xss" not in page
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page
    assert "<img src=x" not in page and "<b>bold</b>" not in page


def test_the_trajectory_steps_are_listed(acme: Project, alice_client: Client) -> None:
    outputs = perfect_outputs()
    tokyo = next(o for o in outputs if o["eval_id"] == "weather_tokyo")
    tokyo["trajectory"] = [{"step_type": "NODE", "name": "planner"}, {"step_type": "TOOL", "name": "get_weather"}]
    run = make_run(acme, import_demo(acme), outputs)
    steps = html(alice_client.get(drill_url(run, "weather_tokyo"))).split('class="table steps"', 1)[1]
    assert "planner" in steps and "NODE" in steps and "TOOL" in steps


def test_a_traced_output_shows_its_span_waterfall(acme: Project, alice_client: Client) -> None:
    trace = json.loads((DATA / "traces" / "genai_cancel_order.json").read_text())
    outputs = [o for o in perfect_outputs() if o["eval_id"] == "order_status"]
    outputs[0]["turns"] = [{"final_response": "Order 1042 shipped on 2026-11-18 and arrives on 2026-11-22."}]
    outputs[0]["trace"] = trace
    run = make_run(acme, import_demo(acme), outputs, eval_ids=["order_status"])
    page = html(alice_client.get(drill_url(run, "order_status")))
    assert 'data-testid="waterfall"' in page
    assert f"/static/{plotly_bundle()}" in page
    chart = page.split('data-testid="waterfall"', 1)[1].split("</script>", 1)[0]
    assert "invoke_agent orders_assistant" in chart
    assert "tool call" in chart and "agent node" in chart  # kinds in the legend
    # The calls the trace supplied are the actual side of the diff: two unexpected cancels.
    assert calldiff(page).count('class="call call-unexpected"') == 2


def test_a_result_without_a_trace_has_no_waterfall_or_plotly(pair: tuple[Run, Run], alice_client: Client) -> None:
    _, candidate = pair
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo")))
    assert 'data-testid="waterfall"' not in page and "vendor/plotly" not in page


# --- With a baseline: the walk ------------------------------------------------------------


def test_the_baselines_calls_are_aligned_with_the_candidates(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo", baseline=baseline.pk)))
    # The baseline made the expected calls: the expected-vs-actual table already is the
    # candidate against the baseline, so no second table repeats it.
    assert 'data-testid="baseline-calldiff"' not in page
    assert 'data-testid="baseline-as-expected"' in page
    against = calldiff(page, "calldiff")
    assert 'class="call call-args_differ"' in against
    assert "regressed" in page.split('class="subtitle"', 1)[1].split("</p>", 1)[0]


def test_previous_and_next_walk_the_regressions_keeping_the_filters(pair: tuple[Run, Run],
                                                                     alice_client: Client) -> None:
    baseline, candidate = pair
    # The regressions in the comparison's order: by status, then eval_id.
    first, second = "order_status", "weather_tokyo"
    page = html(alice_client.get(drill_url(candidate, first, baseline=baseline.pk, status="regressed")))
    assert "regressed 1 of 2" in page
    next_link = re.search(r'<a href="([^"]+)" rel="next" data-walk="next"', page)
    assert next_link is not None
    href = next_link.group(1).replace("&amp;", "&")
    assert href.startswith(reverse("run_case", args=[candidate.pk, result_of(candidate, second).pk]))
    assert f"baseline={baseline.pk}" in href and "status=regressed" in href
    assert 'data-walk="prev"' not in page  # the first has no previous one
    page = html(alice_client.get(href))
    assert "regressed 2 of 2" in page and 'data-walk="next"' not in page
    back = re.search(r'<a href="([^"]+)" data-walk="back"', page)
    assert back is not None and "status=regressed" in back.group(1) and f"candidate={candidate.pk}" in back.group(1)


def test_the_walk_follows_the_filter_it_was_given(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo", baseline=baseline.pk, status="all")))
    assert "case 2 of 8" in page  # the regressions come first: order_status, then weather_tokyo
    prev_link = re.search(r'<a href="([^"]+)" rel="prev" data-walk="prev"', page)
    assert prev_link is not None and "status=all" in prev_link.group(1)


def test_the_walk_is_read_from_the_stored_comparisons_case_rows(pair: tuple[Run, Run],
                                                                 alice_client: Client) -> None:
    from evaluations.models import Comparison, ComparisonCase
    from evaluations.review import comparison

    baseline, candidate = pair
    stored = Comparison.objects.get(baseline=baseline, candidate=candidate)
    assert stored.version == comparison.SUMMARY_VERSION
    summary = comparison.stored_summary(stored)
    assert summary is not None and stored.counts == summary["counts"] == json.loads(stored.head)["counts"]
    rows = list(stored.case_rows.order_by("position").values_list("status", "candidate_result_id", "eval_id"))
    assert rows == [(c["s"], c["cr"], c["id"]) for c in summary["cases"]]
    # Move the case to the front of the stored rows: the drill-down follows them (it does not
    # decode the summary).
    tokyo = stored.case_rows.get(eval_id="weather_tokyo")
    assert tokyo.position == 1
    first = stored.case_rows.get(position=0)
    ComparisonCase.objects.filter(pk=first.pk).update(position=10_000)
    ComparisonCase.objects.filter(pk=tokyo.pk).update(position=0)
    ComparisonCase.objects.filter(pk=first.pk).update(position=1)
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo", baseline=baseline.pk, status="all")))
    assert "case 1 of 8" in page
    # A comparison stored by an older version (without rows) is recomputed and stored again.
    Comparison.objects.filter(pk=stored.pk).update(version=0, head="")
    ComparisonCase.objects.filter(comparison=stored).delete()
    page = html(alice_client.get(drill_url(candidate, "weather_tokyo", baseline=baseline.pk, status="all")))
    assert "case 2 of 8" in page
    stored.refresh_from_db()
    assert stored.version == comparison.SUMMARY_VERSION
    assert stored.case_rows.get(position=1).eval_id == "weather_tokyo"


# --- Size ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [5, 300])
def test_the_drilldown_query_count_does_not_grow_with_the_run(count: int, acme: Project, alice_client: Client,
                                                             django_assert_num_queries: Any) -> None:
    from tests.compare_helpers import generated_outputs, generated_version

    version = generated_version(acme, count)
    baseline = make_run(acme, version, generated_outputs(count))
    candidate = make_run(acme, version, generated_outputs(count, wrong={1, 3}))
    result = CaseResult.objects.filter(run=candidate, status="failed").order_by("pk").first()
    assert result is not None
    url = reverse("run_case", args=[candidate.pk, result.pk]) + f"?baseline={baseline.pk}"
    alice_client.get(url)  # warms the stored comparison and the session's project
    # the same for 5 and 300 cases; 2 of them the triage panel's (the case's triage, the members),
    # 1 the repeats switcher's (the run's other repeats of the case), 5 the walk's (the stored
    # comparison's head; the case's row, its index in the filtered list, the results either side),
    # 3 the grades panel's (the user's role, the criteria's scores, the grades)
    with django_assert_num_queries(20):
        page = html(alice_client.get(url))
    assert "arguments differ" in page
