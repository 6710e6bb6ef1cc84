"""Single sign-on in Chromium: the login page's button posts to evalsite, which sends the
browser on to the provider (the Content-Security-Policy's form-action lets it go there),
the provider's form signs in, and the browser lands signed in on evalsite's home."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluations.models import Membership, Project
from tests.oidc_helpers import Provider, provider

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # the ORM calls made while playwright runs

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def idp(live_server: Any, tmp_path: Path, settings: Any, acme: Project) -> Iterator[Provider]:
    with provider(tmp_path, live_server.url) as p:
        p.configure(settings, role_map="acme-evals=acme:member")
        yield p


def test_signing_in_with_the_provider_in_chromium(chromium: Any, live_server: Any, idp: Provider) -> None:
    idp.set_person("olga", groups=["acme-evals"])
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    tab = context.new_page()
    violations: list[str] = []
    tab.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_role("button", name="Sign in with Acme SSO").click()
    tab.wait_for_url(f"http://127.0.0.1:{idp.port}/login/**")
    tab.fill("input[name=username]", "olga")
    tab.fill("input[name=password]", "olga-idp-pass")
    tab.click("button[type=submit]")
    tab.wait_for_url(live_server.url + "/")
    assert "olga" in tab.inner_text(".site-user")
    assert Membership.objects.get(user__username="olga", project__slug="acme").role == "member"
    assert violations == []
    context.close()


def test_a_linked_superuser_passes_the_code_step_after_the_provider_in_chromium(
        chromium: Any, live_server: Any, idp: Provider, settings: Any) -> None:
    import base64

    from django.contrib.auth import get_user_model
    from django_otp.plugins.otp_totp.models import TOTPDevice

    from tests.test_twofactor import totp

    settings.EVALSITE_REQUIRE_2FA_SUPERUSERS = True
    root = get_user_model().objects.create_superuser("root", "root@corp.example", "root-pass-123")
    device = TOTPDevice.objects.create(user=root, name="authenticator", confirmed=True)
    idp.set_person("root.corp", email="root@corp.example", email_verified=True, groups=["acme-evals"])
    context = chromium.new_context(viewport={"width": 390, "height": 844})
    tab = context.new_page()
    tab.goto(live_server.url + "/accounts/login/")
    tab.get_by_role("button", name="Sign in with Acme SSO").click()
    tab.wait_for_url(f"http://127.0.0.1:{idp.port}/login/**")
    tab.fill("input[name=username]", "root.corp")
    tab.fill("input[name=password]", "root.corp-idp-pass")
    tab.click("button[type=submit]")
    tab.wait_for_url(live_server.url + "/accounts/2fa/verify/")
    assert "Signed in with Acme SSO" in tab.inner_text("[data-testid=sso-second-factor]")
    assert tab.locator(".site-user").count() == 0  # not signed in yet
    tab.fill("input[name=code]", totp(base64.b32encode(bytes.fromhex(device.key)).decode()))
    tab.get_by_role("button", name="Verify").click()
    tab.wait_for_url(live_server.url + "/")
    assert "root" in tab.inner_text(".site-user")
    context.close()
