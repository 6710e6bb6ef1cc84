"""schemathesis against the API of a real server: `.ci/schemathesis.sh` (which CI runs with
30 examples an operation in 90 s), here at a smaller bound so the test suite runs it too."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = REPO / ".ci" / "schemathesis.sh"
# seconds, for the whole script: setup, server, schemathesis, teardown. Setup (migrations, the
# seed, gunicorn) took 21 s once on a loaded machine, leaving too little of a 40 s budget; so
# the budget is generous and schemathesis's own share is capped instead.
BUDGET = 90
FUZZING = 22  # seconds of schemathesis (its --max-time), whatever setup took


@pytest.mark.slow
def test_schemathesis_finds_no_server_errors_and_no_responses_off_the_schema() -> None:
    assert os.access(SCRIPT, os.X_OK), f"{SCRIPT} must be executable"
    env = {**os.environ, "PYTHON": sys.executable, "SCHEMATHESIS_SECONDS": str(BUDGET),
           "SCHEMATHESIS_MAX_TIME": str(FUZZING)}
    result = subprocess.run([str(SCRIPT), "5"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=BUDGET + 20)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "Loaded specification" in output
    assert " passed" in output and "failures" not in output.split("SUMMARY")[-1], output[-3000:]
