"""`manage.py tokens create|list|revoke --user NAME`: API tokens made on the server for a
script that provisions a CI job (the API mints tokens from a signed-in session only); and
docs/api.md's token commands, run as written against a live server on 127.0.0.1."""

from __future__ import annotations

import io
import re
import shlex
from typing import Any

import pytest
import requests
from django.core.management import CommandError, call_command
from django.test import Client

from evaluations.models import ApiToken, AuditEvent
from tests.conftest import REPO

MARKER = "<!-- tokens-example -->"


def tokens(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("tokens", *argv, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_prints_the_token_once_and_it_works_on_the_api(alice: Any) -> None:
    out, err = tokens("create", "--user", "alice", "--name", "CI on main")
    secret = out.strip()
    assert re.fullmatch(r"es_[A-Za-z0-9_-]{43}", secret), out
    assert "shown only this once" in err and secret not in err
    token = ApiToken.objects.get(user=alice)
    assert token.name == "CI on main" and token.digest != secret and secret.startswith(token.prefix)
    client = Client()
    assert client.get("/api/v1/projects/", HTTP_AUTHORIZATION=f"Token {secret}").status_code == 200
    listed, _ = tokens("list", "--user", "alice")
    assert listed.startswith(f"{token.pk}\tCI on main\t{token.prefix}…\tcreated ") and "active" in listed
    assert secret not in listed
    event = AuditEvent.objects.get(verb=AuditEvent.Verb.TOKEN_CREATED)
    assert event.actor == alice and event.summary.endswith("with manage.py tokens")


def test_revoke_stops_the_token_and_says_when_it_was_already(alice: Any) -> None:
    secret = tokens("create", "--user", "alice")[0].strip()
    token = ApiToken.objects.get()
    assert token.name == "manage.py tokens"
    assert tokens("revoke", "--user", "alice", str(token.pk))[0].startswith(f"revoked token {token.pk}")
    assert Client().get("/api/v1/projects/", HTTP_AUTHORIZATION=f"Token {secret}").status_code == 401
    assert "was already revoked" in tokens("revoke", "--user", "alice", str(token.pk))[0]
    assert "\trevoked " in tokens("list", "--user", "alice")[0]


@pytest.mark.parametrize(("argv", "message"), [
    (["create", "--user", "nobody"], "no user 'nobody'"),
    (["create", "--user", "alice", "--name", "  "], "--name cannot be empty"),
    (["revoke", "--user", "alice", "999"], "alice has no token 999"),
])
def test_a_wrong_user_name_or_token_is_an_error_and_writes_nothing(alice: Any, argv: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        tokens(*argv)
    assert not ApiToken.objects.exists()


def test_someone_elses_token_cannot_be_revoked_by_naming_another_user(alice: Any, bob: Any) -> None:
    tokens("create", "--user", "bob")
    bobs = ApiToken.objects.get(user=bob)
    with pytest.raises(CommandError, match=f"alice has no token {bobs.pk}"):
        tokens("revoke", "--user", "alice", str(bobs.pk))
    assert ApiToken.objects.get(pk=bobs.pk).revoked_at is None


def test_a_deactivated_user_gets_no_token(alice: Any) -> None:
    alice.is_active = False
    alice.save()
    with pytest.raises(CommandError, match="deactivated"):
        tokens("create", "--user", "alice")


# --- docs/api.md, as written ------------------------------------------------------------------


def _example() -> list[str]:
    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    block = re.search(re.escape(MARKER) + r"\n```bash\n(.*?)\n```", text, re.S)
    assert block, "docs/api.md lost its tokens example"
    return [line for line in block.group(1).splitlines() if line.strip()]


@pytest.mark.django_db(transaction=True)
def test_the_docs_token_commands_work_as_written_against_a_live_server(alice: Any, live_server: Any) -> None:
    lines = _example()
    env: dict[str, str] = {"EVALSITE": live_server.url}
    token_id = ""
    for line in lines:
        command = line.split("  #", 1)[0].strip()
        assigned = re.fullmatch(r"(\w+)=\$\((.*)\)", command)
        argv = shlex.split(assigned.group(2) if assigned else command)
        if argv[:2] == ["python", "manage.py"]:
            argv = [a.replace("7", token_id) if a == "7" else a for a in argv]
            out, _ = tokens(*argv[3:]) if argv[2] == "tokens" else pytest.fail(f"an unknown command: {line}")
            if assigned:
                env[assigned.group(1)] = out.strip()
                token_id = str(ApiToken.objects.get().pk)
            else:
                assert out.startswith(f"{token_id}\tCI on main\t"), out
            continue
        assert argv[0] == "curl", f"a line the test does not know: {line}"
        method, headers, url = "GET", {}, ""
        args = iter(argv[1:])
        for arg in args:
            if arg == "-X":
                method = next(args)
            elif arg == "-H":
                name, _, value = next(args).partition(": ")
                headers[name] = value.replace("$TOKEN", env["TOKEN"])
            else:
                assert arg.startswith("$EVALSITE/"), f"an option the test does not know: {arg}"
                url = arg.replace("$EVALSITE", env["EVALSITE"]).replace("/7/", f"/{token_id}/")
        response = requests.request(method, url, headers=headers, timeout=30)
        assert response.status_code == 200, (line, response.text)
        if method == "GET":
            assert [t["name"] for t in response.json()["results"]] == ["CI on main"]
        else:
            assert response.json()["revoked"] is True
    assert ApiToken.objects.get().revoked_at is not None  # the last line revoked it


@pytest.mark.django_db(transaction=True)
def test_the_api_refuses_to_mint_tokens_with_a_password_or_a_token_as_the_docs_say(alice: Any,
                                                                                   live_server: Any) -> None:
    docs = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    said = re.search(r'answers `403` \("(.*?)"\)', docs.replace("\n  ", " "), re.S)
    assert said, "docs/api.md no longer says what the server answers"
    url = f"{live_server.url}/api/v1/tokens/"
    by_password = requests.post(url, json={"name": "x"}, auth=("alice", "alice-pass-123"), timeout=30)
    secret = tokens("create", "--user", "alice")[0].strip()
    by_token = requests.post(url, json={"name": "x"}, headers={"Authorization": f"Token {secret}"}, timeout=30)
    for response in (by_password, by_token):
        assert response.status_code == 403
        assert said.group(1) in response.text
    assert ApiToken.objects.count() == 1
