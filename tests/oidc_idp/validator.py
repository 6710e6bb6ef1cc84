"""The test provider's people (from directory.json, re-read on every use, so a test changes
someone's groups between two sign-ins) and its misbehaviours on demand (`mode`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend
from oauth2_provider.oauth2_validators import OAuth2Validator


def directory() -> dict[str, Any]:
    return json.loads((Path(os.environ["IDP_DIR"]) / "directory.json").read_text())


class DirectoryBackend(BaseBackend):
    def authenticate(self, request: Any, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> Any:
        person = directory()["people"].get(username or "")
        if person is None or person["password"] != password:
            return None
        user, _ = get_user_model().objects.get_or_create(username=username)
        return user

    def get_user(self, user_id: Any) -> Any:
        return get_user_model().objects.filter(pk=user_id).first()


class Validator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        person = directory()["people"][request.user.username]
        return {"preferred_username": request.user.username, "name": person.get("name", request.user.username),
                "email": person["email"], "email_verified": person.get("email_verified", True),
                "groups": person.get("groups", [])}

    def get_id_token_dictionary(self, token: Any, token_handler: Any, request: Any) -> Any:
        claims, expiration = super().get_id_token_dictionary(token, token_handler, request)
        person = directory()["people"].get(request.user.username, {})
        for claim in ("amr", "acr"):  # how the person authenticated at the provider, when a test says
            if claim in person:
                claims[claim] = person[claim]
        mode = directory().get("mode", "")
        if mode == "wrong_aud":
            claims["aud"] = "another-client"
        elif mode == "expired":
            claims["exp"] = int(time.time()) - 3600
            claims["iat"] = int(time.time()) - 7200
        elif mode == "bad_nonce":
            claims["nonce"] = "not-the-nonce-that-was-sent"
        return claims, expiration
