"""A real OpenID provider on 127.0.0.1 for the SSO tests (tests/oidc_idp/, django-oauth-
toolkit in a subprocess with its own SQLite), and a sign-in through it with real HTTP."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from evalsite.settings import oidc_providers

REPO = Path(__file__).resolve().parent.parent
CLIENT_ID = "evalsite-test"
CLIENT_SECRET = "evalsite-test-secret-" + "s" * 20
CALLBACK = "/accounts/oidc/sso/login/callback/"


class Provider:
    def __init__(self, folder: Path, port: int) -> None:
        self.folder, self.port = folder, port
        self.issuer = f"http://127.0.0.1:{port}/o"

    def directory(self) -> dict[str, Any]:
        return json.loads((self.folder / "directory.json").read_text())

    def set_person(self, username: str, **fields: Any) -> None:
        d = self.directory()
        person = d["people"].setdefault(username, {"password": f"{username}-idp-pass", "email": f"{username}@corp.example",
                                                   "email_verified": True, "groups": []})
        person.update(fields)
        (self.folder / "directory.json").write_text(json.dumps(d))

    def set_mode(self, mode: str) -> None:
        d = self.directory()
        d["mode"] = mode
        (self.folder / "directory.json").write_text(json.dumps(d))

    def configure(self, settings: Any, *, name: str = "Acme SSO", role_map: str = "") -> None:
        """evalsite's settings as the environment would give them for this provider."""
        settings.EVALSITE_OIDC_ISSUER = self.issuer
        settings.EVALSITE_OIDC_NAME = name
        settings.EVALSITE_OIDC_ROLE_MAP = role_map
        settings.SOCIALACCOUNT_PROVIDERS = oidc_providers(self.issuer, CLIENT_ID, CLIENT_SECRET,
                                                          ["openid", "profile", "email", "groups"], name)
        csp = {**settings.CONTENT_SECURITY_POLICY}
        csp["DIRECTIVES"] = {**csp["DIRECTIVES"], "form-action": ["'self'", f"http://127.0.0.1:{self.port}"]}
        settings.CONTENT_SECURITY_POLICY = csp


@contextmanager
def provider(folder: Path, evalsite_url: str) -> Iterator[Provider]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (folder / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                       serialization.NoEncryption()))
    (folder / "directory.json").write_text(json.dumps({
        "mode": "", "people": {},
        "client": {"client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uri": evalsite_url + CALLBACK}}))
    proc = subprocess.Popen([sys.executable, "-m", "tests.oidc_idp.serve", str(folder)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("READY "):
            raise RuntimeError(f"the test provider did not start: {line}{proc.stderr.read() if proc.stderr else ''}")
        yield Provider(folder, int(line.split()[1]))
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def http() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # loopback only: no proxy from the environment
    return session


def start(session: requests.Session, base: str) -> requests.Response:
    """The SSO button pressed: evalsite's answer, not followed (a redirect to the provider)."""
    page = session.get(base + "/accounts/login/")
    assert page.status_code == 200
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token is not None
    return session.post(base + "/accounts/oidc/sso/login/", data={"csrfmiddlewaretoken": token.group(1),
                                                                  "process": "login"}, allow_redirects=False)


def to_callback(session: requests.Session, base: str, username: str, password: str) -> str:
    """Through the provider's login form, up to (not into) evalsite's callback URL."""
    first = start(session, base)
    assert first.status_code == 302, first.text[:500]
    login_page = session.get(first.headers["Location"])  # the provider sends us to its login form
    assert "/login/" in login_page.url
    next_url = parse_qs(urlsplit(login_page.url).query)["next"][0]
    answer = session.post(login_page.url.split("?")[0], data={
        "csrfmiddlewaretoken": session.cookies["idp_csrftoken"], "username": username, "password": password,
        "next": next_url}, allow_redirects=False)
    location = answer.headers["Location"]
    while not location.startswith(base):  # the provider's authorize, then back to evalsite
        answer = session.get(location if location.startswith("http") else first.headers["Location"].split("/o/")[0]
                             + location, allow_redirects=False)
        location = answer.headers["Location"]
    assert CALLBACK in location
    return location


def sign_in(session: requests.Session, base: str, username: str, password: str) -> requests.Response:
    return session.get(to_callback(session, base, username, password))
