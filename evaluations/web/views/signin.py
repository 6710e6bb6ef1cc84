"""Signing in: the password form with its SSO button (or SSO only), the second step for
accounts with a second factor, the second factor's pages, and the site-wide sign-in log.

A password that is right for an account with a second factor (or a superuser who must have
one) does not log in: the session only remembers, for five minutes, who passed the
password, and `login()` happens after the code. So no page or API call ever sees a session
that skipped the second factor. A single sign-on that the provider's claims do not make
enough for such an account ends here too (accounts/sso.py, `AccountAdapter.pre_login`).
"""

from __future__ import annotations

from typing import Any

import segno
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as django_login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from evaluations.accounts import twofactor
from evaluations.accounts.signins import signin_record, signins_page
from evaluations.accounts.sso import PROVIDER_ID, sso_enabled, sso_name, sso_signed_in

BACKEND = "evaluations.auth_backends.ModelBackend"


class CodeForm(forms.Form):
    code = forms.CharField(max_length=32, strip=True, label="Code",
                           widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "text",
                                                         "autofocus": True}))


def sso_context() -> dict[str, Any]:
    return {"sso_enabled": sso_enabled(), "sso_name": sso_name(), "sso_only": settings.EVALSITE_SSO_ONLY,
            "sso_login_url": reverse("openid_connect_login", kwargs={"provider_id": PROVIDER_ID})}


class LoginView(auth_views.LoginView):
    """Django's login form, with the SSO button beside it, refused when SSO is the only way
    in, and a second step for accounts with a second factor."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **sso_context()}

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.EVALSITE_SSO_ONLY:
            context = {**sso_context(), "refused": True, "next": self.get_redirect_url()}
            return render(request, "registration/login.html", context, status=403)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        # The failure itself is logged by the user_login_failed signal (every backend refusal).
        return super().form_invalid(form)

    def form_valid(self, form: Any) -> HttpResponse:
        user = form.get_user()
        if twofactor.second_factor_due(user):
            target = twofactor.pending_start(self.request.session, user=user, next_url=self.get_success_url())
            return HttpResponseRedirect(reverse(target))
        response = super().form_valid(form)
        signin_record(request=self.request, user=user, method="password", ok=True)
        return response


def _first_factor(pending: tuple[Any, str, dict[str, Any] | None] | None) -> str:
    return "sso" if pending is not None and pending[2] is not None else "password"


def _finish_login(request: HttpRequest, user: Any, second: str) -> str:
    """Signed in at last: after the password, or after single sign-on (whose roles are applied
    now, as at any SSO sign-in). `second` names the second factor."""
    pending = twofactor.pending_of(request.session)
    target = pending[1] if pending else reverse("home")
    request.session.pop(twofactor.PENDING, None)
    user.backend = BACKEND
    django_login(request, user)
    if pending is not None and pending[2] is not None:
        sso_signed_in(request=request, user=user, sso=pending[2], method=f"sso + {second}")
    else:
        signin_record(request=request, user=user, method=f"password + {second}", ok=True)
    return target


@require_http_methods(["GET", "POST"])
def twofactor_verify(request: HttpRequest) -> HttpResponse:
    """The second step: a code from the authenticator, or a recovery code."""
    pending = twofactor.pending_of(request.session)
    if pending is None:
        return redirect_to_login(reverse("home"))
    user = pending[0]
    context: dict[str, Any] = {"form": CodeForm(), "via_sso": _first_factor(pending) == "sso", "sso_name": sso_name()}
    if request.method == "GET":
        return render(request, "registration/twofactor_verify.html", context)
    form = CodeForm(request.POST)
    error = ""
    if form.is_valid():
        check = twofactor.second_factor_verify(user=user, code=form.cleaned_data["code"])
        if check.method is not None:
            return HttpResponseRedirect(_finish_login(request, user, check.method))
        error = twofactor.refusal(check)
        reason = f"{check.kind} not checked: throttled" if check.wait_seconds else "wrong or reused code"
    else:
        error = reason = "Enter the code."
    signin_record(request=request, user=user, method=f"{_first_factor(pending)} + second factor", ok=False,
                  reason=reason.rstrip("."))
    return render(request, "registration/twofactor_verify.html", {**context, "form": form, "error": error},
                  status=400)


def _qr(device: Any) -> str:
    return str(segno.make(device.config_url, error="m").svg_data_uri(scale=5, border=2))


@require_http_methods(["GET", "POST"])
def twofactor_setup(request: HttpRequest) -> HttpResponse:
    """Set up a TOTP authenticator: signed in from the account page, or during a sign-in
    when a superuser must have one."""
    pending = None if request.user.is_authenticated else twofactor.pending_of(request.session)
    user: Any = request.user if request.user.is_authenticated else (pending[0] if pending else None)
    if user is None:
        return redirect_to_login(request.get_full_path())
    if twofactor.has_second_factor(user):
        return HttpResponseRedirect(reverse("twofactor"))
    device = twofactor.totp_pending(user)
    context = {"qr": _qr(device), "secret": _base32(device.bin_key), "form": CodeForm(), "during_signin": bool(pending),
               "required": twofactor.second_factor_required(user), "via_sso": _first_factor(pending) == "sso",
               "sso_name": sso_name()}
    if request.method == "GET":
        return render(request, "registration/twofactor_setup.html", context)
    form = CodeForm(request.POST)
    codes = twofactor.totp_confirm(user=user, device=device, code=form.data.get("code", "")) \
        if form.is_valid() else None
    if codes is None:
        context.update(form=form, error="That code is not right: enter the 6 digits your app shows now.")
        return render(request, "registration/twofactor_setup.html", context, status=400)
    if pending is not None:
        _finish_login(request, user, "TOTP (set up now)")
    response = render(request, "registration/twofactor_codes.html", {"codes": codes})
    response["Cache-Control"] = "no-store"  # the only page that ever shows the codes
    return response


def _base32(key: bytes) -> str:
    import base64

    text = base64.b32encode(key).decode().rstrip("=")
    return " ".join(text[i:i + 4] for i in range(0, len(text), 4))


@login_required
def twofactor_page(request: HttpRequest) -> HttpResponse:
    """The account's second factor: whether it is on, the recovery codes left, turning it off."""
    user: Any = request.user
    return render(request, "registration/twofactor.html", {
        "enabled": twofactor.has_second_factor(user), "codes_left": twofactor.recovery_codes_left(user),
        "required": twofactor.second_factor_required(user), "form": CodeForm()})


@login_required
@require_POST
def twofactor_disable(request: HttpRequest) -> HttpResponse:
    """Turning it off takes a current code, so a session left open cannot do it."""
    user: Any = request.user
    if not twofactor.has_second_factor(user):
        return HttpResponseRedirect(reverse("twofactor"))
    context: dict[str, Any] = {"enabled": True, "codes_left": twofactor.recovery_codes_left(user),
                               "required": twofactor.second_factor_required(user), "form": CodeForm(request.POST)}
    if context["required"]:
        context["error"] = "Superusers must keep a second factor here (EVALSITE_REQUIRE_2FA_SUPERUSERS)."
        return render(request, "registration/twofactor.html", context, status=400)
    code = str(request.POST.get("code", ""))
    check = twofactor.second_factor_verify(user=user, code=code)
    if check.method is None:
        context["error"] = (twofactor.refusal(check) if check.wait_seconds else
                            "That code is not right: enter the current one from your app, or a recovery code.")
        return render(request, "registration/twofactor.html", context, status=400)
    twofactor.second_factor_disable(user=user, actor=user)
    messages.success(request, "The second factor is off: signing in asks for your password only.")
    return HttpResponseRedirect(reverse("twofactor"))


@login_required
def signin_log(request: HttpRequest) -> HttpResponse:
    """Every sign-in and failed try on this server, for superusers."""
    user: Any = request.user
    if not user.is_superuser:
        raise PermissionDenied
    failures = request.GET.get("failures") == "1"
    page = signins_page(before=request.GET.get("before"), failures_only=failures)
    return render(request, "evaluations/accounts/signin_log.html",
                  {"page": page, "rows": page.rows, "failures": failures})
