#!/usr/bin/env bash
# The first hour: follows the README (and docs/teams.md) literally with
# bin/waggle from `make build`, on a fresh data dir under a temp dir (never
# ~/.waggle), and checks what a newcomer would see at each step:
#   1. echo mode: `waggle serve` with a model server that does not answer;
#      the README's curl chat and history; the start-up log names the URL.
#   2. a fake Ollama (services/waggle/cmd/fakellm, a test tool) listing one
#      model: with only WAGGLE_LLM_URL set the server uses that model.
#   3. a team server (docs/teams.md): --auth required --postgres-url, then
#      `waggle team create` and `waggle token create` over the embedded NATS
#      listener, and a chat with the token in a team workspace. Needs
#      WAGGLE_TEST_POSTGRES_URL (run under scripts/with-postgres.sh, as
#      .ci/run does); without it the step is skipped, loudly.
# Prints one line per check and finally `N passed, M failed`; exits non-zero
# on any failure. Every process listens on a free loopback port (asked for
# as port 0 and read back from the log), is killed at exit, and every wait
# is a poll with a deadline.
set -uo pipefail
cd "$(dirname "$0")/.."

pg_url=${WAGGLE_TEST_POSTGRES_URL:-}
# The reader's own WAGGLE_* settings must not change what the README
# promises; each step sets exactly what the docs tell it to.
for v in $(compgen -e | grep '^WAGGLE_' || true); do unset "$v"; done

passed=0
failed=0
pids=()
tmp=$(mktemp -d /tmp/waggle-first-hour.XXXXXX)
keep=${FIRST_HOUR_KEEP:-} # set to keep the logs even when every check passes

cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    # Bounded: a process that ignores SIGTERM for 10 s is killed.
    local i
    for i in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  if [ -n "$keep" ]; then
    echo "first-hour: logs kept in $tmp" >&2
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); keep=1; echo "FAIL $*"; }
# check DESCRIPTION COMMAND...: one line for one check.
check() {
  local desc=$1; shift
  if "$@" >/dev/null 2>&1; then ok "$desc"; else bad "$desc"; fi
}

# poll SECONDS COMMAND...: run COMMAND every 0.1 s until it succeeds or the
# deadline passes.
poll() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.1
  done
}

# start NAME COMMAND...: runs COMMAND in the background, stdout in
# $tmp/NAME.out and stderr in $tmp/NAME.log; its pid in $last_pid.
start() {
  local name=$1; shift
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.log" &
  last_pid=$!
  pids+=("$last_pid")
}

# log_field FILE MSG KEY: KEY's string value in the JSON log line whose msg
# is MSG (the server logs as JSON: WAGGLE_LOG_FORMAT=json).
log_field() {
  grep -F "\"msg\":\"$2\"" "$1" | head -n 1 | sed -n "s/.*\"$3\":\"\([^\"]*\)\".*/\1/p"
}

# serve NAME ENV... -- ARGS...: `waggle serve` on fresh ports; waits until it
# logs that it is running (or exits); sets $addr (host:port of the HTTP API).
serve() {
  local name=$1; shift
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  start "$name" env "${envs[@]}" WAGGLE_ADDR=127.0.0.1:0 WAGGLE_LOG_FORMAT=json ./bin/waggle serve "$@"
  local pid=$last_pid
  poll 90 running_or_dead "$tmp/$name.log" "$pid"
  addr=$(log_field "$tmp/$name.log" "waggle is running" addr)
  [ -n "$addr" ]
}
running_or_dead() { grep -q '"msg":"waggle is running"' "$1" || ! kill -0 "$2" 2>/dev/null; }

# chat FILE BODY [CURL-ARGS...]: the README's curl chat (plus any extra
# curl arguments), its SSE stream in FILE; bounded by --max-time.
chat() {
  local out=$1 body=$2; shift 2
  curl -sS -N --max-time 120 -X POST "http://$addr/api/chat" \
    -H 'content-type: application/json' "$@" -d "$body" >"$out" 2>"$out.err"
}
# ends_in_done FILE: the stream's last event is `done`.
ends_in_done() { [ "$(grep '^event:' "$1" | tail -n 1)" = "event: done" ]; }
# done_contains FILE TEXT: the `done` event's data holds TEXT.
done_contains() { grep -A1 '^event: done' "$1" | grep '^data:' | grep -qF -- "$2"; }

# bin/waggle as the README builds it (cached, so cheap when up to date).
if ! make build >"$tmp/build.log" 2>&1; then
  cat "$tmp/build.log" >&2
  bad "make build"
  echo "$passed passed, $failed failed"
  exit 1
fi
# The fake model server: built once, a test tool (not part of the product).
if go build -o "$tmp/fakellm" ./services/waggle/cmd/fakellm 2>"$tmp/fakellm-build.log"; then
  fakellm=$tmp/fakellm
else
  fakellm=
  bad "build the fake model server (services/waggle/cmd/fakellm): $(head -n 3 "$tmp/fakellm-build.log")"
fi

# --- 1. Echo mode -----------------------------------------------------------
echo "== 1. echo mode: no model server answers"
dead_llm=http://127.0.0.1:1/v1 # port 1: nothing listens there
if serve echo WAGGLE_DATA_DIR="$tmp/echo" WAGGLE_LLM_URL=$dead_llm --; then
  ok "waggle serve starts on a fresh data dir ($addr)"
  chat "$tmp/echo-chat.sse" '{"message":"hello","workspace":"default","session":"s1"}'
  check "the README's curl chat ends in event: done" ends_in_done "$tmp/echo-chat.sse"
  check "its reply is the echo-mode reply quoting the message" \
    done_contains "$tmp/echo-chat.sse" 'Your message: \"hello\"'
  curl -sS --max-time 10 "http://$addr/api/history?workspace=default&session=s1" >"$tmp/echo-history.json" 2>&1
  check "GET /api/history has the two messages" \
    grep -q '"count":2}' "$tmp/echo-history.json"
  check "history: the user's hello, then the assistant's reply" \
    grep -q '"role":"user","content":"hello".*"role":"assistant"' "$tmp/echo-history.json"
  check "the start-up log names the model server it probed and says it did not answer" \
    grep -q "\"msg\":\"the model server did not answer.*\"url\":\"$dead_llm\"" "$tmp/echo.log"
else
  bad "waggle serve starts on a fresh data dir (see $tmp/echo.log)"
fi

# --- 2. A fake Ollama ---------------------------------------------------------
echo "== 2. a model server (fake Ollama) listing llama3.2:1b"
fake_url=
if [ -n "$fakellm" ]; then
  start fakellm "$fakellm" -models llama3.2:1b -reply "Hello from the fake model."
  fake_pid=$last_pid
  if poll 30 test -s "$tmp/fakellm.out"; then fake_url=$(head -n 1 "$tmp/fakellm.out"); fi
  if [ -n "$fake_url" ]; then ok "the fake model server listens at $fake_url"; else bad "the fake model server starts (see $tmp/fakellm.log)"; kill "$fake_pid" 2>/dev/null; fi
fi
if [ -n "$fake_url" ]; then
  if serve ollama WAGGLE_DATA_DIR="$tmp/ollama" WAGGLE_LLM_URL="$fake_url" --; then
    ok "waggle serve starts with only WAGGLE_LLM_URL set ($addr)"
    health_model() { curl -sS --max-time 5 "http://$addr/health" | grep -q '"defaultModel":"llama3.2:1b"'; }
    if poll 15 health_model; then ok "/health's defaultModel is llama3.2:1b, the server's first model"
    else bad "/health's defaultModel is llama3.2:1b (got: $(curl -sS --max-time 5 "http://$addr/health" | grep -o '"defaultModel":"[^"]*"'))"; fi
    chat "$tmp/ollama-chat.sse" '{"message":"hello","workspace":"default","session":"s1"}'
    check "a chat ends in event: done" ends_in_done "$tmp/ollama-chat.sse"
    check "its reply is the model's" done_contains "$tmp/ollama-chat.sse" "Hello from the fake model."
    check "the start-up log names the model server it probed and says it answered" \
      grep -q "\"msg\":\"the model server answered.*\"url\":\"$fake_url\"" "$tmp/ollama.log"
  else
    bad "waggle serve starts with only WAGGLE_LLM_URL set (see $tmp/ollama.log)"
  fi
fi

# --- 3. A team server ---------------------------------------------------------
echo "== 3. a team server (docs/teams.md)"
if [ -z "$pg_url" ]; then
  echo "SKIP step 3 (team server): WAGGLE_TEST_POSTGRES_URL is not set; run under scripts/with-postgres.sh to check it"
elif [ -z "$fake_url" ]; then
  bad "team server: needs the fake model server of step 2"
else
  # The database may be shared with earlier runs (and make test): names
  # unique to this run keep the doc's commands valid on it.
  run=$$$RANDOM
  team=acme-$run owner=olga-$run
  data=$tmp/team
  if serve team WAGGLE_LLM_URL="$fake_url" -- \
      --auth required --postgres-url "$pg_url" --nats-listen 127.0.0.1:0 --data-dir "$data"; then
    ok "waggle serve --auth required --postgres-url … --nats-listen … --data-dir … starts ($addr)"
    nats_url=$(log_field "$tmp/team.log" "embedded NATS listening" url)
    # docs/teams.md: the CLI authenticates with the server's data dir
    # (export WAGGLE_DATA_DIR=…) and finds its NATS at WAGGLE_NATS_URL (the
    # doc's 127.0.0.1:4222 is a free port here).
    cli() { WAGGLE_DATA_DIR=$data WAGGLE_NATS_URL=$nats_url ./bin/waggle "$@"; }
    check "waggle team create $team --name \"Acme\" --owner $owner" \
      cli team create "$team" --name "Acme" --owner "$owner"
    cli token create "$owner" --name laptop >"$tmp/token.out" 2>"$tmp/token.log"
    # It prints the new token as JSON; the secret is its "token" field.
    token=$(sed -n 's/^ *"token": *"\([^"]*\)".*/\1/p' "$tmp/token.out" | head -n 1)
    if [ -n "$token" ]; then ok "waggle token create $owner --name laptop prints a token"
    else bad "waggle token create $owner --name laptop prints a token ($(head -c 300 "$tmp/token.log"))"; fi
    check "the CLI without the data dir's key is refused" \
      bash -c "! WAGGLE_NATS_URL=$nats_url WAGGLE_DATA_DIR=$tmp/nowhere ./bin/waggle team list --timeout 5s"
    auth=(-H "Authorization: Bearer $token")
    curl -sS --max-time 10 "http://$addr/api/workspaces" "${auth[@]}" >"$tmp/team-list.json" 2>&1
    check "the new team came with its first workspace" grep -q "\"teamId\":\"$team\"" "$tmp/team-list.json"
    curl -sS --max-time 10 -X POST "http://$addr/api/workspaces" -H 'content-type: application/json' \
      "${auth[@]}" -d "{\"name\":\"Acme chat\",\"teamId\":\"$team\"}" >"$tmp/team-ws.json" 2>&1
    ws=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' "$tmp/team-ws.json" | head -n 1)
    if [ -n "$ws" ]; then ok "the owner creates a team workspace ($ws)"
    else bad "the owner creates a team workspace: $(head -c 300 "$tmp/team-ws.json")"; fi
    chat "$tmp/team-chat.sse" "{\"message\":\"hello\",\"workspace\":\"$ws\",\"session\":\"s1\"}" "${auth[@]}"
    check "a chat with the token in the team workspace ends in event: done" ends_in_done "$tmp/team-chat.sse"
    check "its reply is the model's" done_contains "$tmp/team-chat.sse" "Hello from the fake model."
    chat "$tmp/team-anon.sse" "{\"message\":\"hello\",\"workspace\":\"$ws\",\"session\":\"s2\"}" -o /dev/null -w '%{http_code}'
    check "the same chat without a token is refused (401)" test "$(cat "$tmp/team-anon.sse")" = 401
  else
    bad "waggle serve --auth required --postgres-url … starts (see $tmp/team.log)"
  fi
fi

# --- 4. make cluster, one runner killed --------------------------------------
echo "== 4. make cluster's topology with one runner killed -9"
# scripts/cluster.sh listens on fixed ports (NATS 4222-4224, 6222-6224,
# 8222-8224; metrics 9460-9463; gateways 3333-3334): skip if one is taken.
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
busy=
for p in 3333 3334 4222 4223 4224 6222 6223 6224 8222 8223 8224 9460 9461 9462 9463; do
  port_taken "$p" && busy="$busy $p"
done
if [ -n "$busy" ]; then
  echo "SKIP step 4 (make cluster): its fixed loopback ports are in use:$busy"
else
  # A working copy of what the script needs, so its .cluster/ (logs, data,
  # JetStream stores) is written under the temp dir, not in the repo.
  wc=$tmp/cluster
  mkdir -p "$wc/scripts" "$wc/bin" "$wc/deploy/nats"
  cp scripts/cluster.sh "$wc/scripts/"
  cp bin/waggle "$wc/bin/"
  cp deploy/nats/local-*.conf "$wc/deploy/nats/"
  start cluster env ${fake_url:+WAGGLE_LLM_URL=$fake_url} "$wc/scripts/cluster.sh"
  cluster_pid=$last_pid
  cluster_up() { grep -q '^gateways:' "$tmp/cluster.out" || ! kill -0 "$cluster_pid" 2>/dev/null; }
  poll 240 cluster_up
  # Each process the cluster started is ours to stop too, even if the
  # script's own trap does not get to run.
  for p in $(sed -n 's/^started .* (pid \([0-9]*\))$/\1/p' "$tmp/cluster.out"); do pids+=("$p"); done
  gw_up() { curl -sf --max-time 2 "http://127.0.0.1:$1/health"; }
  if grep -q '^gateways:' "$tmp/cluster.out" && poll 60 gw_up 3333 && poll 60 gw_up 3334; then
    ok "make cluster's topology is up (2 gateways, 3 runners)"
    runner=$(sed -n 's/^started runner-1 (pid \([0-9]*\))$/\1/p' "$tmp/cluster.out")
    kill -KILL "$runner"
    reported() { grep -q "runner-1 (pid $runner) exited" "$tmp/cluster.log"; }
    check "kill -9 runner-1: the cluster script reports it and keeps the rest" poll 30 reported
    addr=127.0.0.1:3334
    chat "$tmp/cluster-chat.sse" '{"message":"hello","workspace":"default","session":"after-kill"}'
    check "a chat through a gateway still ends in event: done" ends_in_done "$tmp/cluster-chat.sse"
    addr=127.0.0.1:3333
    chat "$tmp/cluster-chat2.sse" '{"message":"hello again","workspace":"default","session":"after-kill-2"}'
    check "and through the other gateway" ends_in_done "$tmp/cluster-chat2.sse"
  else
    bad "make cluster's topology comes up (see $tmp/cluster.out, $wc/.cluster/logs)"
  fi
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
