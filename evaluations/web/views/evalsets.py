"""Eval-set pages: list, detail (with its htmx cases table), case, downloads and upload."""

from __future__ import annotations

import re

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from evaluations.audit import object_history, record_rename, record_uploads
from evaluations.converters import parse_id
from evaluations.evalsets import exports, selectors
from evaluations.evalsets.forms import UploadForm
from evaluations.evalsets.services import RenameError, evalset_import, evalset_rename
from evaluations.evaluators.deepeval_judged.catalogue import judged_metric_catalogue
from evaluations.interop import EvalSetImportError, SourceFile
from evaluations.interop import check_size as check_upload_size
from evaluations.models import OPEN_VERSION, EvalSetSource, Membership, Project
from evaluations.runs.exports import version_native_chunks
from evaluations.web.views.common import SESSION_PROJECT_KEY, can_upload, current_project, enter_project

# What each EvalSetImportError code means, for the person who uploaded the file.
IMPORT_ERROR_TITLES = {
    "invalid_json": "The file is not valid JSON",
    "invalid_csv": "The file is not valid CSV",
    "encoding": "The file is not UTF-8 text",
    "schema": "The file does not match its format",
    "unknown_format": "No known eval-set format was recognised",
    "too_large": "The upload is too large",
    "too_expanded": "The upload expands past a limit",
    "invalid_yaml": "The file is not YAML evalsite can read",
    "empty": "The upload holds no eval cases",
    "invalid_zip": "The zip archive cannot be read",
    "unsafe_zip": "The zip archive is unsafe",
    "duplicate_ids": "Ids are used more than once",
    "not_found": "A file was not found",
}


@login_required
@require_GET
def evalset_list(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    rows = selectors.evalset_rows(project=project) if project else []
    return render(request, "evaluations/evalset_list.html", {"project": project, "rows": rows})


@login_required
@require_POST
def project_switch(request: HttpRequest) -> HttpResponse:
    pk = parse_id(request.POST.get("project", ""))
    if pk is None:
        raise Http404("no such project")
    project = get_object_or_404(Project.objects.visible_to(request.user), pk=pk)
    request.session[SESSION_PROJECT_KEY] = project.pk
    # Whatever page the switch came from belonged to the old project: start at its list.
    return HttpResponseRedirect(reverse("evalset_list"))


@login_required
@require_GET
def evalset_detail(request: HttpRequest, pk: int) -> HttpResponse:
    return _detail(request, pk)


def _detail(request: HttpRequest, pk: int, rename_error: str = "") -> HttpResponse:
    evalset = get_object_or_404(selectors.evalsets_visible_to(request.user).select_related("project"), pk=pk)
    version_number = _int_or_none(request.GET.get("version"))
    if request.GET.get("version") and version_number is None:
        raise Http404("no such version")
    page = selectors.evalset_page(
        evalset=evalset,
        version_number=version_number,
        q=request.GET.get("q", "").strip(),
        tag=request.GET.get("tag", "").strip(),
        page=request.GET.get("page", 1),
    )
    if page is None:
        raise Http404("no such version")
    role = evalset.project.role_of(request.user)  # one query: who may edit, run and delete
    context: dict[str, object] = {"page": page, "evalset": evalset,
                                  "can_edit": role in {Membership.Role.MEMBER, Membership.Role.ADMIN},
                                  "can_admin": role == Membership.Role.ADMIN,
                                  "tool_formats": exports.tool_formats(
                                      evalset.pk, [(v.number, v.how_created, v.source_format) for v in page.versions])}
    # htmx swaps just the table while someone types; a history restore wants the whole page.
    if request.htmx and not request.htmx.history_restore_request:  # type: ignore[attr-defined]
        response = render(request, "evaluations/_cases_table.html", context)
    else:
        enter_project(request, evalset.project)
        context["history"] = object_history(evalset)
        context["rename_error"] = rename_error
        context["judged_metrics"] = judged_metric_catalogue()
        if context["can_edit"] and page.is_latest:  # the bulk form's "move to" choices
            context["move_targets"] = list(selectors.evalsets_visible_to(request.user)
                                           .filter(project=evalset.project).exclude(pk=evalset.pk)
                                           .only("pk", "name", "eval_set_id").order_by("name", "eval_set_id"))
        response = render(request, "evaluations/evalset_detail.html", context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@login_required
@require_GET
def case_detail(request: HttpRequest, pk: int) -> HttpResponse:
    case = get_object_or_404(
        selectors.cases_visible_to(request.user).select_related("version__evalset__project",
                                                                "version__evalset__latest_version"), pk=pk
    )
    project = case.version.evalset.project
    enter_project(request, project)
    in_latest = case.valid_to == OPEN_VERSION
    latest = case.version.evalset.latest_version
    return render(request, "evaluations/case_detail.html", {
        "page": selectors.case_page(case=case), "case": case, "in_latest": in_latest,
        "latest_number": latest.number if latest else None,
        "can_edit": in_latest and can_upload(request.user, project)})


@login_required
@require_GET
def version_original(request: HttpRequest, pk: int) -> HttpResponse:
    version = get_object_or_404(selectors.versions_visible_to(request.user), pk=pk)
    source = get_object_or_404(EvalSetSource, version=version)
    response = HttpResponse(source.content(), content_type=source.content_type or "application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, source.filename) or "attachment"
    return response


@login_required
@require_GET
def version_native(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    version = get_object_or_404(selectors.versions_visible_to(request.user).select_related("evalset"), pk=pk)
    response = StreamingHttpResponse(version_native_chunks(version), content_type="application/json; charset=utf-8")
    filename = _safe_filename(version.evalset.eval_set_id) + ".evalset.json"
    response["Content-Disposition"] = content_disposition_header(True, filename) or "attachment"
    return response


@login_required
@require_GET
def version_outputs_skeleton(request: HttpRequest, pk: int) -> StreamingHttpResponse:
    """The version's outputs file to fill in (JSON lines: a line per case, its turns' blanks)."""
    version = get_object_or_404(selectors.versions_visible_to(request.user).select_related("evalset"), pk=pk)
    response = StreamingHttpResponse(selectors.outputs_skeleton_lines(version),
                                     content_type="application/x-ndjson; charset=utf-8")
    filename = selectors.outputs_skeleton_filename(version)
    response["Content-Disposition"] = content_disposition_header(True, filename) or "attachment"
    return response


@login_required
@require_GET
def version_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    """The version in its tool's own format; a page listing what would be lost (409) when
    the format cannot hold it all."""
    version = get_object_or_404(selectors.versions_visible_to(request.user).select_related("evalset__project"), pk=pk)
    try:
        export = exports.tool_export(version, fmt)
    except exports.ExportUnavailable as exc:
        raise Http404(str(exc)) from None
    except exports.ExportLossError as exc:
        enter_project(request, version.evalset.project)
        return render(request, "evaluations/curation/export_losses.html",
                      {"version": version, "evalset": version.evalset, "error": exc,
                       "label": exports.TOOL_LABELS[fmt]}, status=409)
    response = HttpResponse(export.data, content_type=export.content_type)
    response["Content-Disposition"] = content_disposition_header(True, export.filename) or "attachment"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def evalset_upload(request: HttpRequest) -> HttpResponse:
    project = current_project(request)
    if project is None or not can_upload(request.user, project):
        raise PermissionDenied("only members and admins of the project may upload")

    if request.method == "GET":
        return render(request, "evaluations/upload.html", {"form": UploadForm(), "project": project})

    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, "evaluations/upload.html", {"form": form, "project": project}, status=400)
    try:
        files = []
        for f in form.cleaned_data["files"]:
            # Checked before reading, so an oversize file is refused without loading it whole.
            check_upload_size(f.name, f.size)
            files.append(SourceFile(name=f.name, data=f.read()))
        outcomes = evalset_import(
            project=project, files=files, format=form.cleaned_data["format"] or None, user=request.user
        )
    except EvalSetImportError as error:
        context = {
            "form": form,
            "project": project,
            "error": error,
            "error_title": IMPORT_ERROR_TITLES.get(error.code, error.code.replace("_", " ").capitalize()),
            "more_problems": error.total - len(error.problems),
        }
        return render(request, "evaluations/upload.html", context, status=400)
    record_uploads(project=project, actor=request.user, outcomes=outcomes, via="the upload page")
    return render(
        request, "evaluations/upload.html", {"form": UploadForm(), "project": project, "outcomes": outcomes}
    )


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None


def _safe_filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "evalset"


@login_required
@require_POST
def evalset_rename_view(request: HttpRequest, pk: int) -> HttpResponse:
    """POST `name`: the eval set's new name (members and admins), recorded in its activity with
    the old one. A bad name re-renders the page with the error (400) and changes nothing."""
    evalset = get_object_or_404(selectors.evalsets_visible_to(request.user).select_related("project"), pk=pk)
    if not can_upload(request.user, evalset.project):
        raise PermissionDenied("only members rename eval sets")
    try:
        with transaction.atomic():
            before = evalset_rename(evalset=evalset, name=request.POST.get("name", ""))
            if before is not None:
                record_rename(evalset=evalset, actor=request.user, before=before, via="the page")
    except RenameError as exc:
        response = _detail(request, pk, rename_error=str(exc))
        response.status_code = 400
        return response
    return HttpResponseRedirect(reverse("evalset_detail", args=[evalset.pk]))
