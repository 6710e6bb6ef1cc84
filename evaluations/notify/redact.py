"""Secrets taken out of what a delivery log shows to people who may not see a channel's URL
(the project's members and viewers): a receiver's answer or an error can echo the URL (a
Slack webhook's path is its token), a token, a bearer header or a password. Admins, who see
the URL, read the log as it was stored; everyone else reads it through `redact`.

What goes: every URL's userinfo, path, query and fragment (its scheme and host stay), the
channel's own URL and secret wherever they appear, Slack tokens (`xoxb-…`, `xapp-…`), bearer
and basic credentials, JWTs, GitHub, AWS, Google and `sk-` keys, and the value of anything
named like a secret (`token=`, `"api_key": "…"`, `password:` …).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from evaluations.models import NotifyChannel

HIDDEN = "[redacted]"
_URL = re.compile(r"\b[a-z][a-z0-9+.-]{1,15}://[^\s\"'<>`]+", re.IGNORECASE)
_TOKENS = [
    re.compile(r"\bxox[a-z]-[A-Za-z0-9-]{6,}"),  # Slack bot, user, app-level tokens
    re.compile(r"\bxapp-[A-Za-z0-9-]{6,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # a JWT
    re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),
]
_SCHEMES = re.compile(r"\b(bearer|basic|token|digest)(\s+)[A-Za-z0-9._~+/=-]{6,}", re.IGNORECASE)
_NAMED = re.compile(
    r"""(?P<name>\b[\w-]*(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|auth|signature|sig|key)
        ["']?\s*[=:]\s*["']?)(?P<value>[^\s"'&;,}<>]+)""", re.IGNORECASE | re.VERBOSE)


def _url(match: re.Match[str]) -> str:
    text = match.group(0)
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return HIDDEN
    if host and ":" in host:
        host = f"[{host}]"
    rest = parts.path not in ("", "/") or parts.query or parts.fragment
    return f"{parts.scheme}://{host}{port}" + (f"/{HIDDEN}" if rest else parts.path)


def redact(text: str, known: Iterable[str] = ()) -> str:
    """`text` with its secrets replaced by [redacted]; `known` are secrets to take out wherever
    they appear (the channel's URL, its path's parts, its signing secret)."""
    for secret in sorted({k for k in known if len(k) >= 8}, key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    text = _URL.sub(_url, text)
    for pattern in _TOKENS:
        text = pattern.sub(HIDDEN, text)
    text = _SCHEMES.sub(lambda m: f"{m.group(1)}{m.group(2)}{HIDDEN}", text)
    return _NAMED.sub(lambda m: m.group("name") + HIDDEN, text)


def channel_secrets(channel: NotifyChannel) -> list[str]:
    """What of the channel is secret: its URL, each long part of the URL's path and query, its
    signing key."""
    known = [channel.url, channel.secret] if channel.url else [channel.secret]
    if channel.url:
        parts = urlsplit(channel.url)
        known += [p for p in re.split(r"[/?&=#@:]", f"{parts.path}?{parts.query}") if len(p) >= 8]
        if parts.password:
            known.append(parts.password)
    return known


def for_viewer(text: str, channel: NotifyChannel, *, admin: bool) -> str:
    """The log's text as this reader may see it: whole for the project's admins."""
    return text if admin or not text else redact(text, channel_secrets(channel))
