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


def pytest_configure(config: pytest.Config) -> None:
    """The test process hashes passwords with a fast hasher: PBKDF2's million iterations took
    0.17 s for every user a fixture makes, most of the suite's time in the fixtures. Servers the
    tests start in other processes keep the production hashers, and a test that is about the
    hashing itself sets them back with the `settings` fixture.

    And whitenoise looks a static file up when it is asked for (its autorefresh mode, as under
    runserver) instead of listing every file the finders know when its middleware starts: every
    new test `Client` builds the middleware chain again on its first request, and the listing
    (some 240 files, 12 ms) was 15 % of a worker's CPU in a py-spy profile of the suite. The same
    files are served with the same headers (tests/test_fast_pages.py, tests/test_static_assets.py);
    `manage.py up`, which the tests also start in other processes, serves its collected assets
    as in production."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.WHITENOISE_AUTOREFRESH = True


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


def _template_key() -> str:
    """What the template data directory depends on: the migrations and the static sources."""
    import hashlib

    digest = hashlib.sha256()
    for folder in (REPO / "evaluations" / "migrations", REPO / "static"):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                stat = path.stat()
                digest.update(f"{path.relative_to(REPO)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@pytest.fixture(scope="session")
def embedded_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Fills a folder as `manage.py up` leaves an embedded data directory after its first start
    (a migrated SQLite database, the static files collected), for the tests that start evalsite
    in another process: each copies one template instead of migrating and collecting again.
    The template is made once per test session, shared by the xdist workers through a lock; the
    server started on the copy still runs its own migrate and static check, which find nothing
    to do."""
    import fcntl
    import os
    import shutil
    import subprocess
    import sys

    shared = tmp_path_factory.getbasetemp().parent
    template = shared / f"evalsite-data-template-{_template_key()}"
    with (shared / "evalsite-data-template.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (template / ".ready").exists():
            shutil.rmtree(template, ignore_errors=True)
            template.mkdir()
            env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY",
                                                                    "DJANGO_SETTINGS_MODULE"}}
            env.update({"EVALSITE_DATA_DIR": str(template),
                        "EVALSITE_STATICFILES_STORAGE": "evalsite.staticfiles.StaticFilesStorage"})
            subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True)
            subprocess.run([sys.executable, "-c", _COLLECT_AS_UP_DOES], cwd=REPO, env=env, check=True)
            (template / ".ready").touch()

    def fill(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copytree(template, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".ready", "secret_key"))
        return folder

    return fill


# The static files collected with the stamp `up` checks, so that an `up` on a copy skips them.
_COLLECT_AS_UP_DOES = """
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
import django
django.setup()
from django.core.management import call_command
from django.conf import settings
from pathlib import Path
from evaluations.management.commands.up import STATIC_STAMP, static_fingerprint
call_command("collectstatic", "--noinput", "-v", "0")
(Path(settings.STATIC_ROOT) / STATIC_STAMP).write_text(static_fingerprint(os.environ["EVALSITE_STATICFILES_STORAGE"]))
"""


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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n 4` hands tests out a module's run at a time, few ahead (tests/xdist_schedule.py)."""
    from tests.xdist_schedule import make_scheduler

    return make_scheduler(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests need Debian's Chromium. Without it they are skipped with that reason,
    unless EVALSITE_REQUIRE_BROWSER is set (CI), where a missing browser is a failure."""
    import os

    skip_team_tests(items)
    mark_database_free(items)
    mark_database_agnostic(items)
    heavy_modules_first(items)
    if Path(CHROMIUM).exists() or os.environ.get("EVALSITE_REQUIRE_BROWSER"):
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is not installed (apt-get install -y chromium)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


def heavy_modules_first(items: list[pytest.Item]) -> None:
    """Start the long tests first. pytest-xdist hands tests out in collection order, and in
    alphabetical order `test_schemathesis`, `test_up` and `test_recipe_otel` (30-47 s each)
    came last and ran alone for the suite's last three minutes. A module is heavy when one of
    its tests starts processes, drives Chromium or commits to the database.

    pytest-django's order is kept where it matters: on each worker every test that rolls back
    (`db`) still runs before every test that commits (`transactional_db`, `live_server`), whose
    flush empties the tables, rows the migrations made included. So the order is: heavy tests
    that use no database (subprocess servers on databases of their own), then the rolled-back
    tests, then the committing ones, then the light tests that use no database; heavy modules
    first within each, each module's tests in their order."""
    def heavy(item: pytest.Item) -> bool:
        return "slow" in item.keywords or "browser" in item.keywords or _django_group(item) == 1

    first = {item.nodeid.split("::")[0] for item in items if heavy(item)}

    def key(item: pytest.Item) -> tuple[int, bool]:
        group, light = _django_group(item), item.nodeid.split("::")[0] not in first
        if group == 2:
            return (3 if light else -1, False)
        return (group, light)

    items.sort(key=key)


def _django_group(item: pytest.Item) -> int:
    """pytest-django's order of a test: 0 rolls back, 1 commits (and flushes), 2 uses no database."""
    fixtures = set(getattr(item, "fixturenames", ()))
    marker = item.get_closest_marker("django_db")
    if marker and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")):
        return 1
    if {"transactional_db", "live_server", "django_db_reset_sequences"} & fixtures:
        return 1
    return 0 if marker or "db" in fixtures else 2


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


def mark_database_agnostic(items: list[pytest.Item]) -> None:
    """Mark `database_agnostic` the tests whose answer the database cannot change: the browser
    journeys (what Chromium draws of pages that the test client checks on both databases, query
    counts included) and any test marked so by hand. CI runs them in the SQLite pass only."""
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.database_agnostic)


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
