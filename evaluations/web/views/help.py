"""Help: the documentation of `docs/` and the README, rendered from the same Markdown.

Signed-in users only, like every other page: the docs are public in the repository, but a
server's pages are its users', and a login page that links nowhere leaks nothing either.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from evaluations.web.docs import IMAGE_SUFFIXES, doc_index, doc_page, image_path
from evaluations.web.views.common import current_project


@login_required
@require_GET
def help_index(request: HttpRequest) -> HttpResponse:
    current_project(request)  # the header's project switcher
    return render(request, "evaluations/help/index.html", {"pages": doc_index()})


@login_required
@require_GET
def help_page(request: HttpRequest, slug: str) -> HttpResponse:
    page = doc_page(slug)
    if page is None:
        raise Http404("No such help page.")
    current_project(request)
    return render(request, "evaluations/help/page.html", {"page": page, "pages": doc_index()})


@login_required
@require_GET
def help_image(request: HttpRequest, name: str) -> FileResponse:
    path = image_path(name)
    if path is None:
        raise Http404("No such image.")
    response = FileResponse(path.open("rb"), content_type=IMAGE_SUFFIXES[path.suffix.lower()])
    response["Cache-Control"] = "private, max-age=3600"
    response["X-Content-Type-Options"] = "nosniff"
    return response
