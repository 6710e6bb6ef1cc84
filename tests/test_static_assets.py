"""The chart library is evalsite's own build of plotly.js (assets/plotly: core + scatter, bar,
heatmap), of the version the Python package writes figures for, named by its content hash,
served precompressed and cached for a year both from the finders (the embedded default) and
after collectstatic with the compressed manifest storage; pages have a favicon."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from pathlib import Path

import plotly
import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from evaluations.web.templatetags.evalsite import plotly_bundle
from tests.conftest import REPO

VENDOR = REPO / "static" / "vendor"
CARTESIAN_BYTES = 1_500_041  # the published plotly.js-cartesian-dist-min 4.1.1 it replaced


def _version(text: str) -> str:
    match = re.search(r"plotly\.js(?: \([a-z:, -]+\))? v(\d+\.\d+\.\d+)", text[:400])
    assert match, text[:400]
    return match.group(1)


def test_one_bundle_named_by_its_content_hash_and_built_from_the_pinned_recipe() -> None:
    bundles = sorted(VENDOR.glob("plotly-*.min.js"))
    assert [p.name for p in bundles] == [Path(plotly_bundle()).name]
    code = bundles[0].read_bytes()
    assert bundles[0].name == f"plotly-evalsite-{hashlib.sha256(code).hexdigest()[:12]}.min.js"
    assert gzip.decompress(Path(f"{bundles[0]}.gz").read_bytes()) == code
    assert Path(f"{bundles[0]}.br").stat().st_size < Path(f"{bundles[0]}.gz").stat().st_size
    assert len(code) < CARTESIAN_BYTES  # only three trace types, not every cartesian one
    # The recipe: the documented modular build, plotly.js pinned to the Python package's.
    recipe = (REPO / "assets" / "plotly" / "index.js").read_text()
    assert 'require("plotly.js/lib/core")' in recipe
    assert all(f'require("plotly.js/lib/{trace}")' in recipe for trace in ("scatter", "bar", "heatmap"))
    package = json.loads((REPO / "assets" / "plotly" / "package.json").read_text())
    lock = json.loads((REPO / "assets" / "plotly" / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/plotly.js"]["version"] == package["devDependencies"]["plotly.js"]
    with open(os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js"), encoding="utf-8") as fh:
        theirs = fh.read(400)
    assert _version(code.decode()) == _version(theirs) == package["devDependencies"]["plotly.js"]
    assert (VENDOR / "plotly.js-LICENSE.txt").read_text().startswith("MIT License")


def test_the_charts_use_only_the_trace_types_in_the_bundle() -> None:
    """A chart with another trace type would draw nothing: add it to assets/plotly/index.js."""
    charts = "".join(p.read_text() for p in (REPO / "evaluations" / "web" / "charts").glob("*.py"))
    assert set(re.findall(r"\bgo\.([A-Z][a-z]+)\(", charts)) - {"Figure"} == {"Bar", "Scatter", "Heatmap"}


@pytest.mark.django_db
@pytest.mark.parametrize("encoding, suffix", [("gzip", ".gz"), ("br", ".br")])
def test_the_bundle_is_served_precompressed_and_immutable(encoding: str, suffix: str) -> None:
    url = f"/static/{plotly_bundle()}"
    response = Client().get(url, HTTP_ACCEPT_ENCODING=encoding)
    assert response.status_code == 200
    assert response["Content-Encoding"] == encoding
    assert int(response["Content-Length"]) == (VENDOR / (Path(url).name + suffix)).stat().st_size
    assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]
    plain = Client().get(url)
    assert "Content-Encoding" not in plain and "immutable" in plain["Cache-Control"]
    css = Client().get("/static/css/evalsite.css")
    assert "immutable" not in css["Cache-Control"]  # a file that changes under its name is not


@pytest.mark.django_db
def test_after_collectstatic_the_manifest_name_is_served_compressed_and_immutable(tmp_path: Path) -> None:
    storage = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    with override_settings(
        STATIC_ROOT=tmp_path, STORAGES=storage, WHITENOISE_USE_FINDERS=False, WHITENOISE_AUTOREFRESH=False
    ):
        call_command("collectstatic", "--noinput", verbosity=0)
        client = Client()
        from django.templatetags.static import static

        url = static(plotly_bundle())
        assert re.fullmatch(r"/static/vendor/plotly-evalsite-[0-9a-f]{12}\.min\.[0-9a-f]{12}\.js", url), url
        response = client.get(url, HTTP_ACCEPT_ENCODING="gzip")
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
        assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]


def test_pages_name_a_favicon(alice_client: Client) -> None:
    page = alice_client.get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    assert Client().get("/static/favicon.svg").status_code == 200
