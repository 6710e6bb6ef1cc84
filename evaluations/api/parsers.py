"""Request parsers that keep bodies within the upload limit (EVALSITE_MAX_UPLOAD_MB).

A JSON body larger than the limit is refused with 413 before it is read whole (by its
Content-Length, or after limit + 1 bytes when it has none). A multipart body is streamed
by Django (files over 10 MB go to temporary files); each file is then checked on its own,
as the upload page does, so the error names the file that is too large.
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from evaluations import safejson
from evaluations.api.errors import ApiError, problem
from evaluations.interop import max_upload_bytes


def _too_large(size: int | None, limit: int) -> ApiError:
    what = f"the request body is {size:,} bytes" if size is not None else "the request body is larger"
    return ApiError(413, "too_large", f"{what}, over the upload limit of {limit:,} bytes",
                    [problem(f"send at most {limit:,} bytes (EVALSITE_MAX_UPLOAD_MB)", "body")])


def _content_length(parser_context: dict[str, Any] | None) -> int | None:
    request = (parser_context or {}).get("request")
    if request is None:
        return None
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) or None
    except ValueError:
        return None


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        limit = max_upload_bytes()
        length = _content_length(parser_context)
        if length is not None and length > limit:
            raise _too_large(length, limit)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise _too_large(None, limit)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ApiError(400, "parse_error", f"the body is not UTF-8 text (byte {exc.start})",
                           [problem("send JSON encoded as UTF-8", "body")]) from None
        try:
            return safejson.loads(text, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise ApiError(400, "parse_error", f"the body is not valid JSON: {exc.msg}",
                           [{**problem(exc.msg, "body"), "line": exc.lineno, "column": exc.colno}]) from None
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"the body is not valid JSON: {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class FormParser(parsers.FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        limit = max_upload_bytes()
        length = _content_length(parser_context)
        if length is not None and length > limit:
            raise _too_large(length, limit)
        return super().parse(stream, media_type, parser_context)


class MultiPartParser(parsers.MultiPartParser):
    """Files are checked one by one by the views (`formats.check_size`), before they are read."""
