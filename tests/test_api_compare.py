"""Comparing two runs through the API: the compare page's numbers as JSON."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.models import Comparison, Membership, Project, Run
from evaluations.review import comparison
from tests.compare_helpers import (
    baseline_and_candidate,
    generated_outputs,
    generated_version,
    import_demo,
    make_run,
    perfect_outputs,
    regressed_outputs,
)


def _compare(client: Client, **params: Any) -> Any:
    return client.get("/api/v1/compare/", params)


def _assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"code", "message", "problems", "problem_count"}
    assert body["code"] == code, body
    return body


@pytest.mark.django_db
def test_the_answer_has_the_compare_pages_numbers(alice_client: Client, acme: Project) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    body = _compare(alice_client, baseline=baseline.pk, candidate=candidate.pk).json()
    summary = comparison.comparison_get(baseline=baseline, candidate=candidate)

    assert body["headline"] == comparison.headline(summary)
    assert body["criteria"] == summary["criteria"]
    assert body["counts"]["regressed"] == 2 and body["counts"]["unchanged-pass"] == 6
    assert body["total_cases"] == 8
    assert body["verdict"] == "regressed"
    assert body["gate"] == {"alpha": None, "regressed": True, "criteria": [], "open_regressions": 0,
                            "reason": "2 cases regressed"}
    trajectory = next(c for c in body["criteria"] if c["name"] == "trajectory_match")
    assert (trajectory["pass_to_fail"], trajectory["fail_to_pass"], trajectory["delta"]) == (2, 0, -0.25)

    regressions = body["regressions"]
    assert regressions["count"] == 2
    assert {c["eval_id"] for c in regressions["results"]} == {"weather_tokyo", "order_status"}
    tokyo = next(c for c in regressions["results"] if c["eval_id"] == "weather_tokyo")
    assert (tokyo["baseline_outcome"], tokyo["candidate_outcome"]) == ("pass", "fail")
    assert tokyo["scores"]["trajectory_match"] == {"baseline": 1.0, "candidate": 0.0}
    assert tokyo["url"].startswith(f"http://testserver/runs/{candidate.pk}/cases/{tokyo['candidate_result']}/")
    assert body["improvements"] == {"count": 0, "results": []}

    assert body["latency"]["baseline"]["count"] == 8
    assert body["latency"]["delta_p95"] == summary["latency"]["delta_p95"]
    assert body["baseline"]["id"] == baseline.pk and body["candidate"]["model"] == "agent-v2"
    assert body["candidate"]["url"] == f"http://testserver/runs/{candidate.pk}/"
    assert body["compare_url"] == f"http://testserver/compare/?baseline={baseline.pk}&candidate={candidate.pk}"
    assert alice_client.get(body["compare_url"]).status_code == 200


@pytest.mark.django_db
def test_a_significance_level_only_fails_the_gate_on_significant_flips(alice_client: Client, acme: Project) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    gate = _compare(alice_client, baseline=baseline.pk, candidate=candidate.pk, alpha=0.05).json()["gate"]
    # Two flips of eight: McNemar p = 0.5, could be chance.
    assert gate["regressed"] is False and gate["alpha"] == 0.05
    assert "no criterion significantly worse" in gate["reason"]
    lenient = _compare(alice_client, baseline=baseline.pk, candidate=candidate.pk, alpha=0.5).json()["gate"]
    assert lenient["regressed"] is False  # p = 0.5 is not below 0.5
    version = generated_version(acme, 40)
    big_base = make_run(acme, version, generated_outputs(40))
    big_candidate = make_run(acme, version, generated_outputs(40, wrong=set(range(12))))
    gate = _compare(alice_client, baseline=big_base.pk, candidate=big_candidate.pk, alpha=0.01).json()["gate"]
    assert gate["regressed"] is True and gate["criteria"] == ["trajectory_match"]


@pytest.mark.django_db
def test_limit_caps_the_lists_but_not_their_counts(alice_client: Client, acme: Project) -> None:
    version = generated_version(acme, 30)
    base = make_run(acme, version, generated_outputs(30))
    candidate = make_run(acme, version, generated_outputs(30, wrong={1, 2, 3, 4, 5}))
    body = _compare(alice_client, baseline=base.pk, candidate=candidate.pk, limit=2).json()
    assert body["regressions"]["count"] == 5
    assert [c["eval_id"] for c in body["regressions"]["results"]] == ["case_0001", "case_0002"]


@pytest.mark.django_db
def test_pinned_and_default_baselines_are_the_pages_own(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    first = make_run(acme, version, perfect_outputs())
    second = make_run(acme, version, perfect_outputs())
    candidate = make_run(acme, version, regressed_outputs())
    # No pinned run: `pinned` is a 400 that says so; the default is the latest earlier run.
    body = _assert_error(_compare(alice_client, baseline="pinned", candidate=candidate.pk), 400, "no_baseline")
    assert "no pinned baseline" in body["message"] and body["problems"][0]["path"] == "baseline"
    assert _compare(alice_client, candidate=candidate.pk).json()["baseline"]["id"] == second.pk
    version.evalset.baseline_run = first
    version.evalset.save()
    assert _compare(alice_client, baseline="pinned", candidate=candidate.pk).json()["baseline"]["id"] == first.pk
    assert _compare(alice_client, candidate=candidate.pk).json()["baseline"]["id"] == first.pk


@pytest.mark.django_db
def test_runs_of_different_eval_sets_are_a_400_and_nothing_is_stored(alice_client: Client, acme: Project) -> None:
    demo = make_run(acme, import_demo(acme), perfect_outputs())
    other = make_run(acme, generated_version(acme, 3), generated_outputs(3))
    body = _assert_error(_compare(alice_client, baseline=demo.pk, candidate=other.pk), 400, "not_comparable")
    assert "compare runs of the same eval set" in body["message"]
    _assert_error(_compare(alice_client, baseline=other.pk, candidate=other.pk), 400, "not_comparable")
    assert Comparison.objects.count() == 0


@pytest.mark.django_db
def test_the_first_run_has_nothing_to_compare_with(alice_client: Client, acme: Project) -> None:
    only = make_run(acme, import_demo(acme), perfect_outputs())
    body = _assert_error(_compare(alice_client, candidate=only.pk), 400, "no_baseline")
    assert "no earlier completed run" in body["message"]


@pytest.mark.django_db
def test_other_projects_runs_do_not_exist(alice_client: Client, bob_client: Client, acme: Project, alice: Any,
                                          globex: Project) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    _assert_error(_compare(bob_client, baseline=baseline.pk, candidate=candidate.pk), 404, "not_found")
    # alice sees globex too, but a baseline from another project is not this comparison's.
    Membership.objects.create(project=globex, user=alice, role=Membership.Role.MEMBER)
    foreign = make_run(globex, import_demo(globex), perfect_outputs())
    _assert_error(_compare(alice_client, baseline=foreign.pk, candidate=candidate.pk), 404, "not_found")
    _assert_error(_compare(alice_client, baseline=baseline.pk, candidate=999999), 404, "not_found")


@pytest.mark.django_db
@pytest.mark.parametrize("params,path", [
    ({}, "candidate"),
    ({"candidate": "abc"}, "candidate"),
    ({"candidate": "1", "baseline": "latest"}, "baseline"),
    ({"candidate": "1", "alpha": "often"}, "alpha"),
    ({"candidate": "1", "alpha": "2"}, "alpha"),
    ({"candidate": "1", "limit": "5000"}, "limit"),
    ({"candidate": "99999999999999999999"}, "candidate"),
])
def test_bad_parameters_are_a_400_naming_the_parameter(alice_client: Client, params: dict[str, str],
                                                       path: str) -> None:
    body = _assert_error(alice_client.get("/api/v1/compare/", params), 400, "invalid")
    assert [p["path"] for p in body["problems"]] == [path]


@pytest.mark.django_db
def test_a_token_is_enough_and_no_token_is_a_401(acme: Project, alice: Any) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    params = {"baseline": baseline.pk, "candidate": candidate.pk}
    _assert_error(Client().get("/api/v1/compare/", params), 401, "not_authenticated")
    secret = token_create(user=alice, name="ci").secret
    response = Client(HTTP_AUTHORIZATION=f"Token {secret}").get("/api/v1/compare/", params)
    assert response.status_code == 200 and response.json()["verdict"] == "regressed"


@pytest.mark.django_db
def test_a_stored_comparison_costs_the_same_queries_at_any_size(alice_client: Client, acme: Project,
                                                               django_assert_max_num_queries: Any) -> None:
    small = baseline_and_candidate(acme)
    version = generated_version(acme, 200)
    large = (make_run(acme, version, generated_outputs(200)), make_run(acme, version, generated_outputs(200, wrong={7})))
    counts = []
    for base, candidate in (small, large):
        _compare(alice_client, baseline=base.pk, candidate=candidate.pk)  # computes and stores it
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            assert _compare(alice_client, baseline=base.pk, candidate=candidate.pk).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]
    with django_assert_max_num_queries(counts[0]):
        _compare(alice_client, baseline=large[0].pk, candidate=large[1].pk)


@pytest.mark.django_db
def test_a_running_candidate_is_compared_live(alice_client: Client, acme: Project) -> None:
    from evaluations.runs import services as runs
    from evaluations.schemas.outputs import AgentOutput

    version = import_demo(acme)
    base = make_run(acme, version, perfect_outputs())
    queued = runs.run_create(project=acme, version=version, target_kind="uploaded", enqueue=False,
                             outputs=[AgentOutput.model_validate(o) for o in regressed_outputs()])
    assert queued.status == Run.Status.QUEUED
    body = _compare(alice_client, baseline=base.pk, candidate=queued.pk).json()
    assert body["live"] is True and body["total_cases"] == 8  # the base's cases; none judged yet
    assert body["counts"]["pending"] == 8 and body["counts"]["removed"] == 0
    assert Comparison.objects.filter(candidate=queued).count() == 0
