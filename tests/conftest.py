"""Shared fixtures.

The people in these tests:
- alice: a member of the "acme" project; uploads and reads eval sets.
- bob: a member of another project ("globex"); must never see acme's data.
- admin: a superuser, for the admin-only paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evaluations.interop import SourceFile
from evaluations.models import Membership, Project

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
# Real eval sets published by ADK, UiPath and DeepEval, kept in the repository with their
# licences and provenance (tests/data/realworld/README.md).
REALWORLD = DATA / "realworld"


def source(path: Path, name: str | None = None) -> SourceFile:
    return SourceFile(name or path.name, path.read_bytes())


@pytest.fixture
def realworld() -> Path:
    assert REALWORLD.is_dir(), f"the real-world eval sets are expected at {REALWORLD}"
    return REALWORLD


@pytest.fixture
def acme(db: None) -> Project:
    return Project.objects.create(slug="acme", name="Acme")


@pytest.fixture
def globex(db: None) -> Project:
    return Project.objects.create(slug="globex", name="Globex")


@pytest.fixture
def alice(acme: Project):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_user("alice", "alice@example.com", "alice-pass-123")
    Membership.objects.create(project=acme, user=user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def bob(globex: Project):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_user("bob", "bob@example.com", "bob-pass-123")
    Membership.objects.create(project=globex, user=user, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def alice_client(alice) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def bob_client(bob) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(bob)
    return client


CHROMIUM = "/usr/bin/chromium"
# Measured here: without the background-networking flags Chromium keeps trying to
# reach Google's hosts from this closed network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def chromium():  # type: ignore[no-untyped-def]
    """Debian's headless Chromium, driven by playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def tab(chromium):  # type: ignore[no-untyped-def]
    """A fresh desktop tab (1440 x 900, 10 s timeouts, downloads accepted), closed after the test."""
    context = chromium.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests need Debian's Chromium. Without it they are skipped with that reason,
    unless EVALSITE_REQUIRE_BROWSER is set (CI), where a missing browser is a failure."""
    import os

    skip_team_tests(items)
    mark_database_free(items)
    if Path(CHROMIUM).exists() or os.environ.get("EVALSITE_REQUIRE_BROWSER"):
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


DATABASE_FIXTURES = frozenset({"db", "transactional_db", "live_server", "django_db_reset_sequences",
                               "django_db_serialized_rollback"})


def mark_database_free(items: list[pytest.Item]) -> None:
    """Mark `database_free` the tests that use no database: no django_db mark and no database
    fixture, so pytest-django blocks any query they would make (the formats, the evaluators,
    the charts, and the tests whose subprocess servers run on a throwaway SQLite of their
    own). DATABASE_URL changes nothing for them: CI runs them in the SQLite pass and leaves
    them out of the PostgreSQL pass (`-m "not database_free"`)."""
    for item in items:
        if item.get_closest_marker("django_db") is None and not DATABASE_FIXTURES & set(
                getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.database_free)


TEAM_TESTS_SKIP_REASON = ("team-server test: needs PostgreSQL and Redis on 127.0.0.1; runs only with "
                          "EVALSITE_TEAM_TESTS=1 (and DATABASE_URL=postgres://..., REDIS_URL=redis://...), "
                          "as .ci/team.sh does")


def skip_team_tests(items: list[pytest.Item]) -> None:
    """Tests marked `team` start the team-server shape against PostgreSQL and Redis, which a
    fresh machine lacks: they run only when EVALSITE_TEAM_TESTS=1 says those are there."""
    import os

    if os.environ.get("EVALSITE_TEAM_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason=TEAM_TESTS_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("team") is not None:
            item.add_marker(skip)


# Walks the page down half a viewport at a time, as a reader scrolling would, until every
# figure's data block is drawn, then back to the top.
_DRAW_CHARTS = """async () => {
  const blocks = () => Array.from(document.querySelectorAll("script.plotly-figure"));
  for (let y = 0; y <= document.documentElement.scrollHeight; y += window.innerHeight / 2) {
    window.scrollTo(0, y);
    await new Promise(r => setTimeout(r, 60));
  }
  const started = Date.now();
  while (blocks().some(b => !b.dataset.drawn || !document.getElementById(b.dataset.target).querySelector(".main-svg"))) {
    if (Date.now() - started > 20000) throw new Error("figures not drawn");
    await new Promise(r => setTimeout(r, 100));
  }
  window.scrollTo(0, 0);
  return blocks().length;
}"""


def draw_charts(page: Any) -> int:
    """Every chart of the page drawn: static/js/figures.js draws a chart when it comes into
    view (and fetches plotly.js with the first), so a test scrolls to it as a person would.
    Returns how many figures the page has."""
    return int(page.evaluate(_DRAW_CHARTS))
