#!/usr/bin/env bash
# `canopy top` driven through tmux (send-keys, capture-pane) in an 80x24 terminal:
#  1. on a profile file (deterministic): the hot functions pane, the call tree, and the
#     keys i (invert), f (focus on node), F (focus on function), m (merge), d (drop),
#     u (pop), / (search), w (window), p (pause) change the view as they should; q quits
#     and restores the terminal; SIGINT does too;
#  2. live, in-process on the known-profile workload (top --pid): it shows the
#     workload's hot functions after a few refreshes;
#  3. live in wall mode (top --pid --mode wall): totals and self columns are times.
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || skip "tmux is not installed"

# One tmux server per start (a fresh server on a name just killed can race its exit).
RUN=0
SOCK="canopy-test-top-$$-$RUN"
tm() { tmux -L "$SOCK" "$@"; }
cleanup() {
  tm kill-server 2>/dev/null || true
  [ -n "${WL_PID:-}" ] && kill "$WL_PID" 2>/dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT

# start_top ARGS...: runs canopy top in a fresh 80x24 tmux session; its exit status goes
# to $TMP/status when it ends.
start_top() {
  rm -f "$TMP/status"
  tm kill-server 2>/dev/null || true
  RUN=$((RUN + 1))
  SOCK="canopy-test-top-$$-$RUN"
  tm -f /dev/null new-session -d -s t -x 80 -y 24 \
    "env TERM=xterm-256color CANOPY_SOCKET=$TMP/no-daemon.sock ASAN_OPTIONS=${ASAN_OPTIONS:-} \
     $CANOPY_BIN top $* 2>$TMP/top.err; echo \$? >$TMP/status; sleep 30"
}
screen() { tm capture-pane -p -t t; }
# wait_for PATTERN [SECONDS]: until the screen matches (grep -E).
wait_for() {
  local pat=$1 secs=${2:-10} i
  for ((i = 0; i < secs * 10; i++)); do
    screen | grep -qE -- "$pat" && return 0
    sleep 0.1
  done
  echo "---- screen ----" >&2; screen >&2; echo "---- stderr ----" >&2
  cat "$TMP/top.err" >&2 || true
  fail "screen never showed /$pat/"
}
# wait_not PATTERN: until the screen no longer matches.
wait_not() {
  local pat=$1 i
  for ((i = 0; i < 100; i++)); do
    screen | grep -qE -- "$pat" || return 0
    sleep 0.1
  done
  screen >&2
  fail "screen still shows /$pat/"
}
keys() { tm send-keys -t t "$@"; sleep 0.3; }
wait_status() {
  local i
  for ((i = 0; i < 100; i++)); do
    [ -s "$TMP/status" ] && return 0
    sleep 0.1
  done
  screen >&2
  fail "canopy top did not exit"
}

# ---- 1. a file --------------------------------------------------------------------------
cat >"$TMP/p.folded" <<'EOF'
main;work_a;burn 50
main;work_b;work_b_inner;burn 30
main;work_c;work_c;work_c;burn 15
main;work_c;helper 5
EOF
start_top "$TMP/p.folded"
wait_for 'HOT FUNCTIONS'
s=$(screen)
# Hot functions by self: burn 95%, helper 5%.
echo "$s" | grep -qE '^ +95\.0% +95 +95\.0% +burn' || { echo "$s" >&2; fail "burn not hot at 95%"; }
echo "$s" | grep -qE '^ +5\.0% +5 +5\.0% +helper' || { echo "$s" >&2; fail "helper not at 5%"; }
# The tree is auto-expanded: main 100%, work_a 50% under it, work_b_inner 30%.
echo "$s" | grep -qE '100\.0% +0\.0% +- main' || { echo "$s" >&2; fail "main not at 100%"; }
echo "$s" | grep -qE '50\.0% +0\.0% +- work_a' || { echo "$s" >&2; fail "work_a not at 50%"; }
echo "$s" | grep -qE '30\.0% +0\.0% +- work_b_inner' || { echo "$s" >&2; fail "work_b_inner"; }
echo "$s" | grep -q 'transforms: none' || fail "transforms line"
[ "$(echo "$s" | wc -l)" -le 24 ] || fail "more than 24 lines"

# i: inverted tree; burn is the first root at 95% self.
keys i
wait_for 'INVERTED TREE'
screen | grep -qE '95\.0% +95\.0% +[-+] burn' || { screen >&2; fail "inverted root burn"; }
keys i
wait_not 'INVERTED TREE'

# Select work_b (down from main: work_a, burn, work_b) and focus on it (f).
keys Down Down Down
keys f
wait_for 'transforms: focus:main;work_b'
s=$(screen)
echo "$s" | grep -qE '100\.0% +0\.0% +- work_b$' || { echo "$s" >&2; fail "focus: work_b root"; }
echo "$s" | grep -q 'work_a' && { echo "$s" >&2; fail "focus kept work_a"; }
# u pops it.
keys u
wait_for 'transforms: none'
screen | grep -q 'work_a' || fail "u did not restore work_a"

# / search for helper, then F focuses on its function.
keys / h e l p e r Enter
wait_for '/helper'
keys F
wait_for 'transforms: focus-func:helper'
screen | grep -qE '100\.0% +100\.0% +  helper' || { screen >&2; fail "focus-func helper"; }
keys u
wait_for 'transforms: none'

# m on the selection (back on main after the pop: the first row) merges main.
keys g m
wait_for 'transforms: merge:main'
screen | grep -qE '[-+] main' && { screen >&2; fail "merge:main kept main"; }
keys u
# d drops burn's samples: select burn through search.
keys / b u r n Enter
keys d
wait_for 'transforms: drop:burn'
screen | grep -qE '100\.0% +100\.0% +helper' || { screen >&2; fail "drop:burn leaves helper only"; }
keys u
wait_for 'transforms: none'

# w cycles the window, p pauses.
keys w
wait_for 'window 60 s'
keys p
wait_for '\[paused\]'
keys q
wait_status
[ "$(cat "$TMP/status")" = 0 ] || fail "top exited with $(cat "$TMP/status"): $(cat "$TMP/top.err")"
# The terminal is restored: the alternate screen is gone, so our UI is no longer shown.
screen | grep -q 'HOT FUNCTIONS' && fail "screen not restored after q"

# SIGINT ends it cleanly too.
start_top "$TMP/p.folded"
wait_for 'HOT FUNCTIONS'
tm send-keys -t t C-c
wait_status
[ "$(cat "$TMP/status")" = 0 ] || fail "top after ^C exited with $(cat "$TMP/status")"
screen | grep -q 'HOT FUNCTIONS' && fail "screen not restored after ^C"
echo "PASS top on a file"

# ---- 2. live, in-process ----------------------------------------------------------------
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
"$WL" 60 >/dev/null &
WL_PID=$!
start_top --pid "$WL_PID"
wait_for 'work_a' 20
wait_for '[0-9]+ samples' 5
s=$(screen)
echo "$s" | grep -qE 'burn' || { echo "$s" >&2; fail "live: burn not shown"; }
grep -q 'in-process' "$TMP/top.err" || fail "live: no in-process note on stderr"
keys i
wait_for 'INVERTED TREE'
keys q
wait_status
[ "$(cat "$TMP/status")" = 0 ] || fail "live top exited with $(cat "$TMP/status"): $(cat "$TMP/top.err")"
kill "$WL_PID" 2>/dev/null || true
echo "PASS top live in-process"

# ---- 3. live, wall mode: weights are times ------------------------------------------------
WL=$CANOPY_WORKLOADS/wl_waits_fp
[ -x "$WL" ] || fail "workload $WL not built"
"$WL" 60 >/dev/null &
WL_PID=$!
start_top --pid "$WL_PID" --mode wall
wait_for 'compute' 20
wait_for 'total [0-9.]+ (ms|s)\)' 10
s=$(screen)
echo "$s" | grep -qE '^ +[0-9.]+% +[0-9.]+ (ms|s) ' || { echo "$s" >&2; fail "wall: hot functions not in time units"; }
keys q
wait_status
[ "$(cat "$TMP/status")" = 0 ] || fail "wall top exited with $(cat "$TMP/status"): $(cat "$TMP/top.err")"
kill "$WL_PID" 2>/dev/null || true
echo "PASS top live wall"
