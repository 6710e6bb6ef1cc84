"""Scale: three `qcluster` processes run one 5,000-case run on PostgreSQL, with the Redis broker
and with the ORM broker, as `up --team` starts them. Every result exists exactly once and
the counters and aggregates equal a recount from the database."""

from __future__ import annotations

import pytest
from django_q.models import Task

from evaluations.models import CaseResult, Project
from tests.team.conftest import TeamServer
from tests.team.helpers import (
    CRITERIA,
    Api,
    Progress,
    assert_consistent,
    assert_summary_matches_recount,
    generate,
    import_evalset,
    member_with_token,
    wait_for,
)

pytestmark = [pytest.mark.team, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CASES = 5000


def test_three_clusters_evaluate_5000_uploaded_cases_each_exactly_once(server: TeamServer) -> None:
    project = Project.objects.create(slug="team", name="Team")
    api = Api(server.url, member_with_token(project))
    evalset, outputs, expected = generate(CASES)
    version = import_evalset(project, evalset)
    try:
        run = api.create_run(evalset=version.evalset_id, outputs=outputs, config={"criteria": CRITERIA},
                             name=f"scale on {server.broker}")
        final = Progress(api, run["id"]).wait({"completed", "failed", "cancelled"}, 240, server.tail)
    finally:
        api.close()

    assert final["status"] == "completed", final
    assert (final["cases_total"], final["cases_done"]) == (CASES, CASES)
    assert assert_consistent(run["id"], criteria=len(CRITERIA)) == {"passed": 4000, "failed": 1000}
    assert dict(CaseResult.objects.filter(run_id=run["id"]).values_list("case__eval_id", "status")) == expected
    assert_summary_matches_recount(run["id"])

    # The tasks' own record: the batches settled 5,000 results between them (a batch that ran
    # twice settled nothing the second time), and all three clusters took a share.
    def records() -> list[dict[str, int | str]]:
        found = [t.result for t in Task.objects.filter(group=f"run-{run['id']}", success=True)]
        return found if sum(int(r["settled"]) for r in found) >= CASES else []

    done = wait_for(records, 30, "the clusters did not record their batches")
    assert sum(int(r["settled"]) for r in done) == CASES
    clusters = {server.cluster_of(int(str(r["worker"]).rsplit(":", 1)[1])) for r in done if r["settled"]}
    assert clusters == {p.pid for p in server.clusters()}, server.tail()
