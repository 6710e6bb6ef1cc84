"""The chart library is a build of the cartesian trace types only, of the same plotly.js
version the Python package writes figures for, served compressed and cached for a year
(its file name carries its version); pages have a favicon."""

from __future__ import annotations

import gzip
import os
import re

import plotly
import pytest
from django.test import Client

from tests.conftest import REPO

BUNDLE = "vendor/plotly-cartesian-4.1.1.min.js"


def _version(text: str) -> str:
    match = re.search(r"plotly\.js(?: \([a-z -]+\))? v(\d+\.\d+\.\d+)", text[:400])
    assert match, text[:400]
    return match.group(1)


def test_the_bundle_matches_the_python_packages_plotly_js() -> None:
    ours = (REPO / "static" / BUNDLE).read_text(encoding="utf-8")
    with open(os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js"),
              encoding="utf-8") as fh:
        theirs = fh.read(400)
    assert _version(ours) == _version(theirs) == "4.1.1"
    assert "(cartesian - minified)" in ours[:200]
    assert len(ours) < 1_600_000  # the full bundle is 4.8 MB
    assert gzip.decompress((REPO / "static" / (BUNDLE + ".gz")).read_bytes()).decode() == ours
    assert (REPO / "static" / "vendor" / "plotly.js-LICENSE.txt").read_text().startswith("MIT License")


@pytest.mark.django_db
def test_the_bundle_is_served_compressed_with_long_cache_headers() -> None:
    response = Client().get(f"/static/{BUNDLE}", HTTP_ACCEPT_ENCODING="gzip")
    assert response.status_code == 200
    assert response["Content-Encoding"] == "gzip"
    assert int(response["Content-Length"]) < 600_000
    assert "max-age=315360000" in response["Cache-Control"] and "immutable" in response["Cache-Control"]
    css = Client().get("/static/css/evalsite.css")
    assert "immutable" not in css["Cache-Control"]  # a file that changes under its name is not


def test_pages_name_a_favicon(alice_client: Client) -> None:
    page = alice_client.get("/").content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    assert Client().get("/static/favicon.svg").status_code == 200
