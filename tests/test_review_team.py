"""Reviewing as a team, day after day (issue 29): home and the runs list per branch with the
baseline named in the cell, a queue that hands work out (filters, select all, assign, comment
and set a status at once, viewers never assignable), a case's history, a filtered activity
feed, a feature branch that shows main's decisions, the review report and the CSVs."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.models import AuditEvent, Project, Run, Triage
from evaluations.review import baselines
from evaluations.review.triage import QueueKey, comment_add, triage_bulk, triage_update
from evaluations.runs.listing import default_branch
from tests.team_helpers import FEATURE_OWN, FLAKY, REGRESSED, day_run, eval_id, team_version, user_in

pytestmark = pytest.mark.django_db


def html(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rows_of(response: Any) -> list[list[str]]:
    body = b"".join(response.streaming_content).decode() if response.streaming else response.content.decode()
    return list(csv.reader(io.StringIO(body)))


@pytest.fixture
def team(acme: Project, alice: Any) -> dict[str, Any]:
    bob = user_in(acme, "bob2", "member")
    vera = user_in(acme, "vera", "viewer")
    return {"alice": alice, "bob": bob, "vera": vera, "version": team_version(acme)}


def queue_count(client: Client, query: str) -> str:
    page = html(client.get(reverse("review_queue") + "?" + query))
    return page.split('data-testid="queue-summary">', 1)[1].split("</p>", 1)[0]


# --- Baselines in words ---------------------------------------------------------------------


def test_the_baseline_label_names_the_run_its_branch_and_why() -> None:
    assert baselines.baseline_label(baseline_pk=12, baseline_branch="main", reason=baselines.PINNED) == \
        "vs #12 · main · pinned"
    assert baselines.baseline_label(baseline_pk=12, baseline_branch="main", reason=baselines.LIKE_FOR_LIKE) == \
        "vs #12 · previous on main"
    assert baselines.baseline_label(baseline_pk=3, baseline_branch="", reason=baselines.FALLBACK) == \
        "vs #3 · latest on no branch"
    assert baselines.unlike_warning(["model a → b"]) == "⚠ not like for like: model a → b"
    assert baselines.unlike_warning([]) == ""


def test_the_default_branch_is_the_pinned_ones_else_main_else_the_most_used() -> None:
    assert default_branch(pinned_branch="release", run_counts={"main": 9, "release": 1}) == "release"
    assert default_branch(pinned_branch=None, run_counts={"main": 1, "feat": 9}) == "main"
    assert default_branch(pinned_branch=None, run_counts={"dev": 2, "feat": 9}) == "feat"
    assert default_branch(pinned_branch="gone", run_counts={"dev": 2}) == "dev"


# --- Home and the runs list per branch --------------------------------------------------------


def test_home_keeps_main_first_when_a_feature_branch_runs_and_names_each_baseline(
        acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    day3 = day_run(acme, version, wrong=REGRESSED, flaky=FLAKY)
    day4 = day_run(acme, version, wrong=REGRESSED | FEATURE_OWN, branch="feat/x")
    page = html(client_for(team["alice"]).get(reverse("home")))
    block = page.split('data-testid="home-set"', 1)[1]
    assert block.index('data-branch="main"') < block.index('data-branch="feat/x"')  # main first, not replaced
    main = block.split('data-branch="main"', 1)[1].split("</tr>", 1)[0]
    assert f"vs #{day2.pk} · previous on main" in main and "5 regressions" not in main  # day 3 vs day 2
    assert 'data-testid="home-flaky"><a' in main and "≈ 3" in main  # three newly flaky cases
    feature = block.split('data-branch="feat/x"', 1)[1].split("</tr>", 1)[0]
    assert f"vs #{day3.pk} · latest on main" in feature and "2 regressions" in feature
    assert "feat/x compared with main" in feature and "not like for like" not in feature  # calm, once
    summary = block.split("<summary>", 1)[1].split("</summary>", 1)[0]  # the collapsible's head: main
    assert "main" in summary and f"vs #{day2.pk}" in summary and "1 other branch" in summary
    assert day1.pk and day4.pk


def test_a_different_model_is_spelled_out_as_not_like_for_like_in_the_cell(acme: Project, team: dict[str, Any]
                                                                             ) -> None:
    version = team["version"]
    day_run(acme, version)
    other = day_run(acme, version, wrong={1})
    Run.objects.filter(pk=other.pk).update(model="agent-v2")
    evalset = version.evalset
    evalset.baseline_run = Run.objects.filter(branch="main").order_by("pk").first()
    evalset.save()
    page = html(client_for(team["alice"]).get(reverse("home")))
    cell = page.split('data-testid="home-change">', 1)[1].split("</td>", 1)[0]
    assert "· main · pinned" in cell
    assert "⚠ not like for like: model agent-v1 → agent-v2" in cell


def test_the_runs_list_groups_a_page_by_eval_set_and_branch_default_first(acme: Project, team: dict[str, Any]
                                                                         ) -> None:
    version = team["version"]
    day_run(acme, version, name="m1")
    day_run(acme, version, branch="feat/x", name="f1")
    day_run(acme, version, name="m2")
    day_run(acme, version, branch="feat/x", name="f2")
    page = html(client_for(team["alice"]).get(reverse("run_list")))
    groups = page.split('data-testid="run-group"')[1:]
    assert len(groups) == 2
    assert "main</span> <span class=\"muted\">default</span>" in groups[0] and ">m2<" in groups[0]
    assert groups[0].index(">m2<") < groups[0].index(">m1<")
    assert "feat/x" in groups[1] and ">f2<" in groups[1] and ">f1<" in groups[1]


# --- The queue --------------------------------------------------------------------------------


def test_a_lead_assigns_comments_and_confirms_every_regression_of_main_in_one_action(
        acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day_run(acme, version)
    day_run(acme, version, wrong=REGRESSED)
    day_run(acme, version, branch="feat/y", wrong={30})  # another branch's regression stays untouched
    alice = client_for(team["alice"])
    assert queue_count(alice, "tab=untriaged").startswith("6 cases")
    assert queue_count(alice, "tab=untriaged&branch=main").startswith("5 cases")
    response = alice.post(reverse("triage_bulk"), {
        "tab": "untriaged", "scope": "all", "branch": "main", "status": "confirmed",
        "assignee": team["bob"].pk, "comment": "Looks like the **lookup** change; bob takes these."})
    assert response.status_code == 302 and "branch=main" in response["Location"]
    decided = Triage.objects.filter(branch="main")
    assert sorted(t.eval_id for t in decided) == sorted(eval_id(i) for i in REGRESSED)
    assert {(t.status, t.assignee_id) for t in decided} == {("confirmed", team["bob"].pk)}
    assert all(t.comments.count() == 1 for t in decided)
    assert not Triage.objects.filter(branch="feat/y").exists()
    assert queue_count(alice, "tab=untriaged").startswith("1 case")
    bob = client_for(team["bob"])
    assert queue_count(bob, "tab=assigned").startswith("5 cases open and assigned to you")
    assert html(bob.get(reverse("review_count"))).count(">5<") == 1


def test_assigned_to_me_shows_open_cases_by_default_and_all_on_request(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    keys = [QueueKey(day2.pk, day1.pk, eval_id(i)) for i in REGRESSED]
    triage_bulk(project=acme, keys=keys, status="confirmed", assignee=team["bob"], actor=team["alice"])
    day_run(acme, version)  # day 5: fixed
    bob = client_for(team["bob"])
    assert Triage.objects.filter(status="fixed").count() == 5
    assert "Nothing open is assigned to you" in queue_count(bob, "tab=assigned")
    assert queue_count(bob, "tab=assigned&state=all").startswith("5 cases assigned to you")
    assert html(bob.get(reverse("review_count"))).strip() == ""  # no count in the navigation


def test_filters_by_eval_set_criterion_and_assignee(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    triage_update(project=acme, evalset=version.evalset, eval_id=eval_id(1), baseline=day1, candidate=day2,
                  assignee=team["bob"], actor=team["alice"])
    alice = client_for(team["alice"])
    assert queue_count(alice, f"tab=untriaged&evalset={version.evalset_id}").startswith("5 cases")
    assert queue_count(alice, "tab=untriaged&evalset=999999").startswith("No untriaged regressions")
    assert queue_count(alice, "tab=untriaged&assignee=bob2").startswith("1 case")
    assert queue_count(alice, "tab=untriaged&assignee=none").startswith("4 cases")
    page = html(alice.get(reverse("review_queue") + "?tab=untriaged"))
    criteria = page.split('name="criterion"', 1)[1].split("</select>", 1)[0]
    assert '"trajectory_match"' in criteria and '"response_match"' in criteria
    # the wrong lookup id drops the trajectory score; the answer's text is still right
    assert queue_count(alice, "tab=untriaged&criterion=trajectory_match").startswith("5 cases")
    assert queue_count(alice, "tab=untriaged&criterion=response_match").startswith("No untriaged")


def test_viewers_are_never_offered_or_accepted_as_assignees(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    alice = client_for(team["alice"])
    page = html(alice.get(reverse("review_queue") + "?tab=untriaged"))
    assignees = page.split('data-testid="bulk-assignee">', 1)[1].split("</select>", 1)[0]
    assert "bob2" in assignees and "vera" not in assignees
    response = alice.post(reverse("triage_bulk"), {"tab": "untriaged", "scope": "all",
                                                   "assignee": team["vera"].pk}, follow=True)
    assert "Vera is a viewer of Acme and cannot act on a case" in html(response)
    assert not Triage.objects.exists()  # all or nothing
    api = alice.post(reverse("api_triage"), {"candidate": day2.pk, "baseline": day1.pk, "eval_id": eval_id(1),
                                             "assignee": "vera"}, content_type="application/json")
    assert api.status_code == 400 and "vera is a viewer" in str(api.json())
    drill = alice.post(reverse("triage_update"), {"candidate": day2.pk, "baseline": day1.pk, "assignee":
                                                  team["vera"].pk, "result": day2.results.filter(
                                                      case__eval_id=eval_id(1)).first().pk},
                       HTTP_HX_REQUEST="true")
    assert "cannot act on a case" in drill.content.decode()
    assert not Triage.objects.exists()


def test_a_viewer_sees_the_queue_but_no_bulk_form_and_cannot_post_it(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day_run(acme, version)
    day_run(acme, version, wrong=REGRESSED)
    vera = client_for(team["vera"])
    page = html(vera.get(reverse("review_queue") + "?tab=untriaged"))
    assert "5 cases" in page and 'data-testid="bulk-form"' not in page
    assert vera.post(reverse("triage_bulk"), {"tab": "untriaged", "scope": "all", "status": "flaky"}
                     ).status_code == 403
    assert not Triage.objects.exists()


def test_an_empty_bulk_action_is_refused_with_what_to_do(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day_run(acme, version)
    day_run(acme, version, wrong=REGRESSED)
    alice = client_for(team["alice"])
    page = html(alice.post(reverse("triage_bulk"), {"tab": "untriaged", "scope": "all"}, follow=True))
    assert "Choose a status, an assignee or a comment to apply." in page
    page = html(alice.post(reverse("triage_bulk"), {"tab": "untriaged", "status": "flaky"}, follow=True))
    assert "Select the cases first." in page
    assert not Triage.objects.exists()


def test_the_queue_costs_the_same_queries_with_more_cases(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    alice = client_for(team["alice"])
    counts = []
    base = day_run(acme, version)
    for wrong in ({1, 2}, set(range(1, 30))):
        run = day_run(acme, version, wrong=wrong)
        keys = [QueueKey(run.pk, base.pk, eval_id(i)) for i in sorted(wrong)]
        triage_bulk(project=acme, keys=keys, assignee=team["alice"], comment="mine", actor=team["alice"])
        alice.get(reverse("review_queue"))
        for query in ("tab=assigned&state=all", "tab=untriaged&assignee=none"):
            with CaptureQueriesContext(connection) as queries:
                html(alice.get(reverse("review_queue") + "?" + query))
            counts.append(len(queries))
    assert counts[:2] == counts[2:], counts


# --- History and activity ---------------------------------------------------------------------


def test_a_cases_history_says_every_change_and_comment_with_who_and_when(acme: Project, team: dict[str, Any]
                                                                          ) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    kw = {"project": acme, "evalset": version.evalset, "eval_id": eval_id(1), "baseline": day1, "candidate": day2}
    t = triage_update(**kw, status="confirmed", actor=team["alice"])
    triage_update(**kw, assignee=team["bob"], actor=team["alice"])
    comment_add(triage=t, body="<script>x</script> on it", author=team["bob"])
    day_run(acme, version)  # passes again: evalsite closes it
    result = day2.results.filter(case__eval_id=eval_id(1)).first()
    page = html(client_for(team["vera"]).get(reverse("run_case", args=[day2.pk, result.pk])
                                             + f"?baseline={day1.pk}"))
    history = page.split('data-testid="triage-history">', 1)[1].split("</ol>", 1)[0]
    lines = history.split("<li>")[1:]
    assert len(lines) == 4
    assert "<strong>alice</strong> status open → confirmed" in lines[0]
    assert "<strong>alice</strong> assignee none → bob2" in lines[1]
    assert "<strong>bob2</strong> commented" in lines[2]
    assert "<strong>evalsite</strong> status confirmed → fixed" in lines[3]
    api = client_for(team["vera"]).get(reverse("api_triage_history", args=[t.pk])).json()
    assert [(e["actor"], e["kind"]) for e in api] == [("alice", "change"), ("alice", "change"), ("bob2", "comment"),
                                                      ("", "change")]
    assert api[0]["before"] == {"status": "open", "assignee": None} and api[1]["after"]["assignee"] == "bob2"


def test_the_history_costs_one_query_whatever_its_length(acme: Project, team: dict[str, Any]) -> None:
    from evaluations.review.triage import case_history

    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    kw = {"project": acme, "evalset": version.evalset, "eval_id": eval_id(1), "baseline": day1, "candidate": day2}
    t = triage_update(**kw, status="confirmed", actor=team["alice"])
    lengths = []
    for extra in (1, 20):
        for i in range(extra):
            comment_add(triage=t, body=f"note {i}", author=team["bob"])
        with CaptureQueriesContext(connection) as queries:
            lengths.append(len(case_history(t)))
        assert len(queries) == 1
    assert lengths == [2, 22]


def test_the_activity_feed_filters_by_person_case_branch_kind_and_date_in_the_url(
        acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    feature = day_run(acme, version, wrong=REGRESSED | FEATURE_OWN, branch="feat/x")
    for candidate, i, who in ((day2, 1, "alice"), (day2, 2, "bob"), (feature, 20, "bob")):
        t = triage_update(project=acme, evalset=version.evalset, eval_id=eval_id(i), baseline=day1,
                          candidate=candidate, status="confirmed", actor=team[who])
        comment_add(triage=t, body="seen", author=team[who])
    url = reverse("project_activity", args=["acme"])
    client = client_for(team["vera"])
    page = html(client.get(url + "?actor=bob2&kind=triage.changed"))
    assert page.count("triaged case_") == 2 and eval_id(1) not in page.split('data-testid="activity-filters"')[1]
    page = html(client.get(url + f"?eval_id={eval_id(20)}"))
    body = page.split("</form>", 1)[1]
    assert body.count(eval_id(20)) >= 2 and eval_id(2) + " " not in body  # its change and its comment
    page = html(client.get(url + "?branch=feat/x&kind=comment.added"))
    assert page.split("</form>", 1)[1].count("commented on") == 1
    assert "No events match these filters." in html(client.get(url + "?from=2001-01-01&to=2001-01-02"))
    assert AuditEvent.objects.filter(data__branch="main").count() == 4


# --- A feature branch knows main --------------------------------------------------------------


def test_a_feature_branch_shows_mains_decision_and_its_thread_for_cases_failing_on_both(
        acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    triage_bulk(project=acme, keys=[QueueKey(day2.pk, day1.pk, eval_id(i)) for i in REGRESSED],
                status="confirmed", assignee=team["bob"], actor=team["alice"])
    feature = day_run(acme, version, wrong=REGRESSED | FEATURE_OWN, branch="feat/x")
    page = html(client_for(team["alice"]).get(reverse("compare") + f"?baseline={day2.pk}&candidate={feature.pk}"
                                              "&status=all"))
    assert "feat/x compared with main" in page.split('data-testid="branch-note">', 1)[1].split("</p>", 1)[0]
    assert 'data-testid="mismatch"' not in page
    cells = page.split('data-testid="main-triage"')[1:]
    assert len(cells) == 5
    assert all(">main: Confirmed regression · bob2</a>" in c.split("</a>", 1)[0] + "</a>" for c in cells)
    link = page.split('data-testid="main-triage"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
    assert link.startswith(reverse("run_case_by_eval_id", args=[day2.pk])) and link.endswith("#triage")
    # on main itself nothing is repeated
    main_page = html(client_for(team["alice"]).get(reverse("compare") + f"?baseline={day1.pk}&candidate={day2.pk}"))
    assert 'data-testid="main-triage"' not in main_page and 'data-testid="branch-note"' not in main_page


# --- Report and exports -----------------------------------------------------------------------


def test_the_compare_and_queue_csvs_carry_triage_assignee_and_last_comment(acme: Project, team: dict[str, Any]
                                                                          ) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    triage_bulk(project=acme, keys=[QueueKey(day2.pk, day1.pk, eval_id(1))], status="confirmed",
                assignee=team["bob"], comment="=cmd|' /C calc'!A0", actor=team["alice"])
    alice = client_for(team["alice"])
    rows = rows_of(alice.get(reverse("compare_csv") + f"?baseline={day1.pk}&candidate={day2.pk}"))
    # the triage columns, then the candidate's causes of the case last (docs/causes.md)
    assert rows[0][-1] == "causes"
    rows = [row[:-1] for row in rows if row]
    header = rows[0]
    assert header[-6:] == ["triage_status", "assignee", "decided_by", "decided_at", "last_comment_by", "last_comment"]
    one = next(r for r in rows if r[0] == eval_id(1))
    assert one[-6:-3] == ["confirmed", "bob2", "alice"] and one[-2] == "alice"
    assert one[-1].startswith("'=")  # a formula is written as text
    two = next(r for r in rows if r[0] == eval_id(2))
    assert two[-6:] == [""] * 6
    queue = rows_of(alice.get(reverse("review_queue_csv") + "?tab=assigned&assignee=bob2"))
    assert queue[0][:5] == ["eval_set", "branch", "eval_id", "candidate_run", "baseline_run"]
    assert [r[2] for r in queue[1:]] == [eval_id(1)] and queue[1][5:8] == ["confirmed", "bob2", "alice"]
    untriaged = rows_of(alice.get(reverse("review_queue_csv") + "?tab=untriaged"))
    assert len(untriaged) == 1 + 4


def test_the_review_report_of_a_week(acme: Project, team: dict[str, Any]) -> None:
    version = team["version"]
    day1 = day_run(acme, version)
    day2 = day_run(acme, version, wrong=REGRESSED)
    triage_bulk(project=acme, keys=[QueueKey(day2.pk, day1.pk, eval_id(i)) for i in REGRESSED],
                status="confirmed", assignee=team["bob"], comment="bob | takes *these*", actor=team["alice"])
    day_run(acme, version, wrong=REGRESSED | FEATURE_OWN, branch="feat/x")
    day_run(acme, version)  # fixed
    client = client_for(team["vera"])  # any member may read it
    page = html(client.get(reverse("project_report", args=["acme"])))
    counts = page.split('data-testid="report-counts">', 1)[1].split("</ul>", 1)[0]
    assert "<strong class=\"num\">4</strong> runs" in counts
    assert "<strong class=\"num\">5</strong> decisions made or open" in counts
    assert "median time to fix" in counts
    link = page.split('data-testid="report-link">', 1)[1].split("<", 1)[0]
    assert "from=" in link and "to=" in link
    decisions = page.split('data-testid="report-decisions"', 1)[1]
    assert decisions.count("Fixed") == 5 and decisions.count("fixed by a passing run") == 5 and "bob2" in decisions
    first = decisions.split("</tr>", 2)[1]
    assert "<td>alice <span class=\"muted\">· fixed by a passing run</span>" in first  # who decided: a person
    md = client.get(reverse("project_report_md", args=["acme"]) + "?" + link.split("?", 1)[1]).content.decode()
    assert md.startswith("# Review report: Acme") and "| support | main | 3 | 3 |" in md
    assert "bob \\| takes \\*these\\*" in md  # a comment stays text in the table
    rows = rows_of(client.get(reverse("project_report_csv", args=["acme"])))
    assert rows[0][:4] == ["eval_set", "branch", "eval_id", "status"] and len(rows) == 6
    assert {(r[3], r[5], r[6]) for r in rows[1:]} == {("fixed", "alice", "True")}
    bad = client.get(reverse("project_report", args=["acme"]) + "?from=2026-02-10&to=2026-02-01")
    assert bad.status_code == 400 and "is after to" in bad.content.decode()
    bad = client.get(reverse("project_report_csv", args=["acme"]) + "?from=soon")
    assert bad.status_code == 400 and "'soon' is not a date" in bad.content.decode()


def test_the_report_costs_the_same_queries_with_more_runs_and_decisions(acme: Project, team: dict[str, Any]
                                                                        ) -> None:
    version = team["version"]
    client = client_for(team["alice"])
    base = day_run(acme, version)
    counts = []
    for wrong in ({1}, set(range(1, 25))):
        run = day_run(acme, version, wrong=wrong)
        day_run(acme, version, branch=f"feat/{len(wrong)}")
        triage_bulk(project=acme, keys=[QueueKey(run.pk, base.pk, eval_id(i)) for i in sorted(wrong)],
                    status="confirmed", comment="seen", actor=team["alice"])
        client.get(reverse("project_report", args=["acme"]))
        with CaptureQueriesContext(connection) as queries:
            html(client.get(reverse("project_report", args=["acme"])))
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_the_members_page_is_in_the_navigation(acme: Project, team: dict[str, Any]) -> None:
    page = html(client_for(team["vera"]).get(reverse("home")))
    nav = page.split('aria-label="Main"', 1)[1].split("</nav>", 1)[0]
    assert f'href="{reverse("project_members", args=["acme"])}"' in nav
    assert f'href="{reverse("project_report", args=["acme"])}"' in nav
    assert f'hx-get="{reverse("review_count")}"' in nav
