#!/usr/bin/env bash
# Load benchmark (issue 7): the team-server shape (`manage.py up --team`: gunicorn + whitenoise,
# qcluster processes, PostgreSQL, Redis) on 127.0.0.1; the compare page of two finished
# 10,000-case runs and the runs API under 32 concurrent connections (wrk) while a third
# 10,000-case run is being evaluated, against the same run's time on the idle server.
#
#   bench/load.sh                                   # defaults below
#   CASES=2000 CONNECTIONS=16 API_CONNECTIONS=4 MAX_SECONDS=60 bench/load.sh
#
# The web server runs at up's default --web-nice (WEB_NICE=0: the queue's priority).
# Targets: >= 150 req/s on the compare page, p99 <= 500 ms, zero errors, completion under load
# <= 1.5x idle. Uses (and first drops) its own database, evalsite_load, and Redis database 12;
# needs PostgreSQL on 127.0.0.1:5432 (user postgres, trust) and Redis on 127.0.0.1:6379.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
DB_NAME=${EVALSITE_LOAD_DB:-evalsite_load}
REDIS_DB=${EVALSITE_LOAD_REDIS_DB:-12}
PORT=${PORT:-8765}
CASES=${CASES:-10000}
CONNECTIONS=${CONNECTIONS:-32}
API_CONNECTIONS=${API_CONNECTIONS:-8}
MAX_REQUESTS=${MAX_REQUESTS:-100000}
MAX_SECONDS=${MAX_SECONDS:-180}
WEB_WORKERS=${WEB_WORKERS:-3}
THREADS=${THREADS:-2}
CLUSTERS=${CLUSTERS:-1}
WEB_NICE=${WEB_NICE:-5}  # up --web-nice: the web server's CPU priority below the evaluation's

command -v wrk >/dev/null || { echo "bench/load.sh needs wrk: apt-get install -y wrk" >&2; exit 1; }

data_dir=$(mktemp -d /tmp/evalsite-load-XXXXXX)
export DATABASE_URL="postgres://postgres@127.0.0.1:5432/${DB_NAME}"
export REDIS_URL="redis://127.0.0.1:6379/${REDIS_DB}"
export EVALSITE_DATA_DIR="$data_dir"
SECRET_KEY=$("$PYTHON" -c "import secrets; print(secrets.token_urlsafe(50))")
export SECRET_KEY EVALSITE_ADMIN_PASSWORD="load-admin-pass-123" LOG_LEVEL=WARNING

PGOPTIONS="--client-min-messages=warning" psql -q -h 127.0.0.1 -U postgres -d postgres \
  -c "DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)" -c "CREATE DATABASE ${DB_NAME}" >/dev/null
redis-cli -h 127.0.0.1 -n "$REDIS_DB" del django_q:evalsite:q >/dev/null

"$PYTHON" manage.py up --team --port "$PORT" --web-workers "$WEB_WORKERS" --threads "$THREADS" --clusters "$CLUSTERS" \
  --cluster-workers 1 --web-nice "$WEB_NICE" >"$data_dir/up.log" 2>&1 &
up_pid=$!
cleanup() {
  kill -TERM "$up_pid" 2>/dev/null || true
  wait "$up_pid" 2>/dev/null || true
  rm -rf "$data_dir"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  grep -q "Press Ctrl+C" "$data_dir/up.log" && break
  kill -0 "$up_pid" 2>/dev/null || { cat "$data_dir/up.log"; exit 1; }
  sleep 0.5
done
grep -q "Press Ctrl+C" "$data_dir/up.log" || { cat "$data_dir/up.log"; exit 1; }
echo "up --team: gunicorn with $WEB_WORKERS workers x $THREADS threads at nice $WEB_NICE, $CLUSTERS qcluster processes x 1 worker, $(nproc) cores"

"$PYTHON" bench/load_client.py --server "http://127.0.0.1:$PORT" --cases "$CASES" --connections "$CONNECTIONS" \
  --api-connections "$API_CONNECTIONS" --max-requests "$MAX_REQUESTS" --max-seconds "$MAX_SECONDS"
