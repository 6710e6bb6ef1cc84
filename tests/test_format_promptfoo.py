"""promptfoo: the promptfooconfig.yaml reader, its assertions as `promptfoo_*` criteria, bad input,
real published configs, the writer's round trip, and results.json written by promptfoo itself.

The criteria's numbers are proven against promptfoo 0.123.1 in tests/differential/test_promptfoo.py;
the cases here pin the rules that matter most (each was checked against promptfoo's own run)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from evaluations.evalsets.exports import ExportLossError, tool_export
from evaluations.evalsets.services import evalset_import
from evaluations.evaluators import get_evaluator_class
from evaluations.interop import EvalSetImportError, SourceFile, read_upload
from evaluations.interop.promptfoo.evalset import reader
from evaluations.interop.promptfoo.js import js_number, load_yaml
from evaluations.interop.results import read_results
from evaluations.models import EvalCase as CaseRow
from evaluations.models import Project, Run, Score
from evaluations.runs.imports import results_import
from evaluations.schemas.outputs import AgentOutput
from tests.conftest import DATA

RESULTS = DATA / "results" / "promptfoo"


def parse(text: str, name: str = "suite/promptfooconfig.yaml", *companions: SourceFile) -> Any:
    return reader.parse(SourceFile(name, text.encode()), list(companions))


def error(text: str, *companions: SourceFile) -> EvalSetImportError:
    with pytest.raises(EvalSetImportError) as caught:
        read_upload([SourceFile("suite/promptfooconfig.yaml", text.encode()), *companions], format="promptfoo")
    return caught.value


# --- Reading a suite ----------------------------------------------------------------------------

SUITE = """\
description: Weather bot
prompts: ["What is the weather in {{city}}? {{extra.note}}"]
providers: [echo, {id: openai:gpt-4.1, config: {temperature: 0}}]
defaultTest:
  vars: {extra: {note: Be brief.}}
  assert:
    - type: not-icontains
      value: sorry
  options: {provider: echo}
tests:
  - description: paris
    vars: {city: Paris}
    assert:
      - type: contains
        value: Paris
      - type: contains
        value: sunny
        weight: 2
      - type: llm-rubric
        value: is friendly
  - vars: {city: 東京, extra: {note: ''}}
    threshold: 0.5
    metadata: {team: asia}
    assert:
      - type: levenshtein
        value: Tokyo is clear
        threshold: 3
"""


def test_each_test_is_a_case_with_its_prompt_rendered_and_its_assertions_as_criteria() -> None:
    parsed = parse(SUITE)
    assert (parsed.format, parsed.variant) == ("promptfoo", "promptfooconfig")
    evalset = parsed.evalset
    assert (evalset.eval_set_id, evalset.name) == ("suite", "Weather bot")
    assert parse(SUITE, "promptfooconfig.yaml").evalset.eval_set_id == "Weather bot"
    assert evalset.metadata["promptfoo"]["providers"][1]["id"] == "openai:gpt-4.1"
    assert evalset.metadata["promptfoo"]["defaultTest"] == {"options": {"provider": "echo"}}
    first, second = evalset.eval_cases
    assert (first.eval_id, first.name, second.eval_id, second.name) == ("paris", "paris", "test-2", "")
    assert first.conversation[0].user_content.content == "What is the weather in Paris? Be brief."
    assert second.conversation[0].user_content.content == "What is the weather in 東京? "
    assert list(first.criteria) == ["promptfoo_not_icontains", "promptfoo_contains", "promptfoo_contains_2",
                                    "promptfoo_llm_rubric"]
    assert first.criteria["promptfoo_contains_2"] == {"type": "contains", "value": "sunny", "weight": 2}
    assert first.metadata["promptfoo"]["vars"] == {"extra": {"note": "Be brief."}, "city": "Paris"}
    assert first.metadata["promptfoo"]["not_scored"] == {
        "promptfoo_llm_rubric": "llm-rubric is not a deterministic assertion evalsite computes"}
    assert second.metadata["promptfoo"]["test"] == {"threshold": 0.5, "metadata": {"team": "asia"}}
    config = parsed.default_config.criteria
    assert config["promptfoo_contains_2"].evaluator == "promptfoo_contains"
    assert config["promptfoo_not_icontains"].evaluator == "promptfoo_icontains"
    assert (config["promptfoo_llm_rubric"].enabled, config["promptfoo_llm_rubric"].evaluator) == (
        False, "promptfoo_not_scored")
    assert config["promptfoo_llm_rubric"].options == {"not_scored": "llm-rubric is not a deterministic assertion "
                                                                    "evalsite computes"}
    assert parsed.warnings == ["1 promptfoo assertion(s) are kept in their cases but not scored by evalsite "
                               "(llm-rubric: 1): see docs/evalsets.md, promptfoo"]


def test_several_prompts_or_a_prompt_file_leave_the_vars_as_the_user_turn() -> None:
    parsed = parse("prompts: ['a {{x}}', 'b {{x}}']\ntests:\n  - vars: {x: 1, y: [true, null]}\n")
    [case] = parsed.evalset.eval_cases
    assert case.conversation[0].user_content.content == [{"type": "json", "json": {"x": 1, "y": [True, None]}}]
    parsed = parse("prompts: [file://prompt.txt]\ntests: [{vars: {x: hi}}]\n")
    assert parsed.evalset.eval_cases[0].conversation[0].user_content.content == [{"type": "json", "json": {"x": "hi"}}]


def test_vars_holding_lists_of_text_are_one_case_per_combination() -> None:
    parsed = parse("prompts: ['{{a}} {{b}}']\ndefaultTest: {vars: {b: [x, y]}}\ntests:\n"
                   "  - {description: t, vars: {a: [1, 2]}}\n  - {vars: {a: [p, q]}}\n"
                   "  - {vars: {a: [p, q]}, options: {disableVarExpansion: true}}\n")
    # What promptfoo 0.123.1's echo answered for this suite, test by test (a list of numbers is not expanded).
    assert [(c.eval_id, c.conversation[0].user_content.content) for c in parsed.evalset.eval_cases] == [
        ("test-1", "1,2 x"), ("test-2", "1,2 y"), ("test-3", "p x"), ("test-4", "q x"), ("test-5", "p y"),
        ("test-6", "q y"), ("test-7", "p,q x,y")]


def test_yaml_is_read_as_promptfoo_reads_it_yaml_1_2() -> None:
    doc, _ = load_yaml("a: yes\nb: 0755\nc: 1_000\nd: on\ne: 2024-01-01\nf: 0x1F\ng: 1e3\n1: one\n")
    assert doc == {"a": "yes", "b": 755, "c": "1_000", "d": "on", "e": "2024-01-01", "f": 31, "g": 1000.0, "1": "one"}
    assert js_number(1e21) == "1e+21" and js_number(0.000001) == "0.000001" and js_number(2.0) == "2"


def test_tests_written_in_the_config_are_packed_unless_they_share_a_value() -> None:
    # Each test is kept as bytes until its case is made; one that holds an alias, an anchored
    # one and an alias itself stay values (what aliases share is never copied).
    from evaluations.interop.promptfoo.evalset import _Packed

    text = ("prompts: ['Q: {{q}}']\ntests:\n  - description: plain\n    vars: {q: 'é 1', n: [1, 2.5, true, null]}\n"
            "  - &t {description: anchored, vars: {q: '2'}}\n  - *t\n"
            "  - description: &x named\n    assert: [{type: equals, value: 'é'}]\n  - vars: {q: *x}\n")
    doc, _ = load_yaml(text.encode(), pack=_Packed)
    plain, anchored, alias, named, holding = doc["tests"]
    assert isinstance(plain, _Packed) and isinstance(named, _Packed)
    assert [type(t) for t in (anchored, alias, holding)] == [dict, dict, dict] and anchored is alias
    whole, _ = load_yaml(text)
    assert [plain.unpack(), named.unpack()] == [whole["tests"][0], whole["tests"][3]]
    assert (plain.description, named.description) == ("plain", "named")
    cases = parse(text).evalset.eval_cases
    assert [c.eval_id for c in cases] == ["plain", "test-2", "test-3", "named", "test-5"]
    assert cases[0].metadata["promptfoo"]["vars"] == {"q": "é 1", "n": [1, 2.5, True, None]}


def test_yaml_read_from_bytes_fails_where_the_text_does() -> None:
    # The parser reads a UTF-8 file's bytes: its errors have the lines and columns of the text's.
    for text in ("tests:\n  - vars: {q: 'ü'}\n    x: [1, 2\n", "é: 1\nb: [ü, ü]]\n", "a: 1\nb: \u2028\n",
                 "a: 'ß'\n\tb: 2\n"):
        caught = []
        for source in (text, text.encode()):
            with pytest.raises(ValueError) as exc:
                load_yaml(source)
            caught.append((str(exc.value), exc.value.line, exc.value.column))  # type: ignore[attr-defined]
        assert caught[0] == caught[1], text


def test_tests_from_csv_and_yaml_files_in_the_upload() -> None:
    csv = SourceFile("suite/tests.csv", (
        b"topic,__expected1,__expected2,__description,__metadata:tags[]\n"
        b'ml,"contains-any:a,""b, c""",not-regex:\\d,first,"x,y\\,z"\n'
        b"ai,levenshtein(2):aj,fn:output.length > 1,second,\n"))
    more = SourceFile("suite/more/extra.yaml", b"- vars: {topic: extra}\n  assert: [{type: equals, value: extra}]\n")
    [parsed] = read_upload([SourceFile("suite/promptfooconfig.yaml",
                                       b"prompts: ['About {{topic}}']\ntests: [file://tests.csv, file://more/*.yaml]\n"),
                            csv, more])
    first, second, third = parsed.evalset.eval_cases
    assert [c.eval_id for c in (first, second, third)] == ["first", "second", "test-3"]
    assert first.criteria == {"promptfoo_contains_any": {"type": "contains-any", "value": ["a", "b, c"]},
                              "promptfoo_not_regex": {"type": "not-regex", "value": "\\d"}}
    assert first.metadata["promptfoo"]["test"] == {"metadata": {"tags": ["x", "y,z"]}}
    assert second.criteria["promptfoo_levenshtein"] == {"type": "levenshtein", "value": "aj", "threshold": 2}
    assert second.criteria["promptfoo_javascript"] == {"type": "javascript", "value": "output.length > 1"}
    assert third.conversation[0].user_content.content == "About extra"
    assert sorted(f.name for f in parsed.companions_used) == ["suite/more/extra.yaml", "suite/tests.csv"]


# --- Bad input ------------------------------------------------------------------------------------


def test_invalid_yaml_says_where() -> None:
    problem = error("tests:\n  - vars: {a: 1\n").problems[0]
    assert problem.file == "suite/promptfooconfig.yaml" and problem.line == 3
    assert problem.message.startswith("not valid YAML")


@pytest.mark.parametrize(("text", "path", "line", "message"), [
    ("tests:\n  - vars: {a: 1}\n    assert:\n      - value: x\n", "tests[0].assert[0].type", 4,
     "required field is missing"),
    ("tests:\n  - vars: [1, 2]\n", "tests[0].vars", 2, "expected a mapping of variable names to values"),
    ("tests:\n  - vars: {a: 1}\n  - 7\n", "tests[1]", 3, "expected a test (a mapping) or a file:// reference"),
    ("tests:\n  - assert:\n      - type: contains\n        weight: heavy\n", "tests[0].assert[0].weight", 4,
     "expected a number"),
    ("tests: {a: 1}\n", "tests", 1, "expected a list of tests or a file:// reference"),
])
def test_bad_tests_are_refused_with_their_field_path_and_line(text: str, path: str, line: int, message: str) -> None:
    [problem] = error(text).problems
    assert (problem.path, problem.line, problem.message) == (path, line, message)


def test_a_missing_tests_file_is_named() -> None:
    [problem] = error("tests: file://tests.csv\n").problems
    assert "tests.csv" in problem.message and "not in the upload" in problem.message


@pytest.mark.parametrize(("text", "says"), [
    ("a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{n}: &{n} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, n in zip("abcdefg", "bcdefgh", strict=True)) + "tests: []\n", "aliases are expanded"),
    ("tests:\n" + "  " + "[" * 80 + "]" * 80 + "\n", "nested deeper"),
    ("tests: !!python/object:os.system {}\n", "JSON cannot hold (os.system"),
    ("tests:\n  - vars: {a: 'x\u2028y'}\n", "U+2028"),
    ("tests:\n  - vars: {a: !!binary aGk=}\n", "JSON cannot hold"),
])
def test_unsafe_or_unreadable_yaml_is_refused(text: str, says: str) -> None:
    assert says in error(text).problems[0].message


# --- Real published configs -------------------------------------------------------------------------


def folder(path: Path) -> list[SourceFile]:
    return [SourceFile(f"{path.name}/{p.name}", p.read_bytes()) for p in sorted(path.iterdir())]


def test_the_real_configs_import_with_their_unscored_assertions_marked(realworld: Path) -> None:
    base = realworld / "promptfoo"
    [getting] = read_upload(folder(base / "getting-started"))
    assert (getting.evalset.eval_set_id, getting.evalset.name) == ("getting-started", "Getting started")
    assert [c.criteria for c in getting.evalset.eval_cases] == [
        {"promptfoo_contains": {"type": "contains", "value": "Bonjour le monde"}},
        {"promptfoo_icontains": {"type": "icontains", "value": "Dónde está la biblioteca"}}]
    assert getting.evalset.eval_cases[0].conversation[0].user_content.content == [
        {"type": "json", "json": {"language": "French", "input": "Hello world"}}]  # two prompts

    [csv] = read_upload(folder(base / "csv-metadata"))
    cases = csv.evalset.eval_cases
    assert [c.conversation[0].user_content.content for c in cases] == [
        "Tell me about machine learning", "Tell me about quantum physics", "Tell me about climate change"]
    assert cases[1].criteria["promptfoo_contains"] == {"type": "contains", "value": "quantum"}
    assert cases[1].metadata["promptfoo"]["test"]["metadata"] == {
        "category": "science", "tags": ["physics", "advanced,theory", "quantum"]}
    assert csv.default_config.criteria["promptfoo_llm_rubric"].enabled is False
    assert "3 promptfoo assertion(s) are kept" in csv.warnings[0]

    [simple] = read_upload(folder(base / "simple-csv"))
    assert [c.criteria["promptfoo_icontains"]["value"] for c in simple.evalset.eval_cases] == [
        "bonjour", "faim", "Ahoy", "grub"]

    [json_output] = read_upload(folder(base / "json-output"))
    first, second = json_output.evalset.eval_cases
    assert "not_scored" not in first.metadata["promptfoo"] or set(first.metadata["promptfoo"]["not_scored"]) == {
        "promptfoo_javascript"}
    assert set(second.metadata["promptfoo"]["not_scored"]) == {"promptfoo_is_json", "promptfoo_javascript",
                                                               "promptfoo_contains_any"}
    assert second.metadata["promptfoo"]["test"] == {"options": {"transform": "JSON.parse(output)"}}
    # is-json is scored where it has no schema: the criterion is enabled, and gives nothing where it has one
    config = json_output.default_config.criteria["promptfoo_is_json"]
    assert config.enabled is True
    evaluator = get_evaluator_class("promptfoo_is_json")()
    output = AgentOutput.model_validate({"eval_id": "x", "turns": [{"final_response": "{}"}]})
    assert [r.score for r in evaluator.score(first, output, config, "promptfoo_is_json")] == [1.0]
    assert evaluator.score(second, output, config, "promptfoo_is_json") == []


def test_a_zip_of_a_real_config_uploads_through_the_page(realworld: Path, acme: Project, alice_client: Any) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for f in folder(realworld / "promptfoo" / "csv-metadata"):
            zf.writestr(f.name, f.data)
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    response = alice_client.post(reverse("evalset_upload"), {"files": [SimpleUploadedFile("suite.zip", buffer.getvalue())],
                                                             "format": ""})
    assert response.status_code == 200
    page = response.content.decode()
    assert "promptfoo" in page and "csv-metadata" in page
    assert "kept in their cases but not scored by evalsite" in page
    assert CaseRow.objects.filter(evalset__eval_set_id="csv-metadata").count() == 3


def test_a_config_uploads_through_the_api(acme: Project, alice_client: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = alice_client.post("/api/v1/evalsets/", {"project": "acme", "file": [
        SimpleUploadedFile("weather.promptfooconfig.yaml", SUITE.encode())]})
    assert response.status_code == 201, response.content
    [result] = response.json()["results"]
    assert (result["format"], result["variant"], result["case_count"]) == ("promptfoo", "promptfooconfig", 2)
    assert result["evalset"]["eval_set_id"] == "weather"
    bad = alice_client.post("/api/v1/evalsets/", {"project": "acme", "file": [
        SimpleUploadedFile("bad.promptfooconfig.yaml", b"tests:\n  - vars: [1]\n")], "format": "promptfoo"})
    assert bad.status_code == 400
    assert bad.json()["problems"][0]["path"] == "tests[0].vars"


# --- The writer -------------------------------------------------------------------------------------


def test_an_imported_suite_exports_back_as_a_config_that_reads_back_the_same(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[SourceFile("weather.promptfooconfig.yaml", SUITE.encode())])
    export = tool_export(outcome.version, "promptfoo")
    assert export.filename == "weather.promptfooconfig.yaml"
    doc, _ = load_yaml(export.data.decode())
    assert doc["description"] == "Weather bot" and doc["defaultTest"] == {"options": {"provider": "echo"}}
    first = doc["tests"][0]
    assert first["vars"] == {"extra": {"note": "Be brief."}, "city": "Paris"}
    # Stored criteria come back in key order; a type's assertions keep theirs (`contains` before `contains_2`).
    assert sorted(a["type"] for a in first["assert"]) == ["contains", "contains", "llm-rubric", "not-icontains"]
    assert [a["value"] for a in first["assert"] if a["type"] == "contains"] == ["Paris", "sunny"]
    again = evalset_import(project=acme, files=[SourceFile(export.filename, export.data)])
    assert again[0].version.pk == outcome.version.pk  # the same content: the same version


@pytest.mark.parametrize("example", ["getting-started", "csv-metadata", "simple-csv", "json-output"])
def test_each_real_config_round_trips_through_the_promptfoo_export(example: str, realworld: Path, acme: Project,
                                                                   globex: Project) -> None:
    [first] = evalset_import(project=acme, files=folder(realworld / "promptfoo" / example))
    export = tool_export(first.version, "promptfoo")
    [back] = evalset_import(project=globex, files=[SourceFile(export.filename, export.data)])
    assert back.version.content_hash == first.version.content_hash
    assert back.version.evalset.eval_set_id == example


def test_a_real_csv_suite_round_trips_and_an_edit_that_promptfoo_cannot_hold_is_refused(
        realworld: Path, acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=folder(realworld / "promptfoo" / "csv-metadata"))
    export = tool_export(outcome.version, "promptfoo")
    again = evalset_import(project=acme, files=[SourceFile(export.filename, export.data)])
    assert again[0].version.pk == outcome.version.pk
    CaseRow.objects.filter(pk=CaseRow.objects.in_version(outcome.version).order_by("position").first().pk).update(
        tags=["x"])
    with pytest.raises(ExportLossError) as caught:
        tool_export(outcome.version, "promptfoo")
    assert any(loss.path == "tags" for loss in caught.value.losses)


# --- Results written by promptfoo -------------------------------------------------------------------


def test_results_json_keeps_every_assertions_pass_score_and_reason() -> None:
    parsed = read_results(SourceFile("results.json", (RESULTS / "results.json").read_bytes()))
    assert parsed.tool == "promptfoo" and parsed.eval_set_id == "Weather answers"
    assert parsed.labels == {"model": "echo", "tags": ["promptfoo-prompt:{{answer}}"]}
    paris, tokyo, oslo = parsed.cases
    assert (paris.key, tokyo.key, oslo.key) == ("Paris is sunny", "Tokyo as JSON", "test-3")
    assert (paris.passed, tokyo.passed, oslo.passed) == (True, False, False)
    scores = {s.criterion: s for s in oslo.scores}
    assert scores["promptfoo_test"].raw_value == pytest.approx(0.4166666666666667)
    assert scores["promptfoo_test"].threshold == 0.5
    assert scores["promptfoo_tool_call_f1"].raw_value == pytest.approx(2 / 3)
    assert scores["promptfoo_tool_call_f1"].passed is True
    assert scores["promptfoo_equals"].justification["reason"].startswith("Expected output")
    assert {s.criterion for s in paris.scores} == {"promptfoo_test", "promptfoo_not_icontains", "promptfoo_contains",
                                                   "promptfoo_regex", "promptfoo_levenshtein", "promptfoo_javascript"}
    assert paris.output is not None and paris.output.turns[0].final_response == "The weather in Paris is sunny, 21°C."


def test_evalsite_scores_the_fixture_as_promptfoo_did() -> None:
    [parsed] = read_upload([SourceFile("promptfooconfig.yaml", (RESULTS / "promptfooconfig.yaml").read_bytes())])
    results = json.loads((RESULTS / "results.json").read_text(encoding="utf-8"))
    entries = sorted(results["results"]["results"], key=lambda e: e["testIdx"])
    config = parsed.default_config.criteria
    for case, entry in zip(parsed.evalset.eval_cases, entries, strict=True):
        output = AgentOutput.model_validate({"eval_id": case.eval_id, "turns": [
            {"final_response": entry["response"]["output"]}]})
        for key, theirs in zip(case.criteria, entry["gradingResult"]["componentResults"], strict=True):
            if not config[key].enabled or key in case.metadata["promptfoo"].get("not_scored", {}):
                continue
            [ours] = get_evaluator_class(config[key].evaluator)().score(case, output, config[key], key)
            assert (ours.passed, ours.score) == (theirs["pass"], theirs["score"]), (case.eval_id, key)


def test_results_import_as_a_run_of_the_suite_they_carry(acme: Project) -> None:
    run = results_import(project=acme, file=SourceFile("results.json", (RESULTS / "results.json").read_bytes()))
    assert run.status == Run.Status.COMPLETED
    assert (run.model, run.tags) == ("echo", ["imported:promptfoo", "promptfoo-prompt:{{answer}}"])
    assert run.evalset_version.evalset.name == "Weather answers"
    assert run.evalset_version.source_format == "promptfoo"
    levenshtein = Score.objects.get(run=run, criterion="promptfoo_levenshtein")
    assert (levenshtein.passed, levenshtein.score, levenshtein.evaluator) == (True, 1.0, "imported:promptfoo")
    assert run.cases_failed == 2
    # The same results again find the suite they created.
    again = results_import(project=acme, file=SourceFile("results.json", (RESULTS / "results.json").read_bytes()))
    assert again.evalset_version_id == run.evalset_version_id


def test_a_config_imported_first_is_the_suite_its_results_run(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[SourceFile("weather.promptfooconfig.yaml",
                                                               (RESULTS / "promptfooconfig.yaml").read_bytes())])
    run = results_import(project=acme, file=SourceFile("results.json", (RESULTS / "results.json").read_bytes()))
    assert run.evalset_version_id == outcome.version.pk


def test_results_of_several_providers_are_refused_saying_which() -> None:
    doc = json.loads((RESULTS / "results.json").read_text(encoding="utf-8"))
    extra = json.loads(json.dumps(doc["results"]["results"][0]))
    extra["provider"] = {"id": "openai:gpt-4.1", "label": ""}
    doc["results"]["results"].append(extra)
    with pytest.raises(EvalSetImportError) as caught:
        read_results(SourceFile("results.json", json.dumps(doc).encode()))
    assert caught.value.code == "several_runs"
    assert "openai:gpt-4.1" in caught.value.problems[0].message and caught.value.problems[0].line is not None


def test_the_cli_imports_a_config_folder_with_its_tests_file(realworld: Path, acme: Project,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from django.core.management import call_command

    call_command("import_evalset", str(realworld / "promptfoo" / "csv-metadata"), "--project", "acme")
    out = capsys.readouterr().out  # a folder's files are named inside it: the config has no description
    assert "eval set 'promptfoo'" in out and "format promptfoo [promptfooconfig], 3 cases" in out
    assert "warning: 3 promptfoo assertion(s) are kept" in out
    call_command("import_evalset", str(realworld / "promptfoo" / "simple-csv"), "--project", "acme")
    assert "eval set 'A translator built with LLM'" in capsys.readouterr().out  # its description


@pytest.mark.parametrize("threshold", ["1" * 400, "1e400", "-inf", "nan", "half"])
def test_a_csv_threshold_that_is_no_finite_number_is_refused_on_its_line(threshold: str) -> None:
    rows = f"question,__expected,__threshold\nWhat?,contains:yes,0.5\nWhy?,contains:no,{threshold}\n"
    [problem] = error("tests: file://tests.csv\n", SourceFile("suite/tests.csv", rows.encode())).problems
    assert (problem.file, problem.line, problem.path) == ("suite/tests.csv", 3, "__threshold")
    assert problem.message.endswith("is not a finite number") and len(problem.message) < 80
