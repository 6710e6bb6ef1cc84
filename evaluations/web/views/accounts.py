"""The profile page: API tokens (created, shown once, revoked) and a link to change the password."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from evaluations.accounts.services import may_create_projects
from evaluations.accounts.tokens import token_create, token_revoke
from evaluations.models import ApiToken
from evaluations.web.views.common import current_project


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True, help_text="What uses it, e.g. “CI on main”.")


def _render(request: HttpRequest, form: TokenForm, *, secret: str = "", status: int = 200) -> HttpResponse:
    current_project(request)  # the header's project switcher
    user: Any = request.user  # login_required: never anonymous here
    tokens = ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")
    return render(request, "evaluations/accounts/account.html",
                  {"form": form, "tokens": tokens, "secret": secret,
                   "can_create_projects": may_create_projects(user)}, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def account(request: HttpRequest) -> HttpResponse:
    """GET: the profile page. POST: create a token and show it, this once, in the response."""
    if request.method == "GET":
        return _render(request, TokenForm())
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _render(request, form, status=400)
    new = token_create(user=request.user, name=form.cleaned_data["name"])
    response = _render(request, TokenForm(), secret=new.secret)
    # The only page that ever holds the token: no cache may keep it.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    # Someone else's token is a 404, as if it did not exist.
    user: Any = request.user
    token = get_object_or_404(ApiToken, pk=pk, user=user)
    if token_revoke(token=token, user=request.user):
        messages.success(request, f"Token “{token.name}” revoked; it no longer works.")
    else:
        messages.info(request, f"Token “{token.name}” was already revoked.")
    return HttpResponseRedirect(reverse("account"))
