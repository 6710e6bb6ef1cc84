"""The OTLP benchmark's HTTP floor: a WSGI app that reads the request body and answers an empty
200, served by gunicorn with the same workers, threads and access log as `manage.py up`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "application/x-protobuf"), ("Content-Length", "0")])
    return [b""]
