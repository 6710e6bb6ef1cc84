"""Inspect AI (`evaluations/interop/inspect/`): eval logs written by inspect_ai 0.3.285 (`.eval`, a
zstd zip, and `.json`; tests/data/inspect/, written by tests/differential/inspect_logs.py) import
as completed runs keeping every scorer's value, answer and explanation, with their samples as an
eval set; Inspect datasets import and export back (round trip); bad logs say where they are wrong
and write nothing; the real files published by inspect_ai (tests/data/realworld/inspect/) import.

`evalsite_fixture.read.json` is what inspect_ai's own `read_eval_log` read from the two logs when
they were written: the scores evalsite keeps are compared with it.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
import zstandard

from evaluations.evalsets.exports import tool_export
from evaluations.evalsets.services import evalset_import
from evaluations.interop import read_upload
from evaluations.interop.base import EvalSetImportError, SourceFile
from evaluations.interop.inspect.samples import value_to_float, verdict
from evaluations.interop.results import read_results
from evaluations.models import CaseResult, EvalCase, EvalSet, Project, Run, Score
from evaluations.runs.imports import results_import
from tests.conftest import DATA, REALWORLD

FIXTURES = DATA / "inspect"
LOGS = [FIXTURES / "evalsite_fixture.eval", FIXTURES / "evalsite_fixture.json"]
READ_BY_INSPECT = {log["format"]: log for log in json.loads((FIXTURES / "evalsite_fixture.read.json").read_text())["logs"]}


def _file(path: Path) -> SourceFile:
    return SourceFile(path.name, path.read_bytes())


def _error(fn: Any, *args: Any, **kwargs: Any) -> EvalSetImportError:
    with pytest.raises(EvalSetImportError) as info:
        fn(*args, **kwargs)
    return info.value


def _rezip(path: Path, change: Any) -> bytes:
    """The .eval with its members passed through `change(name, bytes) -> bytes | None`, written
    with deflate (what inspect_ai before zstd wrote)."""
    source = zipfile.ZipFile(path)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in source.infolist():
            data = _member(path, info)
            changed = change(info.filename, data)
            if changed is not None:
                zf.writestr(info.filename, changed)
    return out.getvalue()


def _member(path: Path, info: zipfile.ZipInfo) -> bytes:
    from evaluations.interop.inspect.log import member_bytes

    data = path.read_bytes()
    return member_bytes(data, zipfile.ZipFile(io.BytesIO(data)), info, path.name)


# --- The logs inspect_ai wrote -------------------------------------------------------------------


def test_the_fixture_eval_log_is_zstd_compressed_as_inspect_writes_it() -> None:
    methods = {i.compress_type for i in zipfile.ZipFile(LOGS[0]).infolist()}
    assert methods == {93}  # zstd: zipfile itself cannot read these before Python 3.14
    with pytest.raises(NotImplementedError):
        zipfile.ZipFile(LOGS[0]).read("header.json")


@pytest.mark.parametrize("path", LOGS, ids=["eval", "json"])
def test_every_score_reads_back_as_inspect_read_it(path: Path) -> None:
    expected = READ_BY_INSPECT[path.suffix.lstrip(".")]
    parsed = read_results(_file(path))
    assert parsed.tool == "inspect" and parsed.eval_set_id == "evalsite_fixture"
    assert [(c.key, c.iteration + 1) for c in parsed.cases] == sorted(
        ((str(s["id"]), s["epoch"]) for s in expected["samples"]),
        key=lambda k: (k[1], [str(s["id"]) for s in expected["samples"]].index(k[0])))
    by_key = {(c.key, c.iteration + 1): c for c in parsed.cases}
    compared = 0
    for sample in expected["samples"]:
        case = by_key[(str(sample["id"]), sample["epoch"])]
        mine = {s.criterion: s for s in case.scores}
        for name, theirs in sample["scores"].items():
            score = mine[name]
            assert score.justification["value"] == theirs["value"]
            assert score.justification.get("answer") == theirs["answer"]
            assert score.justification.get("explanation") == theirs["explanation"]
            assert score.justification.get("metadata") == theirs["metadata"]
            value = theirs["value"]
            if isinstance(value, dict):
                assert score.raw_value is None
                for key, sub in value.items():
                    assert mine[f"{name}/{key}"].raw_value == value_to_float(sub)
                    assert mine[f"{name}/{key}"].justification["value"] == sub
            else:
                assert score.raw_value == value_to_float(value)
                assert score.passed is verdict(value)
            compared += 1
        assert case.output is not None
        assert case.output.turns[-1].final_response == sample["completion"]
        calls = case.output.all_tool_calls()
        assert [(c.name, c.args, c.call_id) for c in calls] == [
            (c["function"], c["arguments"], c["id"]) for c in sample["tool_calls"]]
        assert [c.result for c in calls] == sample["tool_results"]
        [usage] = sample["usage"].values()
        assert case.output.usage().total_tokens == usage["total_tokens"]
    assert compared == 4 * 8  # four scorers, four samples, two epochs


def test_a_log_imports_as_a_completed_run_with_its_samples_as_an_eval_set(acme: Project) -> None:
    run = results_import(project=acme, file=_file(LOGS[0]))
    assert run.status == Run.Status.COMPLETED
    assert run.model == "mockllm/model" and run.git_commit
    assert run.tags[0] == "imported:inspect" and "inspect-task:evalsite_fixture" in run.tags
    assert "tokens:206" in run.tags and "input-tokens:160" in run.tags and "output-tokens:46" in run.tags
    assert run.target["inspect"]["model_usage"]["mockllm/model"]["total_tokens"] == 206
    tokens = CaseResult.objects.filter(run=run).values_list("prompt_tokens", "completion_tokens")
    assert sum(p + c for p, c in tokens) == 206  # each sample's usage, as the engine records an agent's
    version = run.evalset_version
    assert version.evalset.eval_set_id == "evalsite_fixture" and version.source_format == "inspect"
    assert list(EvalCase.objects.in_version(version).order_by("position").values_list("eval_id", flat=True)) == [
        "1", "capital", "weather", "東京"]
    assert CaseResult.objects.filter(run=run).count() == 8  # two epochs
    weather = Score.objects.get(run=run, result__case__eval_id="weather", result__iteration=1, criterion="match")
    assert (weather.raw_value, weather.passed, weather.justification["value"]) == (0.0, False, "I")
    assert weather.justification["answer"] == "It is sunny in Tokyo."
    shape = Score.objects.get(run=run, result__case__eval_id="capital", result__iteration=0, criterion="shape")
    assert shape.justification["value"] == {"length": 31, "words": 6, "shouted": False}
    assert shape.justification["explanation"] == "31 characters, 6 words"
    assert Score.objects.get(run=run, result__case__eval_id="capital", result__iteration=0,
                             criterion="shape/words").raw_value == 6.0
    result = CaseResult.objects.get(run=run, case__eval_id="weather", iteration=0)
    assert result.status == CaseResult.Status.FAILED  # match said I
    [call] = result.output["turns"][0]["tool_calls"]
    assert call == {**call, "name": "get_weather", "args": {"city": "Tokyo", "unit": "celsius"},
                    "call_id": "call_weather_1", "result": "sunny, 22 degrees celsius in Tokyo"}
    assert CaseResult.objects.get(run=run, case__eval_id="capital", iteration=0).status == CaseResult.Status.PASSED
    # The .json log of the same task is another run of the same eval set (same content, same version).
    again = results_import(project=acme, file=_file(LOGS[1]))
    assert again.evalset_version_id == version.pk and EvalSet.objects.filter(project=acme).count() == 1


def test_a_log_against_a_chosen_eval_set_matches_its_cases(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[_file(LOGS[1])])
    run = results_import(project=acme, file=_file(LOGS[0]), evalset=outcome.version.evalset)
    assert run.evalset_version == outcome.version


def test_the_log_uploaded_as_an_eval_set_gives_its_samples_once(acme: Project) -> None:
    for path in LOGS:
        [parsed] = read_upload([_file(path)])
        assert (parsed.format, parsed.variant) == ("inspect", "log")
        cases = {c.eval_id: c for c in parsed.evalset.eval_cases}
        assert list(cases) == ["1", "capital", "weather", "東京"]
        capital = cases["capital"].conversation[0]
        assert capital.user_content.get_text() == "What is the capital of France?"
        assert capital.metadata == {"system": ["Answer briefly."]}
        assert capital.expected_final_response is not None
        assert capital.expected_final_response.get_text() == "Paris"
        assert cases["capital"].metadata == {"topic": "geography", "level": 1,
                                             "inspect_sample": {"other_targets": ["paris"]}}
        assert cases["1"].metadata == {"inspect_sample": {"id": 1}}


# --- Datasets: reader and writer ---------------------------------------------------------------

DATASET = [
    {"id": "q1", "input": "What is 2 + 2?", "target": "4", "metadata": {"topic": "math"}},
    {"id": 7, "input": [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "function": "get_weather", "arguments": {"city": "Oslo"}, "type": "function"}]},
        {"role": "tool", "tool_call_id": "c1", "function": "get_weather", "content": "rain"},
        {"role": "assistant", "content": "It rains."},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ], "target": ["sun", "sunny"], "choices": ["sun", "rain"]},
    {"input": "No id, no target"},
]


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def test_a_dataset_reads_as_cases() -> None:
    [parsed] = read_upload([SourceFile("weather.jsonl", _jsonl(DATASET))])
    assert (parsed.format, parsed.variant, parsed.evalset.eval_set_id) == ("inspect", "dataset", "weather")
    q1, seven, third = parsed.evalset.eval_cases
    assert (q1.eval_id, seven.eval_id, third.eval_id) == ("q1", "7", "3")
    first, second = seven.conversation
    assert first.metadata == {"system": ["Use the tools."]}
    assert [(c.name, c.args, c.call_id, c.result) for c in first.expected_tool_trajectory] == [
        ("get_weather", {"city": "Oslo"}, "c1", "rain")]
    assert [m.get_text() for m in first.expected_intermediate_responses] == ["It rains."]
    assert second.user_content.content == [{"type": "text", "text": "And tomorrow?"}]
    assert second.expected_final_response is not None and second.expected_final_response.get_text() == "sun"
    assert seven.metadata == {"inspect_sample": {"choices": ["sun", "rain"], "id": 7, "other_targets": ["sunny"]}}
    assert third.conversation[0].expected_final_response is None


def test_a_dataset_round_trips_through_the_export(acme: Project, globex: Project) -> None:
    [first] = evalset_import(project=acme, files=[SourceFile("weather.jsonl", _jsonl(DATASET))])
    export = tool_export(first.version, "inspect")
    assert export.filename == "weather.jsonl"
    rows = [json.loads(line) for line in export.data.decode().splitlines()]
    assert rows[0] == DATASET[0]
    assert rows[1]["id"] == 7 and rows[1]["target"] == ["sun", "sunny"] and rows[1]["choices"] == ["sun", "rain"]
    assert rows[2] == {"id": "3", "input": "No id, no target", "target": ""}
    [back] = evalset_import(project=globex, files=[SourceFile(export.filename, export.data)])
    assert back.version.content_hash == first.version.content_hash


def test_a_log_exports_as_a_dataset_that_reads_back_the_same(acme: Project, globex: Project) -> None:
    [first] = evalset_import(project=acme, files=[_file(LOGS[0])])
    export = tool_export(first.version, "inspect")
    rows = [json.loads(line) for line in export.data.decode().splitlines()]
    assert rows[0] == {"id": 1, "input": "What is 2 + 2? Answer with the number.", "target": "4"}
    assert rows[1]["input"] == [{"role": "system", "content": "Answer briefly."},
                                {"role": "user", "content": "What is the capital of France?"}]
    [back] = evalset_import(project=globex, files=[SourceFile(export.filename, export.data)])
    assert back.version.content_hash == first.version.content_hash


def test_a_plain_jsonl_is_not_taken_for_a_dataset() -> None:
    [parsed] = read_upload([SourceFile("plain.jsonl", _jsonl([{"input": "hi", "expected_output": "hello"}]))])
    assert parsed.format == "plain"


# --- Bad input ----------------------------------------------------------------------------------


def test_a_bad_sample_in_a_zip_log_names_the_member_sample_and_field(acme: Project) -> None:
    def change(name: str, data: bytes) -> bytes:
        if name == "samples/capital_epoch_1.json":
            doc = json.loads(data)
            doc["scores"]["match"] = {"answer": "x"}  # no value
            doc["messages"][1]["role"] = "robot"
            return json.dumps(doc).encode()
        return data

    error = _error(results_import, project=acme, file=SourceFile("bad.eval", _rezip(LOGS[0], change)))
    assert error.code == "schema"
    where = {(p.file, p.case, p.path) for p in error.problems}
    assert ("bad.eval/samples/capital_epoch_1.json", "capital", "scores.match.value") in where
    assert ("bad.eval/samples/capital_epoch_1.json", "capital", "messages[1].role") in where
    assert Run.objects.count() == 0 and EvalSet.objects.count() == 0


def test_a_bad_sample_in_a_json_log_names_its_path(acme: Project) -> None:
    doc = json.loads(LOGS[1].read_text())
    doc["samples"][2]["epoch"] = "first"
    error = _error(results_import, project=acme, file=SourceFile("bad.json", json.dumps(doc).encode()))
    [problem] = error.problems
    assert (problem.file, problem.case, problem.path) == ("bad.json", "weather", "samples[2].epoch")
    assert Run.objects.count() == 0


def test_a_log_nested_past_the_limit_before_its_eval_is_refused_where_it_gets_too_deep(acme: Project) -> None:
    # The Inspect sniffer reads every .json upload's first members before any reader checks
    # its depth; 100,000 brackets in a member ahead of `eval` once cost it 19 s of CPU.
    doc = json.loads(LOGS[1].read_text())
    rest = json.dumps({k: v for k, v in doc.items() if k != "version"}).encode()
    head = b'{"version": 2, "plan": '
    data = head + b"[" * 100_000 + b"]" * 100_000 + b", " + rest[1:]
    for read in (lambda f: results_import(project=acme, file=f), lambda f: evalset_import(project=acme, files=[f])):
        error = _error(read, SourceFile("deep.json", data))
        [problem] = error.problems
        assert error.code == "invalid_json" and "nested more than 64 levels deep" in problem.message
        assert (problem.file, problem.line, problem.column) == ("deep.json", 1, len(head) + 64)  # the bracket at depth 65
    assert Run.objects.count() == 0 and EvalSet.objects.count() == 0


def test_a_deflate_log_without_zstd_reads_the_same() -> None:
    data = _rezip(LOGS[0], lambda name, d: d)
    parsed = read_results(SourceFile("deflate.eval", data))
    assert [(s.criterion, s.raw_value) for s in parsed.cases[0].scores] == [
        (s.criterion, s.raw_value) for s in read_results(_file(LOGS[0])).cases[0].scores]


def test_a_damaged_member_and_a_zip_that_is_no_log_are_refused(acme: Project) -> None:
    data = bytearray(LOGS[0].read_bytes())
    info = zipfile.ZipFile(LOGS[0]).getinfo("samples/1_epoch_1.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 20] ^= 0xFF
    error = _error(read_results, SourceFile("damaged.eval", bytes(data)))
    assert error.code == "invalid_zip" and error.problems[0].file == "damaged.eval/samples/1_epoch_1.json"
    other = io.BytesIO()
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("notes.txt", "hello")
    error = _error(read_results, SourceFile("notes.eval", other.getvalue()))
    assert error.code == "unknown_format" and "header.json" in error.problems[0].message


def test_a_member_that_inflates_past_its_header_is_refused() -> None:
    bomb = zstandard.ZstdCompressor().compress(b"{" + b" " * 100_000 + b"}")
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("header.json", json.dumps({"version": 2, "status": "success", "eval": {"task": "t"}}))
        zf.writestr("samples/1_epoch_1.json", bomb)
    data = bytearray(out.getvalue())
    zinfo = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("samples/1_epoch_1.json")
    # Say zstd in the local header and the directory; claim 10 bytes inflated.
    for offset in (zinfo.header_offset + 8, data.rfind(b"PK\x01\x02") + 10):
        data[offset:offset + 2] = (93).to_bytes(2, "little")
    directory = data.rfind(b"PK\x01\x02")
    data[directory + 24:directory + 28] = (10).to_bytes(4, "little")
    error = _error(read_results, SourceFile("bomb.eval", bytes(data)))
    assert error.code == "invalid_zip" and "inflates past" in error.problems[0].message


def test_a_dataset_with_a_tool_answer_to_no_call_says_where(acme: Project) -> None:
    rows = [{"id": "a", "input": "ok", "target": "x"},
            {"id": "b", "input": [{"role": "user", "content": "q"},
                                  {"role": "tool", "tool_call_id": "nope", "content": "r"}], "target": "x"}]
    error = _error(evalset_import, project=acme, files=[SourceFile("d.jsonl", _jsonl(rows))])
    [problem] = error.problems
    assert (problem.file, problem.line, problem.case, problem.path) == ("d.jsonl", 2, "b", "input[1].tool_call_id")
    assert EvalSet.objects.count() == 0


# --- Real published files ----------------------------------------------------------------------

REAL = REALWORLD / "inspect"


def test_the_real_logs_import_as_runs(acme: Project) -> None:
    run = results_import(project=acme, file=_file(REAL / "log_read_sample.json"))
    assert run.model == "ollama/gemma3" and run.git_commit == "2c576e260" and "tokens:69" in run.tags
    score = Score.objects.get(run=run, criterion="match")
    assert (score.raw_value, score.passed, score.justification["answer"]) == (1.0, True, "Yes")
    [case] = EvalCase.objects.in_version(run.evalset_version)
    # The sample's input was stored once as an attachment: it is put back.
    assert case.conversation[0]["user_content"]["content"].startswith("Is the following statement")
    result = CaseResult.objects.get(run=run)
    assert result.output["turns"][0]["final_response"] == "Yes\n" and result.status == CaseResult.Status.PASSED

    run = results_import(project=acme, file=_file(REAL / "log_tool_call_error.json"))
    result = CaseResult.objects.get(run=run, iteration=3)  # epoch 4, the only one the log holds
    assert result.output is not None
    assert not CaseResult.objects.filter(run=run).exclude(iteration=3).exclude(output=None).exists()
    calls = result.output["turns"][0]["tool_calls"]
    assert [c["call_id"] for c in calls] == [f"bash_{n}" for n in range(1, 12)]
    assert calls[-1]["error"] == "The tool output limit of 10 MiB was exceeded."


def test_the_real_dataset_imports() -> None:
    [parsed] = read_upload([_file(REAL / "wikipedia.jsonl")])
    assert parsed.format == "inspect" and len(parsed.evalset.eval_cases) == 3
    assert parsed.evalset.eval_cases[2].conversation[0].user_content.get_text().startswith("List the ten episode")


# --- Through the pages and the API ------------------------------------------------------------


def test_the_results_import_page_and_api_take_an_eval_log(alice_client: Any, bob_client: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    form = alice_client.get(reverse("results_import")).content.decode()
    assert 'accept=".json,.eval,' in form and "Inspect AI eval log" in form
    page = alice_client.post(reverse("results_import"),
                             {"file": SimpleUploadedFile(LOGS[0].name, LOGS[0].read_bytes())})
    assert page.status_code == 200, page.content.decode()[:2000]
    run = Run.objects.get()
    assert reverse("run_detail", args=[run.pk]) in page.content.decode()
    assert run.created_by.username == "alice" and run.model == "mockllm/model"

    response = alice_client.post("/api/v1/runs/import/", {
        "file": SimpleUploadedFile(LOGS[1].name, LOGS[1].read_bytes()), "project": "acme"})
    assert response.status_code == 201, response.content
    body = response.json()["run"]
    assert body["status"] == "completed" and body["tags"][0] == "imported:inspect" and body["model"] == "mockllm/model"
    assert body["evalset"] == run.evalset_version.evalset_id

    broken = SimpleUploadedFile("broken.eval", LOGS[0].read_bytes()[:4000])
    response = alice_client.post("/api/v1/runs/import/", {"file": broken, "project": "acme"})
    assert response.status_code == 400 and response.json()["problems"][0]["file"] == "broken.eval"
    # Another project's member cannot import into acme.
    response = bob_client.post("/api/v1/runs/import/", {
        "file": SimpleUploadedFile(LOGS[1].name, LOGS[1].read_bytes()), "project": "acme"})
    assert response.status_code in (403, 404)
    assert Run.objects.count() == 2


def test_the_upload_page_and_api_take_an_eval_log_as_an_eval_set(alice_client: Any) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    form = alice_client.get(reverse("evalset_upload")).content.decode()
    assert ".eval," in form
    page = alice_client.post(reverse("evalset_upload"),
                             {"files": SimpleUploadedFile(LOGS[0].name, LOGS[0].read_bytes())})
    assert page.status_code == 200, page.content.decode()[:2000]
    evalset = EvalSet.objects.get()
    assert evalset.eval_set_id == "evalsite_fixture" and evalset.latest_version is not None
    assert evalset.latest_version.source_format == "inspect"
    response = alice_client.post("/api/v1/evalsets/", {
        "file": SimpleUploadedFile("weather.jsonl", _jsonl(DATASET)), "project": "acme"})
    assert response.status_code == 201, response.content
    export = alice_client.get(reverse("version_export", args=[
        EvalSet.objects.get(eval_set_id="weather").latest_version.pk, "inspect"]))
    assert export.status_code == 200
    assert json.loads(export.content.decode().splitlines()[0]) == DATASET[0]


def test_an_imported_log_is_rescored_on_its_outputs(acme: Project) -> None:
    from evaluations.runs.imports import run_rescore

    run = results_import(project=acme, file=_file(LOGS[1]))
    assert run.target["outputs"] is True
    rescored = run_rescore(run=run)
    assert rescored.model == "mockllm/model" and not any(t.startswith("imported:") for t in rescored.tags)
    outputs = {(r.case.eval_id, r.iteration): r.output for r in CaseResult.objects.filter(run=rescored)
               .select_related("case")}
    assert outputs[("weather", 1)]["turns"][0]["tool_calls"][0]["name"] == "get_weather"
    assert len(outputs) == 8


def test_a_log_uploaded_as_outputs_runs_against_its_eval_set(acme: Project) -> None:
    from evaluations.interop.outputs import read_outputs
    from evaluations.runs import services

    [outcome] = evalset_import(project=acme, files=[SourceFile("weather.jsonl", _jsonl(DATASET))])
    outputs = read_outputs([_file(LOGS[0])])
    assert [(o.eval_id, o.iteration) for o in outputs][:4] == [("1", 0), ("capital", 0), ("weather", 0), ("東京", 0)]
    weather = next(o for o in outputs if o.eval_id == "weather")
    assert [(c.name, c.result) for c in weather.all_tool_calls()] == [
        ("get_weather", "sunny, 22 degrees celsius in Tokyo")]
    [log_set] = evalset_import(project=acme, files=[_file(LOGS[0])])
    run = services.run_create(project=acme, version=log_set.version, target_kind=Run.TargetKind.UPLOADED,
                              outputs=outputs, enqueue=False)
    assert CaseResult.objects.filter(run=run).count() == 8
    assert outcome.version.evalset_id != log_set.version.evalset_id
    error = _error(read_outputs, [SourceFile("bad.eval", LOGS[0].read_bytes()[:3000])])
    assert error.problems[0].file == "bad.eval"
