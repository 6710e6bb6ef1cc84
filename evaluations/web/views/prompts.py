"""Prompt pages: the project's prompts (and a new one), one prompt with its versions and the
editor that saves a new version, and the diff of two versions. The API twins are
`/api/v1/prompts/...` (evaluations/api/prompts.py), on the same services and selectors."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from evaluations.audit import audit_record
from evaluations.converters import parse_id, whole_number
from evaluations.models import AuditEvent, Prompt
from evaluations.prompts import selectors
from evaluations.prompts.services import PromptError, Saved, prompt_create, prompt_version_save
from evaluations.schemas.prompt_template import VARIABLES
from evaluations.web.views.common import current_project, enter_project

EXAMPLE_SYSTEM = "You are the support agent of an online shop. Use the tools to look orders up; never guess."
EXAMPLE_USER = "{{input}}"


def _record(request: HttpRequest, saved: Saved) -> None:
    if saved.created:
        audit_record(project=saved.prompt.project, actor=request.user, verb=AuditEvent.Verb.PROMPT_SAVED,
                     obj=saved.prompt, summary=f"saved prompt {saved.prompt.name} v{saved.version.number} "
                                               "through the prompts page", data={"version": saved.version.number})


def _problems(exc: PromptError) -> list[str]:
    return [f"{field}: {message}" for field, messages_ in exc.problems.items() for message in messages_]


@login_required
@require_http_methods(["GET", "POST"])
def prompt_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    can_write = bool(project and project.can_write(request.user))
    fields = {"name": "", "system": "", "user": EXAMPLE_USER, "note": ""}
    problems: list[str] = []
    if request.method == "POST":
        if project is None or not can_write:
            raise PermissionDenied("viewers cannot create prompts")
        fields = {key: request.POST.get(key, "") for key in fields}
        try:
            saved = prompt_create(project=project, name=fields["name"], system=fields["system"],
                                  user=fields["user"], note=fields["note"], actor=request.user)
        except PromptError as exc:
            problems = _problems(exc)
        else:
            _record(request, saved)
            messages.success(request, f"Prompt {saved.prompt.name} saved as version 1.")
            return HttpResponseRedirect(reverse("prompt_detail", args=[saved.prompt.pk]))
    rows = selectors.prompt_rows(Prompt.objects.filter(project=project)) if project else []
    return render(request, "evaluations/prompts/list.html", {
        "project": project, "rows": rows, "can_write": can_write, "fields": fields, "problems": problems,
        "variables": VARIABLES, "example_system": EXAMPLE_SYSTEM}, status=400 if problems else 200)


def _prompt(request: HttpRequest, pk: int) -> Prompt:
    prompt = get_object_or_404(Prompt.objects.visible_to(request.user).select_related("project"), pk=pk)
    enter_project(request, prompt.project)
    return prompt


@login_required
@require_http_methods(["GET", "POST"])
def prompt_detail(request: HttpRequest, pk: int) -> HttpResponse:
    prompt = _prompt(request, pk)
    can_write = prompt.project.can_write(request.user)
    versions = selectors.prompt_versions(prompt=prompt)
    latest = versions[0] if versions else None
    fields = {"system": latest.system if latest else "", "user": latest.user if latest else "{{input}}", "note": ""}
    problems: list[str] = []
    if request.method == "POST":
        if not can_write:
            raise PermissionDenied("viewers cannot change prompts")
        fields = {key: request.POST.get(key, "") for key in fields}
        based_on = request.POST.get("based_on", "")
        try:
            saved = prompt_version_save(prompt=prompt, system=fields["system"], user=fields["user"],
                                        note=fields["note"], actor=request.user,
                                        based_on=parse_id(based_on))
        except PromptError as exc:
            problems = _problems(exc)
        else:
            _record(request, saved)
            if saved.created:
                messages.success(request, f"Saved as version {saved.version.number}.")
            else:
                messages.info(request, f"Nothing changed: version {saved.version.number} already has this text.")
            return HttpResponseRedirect(reverse("prompt_detail", args=[prompt.pk]))
    shown = latest
    asked = request.GET.get("version", "").strip()
    if asked:
        number = whole_number(asked)
        shown = next((v for v in versions if v.number == number), None)
        if shown is None:
            raise Http404("no such version")
    return render(request, "evaluations/prompts/detail.html", {
        "prompt": prompt, "versions": versions, "latest": latest, "shown": shown, "can_write": can_write,
        "fields": fields, "problems": problems, "variables": VARIABLES}, status=400 if problems else 200)


@login_required
@require_GET
def prompt_diff(request: HttpRequest, pk: int) -> HttpResponse:
    prompt = _prompt(request, pk)
    before = whole_number(request.GET.get("from", ""), maximum=999_999_999)
    after = whole_number(request.GET.get("to", ""), maximum=999_999_999)
    if before is None or after is None:
        raise Http404("give two version numbers: ?from=1&to=2")
    diff = selectors.prompt_diff(prompt=prompt, before=before, after=after)
    if diff is None:
        raise Http404("no such version")
    return render(request, "evaluations/prompts/diff.html", {
        "prompt": prompt, "diff": diff, "versions": selectors.prompt_versions(prompt=prompt)})
