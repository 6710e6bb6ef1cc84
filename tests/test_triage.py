"""Triage services, the comment sanitiser and the review queue's selectors."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from evaluations.models import AuditEvent, Comment, Membership, Project, Run, Triage
from evaluations.review import comparison
from evaluations.review.triage import (
    COMMENT_MAX_CHARS,
    assigned_to,
    comment_add,
    comment_tree,
    render_comment,
    triage_update,
    untriaged_regressions,
)
from tests.compare_helpers import (
    baseline_and_candidate,
    generated_outputs,
    generated_version,
    make_run,
    perfect_outputs,
    regressed_outputs,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(acme: Project) -> tuple[Run, Run]:
    baseline, candidate = baseline_and_candidate(acme)
    comparison.comparison_get(baseline=baseline, candidate=candidate)  # stored, as the compare page does
    return baseline, candidate


def update(pair: tuple[Run, Run], actor: Any, eval_id: str = "weather_tokyo", **kwargs: Any) -> Triage:
    baseline, candidate = pair
    return triage_update(project=candidate.project, evalset=candidate.evalset_version.evalset, eval_id=eval_id,
                         baseline=baseline, candidate=candidate, actor=actor, **kwargs)


def member(project: Project, name: str, role: str = Membership.Role.MEMBER) -> Any:
    user = get_user_model().objects.create_user(name, f"{name}@example.com", f"{name}-pass-123")
    Membership.objects.create(project=project, user=user, role=role)
    return user


# --- Services -----------------------------------------------------------------------------


def test_the_first_update_creates_the_triage_and_records_it(pair: tuple[Run, Run], alice: Any) -> None:
    triage = update(pair, alice, status=Triage.Status.CONFIRMED)
    assert triage.status == "confirmed"
    assert triage.updated_by == alice
    assert triage.project == pair[1].project
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.TRIAGE_CHANGED)
    assert event.actor == alice
    assert event.object_type == "triage" and event.object_id == str(triage.pk)
    assert event.data["before"] == {"status": "open", "assignee": None}
    assert event.data["after"] == {"status": "confirmed", "assignee": None}
    assert "weather_tokyo" in event.summary


def test_a_second_update_changes_the_same_row(pair: tuple[Run, Run], alice: Any, acme: Project) -> None:
    carol = member(acme, "carol")
    first = update(pair, alice, status=Triage.Status.CONFIRMED)
    second = update(pair, carol, assignee=carol)
    assert second.pk == first.pk
    assert Triage.objects.count() == 1
    second.refresh_from_db()
    assert second.status == "confirmed"  # kept: only the assignee was given
    assert second.assignee == carol and second.updated_by == carol
    events = list(AuditEvent.objects.filter(verb=AuditEvent.Verb.TRIAGE_CHANGED).order_by("pk"))
    assert len(events) == 2
    assert events[1].data["before"] == {"status": "confirmed", "assignee": None}
    assert events[1].data["after"] == {"status": "confirmed", "assignee": "carol"}


def test_assignee_none_unassigns_and_an_unchanged_update_records_nothing(pair: tuple[Run, Run], alice: Any) -> None:
    update(pair, alice, assignee=alice)
    update(pair, alice, assignee=alice)  # no change
    triage = update(pair, alice, assignee=None)
    assert triage.assignee is None
    assert AuditEvent.objects.filter(verb=AuditEvent.Verb.TRIAGE_CHANGED).count() == 2


def test_triage_is_one_decision_per_case_and_branch(pair: tuple[Run, Run], alice: Any, acme: Project) -> None:
    baseline, candidate = pair
    update(pair, alice, status=Triage.Status.FLAKY)
    update(pair, alice, eval_id="order_status", status=Triage.Status.CONFIRMED)
    other = make_run(acme, candidate.evalset_version, perfect_outputs(), name="other")
    update((other, candidate), alice, status=Triage.Status.EXPECTED)  # another baseline, same branch: same row
    assert Triage.objects.count() == 2
    decided = Triage.objects.get(eval_id="weather_tokyo")
    assert decided.status == "expected" and decided.baseline_id == other.pk  # where it was last decided
    canary = make_run(acme, candidate.evalset_version, perfect_outputs(), name="canary",
                      labels={"branch": "feat/x"})
    update((baseline, canary), alice, status=Triage.Status.CONFIRMED)  # another branch: its own decision
    assert Triage.objects.count() == 3
    assert Triage.objects.get(eval_id="weather_tokyo", branch="feat/x").status == "confirmed"
    assert Triage.objects.get(eval_id="weather_tokyo", branch="").status == "expected"


def test_the_assignee_must_be_a_member_of_the_project(pair: tuple[Run, Run], alice: Any, bob: Any) -> None:
    with pytest.raises(ValidationError, match="not a member"):
        update(pair, alice, assignee=bob)
    assert not Triage.objects.filter(assignee=bob).exists()


def test_unknown_statuses_and_foreign_runs_are_refused(pair: tuple[Run, Run], alice: Any, globex: Project) -> None:
    with pytest.raises(ValidationError, match="unknown status"):
        update(pair, alice, status="wontfix")
    baseline, candidate = pair
    with pytest.raises(ValidationError, match="belong to the project"):
        triage_update(project=globex, evalset=candidate.evalset_version.evalset, eval_id="weather_tokyo",
                      baseline=baseline, candidate=candidate, actor=alice)
    assert Triage.objects.count() == 0


def test_comments_thread_and_are_recorded(pair: tuple[Run, Run], alice: Any, acme: Project) -> None:
    carol = member(acme, "carol")
    triage = update(pair, alice)
    first = comment_add(triage=triage, body="  Looks like the city is wrong.  ", author=alice)
    reply = comment_add(triage=triage, parent=first, body="Agreed.", author=carol)
    later = comment_add(triage=triage, body="Second thread", author=carol)
    assert first.body == "Looks like the city is wrong."
    tree = comment_tree(triage)
    assert [node.comment.pk for node in tree] == [first.pk, later.pk]
    assert [node.comment.pk for node in tree[0].replies] == [reply.pk]
    events = AuditEvent.objects.filter(verb=AuditEvent.Verb.COMMENT_ADDED).order_by("pk")
    assert [e.actor for e in events] == [alice, carol, carol]
    assert events[1].data["parent"] == first.pk


def test_empty_long_and_cross_case_comments_are_refused(pair: tuple[Run, Run], alice: Any) -> None:
    triage = update(pair, alice)
    other = update(pair, alice, eval_id="order_status")
    with pytest.raises(ValidationError, match="empty"):
        comment_add(triage=triage, body="   \n ", author=alice)
    with pytest.raises(ValidationError, match="at most"):
        comment_add(triage=triage, body="x" * (COMMENT_MAX_CHARS + 1), author=alice)
    parent = comment_add(triage=other, body="on the other case", author=alice)
    with pytest.raises(ValidationError, match="same case"):
        comment_add(triage=triage, parent=parent, body="a reply", author=alice)
    assert Comment.objects.count() == 1


# --- The sanitiser ------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
    "<div onclick='alert(1)'>raw</div>",
    "<iframe src='https://evil.example'></iframe>",
    "<style>body{display:none}</style>",
])
def test_raw_html_is_shown_as_text(body: str) -> None:
    html = render_comment(body)
    assert "<script" not in html and "<img" not in html and "<a" not in html and "<div" not in html
    assert "<iframe" not in html and "<style" not in html
    assert "&lt;" in html  # shown, escaped


def test_javascript_links_lose_their_href() -> None:
    html = render_comment("[click](javascript:alert(1)) and [data](data:text/html;base64,PHNjcmlwdD4=)")
    assert "javascript:" not in html
    assert "data:" not in html
    assert "click" in html


def test_images_are_not_rendered() -> None:
    html = render_comment("![tracker](https://evil.example/pixel.png)")
    assert "<img" not in html


def test_markdown_emphasis_code_and_links_are_kept() -> None:
    html = render_comment("**bold** _it_ `x < y` [docs](https://example.com/a?b=1&c=2)\n\n```\n<b>code</b>\n```")
    assert "<strong>bold</strong>" in html
    assert "<em>it</em>" in html
    assert "<code>x &lt; y</code>" in html
    assert '<a href="https://example.com/a?b=1&amp;c=2" rel="nofollow noopener">docs</a>' in html
    assert "&lt;b&gt;code&lt;/b&gt;" in html


# --- The review queue ---------------------------------------------------------------------


def test_untriaged_regressions_are_the_latest_candidates_regressed_cases_without_a_verdict(
        pair: tuple[Run, Run], alice: Any, acme: Project) -> None:
    baseline, candidate = pair
    queue = untriaged_regressions(project=acme)
    assert sorted(row.eval_id for row in queue.rows) == ["order_status", "weather_tokyo"]
    tokyo = next(row for row in queue.rows if row.eval_id == "weather_tokyo")
    assert tokyo.candidate_id == candidate.pk and tokyo.baseline_id == baseline.pk
    assert tokyo.url is not None and tokyo.url.endswith(f"?baseline={baseline.pk}&status=regressed")
    assert not tokyo.triaged

    triage = update(pair, alice, assignee=alice)  # open: still in the queue, now with an assignee
    comment_add(triage=triage, body="looking", author=alice)
    tokyo = next(row for row in untriaged_regressions(project=acme).rows if row.eval_id == "weather_tokyo")
    assert tokyo.triaged and tokyo.assignee == "alice" and tokyo.last_comment_at is not None

    update(pair, alice, status=Triage.Status.CONFIRMED)  # a verdict: out of the queue
    assert [row.eval_id for row in untriaged_regressions(project=acme).rows] == ["order_status"]


def test_only_the_latest_completed_run_of_an_eval_set_is_queued(pair: tuple[Run, Run], acme: Project) -> None:
    baseline, candidate = pair
    newer = make_run(acme, candidate.evalset_version, perfect_outputs(), name="fixed")
    comparison.comparison_get(baseline=baseline, candidate=newer)
    assert untriaged_regressions(project=acme).count == 0  # the regressed candidate is no longer the latest


def test_a_regression_stays_queued_while_it_still_fails_in_the_branchs_latest_run(pair: tuple[Run, Run],
                                                                                  acme: Project) -> None:
    """#2 regressed two cases against #1; #3 fails them again (unchanged against #2): they stay
    in the queue, shown with the run they regressed in, until a run passes them."""
    baseline, candidate = pair
    again = make_run(acme, candidate.evalset_version, regressed_outputs(), name="still bad")
    comparison.comparison_get(baseline=candidate, candidate=again)
    queue = untriaged_regressions(project=acme)
    assert sorted((row.eval_id, row.candidate_id, row.baseline_id) for row in queue.rows) == [
        ("order_status", candidate.pk, baseline.pk), ("weather_tokyo", candidate.pk, baseline.pk)]
    fixed = make_run(acme, candidate.evalset_version, perfect_outputs(), name="fixed")
    comparison.comparison_get(baseline=again, candidate=fixed)
    assert untriaged_regressions(project=acme).count == 0


def test_another_projects_regressions_are_not_queued(pair: tuple[Run, Run], globex: Project) -> None:
    assert untriaged_regressions(project=globex).count == 0


def test_assigned_to_me_lists_my_cases_in_the_project(pair: tuple[Run, Run], alice: Any, acme: Project) -> None:
    carol = member(acme, "carol")
    update(pair, alice, assignee=alice, status=Triage.Status.CONFIRMED)
    update(pair, alice, eval_id="order_status", assignee=carol)
    mine = assigned_to(user=alice, project=acme)
    assert [(row.eval_id, row.status) for row in mine.rows] == [("weather_tokyo", "confirmed")]
    baseline, candidate = pair
    assert mine.rows[0].url is not None
    assert mine.rows[0].url.startswith(f"/runs/{candidate.pk}/cases/") and f"baseline={baseline.pk}" in mine.rows[0].url
    assert [row.eval_id for row in assigned_to(user=carol, project=acme).rows] == ["order_status"]


def test_the_queues_page_fifty_at_a_time(acme: Project, alice: Any) -> None:
    # 61 cases, 60 of them regressed (case 0 looks up item 0 either way)
    version = generated_version(acme, 61)
    baseline = make_run(acme, version, generated_outputs(61), name="good")
    candidate = make_run(acme, version, generated_outputs(61, wrong=set(range(1, 61))), name="bad")
    comparison.comparison_get(baseline=baseline, candidate=candidate)
    first, second = untriaged_regressions(project=acme), untriaged_regressions(project=acme, page=2)
    assert (first.count, len(first.rows), first.num_pages, first.has_next) == (60, 50, 2, True)
    assert len(second.rows) == 10 and second.has_previous
    assert {r.eval_id for r in first.rows}.isdisjoint({r.eval_id for r in second.rows})
