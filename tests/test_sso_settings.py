"""SSO's settings as the environment gives them, read by a fresh Python (settings are read
once at start): the provider configured, the CSP's form-action opened to the issuer's origin
only, and the combinations that cannot work refused at start; a provider that cannot be
reached is a page that says so, not a 500."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from evalsite.settings import oidc_providers
from evaluations.models import AuditEvent

REPO = Path(__file__).resolve().parent.parent
SHOW = ("import json, evalsite.settings as s; print(json.dumps({'form': s.CONTENT_SECURITY_POLICY['DIRECTIVES']"
        "['form-action'], 'apps': s.SOCIALACCOUNT_PROVIDERS['openid_connect']['APPS'], 'scope': "
        "s.SOCIALACCOUNT_PROVIDERS['openid_connect']['SCOPE']}))")


def _settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_")}
    return subprocess.run([sys.executable, "-c", SHOW], cwd=REPO, capture_output=True, text=True,
                          env={**clean, "EVALSITE_DATA_DIR": str(tmp_path), **env})


def test_the_environment_configures_the_provider_and_the_form_action(tmp_path: Path) -> None:
    done = _settings(tmp_path, EVALSITE_OIDC_ISSUER="https://id.example.com/realms/acme/",
                     EVALSITE_OIDC_CLIENT_ID="evalsite", EVALSITE_OIDC_CLIENT_SECRET="s3cret",
                     EVALSITE_OIDC_SCOPES="openid,email groups", EVALSITE_OIDC_NAME="Acme")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["form"] == ["'self'", "https://id.example.com"]
    assert shown["scope"] == ["openid", "email", "groups"]
    [app] = shown["apps"]
    assert app["provider_id"] == "sso" and app["name"] == "Acme" and app["client_id"] == "evalsite"
    assert app["settings"] == {"server_url": "https://id.example.com/realms/acme", "oauth_pkce_enabled": True}


def test_without_an_issuer_there_is_no_provider_and_the_form_action_is_self(tmp_path: Path) -> None:
    shown = json.loads(_settings(tmp_path).stdout)
    assert shown["form"] == ["'self'"] and shown["apps"] == []


@pytest.mark.parametrize(("env", "message"), [
    ({"EVALSITE_SSO_ONLY": "1"}, "EVALSITE_SSO_ONLY=1 needs EVALSITE_OIDC_ISSUER"),
    ({"EVALSITE_OIDC_ISSUER": "https://id.example.com"}, "set EVALSITE_OIDC_CLIENT_ID and EVALSITE_OIDC_CLIENT_SECRET"),
])
def test_settings_that_cannot_work_are_refused_at_start(tmp_path: Path, env: dict[str, str], message: str) -> None:
    done = _settings(tmp_path, **env)
    assert done.returncode != 0 and message in done.stderr


@pytest.mark.django_db
def test_a_provider_that_cannot_be_reached_is_a_page_that_says_so(settings: Any) -> None:
    settings.EVALSITE_OIDC_ISSUER = "http://127.0.0.1:9/o"  # the discard port: refused at once
    settings.SOCIALACCOUNT_PROVIDERS = oidc_providers("http://127.0.0.1:9/o", "id", "secret", ["openid"], "Acme")
    client = Client()
    client.get("/accounts/login/")
    answer = client.post("/accounts/oidc/sso/login/", {"process": "login"})
    assert answer.status_code == 502
    assert b"discovery document could not be read (ConnectionError)" in answer.content
    assert AuditEvent.objects.get(verb=AuditEvent.Verb.SIGNIN_FAILED, project=None).data["method"] == "sso"
    assert AuditEvent.objects.filter(project__isnull=False).count() == 0  # it named no account: no project's feed
