"""No page shows template source: walking the main pages on seeded data (the demo eval set
run twice, a comparison with regressions, a triage), none contains `{#` or `#}` (a Django
comment spread over two lines is printed as text), nor `{%` / `{{` (`%}` is left out: plotly's hover templates say `%{y:.1%}`;
a prompt's `{{input}}` is data)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from evaluations.models import CaseResult, Project, Triage
from tests.compare_helpers import baseline_and_candidate

pytestmark = pytest.mark.django_db


def test_no_rendered_page_contains_template_syntax(acme: Project, alice_client: Client) -> None:
    baseline, candidate = baseline_and_candidate(acme)
    evalset = candidate.evalset_version.evalset
    regressed = CaseResult.objects.get(run=candidate, case__eval_id="weather_tokyo")
    compare = reverse("compare") + f"?baseline={baseline.pk}&candidate={candidate.pk}"
    # a triage decision, so the review queue and activity have something to show
    response = alice_client.post(reverse("triage_update"), {
        "baseline": baseline.pk, "candidate": candidate.pk, "result": regressed.pk,
        "status": Triage.Status.CONFIRMED})
    assert response.status_code == 302, response.content
    pages = [
        reverse("home"), reverse("evalset_list"), reverse("evalset_detail", args=[evalset.pk]),
        reverse("evalset_trend", args=[evalset.pk]), reverse("run_list"), reverse("run_new"),
        reverse("run_detail", args=[baseline.pk]), reverse("run_detail", args=[candidate.pk]),
        compare, compare + "&status=all", reverse("compare") + f"?candidate={candidate.pk}",
        reverse("run_case", args=[candidate.pk, regressed.pk]) + f"?baseline={baseline.pk}&status=regressed",
        reverse("case_detail", args=[regressed.case_id]),
        reverse("review_queue"), reverse("review_queue") + "?state=all",
        reverse("project_activity", args=[acme.slug]), reverse("project_members", args=[acme.slug]),
        reverse("evalset_upload"), reverse("account"),
    ]
    for url in pages:
        response = alice_client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        # The model target's user template, `{{input}}`, is a prompt's own syntax that the new-run
        # page shows as data (a textarea's value, its help); it is no Django template source.
        text = response.content.decode().replace("{{input}}", "")
        for token in ("{#", "#}", "{%", "{{"):
            assert token not in text, f"{url} shows template source {token!r}: ...{text[text.find(token) - 80:text.find(token) + 80]}..."
