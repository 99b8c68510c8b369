#!/usr/bin/env bash
# Run a command against a throwaway PostgreSQL server: initdb into a temporary directory, start it on
# a free loopback port, export DATABASE_URL, run the command, stop and delete the server.
#   bash scripts/with-postgres.sh .venv/bin/python -m pytest tests/test_pipeline.py
set -euo pipefail
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ]; then
  echo "PostgreSQL server binaries not found (Debian package postgresql)" >&2
  exit 1
fi
run_as=()
if [ "$(id -u)" -eq 0 ]; then run_as=(runuser -u postgres --); fi  # initdb refuses to run as root
datadir=$(mktemp -d)
chmod 755 "$datadir"
if [ "$(id -u)" -eq 0 ]; then chown postgres "$datadir"; fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
  "${run_as[@]}" "$bindir/pg_ctl" -D "$datadir/data" -m fast stop >/dev/null 2>&1 || true
  rm -rf "$datadir"
}
trap cleanup EXIT
"${run_as[@]}" "$bindir/initdb" -D "$datadir/data" -U postgres -A trust >/dev/null
"${run_as[@]}" "$bindir/pg_ctl" -D "$datadir/data" -l "$datadir/log" -w \
  -o "-p $port -k $datadir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null
"${run_as[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres liqodash
export DATABASE_URL="postgres://postgres@127.0.0.1:$port/liqodash"
echo "PostgreSQL on port $port: running $*"
"$@"
