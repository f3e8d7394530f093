#!/usr/bin/env bash
# A throwaway PostgreSQL server for omni-store's PostgreSQL tests (store/tests/postgres.rs).
#
#   scripts/postgres.sh setup    install PostgreSQL from the distribution's packages when initdb/pg_ctl are missing
#   scripts/postgres.sh start    a server in a temporary data directory, on a free loopback port; prints `export ...`:
#                                  eval "$(scripts/postgres.sh start)"
#   scripts/postgres.sh stop     stop it and remove its data directory
#   scripts/postgres.sh status   show where the binaries are and what is running
#
# PostgreSQL refuses to run as root: run as root, the server runs as the `postgres` system user the package
# creates (made here when missing); run as anyone else, it runs as that user. It listens on 127.0.0.1 only, with
# password authentication (scram-sha-256) for a superuser `omni` whose password is generated at each start, and
# holds a database `omni`. The tests create a database of their own per test, and drop it.
# The state of a running server (pid, port, data directory, URL) goes to $RUN_DIR/postgres.env.
set -euo pipefail

CACHE=${OMNI_CACHE_DIR:-${HOME:-$(echo ~)}/.cache/omni}
RUN_DIR=$CACHE/run
STATE=$RUN_DIR/postgres.env
PYTHON=${PYTHON:-python3}
START_TIMEOUT=${OMNI_PG_START_TIMEOUT:-60}

log() { echo "postgres: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The directory of initdb and pg_ctl: on the PATH, or where Debian's packages put them
# (/usr/lib/postgresql/<version>/bin, not on the PATH), the newest version first.
bin_dir() {
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(readlink -f "$(command -v pg_ctl)")"
    return
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [[ -n $dir && -x $dir/initdb && -x $dir/pg_ctl ]] || return 1
  echo "$dir"
}

as_root() {
  if [[ $(id -u) == 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "installing needs root (or sudo): $*"
  fi
}

cmd_setup() {
  local dir
  if dir=$(bin_dir); then
    log "found $("$dir/postgres" --version) in $dir"
    return
  fi
  command -v apt-get >/dev/null 2>&1 || die "no initdb/pg_ctl and no apt-get to install them: install PostgreSQL"
  log "installing postgresql from the distribution's packages"
  # The package would make and start a cluster of its own (on port 5432): not needed here.
  as_root mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | as_root tee /etc/postgresql-common/createcluster.d/omni.conf >/dev/null
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
  dir=$(bin_dir) || die "postgresql installed, but no initdb/pg_ctl found"
  log "installed $("$dir/postgres" --version) in $dir"
}

# Runs a command as the server's user: `postgres` when this script runs as root (made when missing).
as_server_user() {
  if [[ $(id -u) == 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

ensure_server_user() {
  [[ $(id -u) == 0 ]] || return 0
  id postgres >/dev/null 2>&1 && return 0
  log "creating the system user postgres (PostgreSQL refuses to run as root)"
  useradd --system --no-create-home --shell /usr/sbin/nologin postgres
}

free_port() {
  "$PYTHON" -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
'
}

# Whether the process runs: a zombie (a stopped server not yet reaped by a parent that does not reap, as in
# some containers) does not.
alive() {
  [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 1
  local stat
  stat=$(ps -o stat= -p "$1" 2>/dev/null || true)
  [[ -n $stat && $stat != Z* ]]
}

print_exports() {
  # shellcheck disable=SC1090
  source "$STATE"
  echo "export OMNI_PG_URL=$OMNI_PG_URL"
}

cmd_start() {
  local bin
  bin=$(bin_dir) || die "PostgreSQL is not installed: run '$0 setup' first"
  mkdir -p "$RUN_DIR"
  if [[ -f $STATE ]]; then
    # shellcheck disable=SC1090
    source "$STATE"
    if alive "${PG_PID:-}"; then
      log "already running"
      print_exports
      return
    fi
    cmd_stop
  fi
  ensure_server_user
  local tmp port password
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/omni-pg.XXXXXX")
  chmod 755 "$tmp"
  port=$(free_port)
  # Letters and digits only: it goes into a URL as it is.
  password=$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24)
  printf '%s\n' "$password" >"$tmp/pwfile"
  if [[ $(id -u) == 0 ]]; then chown -R postgres: "$tmp"; fi
  # Written before starting, so `stop` can clean up even when start-up fails.
  cat >"$STATE" <<EOF
PG_BIN=$bin
PG_DIR=$tmp
PG_PORT=$port
PG_PID=
OMNI_PG_URL=postgres://omni:$password@127.0.0.1:$port/omni
EOF
  if ! as_server_user "$bin/initdb" -D "$tmp/data" -U omni --pwfile="$tmp/pwfile" --auth=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >"$tmp/initdb.log" 2>&1; then
    tail -n 20 "$tmp/initdb.log" >&2
    cmd_stop
    die "initdb failed"
  fi
  rm -f "$tmp/pwfile"
  # Loopback only; the socket in the temporary directory (the default one may not be writable).
  if ! as_server_user "$bin/pg_ctl" -D "$tmp/data" -l "$tmp/server.log" -w -t "$START_TIMEOUT" \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $tmp -c max_connections=200 -c fsync=off" start >&2; then
    tail -n 20 "$tmp/server.log" >&2 || true
    cmd_stop
    die "the server did not start (log: $tmp/server.log)"
  fi
  local pid
  pid=$(head -n 1 "$tmp/data/postmaster.pid")
  sed -i "s/^PG_PID=.*/PG_PID=$pid/" "$STATE"
  PGPASSWORD=$password "$bin/createdb" -h 127.0.0.1 -p "$port" -U omni omni ||
    {
      cmd_stop
      die "createdb failed"
    }
  log "PostgreSQL (pid $pid) on 127.0.0.1:$port, data in $tmp/data"
  print_exports
}

cmd_stop() {
  [[ -f $STATE ]] || {
    log "nothing running"
    return 0
  }
  # shellcheck disable=SC1090
  source "$STATE"
  if [[ -n ${PG_DIR:-} && -f $PG_DIR/data/postmaster.pid ]]; then
    as_server_user "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >&2 || true
  fi
  # pg_ctl returns once the pid file is gone, which may be a moment before the process is.
  for _ in $(seq 50); do
    alive "${PG_PID:-}" || break
    sleep 0.1
  done
  if alive "${PG_PID:-}"; then
    log "pid $PG_PID still running after pg_ctl stop; sending KILL"
    kill -KILL "$PG_PID" 2>/dev/null || true
  fi
  # Only a directory this script made.
  if [[ -n ${PG_DIR:-} && $(basename "$PG_DIR") == omni-pg.* ]]; then
    rm -rf "$PG_DIR"
  fi
  rm -f "$STATE"
  log "stopped"
}

cmd_status() {
  local bin
  if bin=$(bin_dir); then echo "binaries: $bin"; else echo "binaries: missing (run '$0 setup')"; fi
  if [[ -f $STATE ]]; then
    # shellcheck disable=SC1090
    source "$STATE"
    alive "${PG_PID:-}" && s=running || s=dead
    echo "server: 127.0.0.1:$PG_PORT (pid ${PG_PID:-?}, $s), data in $PG_DIR/data"
  else
    echo "server: not running"
  fi
}

case "${1:-}" in
  setup) cmd_setup ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 setup|start|stop|status" >&2
    exit 2
    ;;
esac
