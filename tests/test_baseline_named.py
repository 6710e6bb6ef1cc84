"""Every change names its baseline in the text, not in a tooltip: "vs #12 · main · pinned",
"vs #12 · previous on main", with what makes the runs unlike spelled out after a ⚠. One
wording (`baselines.baseline_label`) for the compare header and the run page; home and the
runs list take it from the same `BaselineLink.label`.

Runs are real: the demo eval set with uploaded outputs, executed in process."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import EvalSetVersion, Project, Run
from evaluations.review import baselines
from evaluations.review.selectors import baseline_link
from evaluations.review.services import evalset_pin_baseline
from tests.compare_helpers import import_demo, make_run, perfect_outputs, regressed_outputs

pytestmark = pytest.mark.django_db


def run(project: Project, version: EvalSetVersion, outputs: list[dict[str, Any]], branch: str,
        model: str = "gpt-4o") -> Run:
    made = make_run(project, version, outputs, labels={"branch": branch, "model": model})
    return Run.objects.select_related("evalset_version__evalset").get(pk=made.pk)


def named(page: str, testid: str) -> str:
    return page.split(f'data-testid="{testid}">', 1)[1].split("</p>", 1)[0]


def test_a_like_for_like_baseline_reads_previous_on_its_branch(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    first = run(acme, version, perfect_outputs(), "main")
    second = run(acme, version, regressed_outputs(), "main")
    label = baselines.baseline_words(baseline=first, candidate=second, reason=baselines.LIKE_FOR_LIKE)
    assert (label.text, label.warning) == (f"vs #{first.pk} · previous on main", "")
    header = named(alice_client.get(reverse("compare") + f"?candidate={second.pk}").content.decode(), "baseline-named")
    assert f"vs #{first.pk} · previous on main" in header and "⚠" not in header
    page = alice_client.get(reverse("run_detail", args=[second.pk])).content.decode()
    assert f"vs #{first.pk} · previous on main" in named(page, "vs-named")


def test_a_pinned_baseline_says_pinned_and_spells_out_what_differs(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    pinned = run(acme, version, perfect_outputs(), "release")
    candidate = run(acme, version, regressed_outputs(), "main", model="claude")
    evalset = version.evalset
    evalset.baseline_run = pinned
    evalset.save()
    # what makes numbers unlike is a warning; another branch is said once, calmly (issue 29)
    expected = (f"vs #{pinned.pk} · release · pinned", "⚠ not like for like: model gpt-4o → claude")
    for url in (reverse("compare") + f"?candidate={candidate.pk}",  # the default baseline
                reverse("compare") + f"?candidate={candidate.pk}&baseline={pinned.pk}"):  # named, and pinned
        header = named(alice_client.get(url).content.decode(), "baseline-named")
        assert all(part in header for part in expected), header
    page = named(alice_client.get(reverse("run_detail", args=[candidate.pk])).content.decode(), "vs-named")
    assert all(part in page for part in expected)
    # not hidden in a title attribute: the words are the element's text
    assert 'title="' not in page


def test_a_fallback_baseline_says_none_was_like_for_like(acme: Project) -> None:
    version = import_demo(acme)
    main = run(acme, version, perfect_outputs(), "main")
    canary = run(acme, version, regressed_outputs(), "feat/planner")
    link = baseline_link(canary)
    assert link is not None
    assert link.label == f"vs #{main.pk} · latest on main (no earlier run on feat/planner)"
    assert link.warning == "" and link.branch_note == "feat/planner compared with main"


def test_the_cached_compare_page_follows_a_new_pin(acme: Project, alice: Any, alice_client: Client) -> None:
    version = import_demo(acme)
    first = run(acme, version, perfect_outputs(), "main")
    second = run(acme, version, regressed_outputs(), "main")
    url = reverse("compare") + f"?candidate={second.pk}&baseline={first.pk}"
    # named in the URL, and the default baseline anyway: the default's words (issue 41)
    assert f"vs #{first.pk} · previous on main" in named(alice_client.get(url).content.decode(), "baseline-named")
    assert f"vs #{first.pk} · previous on main" in named(alice_client.get(url).content.decode(), "baseline-named")
    evalset_pin_baseline(evalset=version.evalset, run=first, actor=alice)  # the page is cached: no message waits
    assert f"vs #{first.pk} · main · pinned" in named(alice_client.get(url).content.decode(), "baseline-named")
