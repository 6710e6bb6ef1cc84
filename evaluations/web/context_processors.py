from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def current_project(request: HttpRequest) -> dict[str, Any]:
    """The project the header shows; set by views through `evaluations.web.views.common`."""
    return {"current_project": getattr(request, "current_project", None)}
