"""The static files storage of `manage.py up` (the embedded default and the team server alike):
whitenoise's compressed manifest storage, so every asset a page names carries its content
hash (cached for a year, `immutable`) and is served gzipped; and a file committed with its
own brotli copy beside it (the plotly.js build, static/vendor/*.min.js.br) keeps it under
the hashed name, so it is served brotli-compressed too without brotli being installed.

Tests and `runserver` keep Django's plain StaticFilesStorage, served from the finders
(the manifest storage needs collectstatic, which a test's live server never runs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    def post_process(self, paths: dict[str, Any], dry_run: bool = False, **options: Any) -> Iterator[Any]:
        yield from super().post_process(paths, dry_run, **options)
        if dry_run:
            return
        for name, (storage, path) in paths.items():
            if name.endswith(".br") or not storage.exists(f"{path}.br"):
                continue
            hashed = self.stored_name(name)
            self.delete(f"{hashed}.br")
            with storage.open(f"{path}.br") as precompressed:
                self._save(f"{hashed}.br", precompressed)
