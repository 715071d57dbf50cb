# Helpers for the daemon's integration tests (sourced after lib.sh): start/stop canopyd on a
# private socket and state dir, protocol calls through daemon_proto.py, JSON field access.
: "${CANOPYD_BIN:?run through ctest}"
PROTO="python3 $(dirname "${BASH_SOURCE[0]}")/daemon_proto.py"
D_PID=
# Private dirs must be traversable by the unprivileged user of the access test.
chmod 0755 "$TMP"

# start_daemon BACKEND STATE_DIR [EXTRA ARGS...]: sets SOCK and D_PID. D_WRAP (e.g.
# setsid: canopyd as a session leader, as systemd runs it) prefixes the command.
start_daemon() {
  local backend=$1 state=$2
  shift 2
  SOCK=$TMP/canopyd.sock
  ${D_WRAP:-} "$CANOPYD_BIN" --socket "$SOCK" --state-dir "$state" --event-loop "$backend" "$@" \
    >>"$TMP/canopyd.log" 2>&1 &
  D_PID=$!
  for ((i = 0; i < 100; i++)); do
    $PROTO call "$SOCK" '{"cmd":"hello"}' >/dev/null 2>&1 && break
    kill -0 $D_PID 2>/dev/null || fail "canopyd exited: $(cat "$TMP/canopyd.log")"
    sleep 0.1
  done
  local loop
  loop=$($PROTO call "$SOCK" '{"cmd":"hello"}' | jget 'd["event_loop"]')
  [ "$loop" = "$backend" ] || fail "canopyd runs $loop, asked for $backend"
}

# need_nobody: skips unless the attack tests' tools are here: root (to become nobody with
# setpriv), setsid (canopyd as a session leader) and a C compiler (the attacker's programs).
need_nobody() {
  [ "$(id -u)" = 0 ] || skip "needs root (to switch to an unprivileged user)"
  command -v setpriv >/dev/null || skip "setpriv not installed"
  command -v setsid >/dev/null || skip "setsid not installed"
  command -v cc >/dev/null || skip "no C compiler"
}

# start_leader BACKEND STATE_DIR [EXTRA ARGS...]: start_daemon with canopyd as its own
# session leader without a controlling terminal, as systemd runs it; fails otherwise.
start_leader() {
  D_WRAP=setsid start_daemon "$@"
  [ "$(ps -o sid= -p $D_PID | tr -d ' ')" = "$D_PID" ] || fail "canopyd is not a session leader"
}

# stop_daemon [SIGNAL]: signals canopyd and waits; fails unless it exits 0 on TERM.
stop_daemon() {
  local sig=${1:-TERM} rc=0
  [ -n "$D_PID" ] || return 0
  kill -"$sig" $D_PID 2>/dev/null || true
  wait $D_PID || rc=$?
  D_PID=
  if [ "$sig" = TERM ] && [ $rc != 0 ]; then
    fail "canopyd exited $rc on SIGTERM: $(tail -5 "$TMP/canopyd.log")"
  fi
  return 0
}

# call JSON: prints the response (one line).
call() { $PROTO call "$SOCK" "$1"; }
# ok JSON: like call, but fails unless "ok" is true.
ok() {
  local r
  r=$(call "$1") || fail "request $1: no response"
  [ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "request $1 failed: $r"
  printf '%s\n' "$r"
}
# jget EXPR: evaluates a Python expression over the JSON document d read from stdin.
jget() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

# wait_for SECONDS CMD...: retries CMD every 0.2 s.
wait_for() {
  local t=$1
  shift
  for ((i = 0; i < t * 5; i++)); do
    "$@" && return 0
    sleep 0.2
  done
  return 1
}

# SLOW: 10 when canopyd is built with a sanitizer (ASan's fork and allocator make each
# forked query worker tens of ms), else 1. Latency and startup bounds are the release
# build's; sanitized runs check them scaled by SLOW.
if grep -q __asan_init "$CANOPYD_BIN" 2>/dev/null; then SLOW=10; else SLOW=1; fi
