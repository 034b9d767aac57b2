#!/usr/bin/env bash
# Start the single-machine demo: SQLite, Celery in-process (or Redis if CELERY_BROKER_URL is set),
# demo users and datasets. Later features add the LLM server, local Argilla and a worker here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1

$PY manage.py migrate --noinput -v 0
$PY manage.py seed_demo
cat <<MSG

  Shiftlab is starting at  http://${HOST}:${PORT}/
  Log in as   researcher / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (imports datasets, runs studies)
              annotator  / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (rates in Argilla)
              admin      / ${SHIFTLAB_DEMO_PASSWORD:-shiftlab-demo}   (Django admin at /admin/)
  API docs:   http://${HOST}:${PORT}/api/docs/    Health: http://${HOST}:${PORT}/health/
  Press Ctrl-C to stop.

MSG
exec $PY manage.py runserver "${HOST}:${PORT}" --noreload
