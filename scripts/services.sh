#!/usr/bin/env bash
# Start local PostgreSQL and Redis for tests and the demo, if they are installed and not running.
# Idempotent: safe to run on a machine where they already run. Prints the URLs to use.
set -u
PG_URL_DEFAULT="postgres://shiftlab:shiftlab@127.0.0.1:5432/shiftlab"
REDIS_PORT="${SHIFTLAB_REDIS_PORT:-6379}"

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

start_redis() {
  if command -v redis-cli >/dev/null 2>&1 && redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
    echo "redis: ready at redis://127.0.0.1:${REDIS_PORT}"; return 0
  fi
  if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis: not installed (apt-get install redis-server)"; return 1
  fi
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no >/dev/null
  for _ in $(seq 1 20); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.5; done
  redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG || { echo "redis: did not start"; return 1; }
  echo "redis: ready at redis://127.0.0.1:${REDIS_PORT}"
}

case "${1:-start}" in
  start) rc=0; start_postgres || rc=1; start_redis || rc=1; exit $rc ;;
  postgres) start_postgres ;;
  redis) start_redis ;;
  *) echo "usage: $0 [start|postgres|redis]"; exit 2 ;;
esac
