#!/usr/bin/env bash
# CI step: the team-server scale and fault tests (tests/team/, marker `team`) on PostgreSQL
# and Redis on 127.0.0.1, through `manage.py up --team`. Starts either service if it is down.
# Runs with the caller's python (the CI venv); budget: 4 minutes on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
PYTHON=${PYTHON:-python}
DB_NAME=${EVALSITE_TEAM_DB:-evalsite_team}
REDIS_DB=${EVALSITE_TEAM_REDIS_DB:-11}

pg_start() {
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && return 0; sleep 1; done
  echo "PostgreSQL did not start" >&2
  return 1
}
# The fault tests stop PostgreSQL for a few seconds (and start it again themselves); whatever
# happens to them, this machine's PostgreSQL is running when this script ends.
trap 'pg_isready -q -h 127.0.0.1 -p 5432 || pg_start' EXIT

pg_isready -q -h 127.0.0.1 -p 5432 || pg_start
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  for _ in $(seq 1 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi

# A test database left behind by an interrupted run (pytest-django recreates it, but cannot
# drop it while something still holds a connection).
PGOPTIONS="--client-min-messages=warning" psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS test_${DB_NAME} WITH (FORCE)" >/dev/null

data_dir=$(mktemp -d /tmp/evalsite-team-XXXXXX)
status=0
EVALSITE_TEAM_TESTS=1 \
  DATABASE_URL="postgres://postgres@127.0.0.1:5432/${DB_NAME}" \
  REDIS_URL="redis://127.0.0.1:6379/${REDIS_DB}" \
  EVALSITE_DATA_DIR="$data_dir" \
  "$PYTHON" -m pytest -q -rs -p no:cacheprovider -m team --basetemp="$data_dir/pytest" tests/team || status=$?
if [ "$status" -ne 0 ]; then  # what the servers said, for the failure above
  find "$data_dir" -name 'up-*.log' -print0 | while IFS= read -r -d '' log; do
    echo "--- last lines of $log"; tail -n 60 "$log"
  done
fi
rm -rf "$data_dir"
echo "team tests finished in $(( $(date +%s) - start ))s"
exit "$status"
