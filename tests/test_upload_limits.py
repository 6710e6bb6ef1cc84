"""Uploads are limited by what they expand to (issue 38, item 3): the members of an upload's zips
and Inspect `.eval` logs, all together (EVALSITE_MAX_UNPACKED_MB), and what following references
adds (EVALSITE_MAX_EXPANDED_MB): attachments put back, YAML aliases, a var repeated in a prompt,
values copied into every case. Each is a 400 naming its limit; nothing is written."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tracemalloc
import zipfile
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile, read_upload
from evaluations.interop.base import EvalSetImportError
from evaluations.interop.limits import max_expanded_bytes, max_unpacked_bytes
from evaluations.interop.outputs import read_outputs
from evaluations.interop.results import read_results
from evaluations.models import EvalCase, EvalSet, EvalSetVersion, Project, Run
from tests.conftest import REPO

_spec = importlib.util.spec_from_file_location("fuzz_upload_recipes_limits",
                                               REPO / "tests" / "data" / "fuzz" / "uploads" / "recipes.py")
assert _spec is not None and _spec.loader is not None
recipes: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = recipes
_spec.loader.exec_module(recipes)

KB = 1024


def _written() -> tuple[int, ...]:
    return EvalSet.objects.count(), EvalSetVersion.objects.count(), EvalCase.objects.count(), Run.objects.count()


def _refused(call: Any, *args: Any) -> EvalSetImportError:
    with pytest.raises(EvalSetImportError) as info:
        call(*args)
    return info.value


# --- The settings ---------------------------------------------------------------------------------

PROBE = """
import json, django
from django.conf import settings
django.setup()
from evaluations.interop.limits import max_expanded_bytes, max_unpacked_bytes
print(json.dumps([settings.EVALSITE_MAX_UPLOAD_BYTES, max_unpacked_bytes(), max_expanded_bytes()]))
"""


def _limits(tmp_path: Any, **env: str) -> list[int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EVALSITE_MAX_") and k != "DATABASE_URL"}
    clean.update({"DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DATA_DIR": str(tmp_path), **env})
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=clean, capture_output=True, text=True,
                          check=True)
    return list(json.loads(done.stdout))


def test_the_expansion_limits_follow_the_upload_limit_unless_set(tmp_path: Any) -> None:
    assert _limits(tmp_path) == [100 * 2**20] * 3
    assert _limits(tmp_path, EVALSITE_MAX_UPLOAD_MB="7") == [7 * 2**20] * 3
    assert _limits(tmp_path, EVALSITE_MAX_UNPACKED_MB="300", EVALSITE_MAX_EXPANDED_MB="20") == [
        100 * 2**20, 300 * 2**20, 20 * 2**20]


def test_a_test_lowering_the_upload_limit_lowers_the_expansion_limits(settings: Any) -> None:
    settings.EVALSITE_MAX_UPLOAD_BYTES = 5000
    assert max_unpacked_bytes() == max_expanded_bytes() == 5000


# --- Inspect attachments ----------------------------------------------------------------------


def _log(samples: list[dict[str, Any]]) -> bytes:
    return recipes.zstd_zip([("header.json", recipes._json(recipes.HEADER)),
                             *((f"samples/{n}_epoch_1.json", recipes._json(s)) for n, s in enumerate(samples, 1))])


def _with_attachment(sample_id: int, times: int, size: int = 300) -> dict[str, Any]:
    return recipes._sample(id=sample_id, input=[{"role": "user", "content": "attachment://a"}] * times,
                           attachments={"a": "x" * size})


def test_attachments_are_counted_each_time_they_are_put_back_across_the_whole_log(settings: Any) -> None:
    settings.EVALSITE_MAX_EXPANDED_BYTES = 1000
    [parsed] = read_upload([SourceFile("ok.eval", _log([_with_attachment(1, 3)]))])  # 900 bytes
    assert parsed.evalset.eval_cases and "x" * 300 in json.dumps(parsed.evalset.eval_cases[0].model_dump())
    for samples in ([_with_attachment(1, 4)], [_with_attachment(1, 2), _with_attachment(2, 2)]):
        data = _log(samples)
        for read in (lambda d: read_upload([SourceFile("log.eval", d)]), lambda d: read_results(SourceFile(
                "log.eval", d)), lambda d: read_outputs([SourceFile("log.eval", d)])):
            error = _refused(read, data)
            assert error.code == "too_expanded" and "EVALSITE_MAX_EXPANDED_MB" in error.problems[0].message
            assert error.problems[0].file and error.problems[0].file.startswith("log.eval/samples/")


def test_the_issues_attachment_bomb_is_refused_without_building_what_it_names() -> None:
    data = recipes.attachments_eval()
    assert len(data) < 1024  # 0.5 KiB standing for 400 MB
    tracemalloc.start()
    try:
        error = _refused(lambda: read_upload([SourceFile("bomb.eval", data)]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.code == "too_expanded" and "104,857,600 bytes an upload may expand by" in error.summary()
    assert peak < 48 * 2**20  # the 4 MB attachment parsed, not 400 MB (it grew a worker by 1.6 GB)


# --- Members of zips and .eval logs, together ------------------------------------------------------


@pytest.mark.parametrize("zipped", [recipes.zstd_zip, recipes.deflate_zip], ids=["zstd", "deflate"])
def test_an_eval_logs_members_are_limited_together_before_any_is_inflated(settings: Any, zipped: Any) -> None:
    settings.EVALSITE_MAX_UNPACKED_BYTES = 1024 * KB
    members = [("header.json", recipes._json(recipes.HEADER)),
               *((f"samples/{n}_epoch_1.json", lambda: recipes._padded_sample(400 * KB)) for n in (1, 2, 3))]
    data = zipped(members)
    reads = (lambda: read_upload([SourceFile("log.eval", data)]), lambda: read_results(SourceFile("log.eval", data)),
             lambda: read_outputs([SourceFile("log.eval", data)]))
    for read in reads:  # each 400 KB member within the limit; the three together not
        error = _refused(read)
        assert error.code == "too_expanded" and error.problems[0].file == "log.eval"
        assert "the log's header and 3 samples inflate to" in error.problems[0].message
        assert "EVALSITE_MAX_UNPACKED_MB" in error.problems[0].message
    tracemalloc.start()
    try:
        for read in reads:
            _refused(read)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * KB  # no member was inflated
    settings.EVALSITE_MAX_UNPACKED_BYTES = 2048 * KB
    with pytest.raises(EvalSetImportError) as info:  # within the limit: read on, to what the samples lack
        read_results(SourceFile("log.eval", data))
    assert info.value.code != "too_expanded"


def test_zips_in_one_upload_are_limited_together(settings: Any) -> None:
    settings.EVALSITE_MAX_UNPACKED_BYTES = 100 * KB
    one = recipes.deflate_zip([("a.evalset.json", lambda: [b" " * (60 * KB), json.dumps(
        {"eval_set_id": "a", "eval_cases": []}).encode()])])
    read_upload_error = _refused(lambda: read_upload([SourceFile("one.zip", one), SourceFile("two.zip", one)]))
    assert read_upload_error.code == "too_expanded" and read_upload_error.problems[0].file == "two.zip"
    assert re.search(r"the zip.s data file inflates to 61,\d{3} bytes \(122,\d{3} with the rest of the upload\): over the 102,400",
                     read_upload_error.problems[0].message)


# --- YAML aliases, prompt templates, copies into every case --------------------------------------


def test_yaml_aliases_are_limited_by_the_text_they_repeat_not_only_by_their_count(settings: Any) -> None:
    settings.EVALSITE_MAX_EXPANDED_BYTES = 2000
    config = "prompts: ['{{q}}']\nproviders: [echo]\nlong: &q " + "y" * 100 + "\ntests:\n"
    ok = config + "".join("  - vars: {q: *q}\n" for _ in range(15))
    [parsed] = read_upload([SourceFile("promptfooconfig.yaml", ok.encode())])
    assert len(parsed.evalset.eval_cases) == 15
    bad = config + "".join("  - vars: {q: *q}\n" for _ in range(40))
    error = _refused(lambda: read_upload([SourceFile("promptfooconfig.yaml", bad.encode())]))
    assert error.code == "too_expanded" and "its aliases repeat more text" in error.problems[0].message
    # The alias that went past: the document's own ~900 characters are not what aliases add.
    assert error.problems[0].line == 31 and bad.splitlines()[30] == "  - vars: {q: *q}"
    assert "EVALSITE_MAX_EXPANDED_MB" in error.problems[0].message


def test_the_issues_alias_bomb_is_refused_before_its_tests_are_built() -> None:
    data = recipes.aliases_yaml()
    tracemalloc.start()
    try:
        error = _refused(lambda: read_upload([SourceFile("promptfooconfig.yaml", data)]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert error.code == "too_expanded"
    assert peak < 32 * 2**20  # it grew a worker by 1.7 GB


def test_a_var_repeated_in_a_prompt_counts_each_repeat(settings: Any) -> None:
    settings.EVALSITE_MAX_EXPANDED_BYTES = 1000
    for times, refused in ((3, False), (12, True)):
        config = f"prompts: ['{'{{q}} ' * times}']\nproviders: [echo]\ntests:\n  - vars: {{q: {'z' * 100}}}\n"
        if refused:
            error = _refused(lambda c=config: read_upload([SourceFile("promptfooconfig.yaml", c.encode())]))
            assert error.code == "too_expanded" and error.problems[0].case == "test-1"
            assert "repeated {{ var }} references" in error.problems[0].message
        else:
            read_upload([SourceFile("promptfooconfig.yaml", config.encode())])


@pytest.mark.django_db
def test_a_default_copied_into_every_case_is_limited_by_what_the_cases_hold(acme: Project, settings: Any) -> None:
    settings.EVALSITE_MAX_EXPANDED_BYTES = 64 * KB
    config = ("prompts: ['{{n}}']\nproviders: [echo]\ndefaultTest:\n  vars:\n    big: " + "w" * (8 * KB)
              + "\ntests:\n" + "".join(f"  - vars: {{n: {n}}}\n" for n in range(40)))
    error = _refused(lambda: evalset_import(project=acme, files=[SourceFile("promptfooconfig.yaml", config.encode())]))
    assert error.code == "too_expanded" and "the cases made from this file hold" in error.problems[0].message
    assert error.problems[0].file == "promptfooconfig.yaml" and error.problems[0].case
    assert _written() == (0, 0, 0, 0)
    few = config.split("tests:\n")[0] + "tests:\n" + "".join(f"  - vars: {{n: {n}}}\n" for n in range(4))
    [outcome] = evalset_import(project=acme, files=[SourceFile("promptfooconfig.yaml", few.encode())])
    assert outcome.version.case_count == 4


# --- Through the API and the page: 400, nothing written ---------------------------------------------


@pytest.mark.django_db
def test_the_api_answers_400_naming_the_limit_and_writes_nothing(alice_client: Client, settings: Any) -> None:
    settings.EVALSITE_MAX_EXPANDED_BYTES = 1000
    response = alice_client.post("/api/v1/evalsets/", {"project": "acme", "file": [
        SimpleUploadedFile("log.eval", _log([_with_attachment(1, 4)]))]})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "too_expanded" and "EVALSITE_MAX_EXPANDED_MB" in body["message"]
    assert _written() == (0, 0, 0, 0)


@pytest.mark.django_db
def test_the_upload_page_says_the_upload_expands_past_a_limit(alice_client: Client, acme: Project,
                                                              settings: Any) -> None:
    settings.EVALSITE_MAX_UNPACKED_BYTES = 100 * KB
    response = alice_client.post(reverse("evalset_upload"), {"files": [SimpleUploadedFile(
        "bomb.zip", recipes.deflate_zip([("a.evalset.json", lambda: [b" " * (200 * KB)])]))], "format": ""})
    assert response.status_code == 400
    page = response.content.decode()
    assert "The upload expands past a limit" in page and "EVALSITE_MAX_UNPACKED_MB" in page
    assert _written() == (0, 0, 0, 0)


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


@pytest.mark.django_db
def test_a_tests_file_named_many_times_is_limited_by_what_the_cases_hold(alice_client: Client,
                                                                         settings: Any) -> None:
    settings.EVALSITE_MAX_EXPANDED_BYTES = 64 * KB
    data = _zip({"promptfooconfig.yaml": ("prompts: ['{{q}}']\nproviders: [echo]\ntests:\n"
                                          + "  - file://t.yaml\n" * 200).encode(),
                 "t.yaml": f"- vars: {{q: {'v' * (4 * KB)}}}\n".encode()})
    response = alice_client.post("/api/v1/evalsets/", {"project": "acme", "file": [SimpleUploadedFile("s.zip", data)]})
    assert response.status_code == 400 and response.json()["code"] == "too_expanded"
    assert _written() == (0, 0, 0, 0)
