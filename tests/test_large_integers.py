"""Large integers are data (issue 38, item 7): an integer of more than 4,300 digits (what Python
turns into an int) is refused with a 400 saying where it is, on every upload path and in the
JSON API alike; an integer beyond 64 bits or past the largest float, which evalsite reads, is
kept where it is data and refused with its field where a number is read."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from evaluations import safejson
from evaluations.evalsets.services import evalset_import
from evaluations.interop import SourceFile
from evaluations.interop.base import EvalSetImportError
from evaluations.interop.promptfoo.js import js_number, load_yaml, render
from evaluations.interop.results import read_results
from evaluations.models import CaseResult, EvalCase, EvalSet, EvalSetVersion, Project, Run
from evaluations.runs.imports import results_import
from tests.conftest import REPO
from tests.engine_helpers import import_demo

CORPUS = REPO / "tests" / "data" / "fuzz" / "uploads"
BIG = "7" * 5000
SAYS = "an integer of 5,000 digits (evalsite reads integers of at most 4,300 digits"


def _written() -> tuple[int, ...]:
    return (EvalSet.objects.count(), EvalSetVersion.objects.count(), EvalCase.objects.count(), Run.objects.count(),
            CaseResult.objects.count())


# --- The parser ---------------------------------------------------------------------------------


def test_json_with_a_5000_digit_integer_is_refused_at_the_number_not_with_a_bare_value_error() -> None:
    text = f'{{"a": "{BIG}",\n "b": [1.5, -{BIG}]}}'  # the digits in the string are text: fine
    for parse in (safejson.loads, lambda t: safejson.loads_exact(t.encode())):
        with pytest.raises(safejson.TooLongNumber) as info:
            parse(text)
        assert isinstance(info.value, json.JSONDecodeError)
        assert (info.value.lineno, info.value.colno) == (2, 13)  # the minus sign
        assert SAYS in info.value.msg


def test_long_digit_runs_that_are_not_integers_are_read_as_before() -> None:
    assert safejson.loads(f'["{BIG}", 1.{BIG}, 2e5]')[0] == BIG
    assert safejson.loads("[" + "9" * 4300 + "]")[0] == int("9" * 4300)
    assert safejson.long_integer(f'{{"k\\"{BIG}": 1}}') is None  # inside a string with an escaped quote


def test_yaml_with_a_5000_digit_integer_names_its_line() -> None:
    from evaluations.interop.promptfoo.js import YamlError

    with pytest.raises(YamlError) as info:
        load_yaml(f"tests:\n  - vars: {{n: {BIG}}}\n")
    assert (info.value.line, info.value.column) == (2, 15) and SAYS in str(info.value)
    assert load_yaml(f"n: '{BIG}'\n")[0] == {"n": BIG}  # quoted: text


def test_the_json_api_refuses_a_5000_digit_integer_with_400_and_its_place(alice_client: Client,
                                                                        acme: Project) -> None:
    body = f'{{"project": "acme",\n "evalset": {BIG}}}'
    response = alice_client.post("/api/v1/runs/", data=body, content_type="application/json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["code"] == "parse_error" and SAYS in answer["message"]
    assert (answer["problems"][0]["line"], answer["problems"][0]["column"]) == (2, 13)


# --- Every upload path ---------------------------------------------------------------------------

SIX = [("bigint.jsonl", 2), ("bigint.evalset.json", 31), ("bigint-log.json", 35),
       ("bigint.promptfooconfig.yaml", 7)]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "line"), SIX)
def test_the_api_refuses_an_eval_set_with_a_5000_digit_integer_naming_file_and_line(
        alice_client: Client, acme: Project, name: str, line: int) -> None:
    response = alice_client.post("/api/v1/evalsets/", {
        "project": "acme", "file": [SimpleUploadedFile(name, (CORPUS / name).read_bytes())]})
    assert response.status_code == 400, response.content[:300]
    problem = response.json()["problems"][0]
    assert (problem["file"], problem["line"]) == (name, line) and SAYS in problem["message"]
    assert _written() == (0, 0, 0, 0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "line"), SIX)
def test_the_upload_page_refuses_it_saying_file_and_line(alice_client: Client, acme: Project, name: str,
                                                         line: int) -> None:
    response = alice_client.post(reverse("evalset_upload"), {
        "files": [SimpleUploadedFile(name, (CORPUS / name).read_bytes())], "format": ""})
    assert response.status_code == 400
    page = response.content.decode()
    assert SAYS in page and name in page and f">{line}:" in page
    assert _written() == (0, 0, 0, 0, 0)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["bigint-outputs.json", "bigint-outputs.jsonl"])
def test_a_runs_outputs_file_with_a_5000_digit_integer_is_refused_by_the_api_and_the_page(
        alice_client: Client, acme: Project, name: str) -> None:
    version = import_demo(acme)
    before = _written()
    data = (CORPUS / name).read_bytes()
    response = alice_client.post("/api/v1/runs/", {"evalset": str(version.evalset_id),
                                                   "outputs_file": SimpleUploadedFile(name, data)})
    assert response.status_code == 400
    assert SAYS in json.dumps(response.json()) and name in json.dumps(response.json())
    page = alice_client.post(reverse("run_new"), {
        "version": version.pk, "config_source": "default", "target_kind": "uploaded", "iterations": 1,
        "warmups": 0, "outputs_file": SimpleUploadedFile(name, data)})
    assert page.status_code == 400
    panel = page.content.decode().split('class="error-panel"', 1)[1].split("</section>", 1)[0]
    assert SAYS in panel and re.search(r'<td class="mono num">\d+:\d+</td>', panel)
    assert _written() == before


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "line"), [("bigint-deepeval-results.json", 14),
                                            ("bigint-adk-results.evalset_result.json", 21), ("bigint-log.json", 35)])
def test_a_results_import_with_a_5000_digit_integer_is_refused_by_the_api_and_the_page(
        alice_client: Client, acme: Project, name: str, line: int) -> None:
    data = (CORPUS / name).read_bytes()
    response = alice_client.post("/api/v1/runs/import/", {"project": "acme", "file": SimpleUploadedFile(name, data)})
    assert response.status_code == 400
    problem = response.json()["problems"][0]
    assert (problem["file"], problem["line"]) == (name, line) and SAYS in problem["message"]
    page = alice_client.post(reverse("results_import"), {"file": SimpleUploadedFile(name, data)})
    assert page.status_code == 400 and SAYS in page.content.decode()
    assert _written() == (0, 0, 0, 0, 0)


# --- What evalsite reads is kept ------------------------------------------------------------------


def _log(header_extra: dict[str, Any], metadata: Any) -> bytes:
    doc = {"version": 2, "status": "success", "eval": {"task": "ids", "model": "mockllm/model", **header_extra},
           "samples": [{"id": 1, "epoch": 1, "input": "What is 2 + 2?", "target": "4",
                        "messages": [{"role": "user", "content": "What is 2 + 2?"},
                                     {"role": "assistant", "content": "4"}],
                        "output": {"model": "mockllm/model", "completion": "4"},
                        "scores": {"match": {"value": "C"}}, "metadata": {"call_id": "ID"}}]}
    return json.dumps(doc).replace('"ID"', str(metadata)).encode()


@pytest.mark.django_db
def test_an_inspect_log_with_integers_beyond_64_bits_is_read_and_keeps_them(acme: Project) -> None:
    """ijson's C parser refuses them (inspect_ai met one: a 20-digit id in a tool call's arguments);
    they answered 500 in the header and 'not valid JSON' in a sample."""
    seed, call = 2**70 + 1, 10**25 + 3
    data = _log({"config": {"seed": seed}}, call)
    [outcome] = evalset_import(project=acme, files=[SourceFile("ids.json", data)])
    case = EvalCase.objects.in_version(outcome.version).get()
    assert str(call) in json.dumps(case.metadata)
    run = results_import(project=acme, file=SourceFile("ids-results.json", data))
    assert run.status == Run.Status.COMPLETED


def test_a_score_past_the_largest_float_is_refused_with_its_field_not_a_500() -> None:
    data = json.dumps({"testRunData": {"testCases": [{"name": "c1", "input": "q", "actualOutput": "a",
                                                      "success": True, "metricsData": [
                                                          {"name": "m", "threshold": 0.5, "success": True,
                                                           "score": "BIG"}]}]}}, indent=1)
    with pytest.raises(EvalSetImportError) as info:
        read_results(SourceFile("run.json", data.replace('"BIG"', "1" + "0" * 400).encode()))
    problem = info.value.problems[0]
    assert problem.path and problem.path.endswith("metricsData[0].score") and problem.line
    assert "past the largest" in problem.message


def test_promptfoo_prints_an_integer_past_the_largest_double_as_javascript_does() -> None:
    assert js_number(10**400) == "Infinity" and js_number(-(10**400)) == "-Infinity"
    assert render("n = {{n}}", {"n": 10**400}) == "n = Infinity"
    doc, _ = load_yaml(f"n: {'1' * 400}\n")
    assert doc["n"] == int("1" * 400)
