"""The repository stands alone: a user's clone has nothing beside it, so nothing in it may
point outside it (the real-world eval sets the tests use live in tests/data/realworld/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REALWORLD, REPO

pytestmark = pytest.mark.database_free

SKIP_DIRS = {".git", ".venv", "venv", "data", "node_modules", ".pytest_cache", ".ruff_cache", ".mypy_cache",
             ".hypothesis", "__pycache__", "artifacts", "out", "staticfiles"}
TEXT_SUFFIXES = {".py", ".sh", ".md", ".txt", ".toml", ".cfg", ".ini", ".html", ".js", ".css", ".json", ".yml",
                 ".yaml", ""}
# Built from parts so that this file does not match itself.
OUTSIDE = re.compile("|".join([
    re.escape("..") + r"/shared\b",
    r"\bshared/(?:realworld|seeds|hooks)\b",
    r"\b(?:STACK|DESIGN|STYLE)" + re.escape(".md"),
    r"(?<![\w/])/" + "work/",
]))


def _project_files() -> list[Path]:
    files = []
    for path in REPO.rglob("*"):
        rel = path.relative_to(REPO)
        folders = rel.parts[:-1]
        # rel.parts, not only its folders: in a git worktree `.git` is a file naming the main checkout
        if any(part in SKIP_DIRS for part in rel.parts) or not path.is_file():
            continue
        if folders and folders[0].startswith(".") and folders[0] not in {".ci", ".github"}:
            continue  # tools' local folders (.differential/ venvs, caches): ignored by git, not the product
        if path.suffix in TEXT_SUFFIXES and path.stat().st_size < 2_000_000:
            files.append(path)
    return files


def test_no_file_in_the_repository_points_outside_it() -> None:
    files = _project_files()
    assert len(files) > 100  # the walk really saw the project
    offenders = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert offenders == []


def test_the_real_world_eval_sets_are_kept_in_the_repository_with_their_licences() -> None:
    assert REALWORLD.is_relative_to(REPO)
    for source, licence in {"google-adk": "Apache License", "deepeval": "Apache License", "uipath": "MIT"}.items():
        folder = REALWORLD / source
        assert any(folder.rglob("*.json")), folder
        assert licence in (folder / "LICENSE").read_text(), folder
    readme = (REALWORLD / "README.md").read_text()
    for upstream in ("google/adk-python", "UiPath/uipath-python", "confident-ai/deepeval"):
        assert upstream in readme
