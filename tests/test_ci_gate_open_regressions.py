"""The CI gate remembers a regression that landed: a candidate that regressed 27 of 60 cases,
run again on the same branch with the same outputs, still fails `--fail-on-regression` with
the default baseline (the regressed run before it), until the cases pass again or a person
accepts them (triage, or a pinned baseline that fails them). Through the API here; the CLIs
read the same answer (tests/test_cli_remote.py, tests/test_cli_eval.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evaluations.models import Project, Run
from evaluations.review import comparison, triage
from evaluations.review.services import evalset_pin_baseline
from tests.compare_helpers import generated_outputs, generated_version, make_run

CASES = 60
WRONG = set(range(2, 56, 2))  # 27 cases (case 0 looks up item 0 whatever it does)
MAIN = {"branch": "main", "model": "agent"}


def _gate(client: Client, candidate: Run, **params: Any) -> dict[str, Any]:
    response = client.get("/api/v1/compare/", {"candidate": candidate.pk, "baseline": "default", **params})
    assert response.status_code == 200, response.content
    return response.json()  # type: ignore[no-any-return]


@pytest.fixture
def landed(acme: Project) -> tuple[Run, Run, Run]:
    """main: a good run, a run that regressed 27 cases, and the same outputs run again."""
    version = generated_version(acme, CASES)
    good = make_run(acme, version, generated_outputs(CASES), labels=MAIN)
    regressed = make_run(acme, version, generated_outputs(CASES, wrong=WRONG), labels=MAIN)
    again = make_run(acme, version, generated_outputs(CASES, wrong=WRONG), labels=MAIN)
    return good, regressed, again


@pytest.mark.django_db
def test_the_run_after_a_regression_still_fails_the_gate_against_the_regressed_run(
        alice_client: Client, landed: tuple[Run, Run, Run]) -> None:
    good, regressed, again = landed
    first = _gate(alice_client, regressed)
    assert first["baseline"]["id"] == good.pk and first["counts"]["regressed"] == 27
    assert first["gate"]["regressed"] is True and first["open_regressions"]["count"] == 0

    body = _gate(alice_client, again)
    assert body["baseline"]["id"] == regressed.pk  # the default baseline: the regressed run
    assert body["counts"]["regressed"] == 0 and body["counts"]["unchanged-fail"] == 27
    assert body["gate"]["regressed"] is True and body["gate"]["open_regressions"] == 27
    assert body["gate"]["reason"] == "no case regressed, 27 regressions of earlier runs on main still open"
    assert body["verdict"] == "regressed"
    still = body["open_regressions"]
    assert still["count"] == 27 and len(still["results"]) == 27
    first_open = still["results"][0]
    assert first_open["eval_id"] == "case_0002"
    assert (first_open["regressed_in"], first_open["regressed_against"]) == (regressed.pk, good.pk)
    assert first_open["candidate_outcome"] == "fail" and first_open["triage"] is None
    assert first_open["compare_url"] == f"http://testserver/compare/?baseline={good.pk}&candidate={regressed.pk}"
    assert _gate(alice_client, again, limit=5)["open_regressions"]["count"] == 27  # `limit` lists fewer
    assert len(_gate(alice_client, again, limit=5)["open_regressions"]["results"]) == 5


@pytest.mark.django_db
def test_it_keeps_failing_on_every_later_run_until_the_cases_pass_again(
        alice_client: Client, acme: Project, landed: tuple[Run, Run, Run]) -> None:
    *_, again = landed
    version = again.evalset_version
    third = make_run(acme, version, generated_outputs(CASES, wrong=WRONG), labels=MAIN)
    assert _gate(alice_client, third)["open_regressions"]["count"] == 27
    # Half of them fixed: those are no longer open, the rest still are.
    fixed = set(range(2, 28, 2))
    partly = make_run(acme, version, generated_outputs(CASES, wrong=WRONG - fixed), labels=MAIN)
    body = _gate(alice_client, partly)
    assert body["counts"]["improved"] == 13 and body["open_regressions"]["count"] == 14
    assert body["gate"]["regressed"] is True
    everything = make_run(acme, version, generated_outputs(CASES), labels=MAIN)
    done = _gate(alice_client, everything)
    assert done["gate"] == {"alpha": None, "regressed": False, "criteria": [], "open_regressions": 0,
                            "reason": "no case regressed"}
    # Broken again after being fixed: a new regression against the run before, not an open one.
    broken = make_run(acme, version, generated_outputs(CASES, wrong={1}), labels=MAIN)
    again_body = _gate(alice_client, broken)
    assert again_body["counts"]["regressed"] == 1 and again_body["open_regressions"]["count"] == 0


@pytest.mark.django_db
def test_another_branch_does_not_inherit_mains_regressions(alice_client: Client, acme: Project,
                                                           landed: tuple[Run, Run, Run]) -> None:
    *_, again = landed
    other = make_run(acme, again.evalset_version, generated_outputs(CASES, wrong=WRONG),
                     labels={"branch": "feature", "model": "agent"})
    body = _gate(alice_client, other, baseline=str(again.pk))
    assert body["counts"]["unchanged-fail"] == 27 and body["open_regressions"]["count"] == 0
    assert body["gate"]["regressed"] is False


@pytest.mark.django_db
def test_a_person_accepts_a_regression_by_triaging_it_expected_or_flaky_not_confirmed(
        alice_client: Client, alice: Any, acme: Project, landed: tuple[Run, Run, Run]) -> None:
    good, regressed, again = landed
    evalset = again.evalset_version.evalset
    for eval_id, status in (("case_0002", "expected"), ("case_0004", "flaky"), ("case_0006", "confirmed")):
        triage.triage_update(project=acme, evalset=evalset, eval_id=eval_id, baseline=good, candidate=regressed,
                             status=status, actor=alice)
    body = _gate(alice_client, again)
    assert body["open_regressions"]["count"] == 25
    listed = {case["eval_id"]: case["triage"] for case in body["open_regressions"]["results"]}
    assert "case_0002" not in listed and "case_0004" not in listed
    assert listed["case_0006"] == "confirmed"
    assert body["gate"]["regressed"] is True


@pytest.mark.django_db
def test_pinning_a_baseline_that_fails_the_cases_accepts_them(alice_client: Client, alice: Any, acme: Project,
                                                              landed: tuple[Run, Run, Run]) -> None:
    good, regressed, again = landed
    evalset = again.evalset_version.evalset
    evalset_pin_baseline(evalset=evalset, run=regressed, actor=alice)
    body = _gate(alice_client, again)
    assert body["baseline"]["id"] == regressed.pk and body["open_regressions"]["count"] == 0
    assert body["gate"]["regressed"] is False
    # Compared with the run before instead of the pin: still accepted, the pinned run fails them.
    later = make_run(acme, again.evalset_version, generated_outputs(CASES, wrong=WRONG), labels=MAIN)
    assert _gate(alice_client, later, baseline=str(again.pk))["gate"]["regressed"] is False
    # Pinning the good run instead: comparing with it shows them as regressions again.
    evalset_pin_baseline(evalset=evalset, run=good, actor=alice)
    pinned = _gate(alice_client, later)
    assert pinned["counts"]["regressed"] == 27 and pinned["gate"]["regressed"] is True


@pytest.mark.django_db
def test_with_a_significance_level_open_regressions_count_as_flips(alice_client: Client, acme: Project,
                                                                   landed: tuple[Run, Run, Run]) -> None:
    *_, again = landed
    gate = _gate(alice_client, again, alpha=0.05)["gate"]
    assert gate["regressed"] is True and gate["open_regressions"] == 27
    assert gate["reason"].startswith("significantly worse (McNemar p < 0.05) with the open regressions: "
                                     "27 regressions of earlier runs on main still open, 0 new, 0 improved")
    # One flaky case that regressed once is not beyond chance: the gate passes, the case is listed.
    version = again.evalset_version
    base = make_run(acme, version, generated_outputs(CASES), labels={"branch": "dev", "model": "agent"})
    once = make_run(acme, version, generated_outputs(CASES, wrong={59}), labels={"branch": "dev", "model": "agent"})
    still = make_run(acme, version, generated_outputs(CASES, wrong={59}), labels={"branch": "dev", "model": "agent"})
    assert _gate(alice_client, once)["baseline"]["id"] == base.pk
    lenient = _gate(alice_client, still, alpha=0.05)
    assert lenient["open_regressions"]["count"] == 1 and lenient["gate"]["regressed"] is False
    assert "1 regression of earlier runs on dev still open" in lenient["gate"]["reason"]
    assert _gate(alice_client, still)["gate"]["regressed"] is True  # without alpha it fails


@pytest.mark.django_db
def test_the_open_regressions_take_a_fixed_number_of_queries(alice_client: Client, acme: Project,
                                                             landed: tuple[Run, Run, Run],
                                                             django_assert_max_num_queries: Any) -> None:
    _, regressed, again = landed
    _gate(alice_client, again)  # the comparison stored

    summary = comparison.comparison_get(baseline=regressed, candidate=again)
    again = Run.objects.select_related("evalset_version__evalset").get(pk=again.pk)
    with django_assert_max_num_queries(4):
        found = triage.open_regressions(baseline=regressed, candidate=again, cases=summary["cases"])
    assert len(found) == 27
