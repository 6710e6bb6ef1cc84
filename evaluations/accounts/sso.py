"""Single sign-on with an OpenID provider, through django-allauth's `openid_connect`
provider: discovery (`<issuer>/.well-known/openid-configuration`), the authorization-code
flow with PKCE (S256) and a single-use `state` kept in the session.

What evalsite adds to allauth's provider:
- a `nonce` sent with each authorization request and required back in the ID token;
- the ID token's signature always checked against the provider's JWKS (allauth skips it
  when the token came straight from the token endpoint), with its issuer (the configured
  one, which discovery must name), audience (our client id) and expiry, each refusal named;
- the userinfo answer taken only for the ID token's own subject;
- linking: an account that exists with the same e-mail is linked only when the provider
  says the address is verified and exactly one account has it; otherwise the sign-in is
  refused (never linked to a different account);
- the groups claim applied to project roles at every sign-in (`roles_map.py`);
- the second factor an account must pass (it has one, or EVALSITE_REQUIRE_2FA_* covers it):
  the ID token's `amr`/`acr` where EVALSITE_OIDC_MFA_VALUES accepts them, else evalsite's own
  TOTP step before the session is signed in (`AccountAdapter.pre_login`);
- the ID token's `jti` taken once in the database (evaluations/once.py), for every process;
- every sign-in and failure written to the sign-in log (`signins.py`), and a link by e-mail
  as an event of its own.

The provider's URLs come from the operator's configuration, not from users, so evalsite's
egress policy for HTTP targets does not apply to them (docs/sso.md).
"""

from __future__ import annotations

import hmac
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import requests
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.internal.decorators import login_not_required
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.internal import jwtkit, statekit
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView, OAuth2LoginView
from allauth.socialaccount.providers.openid_connect.provider import OpenIDConnectProvider
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth import login as django_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse

from evaluations.accounts.roles_map import RoleMapError, groups_of, role_map_parse, roles_apply
from evaluations.accounts.signins import account_event, link_record, signin_record
from evaluations.accounts.twofactor import pending_start, second_factor_due
from evaluations.models import AuditEvent
from evaluations.once import once_take

PROVIDER_ID = "sso"
METHOD = "sso"
BACKEND = "evaluations.auth_backends.ModelBackend"


def sso_enabled() -> bool:
    return bool(settings.EVALSITE_OIDC_ISSUER)


def sso_name() -> str:
    return str(settings.EVALSITE_OIDC_NAME)


class EvalsiteOIDCAdapter(OpenIDConnectOAuth2Adapter):
    """allauth's adapter, with the ID token checked in full and the nonce compared."""

    expected_nonce: str | None = None

    def complete_login(self, request: HttpRequest, app: Any, token: Any, **kwargs: Any) -> Any:
        id_token = kwargs["response"].get("id_token")
        if not id_token:
            raise OAuth2Error("the provider sent no ID token")
        config = self.openid_config
        issuer = str(config.get("issuer", "")).rstrip("/")
        if issuer != str(app.settings["server_url"]).rstrip("/"):
            raise OAuth2Error(f"the discovery document names another issuer ({issuer[:200]})")
        claims = id_token_verify(id_token, keys_url=config["jwks_uri"], issuer=config["issuer"],
                                 audience=app.client_id)
        nonce = claims.get("nonce")
        if not self.expected_nonce or not isinstance(nonce, str) \
                or not hmac.compare_digest(nonce.encode(), self.expected_nonce.encode()):
            raise OAuth2Error("the ID token's nonce is not the one this sign-in sent")
        userinfo = self._fetch_user_info(token.token)
        if userinfo.get("sub") != claims.get("sub"):
            raise OAuth2Error("the userinfo answer is about another subject than the ID token")
        return self.get_provider().sociallogin_from_response(request, {"userinfo": userinfo, "id_token": claims})


def id_token_verify(id_token: str, *, keys_url: str, issuer: str, audience: str) -> dict[str, Any]:
    """The ID token's claims once its signature (the provider's JWKS), issuer, audience and
    expiry hold; an OAuth2Error naming what failed otherwise."""
    try:
        alg, key = jwtkit.fetch_key(id_token, keys_url, jwtkit.lookup_kid_jwk)
        if alg not in {"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"}:
            raise OAuth2Error(f"the ID token is signed with {alg}, not an asymmetric algorithm")
        claims: dict[str, Any] = jwt.decode(id_token, key=key, algorithms=[alg], audience=audience, issuer=issuer,
                                            options={"require": ["exp", "iat", "sub", "aud", "iss"]}, leeway=30)
    except jwt.ExpiredSignatureError as e:
        raise OAuth2Error("the ID token has expired") from e
    except jwt.InvalidAudienceError as e:
        raise OAuth2Error("the ID token is for another client (audience)") from e
    except jwt.InvalidIssuerError as e:
        raise OAuth2Error("the ID token is from another issuer") from e
    except jwt.InvalidSignatureError as e:
        raise OAuth2Error("the ID token's signature does not match the provider's keys") from e
    except (jwt.PyJWTError, KeyError, ValueError) as e:
        raise OAuth2Error(f"the ID token is not valid: {str(e)[:200]}") from e
    jti_check(claims)
    return claims


def jti_check(claims: dict[str, Any]) -> None:
    """An ID token's `jti` is taken once, in the database (evaluations/once.py), until the
    token expires: a replayed token is refused by every process, with or without Redis.
    (allauth's own check keeps the seen ids in the cache, which is per process without Redis.)"""
    jti, issuer, expires = claims.get("jti"), claims.get("iss"), claims.get("exp")
    if jti is None or issuer is None or not isinstance(expires, int | float):
        return
    until = datetime.fromtimestamp(float(expires), tz=UTC) + timedelta(seconds=30)  # the leeway above
    if not once_take(scope="oidc-jti", value=f"{issuer} {jti}", until=until):
        raise OAuth2Error("the ID token was used before (its jti was seen)")


class EvalsiteOIDCProvider(OpenIDConnectProvider):
    """allauth's provider, sending a fresh nonce with each authorization request and
    keeping it in the request's state."""

    oauth2_adapter_class = EvalsiteOIDCAdapter

    def redirect(self, request: HttpRequest, process: Any, next_url: Any = None, data: Any = None,
                 **kwargs: Any) -> Any:
        nonce = secrets.token_urlsafe(32)
        auth_params = dict(kwargs.pop("auth_params", None) or self.get_auth_params())
        auth_params["nonce"] = nonce
        return super().redirect(request, process, next_url, data, auth_params=auth_params, oidc_nonce=nonce,
                                **kwargs)


def _stashed_nonce(request: HttpRequest, state_id: str) -> str | None:
    stashed = statekit.get_states(request).get(state_id)
    if not stashed or len(stashed) != 3 or stashed[2] != PROVIDER_ID:
        return None
    nonce = stashed[0].get("oidc_nonce")
    return nonce if isinstance(nonce, str) else None


@login_not_required
def login(request: HttpRequest, provider_id: str) -> HttpResponse:
    """POST: off to the provider (GET shows a button that posts here)."""
    if provider_id != PROVIDER_ID:
        raise Http404
    try:
        return OAuth2LoginView.adapter_view(EvalsiteOIDCAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist as e:
        raise Http404 from e
    except (requests.RequestException, ValueError, KeyError) as e:  # discovery unreachable or unreadable
        reason = f"the provider's discovery document could not be read ({type(e).__name__})"
        signin_record(request=request, user=None, method=METHOD, ok=False, reason=reason)
        return render(request, "socialaccount/authentication_error.html",
                      {"reason": reason, "sso_name": sso_name()}, status=502)


@login_not_required
def callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    """Where the provider sends the browser back: allauth checks the state (it is used up
    here, so a replayed callback fails), exchanges the code with the PKCE verifier, and
    `complete_login` above checks the ID token."""
    if provider_id != PROVIDER_ID:
        raise Http404
    try:
        adapter = EvalsiteOIDCAdapter(request, provider_id)
    except SocialApp.DoesNotExist as e:
        raise Http404 from e
    adapter.expected_nonce = _stashed_nonce(request, request.GET.get("state", ""))
    return OAuth2CallbackView.adapter_view(adapter)(request)


def _email_claims(sociallogin: Any) -> tuple[str, bool]:
    data = sociallogin.account.extra_data or {}
    merged = {**(data.get("id_token") or {}), **(data.get("userinfo") or {})}
    email = merged.get("email")
    verified = merged.get("email_verified") in (True, "true", "True")
    return (email.strip() if isinstance(email, str) else ""), verified


def _refuse(request: HttpRequest, *, reason: str, username: str = "") -> None:
    signin_record(request=request, user=None, method=METHOD, ok=False, username=username, reason=reason)
    raise ImmediateHttpResponse(render(request, "socialaccount/authentication_error.html",
                                       {"reason": reason, "sso_name": sso_name()}, status=403))


class SocialAdapter(DefaultSocialAccountAdapter):
    def pre_social_login(self, request: HttpRequest, sociallogin: Any) -> None:
        """Links a first sign-in to the one account with the provider's verified e-mail, or
        refuses it when an account has that e-mail and the provider has not verified it."""
        if sociallogin.is_existing:
            return
        email, verified = _email_claims(sociallogin)
        if not email:
            return
        users = list(get_user_model().objects.filter(email__iexact=email).order_by("pk")[:2])
        if not users:
            return
        if not verified:
            _refuse(request, username=email, reason=f"the provider has not verified the e-mail {email}, "
                                                    "which an account here has: not linked")
        if len(users) > 1:
            _refuse(request, username=email, reason=f"several accounts here have the e-mail {email}: "
                                                    "an administrator must link one")
        sociallogin.connect(request, users[0])
        subject = str(sociallogin.account.uid)[:200]
        link_record(request=request, user=users[0], summary=f"{sso_name()} subject {subject} linked to "
                                                            f"{users[0].get_username()} by the verified e-mail {email}",
                    data={"provider": sso_name(), "subject": subject, "email": email[:200]})

    def on_authentication_error(self, request: HttpRequest, provider: Any, error: Any = None,
                                exception: Any = None, extra_context: Any = None) -> None:
        """Every failed SSO sign-in: logged with its reason, answered 401 with it."""
        context = extra_context or {}
        if exception is not None:
            reason = str(exception) or type(exception).__name__
        elif "state_id" in context:
            reason = "unknown or already used state (a replayed or expired sign-in)"
        elif str(error) == "cancelled":
            reason = "cancelled at the provider"
        else:
            reason = f"the provider answered with an error ({str(request.GET.get('error', error))[:100]})"
        signin_record(request=request, user=None, method=METHOD, ok=False, reason=reason[:300])
        raise ImmediateHttpResponse(render(request, "socialaccount/authentication_error.html",
                                           {"reason": reason, "sso_name": sso_name()}, status=401))

    def is_open_for_signup(self, request: HttpRequest, sociallogin: Any) -> bool:
        return True


class AccountAdapter(DefaultAccountAdapter):
    """Local sign-up stays closed (admins create local accounts); SSO users are created by
    the social adapter above."""

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False

    def login(self, request: HttpRequest, user: Any) -> None:
        user.backend = BACKEND
        django_login(request, user)

    def pre_login(self, request: HttpRequest, user: Any, **kwargs: Any) -> Any:
        """A single sign-on of an account that must pass a second factor (it has one, or an
        EVALSITE_REQUIRE_2FA_* setting covers it) goes on only when the ID token's `amr` or
        `acr` says the provider asked for one (EVALSITE_OIDC_MFA_VALUES); else the browser is
        sent to evalsite's own second step, as after a password, and signed in there."""
        response = super().pre_login(request, user, **kwargs)
        sociallogin = (kwargs.get("signal_kwargs") or {}).get("sociallogin")
        if response is not None or sociallogin is None or not second_factor_due(user):
            return response
        claims = _claims(sociallogin)
        said = provider_second_factor((sociallogin.account.extra_data or {}).get("id_token") or {})
        if said is not None:
            sociallogin.state["evalsite_second_factor"] = said
            return None
        next_url = kwargs.get("redirect_url") or sociallogin.get_redirect_url(request) or "/"
        target = pending_start(request.session, user=user, next_url=str(next_url), sso={
            "groups": sorted(groups_of(claims, settings.EVALSITE_OIDC_GROUPS_CLAIM))[:500],
            "subject": str(claims.get("sub", ""))[:200]})
        return HttpResponseRedirect(reverse(target))


def provider_second_factor(id_token: dict[str, Any]) -> str | None:
    """What in the ID token counts as a second factor here ("amr mfa", "acr phrh"), or None:
    an `amr` entry or the `acr` that EVALSITE_OIDC_MFA_VALUES lists."""
    accepted = set(settings.EVALSITE_OIDC_MFA_VALUES)
    if not accepted:
        return None
    amr = id_token.get("amr")
    for value in [amr] if isinstance(amr, str) else amr if isinstance(amr, list) else []:
        if isinstance(value, str) and value in accepted:
            return f"amr {value}"[:100]
    acr = id_token.get("acr")
    if isinstance(acr, str) and acr in accepted:
        return f"acr {acr}"[:100]
    return None


def _claims(sociallogin: Any) -> dict[str, Any]:
    data = sociallogin.account.extra_data or {}
    return {**(data.get("id_token") or {}), **(data.get("userinfo") or {})}


def sso_signed_in(*, request: HttpRequest, user: Any, sso: dict[str, Any], method: str) -> None:
    """An SSO sign-in done (at once, or after evalsite's second step): the provider's groups
    applied to project roles, the sign-in logged."""
    groups = sorted({str(g) for g in sso.get("groups") or []})
    try:
        rules = role_map_parse(settings.EVALSITE_OIDC_ROLE_MAP)
    except RoleMapError as e:  # also a system-check error: only a server started past it gets here
        rules = []
        account_event(user=user, verb=AuditEvent.Verb.SSO_ROLES_CHANGED,
                      summary=f"no roles applied to {user.get_username()}: {e}", data={"error": str(e)})
    changes = roles_apply(user=user, groups=groups, rules=rules, provider=sso_name())
    if changes:
        account_event(user=user, verb=AuditEvent.Verb.SSO_ROLES_CHANGED,
                      summary=f"{sso_name()} changed {user.get_username()}'s roles: " + "; ".join(changes),
                      data={"changes": changes, "groups": sorted(groups)[:50]})
    signin_record(request=request, user=user, method=method, ok=True,
                  data={"provider": sso_name(), "subject": str(sso.get("subject", ""))[:200]})


def on_sso_login(sender: Any, request: HttpRequest, user: Any, **kwargs: Any) -> None:
    """allauth's user_logged_in: an SSO sign-in that needed no step of evalsite's."""
    sociallogin = kwargs.get("sociallogin")
    if sociallogin is None:
        return
    claims = _claims(sociallogin)
    said = sociallogin.state.get("evalsite_second_factor")
    sso_signed_in(request=request, user=user, method=f"{METHOD} + provider's {said}" if said else METHOD,
                  sso={"groups": sorted(groups_of(claims, settings.EVALSITE_OIDC_GROUPS_CLAIM)),
                       "subject": str(claims.get("sub", ""))})
