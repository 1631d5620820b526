#!/usr/bin/env bash
# Services the LabelGate tests use, started on 127.0.0.1 for one CI run or one developer session.
#
#   scripts/services.sh postgres        install PostgreSQL if missing (root + apt-get), start a throw-away
#                                       server on a free port under a temporary directory, create a test
#                                       database, and print on stdout:
#                                         export LABELGATE_TEST_POSTGRES_URL=postgresql+psycopg://...
#                                         export LABELGATE_TEST_POSTGRES_DIR=<temporary directory>/labelgate-pg.XXXXXX
#                                       so that `eval "$(scripts/services.sh postgres)"` configures the tests.
#   scripts/services.sh stop-postgres [DIR]
#                                       stop the server started above (DIR defaults to $LABELGATE_TEST_POSTGRES_DIR)
#                                       and delete its directory.
#
# Progress and errors go to stderr; the exit status is non-zero when the server could not be started (the
# PostgreSQL tests then skip with a message naming LABELGATE_TEST_POSTGRES_URL). The server listens on 127.0.0.1
# only, with `trust` authentication for the `labelgate` role: it is a disposable test server, never a deployment
# (see docs/deployment.md for a real one). As root, the cluster is owned and run by the `postgres` user.
set -euo pipefail

log() { echo "services: $*" >&2; }

pg_bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

install_postgres() {
  if pg_bindir >/dev/null; then return 0; fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "PostgreSQL is not installed and cannot be installed here (needs root and apt-get)"
    return 1
  fi
  log "installing PostgreSQL (apt-get install postgresql)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq postgresql >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null; }
  pg_bindir >/dev/null
}

free_port() {
  # The first port from 55432 nothing listens on (bash's /dev/tcp: a refused connection means free).
  local port
  for port in $(seq 55432 55531); do
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
  done
  return 1
}

as_owner() {
  # PostgreSQL refuses to run as root: run the server tools as `postgres` when we are root.
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
  install_postgres
  local bin dir port
  bin=$(pg_bindir)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/labelgate-pg.XXXXXX")
  chmod 755 "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  port=$(free_port) || { log "no free port in 55432-55531"; return 1; }
  log "initialising a cluster in $dir ($("$bin/postgres" --version))"
  as_owner "$bin/initdb" -D "$dir/data" -U labelgate -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; return 1; }
  # fsync off: a disposable test server; max_connections covers parallel test workers and gate runs.
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c max_connections=200" \
    start >&2 || { cat "$dir/server.log" >&2; return 1; }
  "$bin/psql" -q -h 127.0.0.1 -p "$port" -U labelgate -d postgres -v ON_ERROR_STOP=1 \
    -c "CREATE DATABASE labelgate_test" >&2
  log "PostgreSQL listening on 127.0.0.1:$port (database labelgate_test); stop it with: $0 stop-postgres $dir"
  echo "export LABELGATE_TEST_POSTGRES_URL=postgresql+psycopg://labelgate@127.0.0.1:$port/labelgate_test"
  echo "export LABELGATE_TEST_POSTGRES_DIR=$dir"
}

stop_postgres() {
  local dir=${1:-${LABELGATE_TEST_POSTGRES_DIR:-}}
  if [ -z "$dir" ] || [ ! -d "$dir/data" ]; then log "no server directory given (or it has no data/)"; return 1; fi
  local bin
  bin=$(pg_bindir)
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  rm -rf "$dir"
  log "stopped and removed $dir"
}

case "${1:-}" in
  postgres) start_postgres ;;
  stop-postgres) stop_postgres "${2:-}" ;;
  *) echo "usage: $0 postgres | stop-postgres [DIR]" >&2; exit 2 ;;
esac
