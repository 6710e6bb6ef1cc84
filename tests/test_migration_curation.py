"""Migration 0010 (curation): existing case rows get their eval set, their range of versions
(only their own version; the latest version's stay open) and their own content hash, and each
version's content hash is recomputed the way imports now compute it, so uploading the same
file again still finds its version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection

from evaluations.schemas.evalset import EvalCase as NativeCase
from tests.migration_helpers import old_chain_executor, on_a_scratch_database

BEFORE = [("evaluations", "0009_triage_unique_per_branch")]
AFTER = [("evaluations", "0010_curation")]
OPEN = 2_147_483_647


def _cases(texts: list[str]) -> list[dict]:
    return [
        NativeCase.model_validate(
            {
                "eval_id": f"c{i}",
                "name": f"case {i}",
                "tags": ["t"] if i % 2 else [],
                "conversation": [
                    {
                        "invocation_id": "t1",
                        "user_content": {"role": "user", "content": text},
                        "expected_tool_trajectory": [{"name": "search", "args": {"q": text, "n": 1.5}}],
                    }
                ],
            }
        ).model_dump(mode="json")
        for i, text in enumerate(texts)
    ]


@pytest.mark.django_db(transaction=True)
def test_existing_versions_keep_their_cases_and_are_found_again_by_content(tmp_path: Path) -> None:
    with on_a_scratch_database(connection, tmp_path):
        executor = old_chain_executor(connection)
        executor.migrate(BEFORE)
        apps = executor.loader.project_state(BEFORE).apps
        Project = apps.get_model("evaluations", "Project")
        EvalSet = apps.get_model("evaluations", "EvalSet")
        Version = apps.get_model("evaluations", "EvalSetVersion")
        Case = apps.get_model("evaluations", "EvalCase")
        project = Project.objects.create(slug="p", name="P")
        evalset = EvalSet.objects.create(project=project, eval_set_id="s", name="S")
        contents = {1: _cases(["one", "two", "three"]), 2: _cases(["one", "deux", "three", "four"])}
        for number, cases in contents.items():
            version = Version.objects.create(
                evalset=evalset,
                number=number,
                content_hash=f"old-{number}",
                source_format="native",
                source_filename="s.json",
                name="S",
            )
            for position, case in enumerate(cases):
                Case.objects.create(
                    version=version,
                    position=position,
                    eval_id=case["eval_id"],
                    name=case["name"],
                    tags=case["tags"],
                    metadata=case["metadata"],
                    session_input=case["session_input"],
                    conversation=case["conversation"],
                    rubrics=case["rubrics"],
                    criteria=case["criteria"],
                    conversation_scenario=case["conversation_scenario"],
                )
        executor = old_chain_executor(connection)
        executor.migrate(AFTER)
        executor = old_chain_executor(connection)
        LATEST = [node for node in executor.loader.graph.leaf_nodes() if node[0] == "evaluations"]
        executor.migrate(LATEST)  # the checks below read with today's models

        from evaluations.evalsets.services import evalset_import
        from evaluations.interop import SourceFile
        from evaluations.models import EvalCase, EvalSetVersion
        from evaluations.models import Project as CurrentProject

        v1, v2 = EvalSetVersion.objects.filter(evalset__eval_set_id="s").order_by("number")
        assert {(c.valid_from, c.valid_to) for c in EvalCase.objects.filter(version=v1)} == {(1, 2)}
        assert {(c.valid_from, c.valid_to) for c in EvalCase.objects.filter(version=v2)} == {(2, OPEN)}
        assert [c.eval_id for c in EvalCase.objects.in_version(v1).order_by("position")] == ["c0", "c1", "c2"]
        assert all(len(c.content_hash) == 64 for c in EvalCase.objects.all())
        project = CurrentProject.objects.get(slug="p")
        for version, number in ((v1, 1), (v2, 2)):
            doc = {"eval_set_id": "s", "name": "S", "eval_cases": contents[number]}
            [again] = evalset_import(project=project, files=[SourceFile("s.evalset.json", json.dumps(doc).encode())])
            assert not again.created and again.version.pk == version.pk
