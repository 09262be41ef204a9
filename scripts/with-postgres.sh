#!/usr/bin/env bash
# Runs a command with WAGGLE_TEST_POSTGRES_URL pointing at a PostgreSQL
# server (DESIGN §8). An URL already set is used as is; otherwise a
# throwaway cluster is created with the local initdb (installing Debian's
# postgresql package first when it is missing) on a free loopback port,
# and removed when the command ends.
set -euo pipefail

if [ -n "${WAGGLE_TEST_POSTGRES_URL:-}" ]; then
  exec "$@"
fi

find_bin() {
  local name=$1
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return; fi
  ls -d /usr/lib/postgresql/*/bin/"$name" 2>/dev/null | sort -V | tail -n 1
}

initdb=$(find_bin initdb)
if [ -z "$initdb" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "with-postgres: installing postgresql (Debian package)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
    initdb=$(find_bin initdb)
  fi
fi
if [ -z "$initdb" ]; then
  echo "with-postgres: no initdb found and cannot install PostgreSQL" >&2
  exit 1
fi
bindir=$(dirname "$(readlink -f "$initdb")")

# PostgreSQL refuses to run as root: run the cluster as the postgres user.
runas=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  runas=(runuser -u postgres --)
fi

dir=$(mktemp -d /tmp/waggle-pg.XXXXXX)
chmod 755 "$dir"
[ ${#runas[@]} -gt 0 ] && chown postgres "$dir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null || echo 55432)

cleanup() {
  "${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT

"${runas[@]}" "$bindir/initdb" -D "$dir/data" -U waggle --auth=trust -E UTF8 >/dev/null
"${runas[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
"${runas[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U waggle waggle_test

export WAGGLE_TEST_POSTGRES_URL="postgres://waggle@127.0.0.1:$port/waggle_test?sslmode=disable"
echo "with-postgres: PostgreSQL on 127.0.0.1:$port" >&2
"$@"
