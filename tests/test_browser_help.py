"""In real Chromium: the Help pages (reached from the navigation, a link between pages and its
image, the table of contents, no horizontal overflow at 390 px, no console errors under the
Content-Security-Policy), a new API token's Copy button (with and without the Clipboard API,
no network), and the New run page at 390 px with a long eval id in its problems."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # playwright's loop runs in this thread

from evaluations.models import Project
from tests.engine_helpers import import_demo

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OVERFLOW = "document.documentElement.scrollWidth"


def _context(chromium: Any, width: int, **options: Any) -> Iterator[tuple[Any, list[str]]]:
    context = chromium.new_context(viewport={"width": width, "height": 900}, **options)
    context.set_default_timeout(10_000)
    # Nothing leaves 127.0.0.1: a request anywhere else fails the test.
    outside: list[str] = []
    context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(("http://127.0.0.1",
                  "http://localhost", "data:", "blob:")) else (outside.append(route.request.url), route.abort()))
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    yield tab, errors
    assert outside == []
    context.close()


@pytest.fixture
def desktop(chromium: Any) -> Iterator[tuple[Any, list[str]]]:
    yield from _context(chromium, 1440, permissions=["clipboard-read", "clipboard-write"])


@pytest.fixture
def phone(chromium: Any) -> Iterator[tuple[Any, list[str]]]:
    yield from _context(chromium, 390)


def _login(tab: Any, server: str) -> None:
    tab.goto(server + "/accounts/login/")
    tab.get_by_label("Username").fill("alice")
    tab.get_by_label("Password").fill("alice-pass-123")
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url(server + "/")


def test_help_is_in_the_navigation_and_its_pages_link_to_each_other(desktop: Any, live_server: Any,
                                                                    acme: Project, alice: Any) -> None:
    tab, errors = desktop
    _login(tab, live_server.url)
    tab.get_by_role("navigation", name="Main").get_by_role("link", name="Help").click()
    tab.wait_for_url(live_server.url + "/help/")
    tab.get_by_test_id("help-index").get_by_role("link", name="evalsite", exact=True).click()  # the README
    tab.wait_for_url(live_server.url + "/help/readme/")
    image = tab.locator("article img").first
    assert image.evaluate("img => img.complete && img.naturalWidth > 0")  # the screenshot loaded
    tab.locator("article").get_by_role("link", name="Traces", exact=True).click()
    tab.wait_for_url(live_server.url + "/help/traces/")
    toc = tab.get_by_test_id("help-toc")
    toc.get_by_role("link", name="Send a trace with curl").click()
    assert tab.url.endswith("/help/traces/#send-a-trace-with-curl")
    assert tab.locator("#send-a-trace-with-curl").evaluate("h => h.getBoundingClientRect().top") < 100
    assert "curl -X POST" in tab.locator("article pre").first.inner_text()
    assert errors == []


def test_help_pages_fit_a_phone(phone: Any, live_server: Any, acme: Project, alice: Any) -> None:
    tab, errors = phone
    _login(tab, live_server.url)
    for url in ("/help/", "/help/readme/", "/help/api/", "/help/team-server/", "/help/traces/"):
        tab.goto(live_server.url + url)
        assert tab.evaluate(OVERFLOW) <= 390, url  # wide tables and code scroll inside themselves
    assert errors == []


@pytest.mark.parametrize("clipboard_api", [True, False], ids=["clipboard-api", "execCommand"])
def test_a_new_token_has_a_copy_button(chromium: Any, live_server: Any, acme: Project, alice: Any,
                                       clipboard_api: bool) -> None:
    for tab, errors in _context(chromium, 1440, permissions=["clipboard-read", "clipboard-write"]):
        if not clipboard_api:  # as on a plain-HTTP team server, where the Clipboard API is absent
            tab.add_init_script("Object.defineProperty(navigator, 'clipboard', {value: undefined});"
                                "document.execCommand = (c) => { window.__copied = c; return true; };")
        _login(tab, live_server.url)
        tab.goto(live_server.url + "/account/")
        tab.get_by_label("Name").fill("CI on main")
        tab.get_by_role("button", name="Create token").click()
        secret = tab.get_by_label("The new API token").input_value()
        assert secret.startswith("es_")
        tab.get_by_test_id("copy-token").click()
        tab.locator("#new-token-status").filter(has_text="Copied.").wait_for()
        if clipboard_api:
            assert tab.evaluate("navigator.clipboard.readText()") == secret
        else:
            assert tab.evaluate("window.__copied") == "copy"
            selected = tab.get_by_label("The new API token").evaluate("i => i.value.slice(i.selectionStart, i.selectionEnd)")
            assert selected == secret
        assert tab.get_by_test_id("copy-token").inner_text() == "Copied"
        assert errors == []


def _late(tab: Any, ms: int) -> Any:
    """A route handler that answers after `ms` milliseconds (a slow or loaded server)."""
    return lambda route: (tab.wait_for_timeout(ms), route.continue_())


def test_the_copy_button_is_hidden_until_its_script_is_there(chromium: Any, live_server: Any, acme: Project,
                                                            alice: Any) -> None:
    """A slow evalsite.js (a loaded server): the button shows once its click does something.
    A class's display overrode `hidden`, and a click before the script was lost."""
    for tab, errors in _context(chromium, 1440, permissions=["clipboard-read", "clipboard-write"]):
        _login(tab, live_server.url)
        tab.route("**/js/evalsite.js", _late(tab, 1500))
        tab.goto(live_server.url + "/account/")
        tab.get_by_label("Name").fill("CI on main")
        tab.get_by_role("button", name="Create token").click()
        secret = tab.get_by_label("The new API token").input_value()
        assert tab.evaluate("document.readyState") != "complete"  # the script is still on its way
        assert not tab.get_by_test_id("copy-token").is_visible()
        tab.get_by_test_id("copy-token").click()  # waits for it to show
        tab.locator("#new-token-status").filter(has_text="Copied.").wait_for()
        assert tab.evaluate("navigator.clipboard.readText()") == secret
        tab.unroute_all(behavior="ignoreErrors")
        assert errors == []


def test_the_new_run_page_fits_390_px_with_a_long_eval_id_in_its_problems(phone: Any, live_server: Any,
                                                                         acme: Project, alice: Any) -> None:
    import_demo(acme)
    tab, errors = phone
    _login(tab, live_server.url)
    tab.goto(live_server.url + "/runs/new/")
    assert tab.evaluate(OVERFLOW) <= 390
    tab.get_by_label("Upload outputs").check()
    long_id = "/home/runner/work/agent/tests/fixtures/" + "x" * 80 + ".test.json"
    outputs = json.dumps([{"eval_id": long_id, "iteration": 0, "turns": []}]).encode()
    tab.set_input_files("input[name=outputs_file]", files=[{"name": "outputs.json", "mimeType": "application/json",
                                                           "buffer": outputs}])
    tab.locator("form.run-form button[type=submit]").click()
    tab.get_by_text("The run was not started.").wait_for()
    tab.wait_for_load_state("load")  # its style sheet applied: measured as the reader sees it
    assert long_id in tab.locator("main").inner_text()
    assert tab.evaluate(OVERFLOW) <= 390
    assert [e for e in errors if "400" not in e] == []  # the refused form answers 400, as it should
