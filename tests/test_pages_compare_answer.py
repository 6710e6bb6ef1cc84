"""The compare page answers first, with a fair baseline: the regressed cases and their causes
under the verdict, one wording per question, and one default-baseline rule shared by the
compare page, home, the run page, the API and the CLI (`evaluations.review.baselines`).

Runs are real: the demo eval set with uploaded outputs, executed in process."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluations.models import Project, Run
from evaluations.review import baselines
from tests.compare_helpers import (
    generated_outputs,
    generated_version,
    import_demo,
    make_run,
    perfect_outputs,
    regressed_outputs,
)

pytestmark = pytest.mark.django_db


def twice(outputs_of: Any) -> list[dict[str, Any]]:
    """The outputs for two iterations (the same answers in each)."""
    out = []
    for iteration in (0, 1):
        for o in copy.deepcopy(outputs_of()):
            o["iteration"] = iteration
            out.append(o)
    return out


def compare_url(candidate: Run, baseline: Run | None = None, **params: Any) -> str:
    query = {"candidate": candidate.pk, **({"baseline": baseline.pk} if baseline else {}), **params}
    return reverse("compare") + "?" + "&".join(f"{k}={v}" for k, v in query.items())


def section(page: str, testid: str) -> str:
    return page.split(f'data-testid="{testid}"', 1)[1].split("</section>", 1)[0]


def test_regressions_come_first_with_tags_failing_criteria_repeats_and_cause(acme: Project,
                                                                            alice_client: Client) -> None:
    version = import_demo(acme)
    baseline = make_run(acme, version, twice(perfect_outputs), iterations=2, labels={"branch": "main"})
    candidate = make_run(acme, version, twice(regressed_outputs), iterations=2, labels={"branch": "main"})
    page = alice_client.get(compare_url(candidate, baseline)).content.decode()
    # Under the verdict, before any chart and before the cases table.
    assert page.index('data-testid="regressed-list"') < page.index('data-testid="scatter"')
    assert page.index('data-testid="regressed-list"') < page.index('id="cases"')
    regressions = section(page, "regressed-list")
    rows = regressions.split("<tbody>", 1)[1].split("</tbody>", 1)[0].split("<tr>")[1:]
    tokyo = next(row for row in rows if "weather_tokyo" in row)
    assert "2/2 → 0/2" in tokyo
    assert "reproducible: failed in every repeat" in tokyo
    assert "trajectory_match" in tokyo  # the criterion it fails
    assert '<span class="tag">weather</span>' in tokyo
    assert "city Tokyo→Kyoto" in tokyo  # the cause, from the tool-call diff
    order = next(row for row in rows if "order_status" in row)
    assert "missing get_order(order_id=" in order
    # each links to its drill-down, walking the regressions
    assert f"/runs/{candidate.pk}/cases/" in tokyo and "status=regressed" in tokyo
    # The verdict: one wording per question.
    headline = page.split('data-testid="headline">', 1)[1].split("</p>", 1)[0]
    assert "not distinguishable from chance across 8 cases; the same share of flips would need n≈24 cases to call" in headline
    assert "could be noise" not in headline and "likely real" not in headline
    per_case = page.split('data-testid="per-case">', 1)[1].split("</p>", 1)[0]
    assert "2 regressions reproducible: failed in every repeat" in per_case
    assert 'data-testid="mismatch"' not in page  # like for like: no warning


def test_a_single_repeat_is_not_called_reproducible(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    baseline = make_run(acme, version, perfect_outputs())
    candidate = make_run(acme, version, regressed_outputs())
    page = alice_client.get(compare_url(candidate, baseline)).content.decode()
    assert "1/1 → 0/1" in section(page, "regressed-list")
    assert "reproducible" not in section(page, "regressed-list")
    assert "seen in one repeat only" in page


@pytest.mark.parametrize("count", [10, 400])
def test_building_the_page_costs_the_same_queries_at_any_size(count: int, acme: Project, alice_client: Client,
                                                             django_assert_num_queries: Any) -> None:
    """The answer block reads at most a fixed number of cases, in two queries, whatever the
    run's size and its number of regressions (a tenth of the cases regress here)."""
    version = generated_version(acme, count)
    baseline = make_run(acme, version, generated_outputs(count))
    candidate = make_run(acme, version, generated_outputs(count, wrong=set(range(1, count, 10))))
    url = compare_url(candidate, baseline)
    alice_client.get(url)  # the session learns the project; the comparison is stored
    cache.clear()  # build the page again: nothing of it cached
    with CaptureQueriesContext(connection) as queries:
        page = alice_client.get(url).content.decode()
    # the stored comparison's head, one page of its case rows, the lead criterion's scatter and
    # the answer's first regressions and improvements each one query, the eval set's default
    # branch two (its branches, its pinned baseline's branch); the causes: whether each run's are
    # grouped, the candidate's first ones, the baseline's of the same signatures, the baseline's
    # gone ones (five): none grows with the run
    assert len(queries) == 23, [q["sql"][:150] for q in queries.captured_queries]
    assert f"Regressions <span class=\"muted num\">{count // 10}</span>" in page
    assert "id 1→0" in section(page, "regressed-list")  # the cause: an argument changed
    if count // 10 > 20:
        assert f"All {count // 10} regressions in the cases table" in page


def _run(project: Project, version: Any, outputs: list[dict[str, Any]], branch: str, model: str, **kw: Any) -> Run:
    return make_run(project, version, outputs, labels={"branch": branch, "model": model}, **kw)


def test_the_default_baseline_is_like_for_like_everywhere(acme: Project, alice: Any,
                                                          alice_client: Client) -> None:
    version = import_demo(acme)
    main_1 = _run(acme, version, perfect_outputs(), "main", "gpt-4o", name="main 1")
    _run(acme, version, regressed_outputs(), "feat/planner", "claude", name="canary")  # later, another branch
    main_2 = _run(acme, version, regressed_outputs(), "main", "gpt-4o", name="main 2")

    choice = baselines.baseline_choice(main_2)
    assert choice is not None and choice.run.pk == main_1.pk and choice.reason == baselines.LIKE_FOR_LIKE
    # the compare page
    page = alice_client.get(compare_url(main_2)).content.decode()
    assert f"#{main_1.pk} main 1" in page.split('class="cmp-runs"', 1)[1].split("</p>", 1)[0]
    assert 'data-testid="mismatch"' not in page
    # the API
    body = alice_client.get("/api/v1/compare/", {"candidate": main_2.pk}).json()
    assert body["baseline"]["id"] == main_1.pk
    # the run page: "2 regressions vs #1 →", linking to the comparison
    run_page = alice_client.get(reverse("run_detail", args=[main_2.pk])).content.decode()
    link = run_page.split('data-testid="vs-baseline"', 1)[0].rsplit("<a ", 1)[1]
    assert f"baseline={main_1.pk}&amp;candidate={main_2.pk}" in link
    assert f"2 regressions vs #{main_1.pk} →" in run_page.split('data-testid="vs-baseline"', 1)[1][:200]
    # home: the change links to the same comparison
    home = alice_client.get(reverse("home")).content.decode()
    change = home.split('data-testid="home-change">', 1)[1].split("</td>", 1)[0]
    assert f"baseline={main_1.pk}&amp;candidate={main_2.pk}" in change
    assert "2 regressions" in change and "▼ -25 pt" in change


def test_a_first_run_on_a_branch_falls_back_with_a_visible_warning(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    main = _run(acme, version, perfect_outputs(), "main", "gpt-4o")
    canary = _run(acme, version, twice(regressed_outputs), "feat/planner", "claude", iterations=2)
    choice = baselines.baseline_choice(canary)
    assert choice is not None and choice.run.pk == main.pk and choice.reason == baselines.FALLBACK
    page = alice_client.get(compare_url(canary)).content.decode()
    warning = page.split('data-testid="mismatch">', 1)[1].split("</p>", 1)[0]
    assert "branch" not in warning  # the branch is said once, calmly, not as a warning
    assert "feat/planner compared with main" in page.split('data-testid="branch-note">', 1)[1].split("</p>", 1)[0]
    assert "model gpt-4o → claude" in warning
    assert "iterations 1 → 2" in warning
    run_page = alice_client.get(reverse("run_detail", args=[canary.pk])).content.decode()
    assert "not like for like" in run_page


def test_the_pinned_run_is_the_default_even_on_another_branch(acme: Project, alice_client: Client) -> None:
    version = import_demo(acme)
    pinned = _run(acme, version, perfect_outputs(), "release", "gpt-4o")
    _run(acme, version, perfect_outputs(), "main", "gpt-4o")
    candidate = _run(acme, version, regressed_outputs(), "main", "gpt-4o")
    evalset = version.evalset
    evalset.baseline_run = pinned
    evalset.save()
    candidate.refresh_from_db()
    choice = baselines.baseline_choice(Run.objects.select_related("evalset_version__evalset").get(pk=candidate.pk))
    assert choice is not None and choice.run.pk == pinned.pk and choice.reason == baselines.PINNED
    page = alice_client.get(compare_url(candidate)).content.decode()
    assert 'data-testid="mismatch"' not in page  # same model, version, config: only the branch differs
    assert "main compared with release" in page.split('data-testid="branch-note">', 1)[1].split("</p>", 1)[0]
