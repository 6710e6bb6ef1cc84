"""The hostile uploads of tests/data/fuzz/uploads/ (see its README), replayed through every upload
path of the API and the CLI: each is refused with a 400 (a failing exit code) that says what and
where, nothing is written, and the memory it took stays bounded."""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client

from evaluations.models import CaseResult, EvalCase, EvalSet, EvalSetVersion, Project, Run
from tests.conftest import REPO
from tests.engine_helpers import import_demo

CORPUS = REPO / "tests" / "data" / "fuzz" / "uploads"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text())
OWN = {"README.md", "recipes.py", "expected.json"}
PATHS = ("evalsets", "results", "outputs")
# What replaying one entry may take (tracemalloc's peak): the largest refusal here takes ~20 MB
# (a 4 MB attachment read before its 400th MB is counted); what these files stood for was 180 MB
# to 20 GB.
MEMORY_BOUND = 64 * 1024 * 1024


def _recipes() -> Any:
    spec = importlib.util.spec_from_file_location("fuzz_upload_recipes", CORPUS / "recipes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


RECIPES: dict[str, Any] = _recipes().RECIPES


@functools.cache
def entry_bytes(name: str) -> bytes:
    return RECIPES[name]() if name in RECIPES else (CORPUS / name).read_bytes()


def test_every_file_and_recipe_of_the_corpus_says_what_it_expects() -> None:
    files = {p.name for p in CORPUS.iterdir() if p.is_file()} - OWN  # not __pycache__ (recipes.py is imported)
    assert set(EXPECTED) == files | set(RECIPES)
    assert not files & set(RECIPES)
    for name, entry in EXPECTED.items():
        assert entry["why"] and entry["paths"] and set(entry["paths"]) <= set(PATHS), name
        assert bool(entry.get("recipe")) == (name in RECIPES), name


def test_the_recipes_stand_for_much_more_than_they_weigh() -> None:
    """The point of each: a small file. (What it inflates to is checked by its refusal below.)"""
    for name in RECIPES:
        limit = 5 * 1024 * 1024 if name == "attachments-log.json" else 2 * 1024 * 1024
        assert len(entry_bytes(name)) < limit, name


CASES = [(name, path) for name in EXPECTED for path in PATHS]


def _written() -> tuple[int, ...]:
    return (EvalSet.objects.count(), EvalSetVersion.objects.count(), EvalCase.objects.count(), Run.objects.count(),
            CaseResult.objects.count())


def _check(name: str, path: str, code: str, message: str, problems: list[dict[str, Any]]) -> None:
    expected = EXPECTED[name]["paths"].get(path)
    if expected is None:
        return  # not meant for this path: refused all the same, with whatever that path says
    assert code == expected["code"], (name, path, code, message)
    assert expected["says"] in message, (name, path, message)
    first = problems[0] if problems else {}
    if "line" in expected:
        assert first.get("line") == expected["line"], (name, path, first)
    assert first.get("file") and first["file"].split("/")[0] in (name, "promptfooconfig.yaml"), (name, path, first)


@pytest.fixture
def demo(acme: Project) -> int:
    return import_demo(acme).evalset_id


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "path"), CASES)
def test_the_api_refuses_each_entry_on_each_path_writing_nothing_in_bounded_memory(
        alice_client: Client, demo: int, settings: Any, name: str, path: str) -> None:
    for key, value in EXPECTED[name].get("settings", {}).items():
        setattr(settings, key, value)
    data = entry_bytes(name)
    before = _written()
    upload = SimpleUploadedFile(name, data)
    tracemalloc.start()
    try:
        if path == "evalsets":
            response = alice_client.post("/api/v1/evalsets/", {"project": "acme", "file": [upload]})
        elif path == "results":
            response = alice_client.post("/api/v1/runs/import/", {"project": "acme", "file": upload})
        else:
            response = alice_client.post("/api/v1/runs/", {"evalset": str(demo), "outputs_file": upload})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert response.status_code == 400, (name, path, response.content[:500])
    body = response.json()
    _check(name, path, body["code"], body["message"], body.get("problems", []))
    assert _written() == before
    assert peak < MEMORY_BOUND, f"{name} through {path}: tracemalloc peak {peak / 2**20:.0f} MB"


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "path"), CASES)
def test_the_cli_refuses_each_entry_on_each_path_writing_nothing(
        acme: Project, demo: int, settings: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        name: str, path: str) -> None:
    for key, value in EXPECTED[name].get("settings", {}).items():
        setattr(settings, key, value)
    file = tmp_path / name
    file.write_bytes(entry_bytes(name))
    before = _written()
    with pytest.raises(SystemExit) as exited:
        if path == "evalsets":
            call_command("import_evalset", str(file), "--project", "acme")
        elif path == "results":
            call_command("import_results", str(file), "--project", "acme")
        else:
            call_command("eval", "demo_travel_agent", "--outputs", str(file), "--project", "acme")
    assert exited.value.code not in (0, None), (name, path)
    err = capsys.readouterr().err
    expected = EXPECTED[name]["paths"].get(path)
    if expected is not None:
        assert expected["says"] in err, (name, path, err[-800:])
        if path != "outputs":  # `eval` says the problem; the import commands also name its code
            assert f"error ({expected['code']})" in err, (name, path, err[-800:])
        if "line" in expected:
            assert f":{expected['line']}" in err, (name, path, err[-800:])
    assert _written() == before
