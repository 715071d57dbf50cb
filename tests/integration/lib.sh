# Shared helpers for integration tests (sourced). Binaries and data come from ctest's
# environment (tests/CMakeLists.txt).
set -euo pipefail
: "${CANOPY_BIN:?run through ctest}"
TMP=$(mktemp -d)
TMP_OWNER=$BASHPID

# finish_tmp RC: the last step of every test's EXIT trap. When the test failed (RC != 0) it
# prints the logs the test kept in $TMP (canopyd's, with any sanitizer report or fatal-signal
# backtrace in them) before the directory goes, so a failure in CI says why canopyd did what
# it did.
finish_tmp() {
  local rc=$1 f
  # A background subshell killed before it exec'd runs the EXIT trap too: only the test's
  # own shell may remove the directory its other processes still use.
  [ "$BASHPID" = "$TMP_OWNER" ] || return 0
  if [ "$rc" != 0 ]; then
    for f in "$TMP"/*.log; do
      [ -s "$f" ] || continue
      echo "---- $(basename "$f"), last 200 lines ----" >&2
      tail -n 200 "$f" >&2
    done
  fi
  rm -rf "$TMP"
}
trap 'finish_tmp $?' EXIT

# The EXIT trap of a test whose only background process is its canopyd (D_PID, started
# by start_canopyd): `D_PID=; trap finish_daemon EXIT`.
finish_daemon() {
  local rc=$?
  kill $D_PID 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}

# need_browser: skips unless Debian's chromium, node and curl are here (scripts/setup
# installs them); sets CHROMIUM, DRIVER (the DevTools driver) and SHOTS (screenshots).
need_browser() {
  CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
  [ -x "$CHROMIUM" ] || skip "no chromium at $CHROMIUM (scripts/setup installs it)"
  command -v node >/dev/null || skip "no node (scripts/setup installs nodejs)"
  command -v curl >/dev/null || skip "no curl"
  DRIVER=$(dirname "${BASH_SOURCE[0]}")/web_browser.js
  SHOTS=${CANOPY_WEB_SHOTS:-$TMP/shots}
  mkdir -p "$SHOTS"
}

fail() { echo "FAIL: $*" >&2; exit 1; }

# A test may skip where the kernel forbids what it needs, but never under CI=true.
skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL (skip not allowed under CI=true): $*" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit 77
}

# CMD | grep_all PATTERN...: grep's status without its early exit. `grep -q` stops at the
# first match, and under pipefail the producer then dies of SIGPIPE on its next write, so a
# check that matched fails at random (seen with large folded output).
grep_all() { grep "$@" >/dev/null; }

# json FILE EXPR: evaluates a Python expression over the document d (prints it).
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

# wait_symbols NAME: waits (up to 60 s) until session NAME's symbols.pending is 0, as
# `canopy run` does before printing (docs/cli-live.md, "Session counters"); `canopy tree`
# does not wait, so a tree read at once may still show frames as LIB+0xOFFSET. Returns 1
# when frames are still pending then (a running session may never reach 0).
wait_symbols() {
  local _
  for _ in $(seq 600); do
    "$CANOPY_BIN" sessions --format json >"$TMP/wait_symbols.json" || return 1
    [ "$(json "$TMP/wait_symbols.json" \
      "[s['symbols']['pending'] for s in d['sessions'] if s['name'] == '$1'][0]")" = 0 ] && return 0
    sleep 0.1
  done
  return 1
}

# expect_fail STATUS CMD...: exit STATUS, one line on stderr, nothing on stdout.
expect_fail() {
  local want=$1 rc
  shift
  "$@" >"$TMP/f.out" 2>"$TMP/f.err" && rc=0 || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, expected $want: $(cat "$TMP/f.err")"
  [ ! -s "$TMP/f.out" ] || fail "$*: output on stdout on error"
  [ "$(wc -l <"$TMP/f.err")" = 1 ] || fail "$*: not one error line: $(cat "$TMP/f.err")"
}

# start_canopyd [ARGS...]: canopyd on $CANOPY_SOCKET with a state dir in $TMP (on the event
# loop $CANOPY_EVENT_LOOP when set), ARGS added; sets D_PID and returns once the socket
# exists.
start_canopyd() {
  "$CANOPYD_BIN" --socket "$CANOPY_SOCKET" --state-dir "$TMP/state" \
    ${CANOPY_EVENT_LOOP:+--event-loop "$CANOPY_EVENT_LOOP"} "$@" >"$TMP/d.log" 2>&1 &
  D_PID=$!
  for ((i = 0; i < 100; i++)); do [ -S "$CANOPY_SOCKET" ] && break; sleep 0.1; done
  [ -S "$CANOPY_SOCKET" ] || fail "canopyd did not start: $(cat "$TMP/d.log")"
}


# fleet_canopyd NAME: one of a test's named canopyds (the fleet tests run several), with
# the config $TMP/NAME.conf, on $TMP/NAME.sock, state dir $TMP/state-NAME, log appended to
# $TMP/d-NAME.log; sets D_PID, adds it to PIDS and returns once the socket exists.
fleet_canopyd() {
  "$CANOPYD_BIN" --socket "$TMP/$1.sock" --state-dir "$TMP/state-$1" --config "$TMP/$1.conf" \
    >>"$TMP/d-$1.log" 2>&1 &
  D_PID=$!
  PIDS+=($D_PID)
  for ((i = 0; i < 100; i++)); do [ -S "$TMP/$1.sock" ] && return 0; sleep 0.1; done
  fail "canopyd $1 did not start: $(cat "$TMP/d-$1.log")"
}
