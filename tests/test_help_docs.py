"""Help: the README and docs/*.md served by the app, rendered from the same Markdown.

Every page renders, every link between pages (and to a heading of another page) resolves,
the screenshots are served, a page added to docs/ is listed with no code change, raw HTML in
a page is sanitised, the pages are for signed-in users, and it all works after collectstatic
with the manifest storage a team server uses. Also: the README stays a front door (under
300 lines, the two commands CI reads), and the benchmark table lives in docs/benchmarks.md."""

from __future__ import annotations

import importlib.util
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from django.urls import reverse

from tests.conftest import REPO

DOCS = REPO / "docs"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.ids: set[str] = set()
        self.in_doc = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("data-testid") == "help-doc":
            self.in_doc += 1
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if self.in_doc and tag == "a" and a.get("href"):
            self.hrefs.append(str(a["href"]))
        if self.in_doc and tag == "img" and a.get("src"):
            self.srcs.append(str(a["src"]))


def _parse(html: str) -> _Links:
    parser = _Links()
    parser.feed(html)
    return parser


def _slugs() -> list[str]:
    return ["readme", *sorted(p.stem.lower() for p in DOCS.glob("*.md"))]


def test_every_docs_page_renders_for_a_signed_in_user(alice_client: Client,
                                                      django_assert_max_num_queries: Any) -> None:
    assert len(_slugs()) >= 15  # the README and the pages it moved into docs/
    for slug in _slugs():
        with django_assert_max_num_queries(6):  # session, user, the header's projects: no more
            response = alice_client.get(reverse("help_page", args=[slug]))
        assert response.status_code == 200, slug
        assert re.search(r'<article class="help-doc"[^>]*>\s*<h1 id="', response.content.decode()), slug


def test_the_index_lists_every_page_of_docs_with_its_file(alice_client: Client) -> None:
    html = alice_client.get(reverse("help_index")).content.decode()
    for path in DOCS.glob("*.md"):
        assert f'href="/help/{path.stem.lower()}/"' in html, path.name
        assert f"docs/{path.name}" in html
    assert 'href="/help/readme/"' in html
    # The navigation offers it on every page.
    home = alice_client.get("/").content.decode()
    assert f'<a href="{reverse("help_index")}">Help</a>' in home


def test_every_link_between_pages_and_every_image_resolves(alice_client: Client) -> None:
    pages = {slug: _parse(alice_client.get(reverse("help_page", args=[slug])).content.decode()) for slug in _slugs()}
    checked = 0
    for slug, page in pages.items():
        for href in page.hrefs:
            assert not href.endswith(".md") and "docs/" not in href, (slug, href)  # every .md link rewritten
            if not href.startswith("/help/"):
                assert href.startswith(("#", "http://", "https://", "mailto:")), (slug, href)
                if href.startswith("#"):
                    assert href[1:] in page.ids, (slug, href)
                continue
            path, _, fragment = href.partition("#")
            target = path.removeprefix("/help/").strip("/")
            if not target:  # the docs folder itself: the index
                assert alice_client.get(path).status_code == 200
                continue
            assert target in pages, (slug, href)
            if fragment:
                assert fragment in pages[target].ids, (slug, href)
            checked += 1
        for src in page.srcs:
            image = alice_client.get(src)
            assert image.status_code == 200 and image["Content-Type"] == "image/png", (slug, src)
            assert b"".join(image.streaming_content)[:8] == b"\x89PNG\r\n\x1a\n"
    assert checked >= 20
    assert len(pages["readme"].srcs) >= 3  # the tour's screenshots: home, compare, drill-down


def test_a_heading_anchor_is_githubs_so_links_work_on_both(alice_client: Client) -> None:
    html = alice_client.get(reverse("help_page", args=["cli-and-ci"])).content.decode()
    assert 'id="the-cli-python-managepy-eval"' in html
    toc = re.search(r'data-testid="help-toc".*?</details>', html, re.S)
    assert toc and 'href="#gating-ci-on-regressions"' in toc.group()


def test_a_page_added_to_docs_is_listed_and_served_with_no_code_change(alice_client: Client, tmp_path: Path,
                                                                      settings: Any) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "README.md").write_text("# Front\n\nSee [ops](docs/operations.md#backups).\n")
    (docs / "operations.md").write_text("# Operations\n\n## Backups\n\nBack up [the rest](causes.md).\n")
    (docs / "causes.md").write_text("# Causes\n\nWhy a case failed.\n")
    settings.EVALSITE_DOCS_DIR = docs
    index = alice_client.get(reverse("help_index")).content.decode()
    assert 'href="/help/operations/"' in index and 'href="/help/causes/"' in index and ">Operations</a>" in index
    front = alice_client.get(reverse("help_page", args=["readme"])).content.decode()
    assert 'href="/help/operations/#backups"' in front
    ops = alice_client.get(reverse("help_page", args=["operations"])).content.decode()
    assert 'id="backups"' in ops and 'href="/help/causes/"' in ops
    assert alice_client.get(reverse("help_page", args=["nonexistent"])).status_code == 404


def test_untrusted_html_in_a_page_is_sanitised(alice_client: Client, tmp_path: Path, settings: Any) -> None:
    docs = tmp_path / "docs"
    (docs / "img").mkdir(parents=True)
    (docs / "img" / "x.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    (docs / "hostile.md").write_text(
        "# Hostile\n\n<script>alert('page')</script>\n\n"
        '<img src="x" onerror="alert(1)"> <a href="javascript:alert(2)">js</a> '
        '<iframe src="https://example.com"></iframe> <p style="color:red" onclick="alert(3)">styled</p>\n\n'
        "[md link](javascript:alert(4)) ![svg](img/x.svg) [source](../evaluations/models.py)\n\n"
        "<form action=\"/logout/\"><button>go</button></form>\n"
    )
    settings.EVALSITE_DOCS_DIR = docs
    response = alice_client.get(reverse("help_page", args=["hostile"]))
    assert response.status_code == 200
    doc = re.search(r'<article class="help-doc".*?</article>', response.content.decode(), re.S)
    assert doc
    body = doc.group()
    for bad in ("<script", "onerror", "javascript:", "<iframe", "onclick", "style=", "<form", "<button",
                "x.svg", "evaluations/models.py"):
        assert bad not in body, bad
    assert "styled" in body and "source" in body  # the text stays, only the markup goes
    assert alice_client.get(reverse("help_image", args=["x.svg"])).status_code == 404  # SVG can carry script
    assert alice_client.get("/help/img/..%2F..%2FREADME.md").status_code == 404


def test_the_help_pages_are_for_signed_in_users_only(alice_client: Client) -> None:
    for url in (reverse("help_index"), reverse("help_page", args=["readme"]), reverse("help_image", args=["home.png"])):
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login") + "?next=")
        assert alice_client.get(url).status_code == 200


@pytest.mark.django_db
def test_after_collectstatic_the_help_pages_and_images_are_served(alice_client: Client, tmp_path: Path) -> None:
    storage = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    with override_settings(STATIC_ROOT=tmp_path, STORAGES=storage, WHITENOISE_USE_FINDERS=False,
                           WHITENOISE_AUTOREFRESH=False):
        call_command("collectstatic", "--noinput", verbosity=0)
        assert not (tmp_path / "docs").exists()  # the docs are read from the checkout, not collected
        html = alice_client.get(reverse("help_page", args=["readme"])).content.decode()
        assert re.search(r'href="/static/css/help\.[0-9a-f]{12}\.css"', html)
        image = alice_client.get(reverse("help_image", args=["compare.png"]))
        assert image.status_code == 200 and image["Content-Type"] == "image/png"


def test_the_readme_is_a_front_door_with_the_two_commands_ci_runs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 300
    assert "```bash\npip install -r requirements.txt && python manage.py up\n```" in readme
    command = "pip install -r requirements-dev.txt && python -m pytest -q -n 4"
    assert f"```bash\n{command}\n```" in readme
    assert f"TEST_COMMAND='{command}'" in (REPO / ".ci" / "run").read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):  # every link names a file of the repository
        if not target.startswith("http"):
            assert (REPO / target).exists(), target
    for name in ("home.png", "compare.png", "drilldown.png"):
        image = DOCS / "img" / name
        assert image.stat().st_size < 250_000, name  # kept small


def test_the_benchmark_table_lives_in_docs_benchmarks(tmp_path: Path, monkeypatch: Any) -> None:
    spec = importlib.util.spec_from_file_location("bench_all", REPO / "bench" / "all.py")
    assert spec is not None and spec.loader is not None
    bench_all = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_all", bench_all)  # its dataclasses look their module up
    spec.loader.exec_module(bench_all)
    assert bench_all.DOCS == DOCS / "benchmarks.md"
    assert "import 10k ADK cases" in bench_all.docs_figures()  # the table bench/all.py compares with
    copy = tmp_path / "benchmarks.md"
    copy.write_text(bench_all.DOCS.read_text())
    monkeypatch.setattr(bench_all, "DOCS", copy)
    bench_all.update_docs([bench_all.Figure("import 10k ADK cases", 0.5, "s", "<= 2.5 s", 1.2)])
    assert bench_all.docs_figures() == {"import 10k ADK cases": "0.50 s"}
    assert copy.read_text().startswith("# Benchmarks")  # the rest of the page kept
