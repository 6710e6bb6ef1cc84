"""The compare page: a baseline against a candidate, through the test client as a user sees it.

The runs are real (demo eval set, uploaded outputs, executed in process): the baseline does
everything right; the candidate has two regressions (weather_tokyo asks for Kyoto,
order_status never calls get_order).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from evaluations.models import Comparison, ComparisonSummary, Membership, Project, Run
from evaluations.review import comparison
from evaluations.runs import services as runs
from evaluations.web.templatetags.evalsite import plotly_bundle
from tests.compare_helpers import (
    baseline_and_candidate,
    generated_outputs,
    generated_version,
    import_demo,
    make_run,
    perfect_outputs,
)

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    return response.content.decode()


def compare_url(candidate: Run, baseline: Run | None = None, **params: Any) -> str:
    query = {"candidate": candidate.pk, **params}
    if baseline is not None:
        query["baseline"] = baseline.pk
    return reverse("compare") + "?" + "&".join(f"{k}={v}" for k, v in query.items())


def table_ids(page: str) -> list[str]:
    """The eval ids in the cases table, in order."""
    table = page.split('data-testid="cases-table"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td class="mono"><a href="[^"]*"[^>]*>([^<]+)</a>', table)


@pytest.fixture
def pair(acme: Project) -> tuple[Run, Run]:
    return baseline_and_candidate(acme)


# --- Access -------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(pair: tuple[Run, Run]) -> None:
    baseline, candidate = pair
    response = Client().get(compare_url(candidate, baseline))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_another_projects_runs_are_not_found(pair: tuple[Run, Run], bob_client: Client) -> None:
    baseline, candidate = pair
    response = bob_client.get(compare_url(candidate, baseline))
    assert response.status_code == 404
    assert "weather_tokyo" not in html(response)


def test_a_baseline_from_another_project_is_not_found(pair: tuple[Run, Run], globex: Project, alice: Any,
                                                      alice_client: Client) -> None:
    from evaluations.models import Membership

    Membership.objects.create(project=globex, user=alice)  # alice sees both projects
    other = make_run(globex, import_demo(globex), perfect_outputs())
    _, candidate = pair
    assert alice_client.get(compare_url(candidate, other)).status_code == 404


def test_run_ids_out_of_range_are_not_found(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    huge = "99999999999999999999"  # more than SQLite can bind: was a 500 there
    for query, status in ((f"baseline={huge}&candidate={candidate.pk}", 404),
                          (f"baseline={baseline.pk}&candidate={huge}", 400),
                          (f"baseline=-5&candidate={candidate.pk}", 404)):
        for _ in range(3):  # and again once a valid page of the pair may be cached
            assert alice_client.get(f"{reverse('compare')}?{query}").status_code == status, query
        alice_client.get(compare_url(candidate, baseline))


def test_a_candidate_is_required(alice_client: Client) -> None:
    response = alice_client.get(reverse("compare"))
    assert response.status_code == 400
    assert "Choose a candidate run" in html(response)


# --- The answer ---------------------------------------------------------------------------


def test_the_page_answers_first_with_regressions_and_the_score_change(pair: tuple[Run, Run],
                                                                      alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate, baseline)))
    headline = page.split('data-testid="headline">', 1)[1].split("</p>", 1)[0]
    assert headline.startswith("2 regressions, 0 improvements")
    # Two of eight cases lost their whole trajectory score (EXACT matching): -2/8, a real minus sign.
    assert "trajectory_match \u22120.25 [" in headline
    assert "p95 latency" in headline
    assert "regressed" in page and "unchanged pass" in page
    assert "McNemar" in page


def test_the_criterion_table_shows_means_deltas_flips_and_their_wording(pair: tuple[Run, Run],
                                                                         alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate, baseline)))
    table = page.split('class="table cmp-criteria"', 1)[1].split("</table>", 1)[0]
    trajectory = table.split("trajectory_match</a>", 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">1.000</td>' in trajectory  # baseline mean
    assert '<td class="num">0.750</td>' in trajectory  # candidate mean
    assert "\u22120.250" in trajectory
    assert "2 / 0" in trajectory  # two cases went pass -> fail, none the other way
    assert "0.500" in trajectory  # McNemar p for b=2, c=0
    assert "not distinguishable from chance across 8 cases" in trajectory


def test_the_cases_table_shows_regressions_only_by_default(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert sorted(table_ids(page)) == ["order_status", "weather_tokyo"]
    assert "<strong>regressed</strong> cases only" in page
    everything = html(alice_client.get(compare_url(candidate, baseline, status="all")))
    assert len(table_ids(everything)) == 8
    assert "smalltalk_no_tools" in table_ids(everything)


def test_each_row_links_to_the_drill_down_with_the_filters(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate, baseline, q="tokyo")))
    table = page.split('data-testid="cases-table"', 1)[1].split("</table>", 1)[0]  # not the causes' examples
    links = re.findall(r'<td class="mono"><a href="([^"]+)"[^>]*>weather_tokyo</a>', table)
    assert len(links) == 1
    assert links[0].startswith(f"/runs/{candidate.pk}/cases/")
    assert f"baseline={baseline.pk}" in links[0] and "status=regressed" in links[0] and "q=tokyo" in links[0]
    assert table_ids(page) == ["weather_tokyo"]


def test_an_htmx_request_gets_only_the_cases_table(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    response = alice_client.get(compare_url(candidate, baseline, status="all"), HTTP_HX_REQUEST="true")
    page = html(response)
    assert page.startswith('<div id="compare-cases">')
    assert "<html" not in page and len(table_ids(page)) == 8


def test_the_charts_are_drawn_with_local_plotly(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert f"/static/{plotly_bundle()}" in page and "cdn.plot.ly" not in page
    for testid in ("scatter", "latency-chart", "deltas", "tags"):
        assert f'data-testid="{testid}"' in page, testid
    assert page.count('class="plotly-figure"') == 4  # JSON data blocks, drawn by static/js/figures.js
    # The scatter's points carry their drill-down URLs for the click handler (plotly writes
    # "/" as \u002f inside its script).
    script = page.split('data-testid="scatter"', 1)[1].split("</script>", 1)[0]
    assert f"\\u002fruns\\u002f{candidate.pk}\\u002fcases\\u002f" in script
    # The six unchanged cases all sit at (1, 1): one point that says so.
    assert "and 5 more here" in script and "unchanged pass (6)" in script


# --- Default baseline ---------------------------------------------------------------------


def test_the_default_baseline_is_the_latest_completed_run_before_the_candidate(pair: tuple[Run, Run],
                                                                               alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate)))
    assert f"#{baseline.pk} baseline" in page.split('class="cmp-runs"', 1)[1].split("</p>", 1)[0]
    assert "2 regressions" in page


def test_the_pinned_baseline_wins_unless_it_is_the_candidate(pair: tuple[Run, Run], acme: Project,
                                                             alice_client: Client) -> None:
    baseline, candidate = pair
    later = make_run(acme, candidate.evalset_version, perfect_outputs(), name="later")
    evalset = candidate.evalset_version.evalset
    evalset.baseline_run = candidate
    evalset.save()
    # Pinned: the candidate, compared with the later run.
    page = html(alice_client.get(compare_url(later)))
    assert f"#{candidate.pk} candidate" in page.split('class="cmp-runs"', 1)[1].split("</p>", 1)[0]
    assert "0 regressions, 2 improvements" in page
    # The pinned run itself as the candidate: the run before it.
    page = html(alice_client.get(compare_url(candidate)))
    assert f"#{baseline.pk} baseline" in page.split('class="cmp-runs"', 1)[1].split("</p>", 1)[0]


def test_without_any_earlier_run_the_page_asks_for_a_baseline(acme: Project, alice_client: Client) -> None:
    only = make_run(acme, import_demo(acme), perfect_outputs())
    response = alice_client.get(compare_url(only))
    assert response.status_code == 200
    assert "There is no other finished run" in html(response)


def test_comparing_a_run_with_itself_is_refused(pair: tuple[Run, Run], alice_client: Client) -> None:
    _, candidate = pair
    response = alice_client.get(compare_url(candidate, candidate))
    assert response.status_code == 400
    assert "The baseline is the candidate itself" in html(response)


# --- Cache --------------------------------------------------------------------------------


def test_the_comparison_is_stored_and_reused(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    alice_client.get(compare_url(candidate, baseline))
    stored = Comparison.objects.get(baseline=baseline, candidate=candidate)
    summary = comparison.stored_summary(stored)
    assert summary is not None and summary["counts"]["regressed"] == 2
    # Make the stored numbers recognisably different: a reused comparison shows them. The
    # page reads the stored head (the summary less its cases) and the case rows.
    head = json.loads(stored.head)
    assert head["counts"] == summary["counts"]
    assert stored.case_rows.count() == len(summary["cases"])
    head["counts"]["regressed"] = 99
    stored.head = json.dumps(head)
    stored.save()
    # The page body rendered from it is cached too: the same HTML until the cache is emptied.
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert "2 regressions" in page
    cache.clear()
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert "99 regressions" in page
    assert Comparison.objects.count() == 1


def test_a_triage_change_shows_on_the_cached_page(pair: tuple[Run, Run], alice: Any, alice_client: Client) -> None:
    from evaluations.review import triage

    baseline, candidate = pair
    url = compare_url(candidate, baseline, status="regressed")
    page = html(alice_client.get(url))
    assert "untriaged" in page and "Expected change" not in page
    triage.triage_update(project=candidate.project, evalset=candidate.evalset_version.evalset, eval_id="weather_tokyo",
                         baseline=baseline, candidate=candidate, status="expected", actor=alice)
    page = html(alice_client.get(url))
    assert "Expected change" in page


def test_the_cached_body_is_kept_per_filter_and_for_htmx_apart(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    regressed = html(alice_client.get(compare_url(candidate, baseline, status="regressed")))
    everything = html(alice_client.get(compare_url(candidate, baseline, status="all")))
    assert len(table_ids(regressed)) == 2 and len(table_ids(everything)) == 8
    partial = html(alice_client.get(compare_url(candidate, baseline, status="all"), HTTP_HX_REQUEST="true"))
    assert "<html" not in partial and len(table_ids(partial)) == 8
    again = html(alice_client.get(compare_url(candidate, baseline, status="all")))
    assert again.count("<html") == 1 and len(table_ids(again)) == 8


def test_a_run_that_finishes_again_invalidates_its_comparisons(pair: tuple[Run, Run],
                                                               alice_client: Client) -> None:
    baseline, candidate = pair
    alice_client.get(compare_url(candidate, baseline))
    stored = Comparison.objects.get()
    head = json.loads(stored.head)
    head["counts"]["regressed"] = 99
    stored.head = json.dumps(head)
    stored.save()
    first_computed = stored.computed_at
    assert runs.run_retry_failed(run=candidate) == 2
    runs.run_execute_here(candidate.pk)
    candidate.refresh_from_db()
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert "2 regressions" in page and "99 regressions" not in page
    stored.refresh_from_db()
    assert stored.candidate_finished_at == candidate.finished_at
    assert stored.computed_at > first_computed


def test_a_running_candidate_is_compared_afresh_and_not_stored(pair: tuple[Run, Run],
                                                               alice_client: Client) -> None:
    baseline, candidate = pair
    Run.objects.filter(pk=candidate.pk).update(status=Run.Status.RUNNING, finished_at=None)
    Comparison.objects.all().delete()  # the one stored when the candidate first finished
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert "A run is still going" in page
    assert "2 regressions" in page
    assert not Comparison.objects.exists()


# --- The whole page from the cache ---------------------------------------------------------


def cached_page(client: Client, url: str, assert_queries: Any) -> str:
    """The page once it is served from the cache: the second view stores it, the third reads
    it with three statements (session, user, the page's fingerprint)."""
    client.get(url)
    client.get(url)
    with assert_queries(3):
        return html(client.get(url))


def test_a_renamed_run_shows_on_the_cached_page(pair: tuple[Run, Run], alice_client: Client,
                                                django_assert_num_queries: Any) -> None:
    baseline, candidate = pair
    url = compare_url(candidate, baseline)
    assert "candidate" in cached_page(alice_client, url, django_assert_num_queries)
    Run.objects.filter(pk=candidate.pk).update(name="nightly <b>renamed</b>")
    page = html(alice_client.get(url))
    assert "nightly &lt;b&gt;renamed&lt;/b&gt;" in page and "<b>renamed" not in page


def test_a_newly_finished_run_joins_the_baseline_choices_of_the_cached_page(
        pair: tuple[Run, Run], alice_client: Client, django_assert_num_queries: Any) -> None:
    baseline, candidate = pair
    url = compare_url(candidate, baseline)
    assert "third run" not in cached_page(alice_client, url, django_assert_num_queries)
    make_run(candidate.project, candidate.evalset_version, perfect_outputs(), name="third run")
    assert "third run" in html(alice_client.get(url))


def test_the_cached_page_is_not_served_to_someone_who_lost_access(pair: tuple[Run, Run], alice: Any,
                                                                  alice_client: Client,
                                                                  django_assert_num_queries: Any) -> None:
    baseline, candidate = pair
    url = compare_url(candidate, baseline)
    cached_page(alice_client, url, django_assert_num_queries)
    Membership.objects.filter(user=alice).delete()
    assert alice_client.get(url).status_code == 404


def test_each_user_gets_their_own_header_from_the_cache(pair: tuple[Run, Run], alice_client: Client,
                                                        django_assert_num_queries: Any) -> None:
    baseline, candidate = pair
    url = compare_url(candidate, baseline)
    assert "alice" in cached_page(alice_client, url, django_assert_num_queries)
    carol = get_user_model().objects.create_user("carol", "carol@example.com", "carol-pass-123")
    Membership.objects.create(project=candidate.project, user=carol, role=Membership.Role.VIEWER)
    other = Client()
    other.force_login(carol)
    page = html(other.get(url))
    assert '<span class="muted">carol</span>' in page and '<span class="muted">alice</span>' not in page
    # and a project renamed shows in the header's switcher at once
    Project.objects.filter(pk=candidate.project_id).update(name="Acme Labs")
    assert "Acme Labs" in html(alice_client.get(url))


def test_a_message_waiting_is_shown_rather_than_the_cached_page(pair: tuple[Run, Run], alice_client: Client,
                                                                django_assert_num_queries: Any) -> None:
    baseline, candidate = pair
    url = compare_url(candidate, baseline)
    cached_page(alice_client, url, django_assert_num_queries)
    Membership.objects.filter(project=candidate.project).update(role=Membership.Role.ADMIN)
    # pinning leaves a message for the next page (it redirects to the run, not followed here)
    assert alice_client.post(reverse("run_pin_baseline", args=[baseline.pk])).status_code == 302
    assert "Pinned as the eval set" in html(alice_client.get(url))
    assert "Pinned as the eval set" not in html(alice_client.get(url))  # shown once


def test_the_cached_pages_forms_carry_the_visitors_csrf_token(pair: tuple[Run, Run], alice: Any,
                                                               django_assert_num_queries: Any) -> None:
    from django.middleware.csrf import _check_token_format, _unmask_cipher_token

    baseline, candidate = pair
    url = compare_url(candidate, baseline)
    first = Client()
    first.force_login(alice)
    cached_page(first, url, django_assert_num_queries)
    second = Client()  # another browser of the same user: another CSRF secret
    second.force_login(alice)
    for client in (first, second):
        page = html(client.get(url))
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        _check_token_format(token)
        assert _unmask_cipher_token(token) == client.cookies["csrftoken"].value


# --- Size ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [5, 300])
def test_the_query_count_does_not_grow_with_the_run(count: int, acme: Project, alice_client: Client,
                                                   django_assert_num_queries: Any) -> None:
    version = generated_version(acme, count)
    baseline = make_run(acme, version, generated_outputs(count))
    candidate = make_run(acme, version, generated_outputs(count, wrong={1, 3}, slow=0.2))
    url = compare_url(candidate, baseline, status="all")
    alice_client.get(url)  # computes and stores the comparison; the session learns the project
    # the page's fingerprint (one statement), then, the page not being cached yet: session,
    # user, both runs, projects, baseline choices, and the stored comparison's stamp with the
    # pair's triage state (the page body is cached under it), and whether the named baseline is
    # the default one (its words then are the default's: "previous on main", not "chosen")
    with django_assert_num_queries(8):
        built = html(alice_client.get(url))
    # now the whole page is cached under its fingerprint: session, user, fingerprint
    with django_assert_num_queries(3):
        page = html(alice_client.get(url))
    assert page == built
    assert "2 regressions" in page
    assert len(table_ids(page)) == min(count, 50)
    if count > 50:
        assert f"Page 1 of {-(-count // 50)}" in page


def test_a_finished_run_is_compared_with_its_default_baseline_when_it_completes(pair: tuple[Run, Run]) -> None:
    baseline, candidate = pair
    stored = Comparison.objects.get(baseline=baseline, candidate=candidate)
    assert stored.candidate_finished_at == candidate.finished_at
    assert stored.counts["regressed"] == 2 == comparison.stored_summary(stored)["counts"]["regressed"]


# --- CSV download -------------------------------------------------------------------------


def csv_table(response: Any) -> list[list[str]]:
    import csv
    import io

    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_comparison_downloads_as_csv_with_scores_and_deltas(pair: tuple[Run, Run],
                                                                 alice_client: Client) -> None:
    baseline, candidate = pair
    response = alice_client.get(reverse("compare_csv") + f"?baseline={baseline.pk}&candidate={candidate.pk}")
    assert response.status_code == 200
    assert f"compare-{baseline.pk}-{candidate.pk}.csv" in response["Content-Disposition"]
    header, *rows = csv_table(response)
    assert header[:4] == ["eval_id", "status", "baseline_outcome", "candidate_outcome"]
    summary = comparison.stored_summary(Comparison.objects.get(baseline=baseline, candidate=candidate))
    assert summary is not None
    assert [row[0] for row in rows] == [case["id"] for case in summary["cases"]]
    by_id = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    assert by_id["weather_tokyo"]["status"] == "regressed"
    assert by_id["weather_tokyo"]["baseline_outcome"] == "pass" and by_id["weather_tokyo"]["candidate_outcome"] == "fail"
    # per criterion: baseline, candidate and delta columns, the delta their difference
    criterion = summary["criteria"][0]["name"]
    for row in by_id.values():
        before, after, delta = (row[f"{criterion}:{side}"] for side in ("baseline", "candidate", "delta"))
        if before and after:
            assert float(delta) == pytest.approx(float(after) - float(before), abs=1e-3)
    # the page's filter applies: only the regressions
    response = alice_client.get(reverse("compare_csv")
                                + f"?baseline={baseline.pk}&candidate={candidate.pk}&status=regressed")
    assert sorted(row[0] for row in csv_table(response)[1:]) == ["order_status", "weather_tokyo"]


def test_the_compare_page_links_its_csv(pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    page = html(alice_client.get(compare_url(candidate, baseline)))
    assert f'{reverse("compare_csv")}?baseline={baseline.pk}&amp;candidate={candidate.pk}' in page


def test_the_comparison_csv_keeps_formulas_as_text(acme: Project, alice_client: Client) -> None:
    version = generated_version(acme, 3, eval_set_id="formulas")
    baseline = make_run(acme, version, generated_outputs(3))
    candidate = make_run(acme, version, generated_outputs(3, wrong={1}))
    stored = Comparison.objects.get(baseline=baseline, candidate=candidate)
    summary = comparison.stored_summary(stored)
    assert summary is not None
    summary["cases"][0]["id"] = '=HYPERLINK("http://evil.example","x")'
    ComparisonSummary.objects.filter(comparison=stored).update(summary=summary)
    rows = csv_table(alice_client.get(reverse("compare_csv") + f"?baseline={baseline.pk}&candidate={candidate.pk}"))
    assert rows[1][0] == "'=HYPERLINK(\"http://evil.example\",\"x\")"


def test_the_comparison_csv_of_another_projects_runs_is_not_found(pair: tuple[Run, Run],
                                                                   bob_client: Client) -> None:
    baseline, candidate = pair
    response = bob_client.get(reverse("compare_csv") + f"?baseline={baseline.pk}&candidate={candidate.pk}")
    assert response.status_code == 404
