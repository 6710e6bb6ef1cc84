"""A small OpenID provider for the SSO tests: django-oauth-toolkit's OIDC support (RS256,
discovery, userinfo, PKCE required) on its own SQLite, its people and their groups read
from `directory.json` in IDP_DIR (tests/oidc_idp/README.md)."""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
IDP_DIR = Path(os.environ["IDP_DIR"])

SECRET_KEY = "test-idp-only-" + "x" * 40
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "tests.oidc_idp.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [HERE / "templates"],
              "APP_DIRS": True, "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(IDP_DIR / "idp.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
# evalsite runs on 127.0.0.1 too, on another port: cookies do not tell ports apart.
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
LOGIN_URL = "/login/"
AUTHENTICATION_BACKENDS = ["tests.oidc_idp.validator.DirectoryBackend"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": (IDP_DIR / "key.pem").read_text(),
    "PKCE_REQUIRED": True,
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_idp.validator.Validator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "profile", "email": "e-mail", "groups": "groups"},
    "ID_TOKEN_EXPIRE_SECONDS": 300,
}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
