"""The Content-Security-Policy in Chromium: every main page works under it with no violation
(a `securitypolicyviolation` event or a console error fails the test), its charts drawn
from their JSON data blocks; the policy allows no inline script; and static/css/plotly.css
still holds the rules the served plotly.js build would inject."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest

from evaluations.models import CaseResult, Project
from evaluations.review.triage import triage_update
from evaluations.web.templatetags.evalsite import plotly_bundle
from tests.api_helpers import demo_runs
from tests.conftest import REPO, draw_charts

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM calls made while playwright runs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__violations.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at "
                           + e.sourceFile + ":" + e.lineNumber + " (" + (e.sample || "") + ")");
});
"""


def _pages(acme: Project, alice: Any) -> dict[str, tuple[str, int]]:
    """Page name -> (path, charts it draws)."""
    baseline, candidate = demo_runs(acme)
    evalset = candidate.evalset_version.evalset
    triage_update(project=acme, evalset=evalset, eval_id="weather_tokyo", baseline=baseline, candidate=candidate,
                  actor=alice)
    result = CaseResult.objects.get(run=candidate, case__eval_id="weather_tokyo")
    return {
        "home": ("/", 0),
        "runs": ("/runs/", 0),
        "new run": ("/runs/new/", 0),
        "run": (f"/runs/{candidate.pk}/", 3),
        "compare": (f"/compare/?baseline={baseline.pk}&candidate={candidate.pk}", 4),
        "drill-down": (f"/runs/{candidate.pk}/cases/{result.pk}/?baseline={baseline.pk}", 0),
        "trend": (f"/evalsets/{evalset.pk}/trend/", 1),  # the heatmap; its lines are the server's SVG
        "eval sets": ("/evalsets/", 0),
        "eval set": (f"/evalsets/{evalset.pk}/", 0),
        "triage": ("/review/", 0),
        "upload": ("/evalsets/upload/", 0),
        "account": ("/account/", 0),
        "activity": (f"/projects/{acme.slug}/activity/", 0),
        "API docs": ("/api/docs/", 0),
        "help": ("/help/", 0),
        "help page": ("/help/readme/", 0),  # rendered Markdown with its images
    }


def test_every_main_page_works_under_the_policy_without_a_violation(chromium: Any, live_server: Any, alice: Any,
                                                                    acme: Project) -> None:
    pages = _pages(acme, alice)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    context.add_init_script(LISTEN)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.text} at {m.location.get('url')}")
            if m.type == "error" and not m.location.get("url", "").endswith("/favicon.ico") else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    login = page.goto(live_server.url + "/accounts/login/")
    assert login is not None
    policy = login.headers["content-security-policy"]
    script_src = re.search(r"script-src ([^;]*)", policy)
    assert script_src is not None and "'self'" in script_src.group(1)
    assert "unsafe-inline" not in script_src.group(1) and "unsafe-eval" not in script_src.group(1)
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")

    seen: dict[str, list[str]] = {}
    for name, (path, charts) in pages.items():
        response = page.goto(live_server.url + path)
        assert response is not None and response.status == 200, (name, response and response.status)
        assert "content-security-policy" in response.headers, name
        page.wait_for_load_state("networkidle")
        if charts:
            draw_charts(page)  # charts are drawn as they scroll into view
            page.wait_for_function("n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n",
                                   arg=charts)
            assert page.locator("script.plotly-figure").count() == charts, name
        if name == "API docs":
            page.wait_for_selector(".swagger-ui .opblock", timeout=30_000)  # drawn by its script
        seen[name] = page.evaluate("window.__violations")
    # Hovering a chart draws its hover label: plotly's own styles, no inline ones.
    page.goto(live_server.url + pages["compare"][0])
    draw_charts(page)  # drawn once scrolled into view
    page.wait_for_selector("[data-click-open] .js-plotly-plot .main-svg")
    page.hover("[data-click-open] .js-plotly-plot .nsewdrag")
    seen["compare hover"] = page.evaluate("window.__violations")
    assert {name: v for name, v in seen.items() if v} == {}
    assert errors == []
    context.close()


def test_the_new_token_is_selected_on_focus_without_an_inline_handler(chromium: Any, live_server: Any,
                                                                     alice: Any) -> None:
    context = chromium.new_context()
    context.add_init_script(LISTEN)
    page = context.new_page()
    page.goto(live_server.url + "/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pass-123")
    page.click("button[type=submit]")
    page.wait_for_url(live_server.url + "/")
    page.goto(live_server.url + "/account/")
    page.fill("input[name=name]", "ci")
    page.locator("form:has(input[name=name]) button[type=submit]").click()
    token = page.locator("input[data-select-on-focus]")
    token.focus()
    assert page.evaluate("window.getSelection().toString() || document.activeElement.selectionEnd") not in ("", 0)
    assert page.evaluate("window.__violations") == []
    context.close()


def test_plotly_css_holds_the_rules_the_served_plotly_js_injects(chromium: Any, live_server: Any) -> None:
    page = chromium.new_page()
    page.set_content(f'<html><head><script src="{live_server.url}/static/{plotly_bundle()}"></script></head>'
                     '<body><div id="g"></div></body></html>')
    page.evaluate('Plotly.newPlot("g", [{x: [1, 2], y: [1, 2]}], {}, {displaylogo: false})')
    injected = page.evaluate("""() => Array.from(document.getElementById("plotly.js-style-global").sheet.cssRules)
                                        .map(r => r.cssText)""")
    shipped = (REPO / "static" / "css" / "plotly.css").read_text().split("*/", 1)[1].strip().splitlines()
    assert shipped == injected, "regenerate static/css/plotly.css from the served plotly.js"
    page.close()
