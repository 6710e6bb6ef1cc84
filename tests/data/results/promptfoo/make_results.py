"""Writes results.json beside this file: `promptfoo eval -o results.json` of promptfooconfig.yaml
(here too) by promptfoo 0.123.1 itself, offline with its echo provider.

Run from the repository's root once promptfoo is installed (`npm ci` in tests/differential/promptfoo,
as .ci/differential.sh does): `python tests/data/results/promptfoo/make_results.py`. The results
are a fixture of the plain suite (tests/test_format_promptfoo.py), which needs no promptfoo.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

from tests.differential import promptfoo_run  # noqa: E402


def main() -> None:
    if not promptfoo_run.installed():
        raise SystemExit(f"promptfoo is not installed in {promptfoo_run.MODULES}: run `npm ci` in "
                         "tests/differential/promptfoo first")
    config = (HERE / "promptfooconfig.yaml").read_text(encoding="utf-8")
    results = promptfoo_run.evaluate(config)
    (HERE / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
