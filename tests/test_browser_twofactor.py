"""The second factor in Chromium: a superuser who must have one signs in with the password,
is taken to the set-up page, scans (reads) the key, enters the code, keeps the recovery
codes; the next sign-in asks for the code; no CSP violation on the way."""

from __future__ import annotations

import os
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tests.test_twofactor import _unspent_code, totp

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM calls made while playwright runs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _password(tab: Any) -> None:
    tab.fill("#id_username", "root")
    tab.fill("#id_password", "root-pass-123456")
    tab.click("button:has-text('Log in')")


def test_a_superuser_sets_up_the_second_factor_and_signs_in_with_it(chromium: Any, live_server: Any,
                                                                    settings: Any) -> None:
    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True
    get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-123456")
    context = chromium.new_context(viewport={"width": 390, "height": 900})
    tab = context.new_page()
    violations: list[str] = []
    tab.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    tab.goto(live_server.url + "/accounts/login/")
    _password(tab)
    tab.wait_for_url("**/accounts/2fa/setup/")
    assert tab.locator("img.twofactor-qr").evaluate("img => img.complete && img.naturalWidth > 0")
    tab.fill("#id_code", totp(tab.inner_text("[data-testid=totp-secret]")))
    secret = tab.inner_text("[data-testid=totp-secret]")
    tab.click("button:has-text('Turn on')")
    # The codes page answers the POST at the same address: wait for it rather than count at once
    # (count() does not wait, and a loaded machine had not drawn it yet).
    tab.locator("[data-testid=recovery-codes]").wait_for()
    assert tab.locator("[data-testid=recovery-codes] li").count() == 10
    tab.click("text=Continue")
    tab.wait_for_url(live_server.url + "/")
    context.clear_cookies()
    tab.goto(live_server.url + "/accounts/login/")
    _password(tab)
    tab.wait_for_url("**/accounts/2fa/verify/")
    root = get_user_model().objects.get(username="root")
    tab.fill("#id_code", _unspent_code(root, secret))  # the set-up's own code is spent
    tab.click("button:has-text('Verify')")
    tab.wait_for_url(live_server.url + "/")
    assert tab.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert violations == []
    context.close()
