"""Fast on a phone (issue 28): pages go out gzipped; the assets `manage.py up` serves, in the
embedded default too, carry their content hash, come compressed and are cached for a year;
plotly.js is never a render-blocking script: pages with charts only name it, and
static/js/figures.js fetches it when the first chart comes into view; a chart's box has its
height before it is drawn, so drawing it moves nothing (no layout shift). Lighthouse's
figures are in docs/performance.md (bench/lighthouse.py)."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest
from django.test import Client, override_settings
from django.urls import reverse
from playwright.sync_api import expect

from evaluations.management.commands.up import STATIC_STAMP, Command
from evaluations.models import Project, Run
from evaluations.web.charts import base_layout, to_html
from evaluations.web.templatetags.evalsite import plotly_bundle
from tests.api_helpers import demo_runs
from tests.conftest import REPO

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM calls made while playwright runs

VENDOR = REPO / "static" / "vendor"


@pytest.fixture
def pair(acme: Project, alice: Any) -> tuple[Run, Run]:
    return demo_runs(acme)


def test_a_page_is_gzipped_for_a_browser_that_accepts_it(pair: tuple[Run, Run], alice_client: Client) -> None:
    url = reverse("run_detail", args=[pair[1].pk])
    plain = alice_client.get(url)
    packed = alice_client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert "Content-Encoding" not in plain
    assert packed["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed["Vary"]
    page = gzip.decompress(packed.content).decode()
    assert "Score distribution per criterion" in page
    assert len(packed.content) < len(plain.content) / 3


def test_pages_with_charts_name_plotly_without_a_script_and_pages_without_charts_not_at_all(
        pair: tuple[Run, Run], alice_client: Client) -> None:
    baseline, candidate = pair
    for url in (reverse("run_detail", args=[candidate.pk]),
                f"{reverse('compare')}?baseline={baseline.pk}&candidate={candidate.pk}"):
        page = alice_client.get(url).content.decode()
        assert f'<meta name="evalsite-plotly" content="/static/{plotly_bundle()}">' in page
        assert not re.search(r"<script[^>]*plotly-evalsite", page)  # nothing blocks rendering on it
        assert re.search(r'<script src="/static/js/figures\.js" defer>', page)
    for url in ("/", reverse("run_list"), reverse("evalset_list")):
        assert "plotly" not in alice_client.get(url).content.decode(), url


def test_a_charts_box_has_the_figures_height_before_it_is_drawn() -> None:
    fig = go.Figure(go.Bar(x=["a"], y=[1]), layout=base_layout(height=312))
    assert re.search(r'<div id="figure-[0-9a-f]+" class="plotly-graph-div" style="height:312px"></div>', to_html(fig))
    assert 'style="height:450px"' in to_html(go.Figure(go.Bar(x=["a"], y=[1])))  # plotly's default height


@pytest.mark.django_db
def test_up_collects_hashed_compressed_assets_once_and_serves_them_for_a_year(tmp_path: Path) -> None:
    """What `manage.py up` does before starting its web server, embedded or team: collectstatic
    with evalsite.staticfiles (skipped while the sources are unchanged), then whitenoise serves
    the hashed names gzipped (the plotly build: brotli, from its committed copy), immutable."""
    static_root = tmp_path / "staticfiles"
    env = {**os.environ, "EVALSITE_DATA_DIR": str(tmp_path)}
    env.pop("EVALSITE_STATICFILES_STORAGE", None)
    with override_settings(STATIC_ROOT=static_root):
        Command()._collect_static(env)
        manifest = static_root / "staticfiles.json"
        collected = manifest.stat().st_mtime_ns
        assert env["EVALSITE_STATICFILES_STORAGE"] == "evalsite.staticfiles.StaticFilesStorage"
        assert (static_root / STATIC_STAMP).exists()
        Command()._collect_static(env)  # unchanged sources: nothing collected again
        assert manifest.stat().st_mtime_ns == collected
    # The web server `up` starts, as a process of its own with the storage `up` chose.
    probe = (
        "import django, json; django.setup()\n"
        "from django.templatetags.static import static\n"
        "from django.test import Client\n"
        f"names = {{n: static(n) for n in ('css/evalsite.css', 'js/figures.js', 'vendor/htmx.min.js', {plotly_bundle()!r})}}\n"
        "out = {}\n"
        "for name, url in names.items():\n"
        "    r = Client().get(url, HTTP_ACCEPT_ENCODING='gzip, br')\n"
        "    out[name] = [url, r.status_code, r.get('Content-Encoding'), r['Cache-Control'], int(r['Content-Length'])]\n"
        "print(json.dumps(out))\n"
    )
    env["DJANGO_SETTINGS_MODULE"] = "evalsite.settings"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    import json

    served = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (url, status, encoding, cache, length) in served.items():
        stem, ext = os.path.splitext(name)
        assert re.fullmatch(rf"/static/{re.escape(stem)}\.[0-9a-f]{{12}}{re.escape(ext)}", url), url
        assert status == 200 and "max-age=315360000" in cache and "immutable" in cache, (name, cache)
        assert encoding in ("gzip", "br"), name
        assert length < (REPO / "static" / name).stat().st_size / 2, name
    assert served[plotly_bundle()][2] == "br"
    assert served[plotly_bundle()][4] == (VENDOR / (Path(plotly_bundle()).name + ".br")).stat().st_size


# --- In Chromium, as a phone sees the run page ----------------------------------------------------

LAYOUT_SHIFT = """
window.__shift = 0;
new PerformanceObserver(list => {
  for (const entry of list.getEntries()) if (!entry.hadRecentInput) window.__shift += entry.value;
}).observe({type: "layout-shift", buffered: true});
"""


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_on_a_phone_plotly_loads_when_a_chart_comes_into_view_and_nothing_shifts(
        chromium: Any, live_server: Any, pair: tuple[Run, Run]) -> None:
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    context.set_default_timeout(20_000)
    context.add_init_script(LAYOUT_SHIFT)
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(live_server.url + "/")
    page.wait_for_load_state("networkidle")
    assert not [url for url in fetched if "plotly-evalsite" in url]  # home has no chart

    page.goto(f"{live_server.url}/runs/{pair[1].pk}/")
    page.wait_for_load_state("networkidle")
    charts = page.locator(".charts .plotly-graph-div")
    assert charts.count() == 3
    first = charts.first.bounding_box()
    assert first is not None and first["y"] > 844  # below the fold on a phone
    assert not [url for url in fetched if "plotly-evalsite" in url]  # so plotly.js is not fetched yet
    assert page.locator(".js-plotly-plot").count() == 0
    boxes = [charts.nth(i).bounding_box()["height"] for i in range(3)]

    charts.first.scroll_into_view_if_needed()
    page.wait_for_selector(".charts .js-plotly-plot .main-svg")
    assert len([url for url in fetched if "plotly-evalsite" in url]) == 1
    page.mouse.wheel(0, 4000)
    page.wait_for_function("document.querySelectorAll('.charts .js-plotly-plot .main-svg').length >= 3")
    assert [charts.nth(i).bounding_box()["height"] for i in range(3)] == boxes
    assert page.evaluate("window.__shift") < 0.1
    context.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_trends_first_screen_on_a_phone_is_drawn_by_the_server_and_runs_no_plotly(
        chromium: Any, live_server: Any, pair: tuple[Run, Run]) -> None:
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    context.set_default_timeout(20_000)
    context.add_init_script(LAYOUT_SHIFT)
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    page.goto(live_server.url + "/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-pass-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(live_server.url + "/")
    page.goto(f"{live_server.url}/evalsets/{pair[1].evalset_version.evalset_id}/trend/")
    page.wait_for_load_state("networkidle")
    # the pass rate and latency lines: SVG from the server, the narrow drawing on a phone, one
    # point per run, in the first screen
    for testid in ("pass-rate-trend", "latency-trend"):
        svg = page.get_by_test_id(testid).locator("svg.svg-chart:visible")
        expect(svg).to_have_count(1)
        assert svg.get_attribute("viewBox") == "0 0 400 260"
        assert svg.locator("circle").count() == 2
    top = page.get_by_test_id("pass-rate-trend").bounding_box()
    assert top is not None and top["y"] + top["height"] < 844
    assert not [url for url in fetched if "plotly-evalsite" in url]  # nothing to fetch or run for them
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    # the heatmap, further down, is plotly's: fetched when the reader gets there
    page.get_by_test_id("heatmap").scroll_into_view_if_needed()
    page.wait_for_selector("[data-testid=heatmap] .js-plotly-plot .main-svg")
    assert len([url for url in fetched if "plotly-evalsite" in url]) == 1
    assert page.evaluate("window.__shift") < 0.1
    context.close()
