#!/usr/bin/env bash
# Start the single-machine demo: SQLite, Celery in-process (or Redis if CELERY_BROKER_URL is set),
# demo users and datasets, the embedded LLM server (llama.cpp) in the background, and the local
# Argilla server (annotation UI) when Redis and .venv-argilla are there.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
LLM_PORT="${LLM_PORT:-8081}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1

$PY manage.py migrate --noinput -v 0
$PY manage.py seed_demo

# Background processes, stopped when the demo exits (Ctrl-C, SIGTERM or the web server ending).
LLM_PID=""
WEB_PID=""
WORKER_PID=""
ARGILLA_PID=""
stop_children() {
  for pid in $WEB_PID $WORKER_PID $LLM_PID $ARGILLA_PID; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in $WEB_PID $WORKER_PID $LLM_PID $ARGILLA_PID; do
    wait "$pid" 2>/dev/null || true
  done
}
trap stop_children EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The embedded LLM: downloads its model on first use (1.1 GB, see `make models`), then serves it.
if $PY -c 'import llama_cpp.server' 2>/dev/null; then
  mkdir -p var/log
  $PY manage.py llm_server --port "$LLM_PORT" >var/log/llm_server.log 2>&1 &
  LLM_PID=$!
  LLM_URL="http://127.0.0.1:${LLM_PORT}/v1"
  export SHIFTLAB_LLM_BASE_URL="${SHIFTLAB_LLM_BASE_URL:-$LLM_URL}"
  LLM_LINE="LLM server: ${LLM_URL}   (ready once the model is loaded; log: var/log/llm_server.log)"
else
  LLM_LINE="LLM server: not running. Install it with: $PY -m pip install -r requirements-embedded.txt"
  echo "llama-cpp-python is not installed, so the demo starts without the embedded LLM."
  echo "To add it: $PY -m pip install -r requirements-embedded.txt   (compiles llama.cpp, about 10 minutes)"
fi

# A Celery worker on a local Redis when one can be had, so long runs leave the web server free;
# otherwise tasks run in-process (eager), which is fine for small demo datasets.
if [ -z "${CELERY_BROKER_URL:-}" ] && scripts/services.sh redis >/dev/null 2>&1; then
  export CELERY_BROKER_URL="redis://127.0.0.1:${SHIFTLAB_REDIS_PORT:-6379}/0"
fi
if [ -n "${CELERY_BROKER_URL:-}" ]; then
  mkdir -p var/log
  .venv/bin/celery -A shiftlab worker --concurrency 2 --loglevel=INFO >var/log/celery_worker.log 2>&1 &
  WORKER_PID=$!
  WORKER_LINE="Celery:     worker on ${CELERY_BROKER_URL} (log: var/log/celery_worker.log)"
else
  WORKER_LINE="Celery:     no Redis found: tasks run inside the web process"
fi

# The local Argilla server, where annotators rate. Both it and the web server take the owner's API
# key from ARGILLA_API_KEY (in development, its default in shiftlab/settings.py).
ARGILLA_PORT="${ARGILLA_PORT:-6900}"
if [ -x .venv-argilla/bin/python ] && scripts/services.sh redis >/dev/null 2>&1; then
  mkdir -p var/log
  $PY manage.py argilla_server --port "$ARGILLA_PORT" >var/log/argilla.log 2>&1 &
  ARGILLA_PID=$!
  export ARGILLA_API_URL="http://127.0.0.1:${ARGILLA_PORT}"
  ARGILLA_LINE="Argilla:    ${ARGILLA_API_URL}/   annotators sign in and rate there (log: var/log/argilla.log)"
else
  ARGILLA_LINE="Argilla:    not running (needs Redis and .venv-argilla: run make install and scripts/services.sh redis)"
fi

cat <<MSG

  Shiftlab is starting at  http://${HOST}:${PORT}/
  Log in as   researcher / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (imports datasets, runs studies)
              annotator  / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (rates in Argilla)
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
wait "$WEB_PID"
