"""Accessibility in real Chromium, checked by axe-core (tests/vendor/axe-core: the npm
package's axe.min.js, its version and licence beside it): evalsite's own pages have no
violation of WCAG 2.1 A or AA, at 1440 and 390 px wide, with every chart drawn; nor of the
two rules a review found beyond those (tag chips smaller than 24 px: `target-size`; header
cells with no text: `empty-table-header`). The pages: home, the runs list, a run, compare, a
drill-down, the trend, N-way, the eval sets and an eval set, grading, traces and a trace, and
the login page. (The API docs are Swagger UI's page, not evalsite's.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from evaluations.accounts.tokens import token_create
from evaluations.models import CaseResult, Project, Trace
from tests.api_helpers import demo_runs, finished_run, with_nodes
from tests.conftest import REPO, draw_charts
from tests.engine_helpers import perfect_outputs
from tests.otlp_helpers import T0, post, request_of, span

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM calls made while playwright runs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = REPO / "tests" / "vendor" / "axe-core" / "axe.min.js"
WCAG_21_A_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
ALSO = ["target-size", "empty-table-header"]

CHECK = """async ([tags, rules]) => {
  const wcag = await axe.run(document, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
  const more = await axe.run(document, {runOnly: {type: "rule", values: rules}, resultTypes: ["violations"]});
  return wcag.violations.concat(more.violations).map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 4).map(n => n.target.join(" ") + " :: " + n.failureSummary.split("\\n").slice(0, 2).join(" "))
  }));
}"""


@pytest.fixture
def site(acme: Project, alice: Any) -> dict[str, str]:
    """Path per page, over the demo eval set: a baseline, a candidate with two regressions, a
    third run for N-way, and one trace received over OTLP."""
    baseline, candidate = demo_runs(acme)
    third = finished_run(acme, with_nodes(perfect_outputs()))
    evalset = candidate.evalset_version.evalset
    result = CaseResult.objects.filter(run=candidate, case__eval_id="weather_tokyo").order_by("pk").first()
    assert result is not None
    trace_id, root = os.urandom(16), os.urandom(8)
    spans = [span(trace_id, root, b"", "checkout agent", T0, T0 + 2_000_000_000, {"openinference.span.kind": "AGENT"}),
             span(trace_id, os.urandom(8), root, "tool lookup_order", T0 + 100_000_000, T0 + 900_000_000,
                  {"openinference.span.kind": "TOOL", "tool.name": "lookup_order"})]
    assert post(Client(), request_of(spans), token_create(user=alice, name="agent").secret).status_code == 200
    trace = Trace.objects.get(project=acme, trace_id=trace_id.hex())
    return {
        "home": "/",
        "runs": "/runs/",
        "run": f"/runs/{candidate.pk}/",
        "compare": f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}",
        "drill-down": f"/runs/{candidate.pk}/cases/{result.pk}/?baseline={baseline.pk}",
        "trend": f"/evalsets/{evalset.pk}/trend/",
        "N-way": f"/compare/runs/?runs={baseline.pk},{candidate.pk},{third.pk}",
        "eval sets": "/evalsets/",
        "eval set": f"/evalsets/{evalset.pk}/",
        "grading": "/grading/",
        "traces": "/traces/",
        "trace": f"/traces/{trace.pk}/",
    }


@pytest.fixture(params=[1440, 390], ids=["1440px", "390px"])
def browser_tab(request: pytest.FixtureRequest, chromium: Any) -> Iterator[Any]:
    width = request.param
    # axe is injected as a <script> of its own, which the pages' Content-Security-Policy would
    # refuse (it allows only the server's files): the policy is checked by test_browser_csp.
    context = chromium.new_context(viewport={"width": width, "height": 900 if width > 400 else 844},
                                   bypass_csp=True)
    context.set_default_timeout(20_000)
    yield context.new_page()
    context.close()


def violations(tab: Any, url: str) -> list[str]:
    response = tab.goto(url)
    assert response is not None and response.status == 200, (url, response and response.status)
    tab.wait_for_load_state("networkidle")
    draw_charts(tab)  # every chart drawn (figures.js draws one as it comes into view)
    tab.add_script_tag(path=str(AXE))
    found = tab.evaluate(CHECK, [WCAG_21_A_AA, ALSO])
    return [f"{v['id']} ({v['impact']}): {v['help']}\n      " + "\n      ".join(v["nodes"]) for v in found]


def test_axe_finds_no_violation_on_evalsites_pages(browser_tab: Any, live_server: Any, site: dict[str, str]) -> None:
    tab = browser_tab
    width = tab.viewport_size["width"]
    failures = [f"login @{width}: {v}" for v in violations(tab, live_server.url + "/accounts/login/")]
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url(live_server.url + "/")
    charts = 0
    for name, path in site.items():
        failures += [f"{name} @{width}: {v}" for v in violations(tab, live_server.url + path)]
        charts += tab.locator(".js-plotly-plot, svg.svg-chart:visible").count()  # plotly's, and the server's SVG
    assert charts >= 11  # the run's, compare's, the trend's, N-way's and the trace's charts were checked drawn
    assert failures == [], "\n".join(failures)


def test_axe_is_the_pinned_npm_build_with_its_licence() -> None:
    head = AXE.read_text()[:200]
    version = (AXE.parent / "VERSION").read_text().strip()
    assert head.startswith(f"/*! axe v{version}")
    assert (AXE.parent / "LICENSE").read_text().startswith("Mozilla Public License, version 2.0")
