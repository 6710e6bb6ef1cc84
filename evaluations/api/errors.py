"""One error shape for the whole API: {"code", "message", "problems": [...]}."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from evaluations.formats import EvalSetImportError


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, EvalSetImportError):
        return Response(exc.as_dict(), status=413 if exc.code == "too_large" else 400)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    code = getattr(exc, "default_code", "error")
    if isinstance(detail, dict) and "detail" in detail and len(detail) == 1:
        message = str(detail["detail"])
        problems: list[dict[str, Any]] = []
    else:
        message = "invalid request"
        problems = [
            {"message": str(m), "path": field, "file": None, "case": None, "line": None, "column": None}
            for field, msgs in (detail.items() if isinstance(detail, dict) else [("", detail)])
            for m in (msgs if isinstance(msgs, list) else [msgs])
        ]
    response.data = {"code": code, "message": message, "problems": problems, "problem_count": len(problems)}
    return response
