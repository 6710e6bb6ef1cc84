"""docs/recipes.md, the two import recipes, step by step as written there: an ADK agent's eval
history (every `.adk/eval_history/*.evalset_result.json`) imported, then compared; a
DeepEval test run (`.deepeval/.latest_test_run.json`) imported and rescored by evalsite, the
two runs compared. (The third recipe, an instrumented agent, is tests/test_recipe_otel.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from evaluations.models import Project, Run, Score
from evaluations.runs import services as runs
from tests.conftest import REPO
from tests.engine_helpers import import_demo

RESULTS = Path(__file__).resolve().parent / "data" / "results"
RECIPES = REPO / "docs" / "recipes.md"


@pytest.mark.django_db
def test_an_adk_agents_eval_history_is_imported_and_compared(tmp_path: Path, alice: Any, acme: Project,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert "for f in .adk/eval_history/*.evalset_result.json" in RECIPES.read_text()
    history = tmp_path / "agent" / ".adk" / "eval_history"
    history.mkdir(parents=True)
    source = RESULTS / "adk" / "travel_demo_travel_agent_1764000130.53.evalset_result.json"
    shutil.copy(source, history / source.name)
    later = json.loads(source.read_text())
    later["eval_set_result_id"] += "_later"
    later["creation_timestamp"] += 3600
    (history / "travel_demo_travel_agent_1764003730.53.evalset_result.json").write_text(json.dumps(later))
    import_demo(acme)  # the agent's eval set, uploaded before (recipe step 1)

    for path in sorted(history.glob("*.evalset_result.json")):  # the recipe's loop
        call_command("import_results", str(path), "--project", "acme", "--evalset", "demo_travel_agent")
    out = capsys.readouterr().out
    first, second = Run.objects.order_by("pk")
    assert out.count("completed;") == 2
    assert first.status == second.status == "completed" and "imported:adk" in first.tags
    assert Score.objects.filter(run=first, evaluator="imported:adk").exists()
    client = Client()
    client.force_login(alice)
    page = client.get(f"/compare/?baseline={first.pk}&candidate={second.pk}")
    assert page.status_code == 200


@pytest.mark.django_db
def test_a_deepeval_test_run_is_imported_and_rescored(tmp_path: Path, alice: Any, acme: Project,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert "import_results .deepeval/.latest_test_run.json --project acme --rescore" in RECIPES.read_text()
    folder = tmp_path / ".deepeval"
    folder.mkdir()
    test_run = json.loads((RESULTS / "deepeval" / "test_run.json").read_text())
    (folder / ".latest_test_run.json").write_text(json.dumps({"testRunData": test_run, "testRunLink": None}))

    call_command("import_results", str(folder / ".latest_test_run.json"), "--project", "acme", "--rescore")
    imported, rescored = Run.objects.order_by("pk")
    assert imported.status == "completed" and "imported:deepeval" in imported.tags
    kept = Score.objects.filter(run=imported, evaluator="imported:deepeval")
    assert kept.exists() and all(s.criterion for s in kept)
    assert rescored.target == {"rescored_from": imported.pk}
    rescored = runs.run_execute_here(rescored.pk)  # what the task queue does with it
    assert rescored.status == "completed"
    assert rescored.cases_done == imported.cases_done
    assert not Score.objects.filter(run=rescored, evaluator__startswith="imported:").exists()
    client = Client()
    client.force_login(alice)
    page = client.get(f"/compare/?baseline={imported.pk}&candidate={rescored.pk}")
    assert page.status_code == 200
    assert f"run {rescored.pk} queued" in capsys.readouterr().out
