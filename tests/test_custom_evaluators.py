"""Custom evaluators plug in through the EVALSITE_EVALUATORS setting (dotted paths)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.engine_helpers import DEMO, perfect_outputs


def test_an_evaluator_listed_in_the_setting_scores_a_run_from_the_cli(tmp_path: Path, embedded_data_dir: Any) -> None:
    outputs = perfect_outputs()
    outputs[0]["turns"][0]["final_response"] = "word " * 60  # one answer too long
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    (tmp_path / "config.json").write_text(json.dumps(
        {"criteria": {"brevity": {"evaluator": "word_count", "threshold": 1.0, "options": {"max_words": 40}}}}))
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({"EVALSITE_DATA_DIR": str(embedded_data_dir(tmp_path / "data")),
                "EVALSITE_EVALUATORS": "tests.plugins.word_count.WordCount"})
    done = subprocess.run([sys.executable, "manage.py", "eval", str(DEMO), "--outputs", str(tmp_path / "outputs.json"),
                           "--config", str(tmp_path / "config.json")], cwd=REPO, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "brevity" in done.stdout
    assert "1 failed" in done.stdout


def test_an_unknown_dotted_path_fails_loudly(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({"EVALSITE_DATA_DIR": str(tmp_path), "EVALSITE_EVALUATORS": "tests.plugins.word_count.Nope",
                "DJANGO_SETTINGS_MODULE": "evalsite.settings"})
    done = subprocess.run([sys.executable, "-c", "import django; django.setup(); "
                           "from evaluations.evaluators import registry; registry()"],
                          cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "Nope" in done.stderr
