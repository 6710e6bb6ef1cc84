"""NUL characters in eval sets and agent outputs: PostgreSQL stores none in text or jsonb, so
both are read with U+FFFD in their place, on every database alike (evaluations.schemas.text)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from evaluations.models import CaseResult, EvalCase, Project
from evaluations.runs import services as runs
from evaluations.schemas.text import REPLACEMENT, without_nul
from tests.engine_helpers import import_demo, perfect_outputs


def test_without_nul_replaces_in_strings_and_keys_and_keeps_clean_values_as_they_are() -> None:
    clean = {"a": ["b", 1, None, {"c": 2.5}]}
    assert without_nul(clean) is clean
    assert without_nul({"k\x00": ["x\x00y", {"z": "\x00"}], "n": 3}) == {
        f"k{REPLACEMENT}": [f"x{REPLACEMENT}y", {"z": REPLACEMENT}], "n": 3}


@pytest.mark.django_db
def test_an_eval_set_with_nul_characters_uploads(alice_client: Client, acme: Project) -> None:
    evalset = {"eval_set_id": "nul_set", "eval_cases": [{
        "eval_id": "case\u0000one",
        "conversation": [{"invocation_id": "t1", "user_content": {"role": "user", "content": "say \u0000"},
                          "expected_final_response": {"role": "assistant", "content": "a\u0000b"}}]}]}
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("nul.evalset.json", json.dumps(evalset).encode(), content_type="application/json")
    response = alice_client.post("/api/v1/evalsets/", {"file": upload, "project": acme.slug})
    assert response.status_code == 201, response.content
    case = EvalCase.objects.get(version__evalset__project=acme)
    assert case.eval_id == f"case{REPLACEMENT}one"
    assert case.conversation[0]["expected_final_response"]["content"] == f"a{REPLACEMENT}b"


@pytest.mark.django_db
def test_outputs_with_nul_characters_are_stored_and_scored(alice_client: Client, acme: Project) -> None:
    version = import_demo(acme)
    outputs = perfect_outputs()
    outputs[0]["turns"][0]["final_response"] += "\u0000"
    outputs[0]["turns"][0]["tool_calls"][0]["args"]["note\u0000"] = "x\u0000"
    response = alice_client.post("/api/v1/runs/", data=json.dumps({"evalset": version.evalset_id, "outputs": outputs}),
                                 content_type="application/json")
    assert response.status_code == 201, response.content
    run = runs.run_execute_here(response.json()["id"])
    assert run.status == "completed"
    result = CaseResult.objects.get(run=run, case__eval_id=outputs[0]["eval_id"])
    turn = result.output["turns"][0]
    assert turn["final_response"].endswith(REPLACEMENT)
    assert turn["tool_calls"][0]["args"][f"note{REPLACEMENT}"] == f"x{REPLACEMENT}"
    assert CaseResult.objects.filter(run=run).count() == len(outputs)
