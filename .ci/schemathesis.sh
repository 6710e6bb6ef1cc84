#!/usr/bin/env bash
# schemathesis against the API of a real server on 127.0.0.1: no 5xx, and every response
# conforms to /api/schema/ (body and content type).
#
# The server runs on a throwaway SQLite data dir, seeded with a user, a token, the demo eval
# set, two finished runs and a triaged regression (tests/api_seed.py), so the endpoints have
# data to answer with. Bounded: --max-examples per operation and phase, and the whole script
# in SCHEMATHESIS_SECONDS (default 90): what setup leaves of it goes to schemathesis's
# --max-time, which it shares among its phases (repeating them while time is left) and stops
# at; `timeout` kills it if it ever overruns. Exits non-zero on any failure.
#
# SCHEMATHESIS_POSTGRES=URL (a PostgreSQL server it may create a database on, as
# postgres://postgres@127.0.0.1:5432/postgres) runs the server on a scratch database created
# there and dropped after, instead of SQLite: PostgreSQL refuses what SQLite takes (a NUL in
# text), so a 500 can hide on one database only.
#
# SCHEMATHESIS_MAX_TIME caps schemathesis's own share, so that a caller with a fixed amount of
# fuzzing in mind (the test suite's run of this script) can give setup a generous budget: on a
# loaded machine, migrating and seeding alone can take 20 s.
#
# Usage: .ci/schemathesis.sh [MAX_EXAMPLES]        (PYTHON=... to pick the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python}
BIN=$(dirname "$(command -v "$PYTHON")")
MAX_EXAMPLES=${1:-30}
SECONDS_BUDGET=${SCHEMATHESIS_SECONDS:-90}

DATA=$(mktemp -d "${TMPDIR:-/tmp}/evalsite-schemathesis.XXXXXX")
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$DATA"
  if [ -n "${SCRATCH_DB:-}" ]; then
    "$PYTHON" -c "$PG_SCRATCH" drop "$SCHEMATHESIS_POSTGRES" "$SCRATCH_DB" || true
  fi
}
trap cleanup EXIT

# A throwaway database, whatever the caller's environment points at: embedded, or a scratch
# database on the PostgreSQL server named by SCHEMATHESIS_POSTGRES.
unset DATABASE_URL REDIS_URL
export EVALSITE_DATA_DIR="$DATA" DJANGO_SETTINGS_MODULE=evalsite.settings PYTHONUNBUFFERED=1
SCRATCH_DB=""
PG_SCRATCH='
import sys, psycopg
action, server, name = sys.argv[1:4]
with psycopg.connect(server, autocommit=True) as connection:
    connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    if action == "create":
        connection.execute(f"CREATE DATABASE {name}")
'
if [ -n "${SCHEMATHESIS_POSTGRES:-}" ]; then
  SCRATCH_DB="evalsite_schemathesis_$$"
  "$PYTHON" -c "$PG_SCRATCH" create "$SCHEMATHESIS_POSTGRES" "$SCRATCH_DB"
  export DATABASE_URL="${SCHEMATHESIS_POSTGRES%/*}/$SCRATCH_DB"
fi

"$PYTHON" manage.py migrate -v 0
TOKEN=$("$PYTHON" -m tests.api_seed)
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

"$BIN/gunicorn" evalsite.wsgi:application --bind "127.0.0.1:$PORT" --workers 2 --timeout 60 \
  --log-level warning --error-logfile "$DATA/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do
  if "$PYTHON" -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$PORT/healthz', timeout=1)" \
      2>/dev/null; then
    break
  fi
  sleep 0.1
done

# $SECONDS: bash's count since the script started. Keep 5 s for stopping the server.
left=$((SECONDS_BUDGET - SECONDS - 5))
if [ "$left" -lt 15 ]; then
  echo "setup took ${SECONDS}s: too little of the ${SECONDS_BUDGET}s budget is left" >&2
  exit 1
fi
max_time=$((left - 8))
if [ -n "${SCHEMATHESIS_MAX_TIME:-}" ] && [ "$max_time" -gt "$SCHEMATHESIS_MAX_TIME" ]; then
  max_time=$SCHEMATHESIS_MAX_TIME
fi
# Revoking a token could hit the run's own token and turn every later request into a 401:
# that endpoint is covered by tests/test_api_projects.py instead. Likewise deleting the seeded
# runs or eval set, or archiving its project, would leave every later request a 404: those are
# covered by tests/test_removals.py.
status=0
# From the throwaway dir, so nothing schemathesis keeps (replays, .hypothesis) lands in the repo.
(cd "$DATA" && timeout --kill-after=3 "$left" "$BIN/schemathesis" run "http://127.0.0.1:$PORT/api/schema/" \
  --checks not_a_server_error,response_schema_conformance,content_type_conformance \
  --max-examples "$MAX_EXAMPLES" --max-time "$max_time" --workers 1 --seed 1 \
  --generation-database none \
  --exclude-path-regex '/tokens/\{id\}/revoke/' \
  --exclude-operation-id runs_destroy --exclude-operation-id evalsets_destroy \
  --exclude-operation-id projects_archive_create \
  -H "Authorization: Token $TOKEN") || status=$?

if [ "$status" -ne 0 ]; then
  echo "schemathesis failed (exit $status; 124 means it ran out of its ${SECONDS_BUDGET}s)" >&2
  if [ -s "$DATA/server.log" ]; then
    echo "--- server log ---" >&2
    tail -n 100 "$DATA/server.log" >&2
  fi
fi
exit "$status"
