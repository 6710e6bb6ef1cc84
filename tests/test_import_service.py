"""The import service: versions, content hashing, round trips, all-or-nothing writes."""

from __future__ import annotations

import json

import pytest

from evaluations.evalsets.services import evalset_import
from evaluations.interop import EvalSetImportError, SourceFile
from evaluations.models import EvalCase, EvalSet, EvalSetVersion, Project
from evaluations.runs.exports import version_native_text
from evaluations.schemas.evalset import EvalSet as NativeEvalSet
from tests.conftest import REPO

DEMO = REPO / "evaluations" / "demo" / "travel_agent.evalset.json"


def _demo() -> SourceFile:
    return SourceFile("travel_agent.evalset.json", DEMO.read_bytes())


@pytest.mark.django_db
def test_a_native_file_becomes_an_eval_set_with_its_first_version(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[_demo()])
    assert outcome.created
    assert (outcome.format, outcome.variant) == ("native", "agentflow")
    assert outcome.version.number == 1
    assert outcome.evalset.eval_set_id == "demo_travel_agent"
    assert outcome.evalset.latest_version == outcome.version
    assert outcome.case_count == 8
    assert outcome.version.turn_count == 12
    assert outcome.version.tags == ["flights", "multi-turn", "orders", "single-turn", "smalltalk", "weather"]
    case = EvalCase.objects.get(version=outcome.version, eval_id="weather_two_cities")
    assert [c["args"] for c in case.conversation[0]["expected_tool_trajectory"]] == [{"city": "Rome"}, {"city": "Oslo"}]
    assert case.tags_text == "|weather|single-turn|"
    assert case.search_text == "Is it warmer in Rome or in Oslo right now?"


@pytest.mark.django_db
def test_the_same_content_uploaded_twice_is_the_same_version(acme: Project) -> None:
    [first] = evalset_import(project=acme, files=[_demo()])
    reformatted = json.dumps(json.loads(DEMO.read_bytes()), separators=(",", ":")).encode()
    [second] = evalset_import(project=acme, files=[SourceFile("renamed.json", reformatted)])
    assert not second.created
    assert second.version.pk == first.version.pk
    assert "unchanged" in second.describe()
    assert EvalSetVersion.objects.count() == 1
    assert EvalCase.objects.count() == 8


@pytest.mark.django_db
def test_changed_content_becomes_the_next_version_and_the_old_one_stays(acme: Project) -> None:
    [first] = evalset_import(project=acme, files=[_demo()])
    doc = json.loads(DEMO.read_bytes())
    doc["eval_cases"][0]["conversation"][0]["expected_tool_trajectory"][0]["args"]["city"] = "Kyoto"
    [second] = evalset_import(project=acme, files=[SourceFile("v2.evalset.json", json.dumps(doc).encode())])
    assert second.created and second.version.number == 2
    assert EvalSet.objects.get().latest_version == second.version
    old = EvalCase.objects.get(version=first.version, eval_id="weather_tokyo")
    assert old.conversation[0]["expected_tool_trajectory"][0]["args"] == {"city": "Tokyo"}


@pytest.mark.django_db
def test_the_same_eval_set_in_two_projects_is_two_eval_sets(acme: Project, globex: Project) -> None:
    evalset_import(project=acme, files=[_demo()])
    [other] = evalset_import(project=globex, files=[_demo()])
    assert other.created
    assert EvalSet.objects.count() == 2


@pytest.mark.django_db
def test_native_export_then_import_round_trips_exactly(acme: Project, globex: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[_demo()])
    exported = version_native_text(outcome.version)
    assert NativeEvalSet.model_validate_json(exported) == NativeEvalSet.model_validate_json(DEMO.read_bytes())
    [again] = evalset_import(project=acme, files=[SourceFile("export.evalset.json", exported.encode())])
    assert not again.created and again.version.pk == outcome.version.pk
    # Imported elsewhere and exported again, it is the same text to the byte.
    [elsewhere] = evalset_import(project=globex, files=[SourceFile("export.evalset.json", exported.encode())])
    assert elsewhere.created
    assert version_native_text(elsewhere.version) == exported
    assert elsewhere.version.content_hash == outcome.version.content_hash


@pytest.mark.django_db
def test_the_original_bytes_are_kept_for_download(acme: Project) -> None:
    [outcome] = evalset_import(project=acme, files=[_demo()])
    source = outcome.version.source
    assert source.content() == DEMO.read_bytes()
    assert source.size == len(DEMO.read_bytes())
    assert len(bytes(source.data)) < source.size / 3  # stored compressed
    assert (source.filename, source.content_type) == ("travel_agent.evalset.json", "application/json")


@pytest.mark.django_db
def test_an_upload_with_one_bad_eval_set_among_good_ones_writes_nothing(acme: Project) -> None:
    bad = SourceFile("bad.evalset.json", b'{"eval_set_id": "b", "eval_cases": [{"eval_id": 3}]}')
    with pytest.raises(EvalSetImportError) as error:
        evalset_import(project=acme, files=[_demo(), bad])
    assert error.value.code == "schema"
    assert error.value.problems[0].path == "eval_cases[0].eval_id"
    assert EvalSet.objects.count() == 0


@pytest.mark.django_db
def test_an_eval_set_with_no_cases_is_refused(acme: Project) -> None:
    with pytest.raises(EvalSetImportError) as error:
        evalset_import(project=acme, files=[SourceFile("e.evalset.json", b'{"eval_set_id": "e", "eval_cases": []}')])
    assert error.value.code == "empty"
    assert "no cases" in str(error.value)


def test_the_rows_of_an_upload_come_back_in_order_in_insert_batches_from_a_temporary_file() -> None:
    from evaluations.evalsets.services import BULK_BATCH, ROWS_IN_MEMORY, _SpooledRows

    rows = _SpooledRows()
    made = [(n, f"case-{n}", "x" * 5000, None, n % 3) for n in range(2 * BULK_BATCH + 500)]
    for row in made:
        rows.append(row)
    assert len(rows) == len(made) and 5000 * 2 * BULK_BATCH > ROWS_IN_MEMORY
    assert rows._file._rolled  # past ROWS_IN_MEMORY: on disk, not in memory
    batches = list(rows.batches())
    assert [len(b) for b in batches] == [BULK_BATCH, BULK_BATCH, 500]
    assert [tuple(r) for b in batches for r in b] == made
