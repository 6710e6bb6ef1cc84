"""Serve plotly.min.js from the installed plotly package, so no page needs a CDN."""

from __future__ import annotations

import os
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = os.path.join(os.path.dirname(plotly.__file__), "package_data")
PLOTLY_STATIC_PATH = "vendor/plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PLOTLY_DIR)
        self.storage.prefix = "vendor"  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        if path != PLOTLY_STATIC_PATH:
            return []  # a miss must be [] (not None) for collectstatic and whitenoise
        match = os.path.join(PLOTLY_DIR, "plotly.min.js")
        return [match] if find_all else match

    def list(self, ignore_patterns: Any) -> Any:
        yield "plotly.min.js", self.storage
