#!/usr/bin/env bash
# `make cluster`: the team-server topology as local processes, no Docker —
# a 3-node NATS cluster (waggle nats), one session store + approval +
# command process, 3 turn runners and 2 gateways (127.0.0.1:3333 and :3334).
# Logs and data under .cluster/. Ctrl-C stops everything; a process that
# exits (or that you kill -9 to watch the failover) is reported and the
# others keep running.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=./bin/waggle
[ -x "$bin" ] || make build >/dev/null
mkdir -p .cluster/logs .cluster/data
pids=()
declare -A names=()
stop() {
  echo "stopping ${#pids[@]} processes"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait || true
}
trap stop EXIT INT TERM

start() { # name, args...
  local name=$1; shift
  "$@" >".cluster/logs/$name.log" 2>&1 &
  pids+=($!)
  names[$!]=$name
  echo "started $name (pid $!)"
}

# local-N.conf set sync_interval: always, like the team-server configs:
# JetStream state is fsynced before it is acknowledged (docs/operations.md).
for i in 1 2 3; do
  grep -q '^ *sync_interval: always' "deploy/nats/local-$i.conf" || { echo "deploy/nats/local-$i.conf must set sync_interval: always" >&2; exit 1; }
  start "nats-$i" "$bin" nats --config "deploy/nats/local-$i.conf"
done
urls=nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224
# Wait until JetStream is clustered (a meta leader elected) on every node:
# replicated streams cannot be created before that.
for port in 8222 8223 8224; do
  for i in $(seq 1 120); do
    "$bin" healthcheck --url "http://127.0.0.1:$port/healthz" 2>/dev/null && break
    sleep 0.5
  done
done

common=(--nats-url "$urls" --data-dir .cluster/data --log-format text)
# R1 streams and buckets: on one laptop (or a 2-core CI box), raft groups
# for every R3 asset make startup slow; docker-compose.yml uses R3.
export WAGGLE_NATS_REPLICAS=1
wait_ready() { # metrics address
  for i in $(seq 1 120); do
    "$bin" healthcheck --url "http://$1/health" 2>/dev/null && return
    sleep 0.5
  done
}
# Start in waves so the new cluster's meta leader is not asked to create
# every stream and bucket at once.
start services "$bin" serve "${common[@]}" --targets=session-store,approval,command --metrics-addr 127.0.0.1:9460
wait_ready 127.0.0.1:9460
for i in 1 2 3; do
  start "runner-$i" "$bin" serve "${common[@]}" --targets=turn-runner --metrics-addr "127.0.0.1:946$i"
done
wait_ready 127.0.0.1:9461
start gateway-1 "$bin" serve "${common[@]}" --targets=gateway --addr 127.0.0.1:3333
start gateway-2 "$bin" serve "${common[@]}" --targets=gateway --addr 127.0.0.1:3334

echo "gateways: http://127.0.0.1:3333 http://127.0.0.1:3334 — logs in .cluster/logs; Ctrl-C to stop"
# One process going away is what a cluster is for: say so, keep the rest.
live=${#pids[@]}
while [ "$live" -gt 0 ]; do
  exited=
  status=0
  wait -n -p exited "${pids[@]}" 2>/dev/null || status=$?
  [ -n "$exited" ] || break
  live=$((live - 1))
  echo "${names[$exited]} (pid $exited) exited with status $status; see .cluster/logs/${names[$exited]}.log — the others keep running" >&2
done
