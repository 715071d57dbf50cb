#!/usr/bin/env bash
# canopyd on a real, busy machine, for a while (issue 22, item 6):
#   bench/soak.sh [--minutes N] [--freq HZ] [--build DIR]   (30 minutes; canopyd's default
#   frequency for system and attach sessions, 99 Hz; DIR: build-rel/)
# (ctest's integration.test_daemon_soak runs it for 2 minutes on the ASan build.)
# Under load, all at once: a system session and five attach sessions on the test
# workloads (niced), ten clients querying in loops (five `canopy tree`, five `canopy
# sessions`, one a second each, every wall time kept), one `canopy top` on the system
# session in tmux, wl_churn (~10 000 processes a minute, exec chains, fresh libraries,
# thread storms), a compile loop (gcc on common/*.c), and a state directory near its quota
# (state_dir_max: saved sessions of another user fill it to within 1 MiB, so the quota deletes sessions during the run). canopyd is
# restarted, alternately by SIGTERM and SIGKILL, at evenly spaced times (2 in 2 minutes,
# one per 5 minutes otherwise); after each restart the six sessions are started again.
# Checks (each says why its bound is what it is):
# - zero crashes: no sanitizer report or fatal signal in canopyd's log, exit 0 on SIGTERM;
# - every session is back after each restart: all ids listed before it are listed after,
#   except those canopyd's log says the state dir's quota deleted (the quota's job); a
#   SIGKILL comes at least 3 checkpoints (5 s each) after the sessions started;
# - `canopy top` is still running before each restart;
# - no query fails outside the restart windows (+-3 s), and the median of the clients'
#   query wall times, less each client's start-up (the wall time of `canopy --version`
#   just before: process start under this load, not canopyd's), is at most 50 ms (x10 for
#   a sanitized canopyd, as daemon_lib.sh's SLOW: ASan's fork and allocator), the bound
#   issue 22 sets, times the stretch the machine imposed on canopyd: (time on a CPU + time
#   runnable and waiting for one) / time on a CPU of its loop thread (/proc/PID/schedstat,
#   sampled by daemon_watch.py), 1 on a machine with a core to spare. A shared 2-core
#   machine at a load average of 15-20 stretched it x3-x10: the bound is on what canopyd
#   does, the wait for a CPU is the machine's. The wall times are printed too;
# - RSS and fds flat after a 30 s warm-up in each canopyd lifetime (daemon_watch.py: own
#   memory's steady growth within K x the profiles' growth + C MiB, K and C 1 and 16,
#   4 and 64 under ASan, as in test_daemon_churn.sh; a lifetime with fewer than 10
#   samples past its warm-up is not judged; fds other than
#   cached object files within +20: ten clients' connections, top's, the watcher's, and
#   query_workers (4) jobs' memfd and pidfd); the warm-up is longer than the churn
#   test's 20 s: ten clients' answers of up to MiBs each fill ASan's quarantine (32 MiB)
#   and the allocator's caches first;
# Prints a summary: resources over time, query latency median/p95, lost records, restarts.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MIN=30
FREQ=
BUILD=$ROOT/build-rel
while [ $# -gt 0 ]; do
  case $1 in
    --minutes) MIN=$2; shift 2 ;;
    --freq) FREQ=",\"freq\":$2"; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    *) echo "usage: bench/soak.sh [--minutes N] [--freq HZ] [--build DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "${CANOPY_BIN:-}" ]; then
  export CANOPY_BIN=$BUILD/client/canopy CANOPYD_BIN=$BUILD/daemon/canopyd
  export CANOPY_WORKLOADS=$BUILD/tests/workloads
fi
export I=$ROOT/tests/integration
source "$I/lib.sh"
source "$I/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "a system session needs root"
command -v tmux >/dev/null || skip "tmux is not installed"
command -v gcc >/dev/null || skip "no gcc for the compile loop"
for w in wl_churn wl_threads_fp wl_shares_fp wl_deep_fp wl_waits_fp wl_sigprof; do
  [ -x "$CANOPY_WORKLOADS/$w" ] || fail "$CANOPY_WORKLOADS/$w not built"
done
DUR=$((MIN * 60))
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
export CANOPY_SOCKET=$TMP/canopyd.sock
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=32:allocator_release_to_os_interval_ms=500" # see test_daemon_churn.sh
# One tmux server per start of top (a fresh server on a name just killed can race its
# exit: test_top.sh).
RUN=0
TM="tmux -L canopy-soak-$$-$RUN"
BG=()
cleanup() {
  local rc=$?
  for ((i = 0; i <= RUN; i++)); do tmux -L canopy-soak-$$-$i kill-server 2>/dev/null || true; done
  kill "${BG[@]}" 2>/dev/null || true
  stop_daemon KILL || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap cleanup EXIT
now() { echo $(($(date +%s%N) / 1000000)); } # ms
T0=$(now)
el() { echo $((($(now) - T0) / 1000)); }     # s since start

# ---- The state dir near its quota: another user's saved sessions fill all but 1 MiB.
mkdir -p "$TMP/state"
$PY "$I/big_canopy.py" "$TMP/state/s900.canopy" s900 65534 2000 20000 20000 1
$PY "$I/big_canopy.py" "$TMP/state/s901.canopy" s901 65534 2000 20000 20000 2
seed=$(du -cb "$TMP/state"/*.canopy | tail -1 | cut -f1)
cat >"$TMP/canopyd.conf" <<CONF
checkpoint = 5s
state_dir_max = $((seed + (1 << 20)))
CONF

daemon_up() {
  start_daemon io_uring "$TMP/state" --config "$TMP/canopyd.conf"
  echo $D_PID >"$TMP/d.pid"
}
ids() { "$CANOPY_BIN" sessions --format json | $PY -c 'import json,sys; print(" ".join(sorted(s["id"] for s in json.load(sys.stdin)["sessions"])))'; }

# ---- Load that runs throughout -------------------------------------------------------
W=()
for w in "wl_threads_fp $((DUR + 120)) 0" "wl_shares_fp $((DUR + 120))" "wl_deep_fp $((DUR + 120))" \
  "wl_waits_fp $((DUR + 120))" "wl_sigprof $((DUR + 120))"; do
  # shellcheck disable=SC2086
  nice -n 19 "$CANOPY_WORKLOADS"/$w >/dev/null &
  W+=($!)
  BG+=($!)
done
"$CANOPY_WORKLOADS/wl_churn" --procs 150 --chains 17 --dso 2 --storm 32 --storm-rate 2 \
  --seconds "$DUR" >"$TMP/churn.json" &
CH=$!
BG+=($CH)
(
  cd "$ROOT"
  while :; do
    for f in text util buf containers err; do
      nice -n 10 gcc -std=gnu11 -O2 -D_GNU_SOURCE -Icommon/include -Icommon -c common/$f.c \
        -o "$TMP/cc.o" && echo ok >>"$TMP/compiles"
    done
  done
) &
BG+=($!)

# start_sessions: the system session and one attach per workload; their ids in $TMP/live
# (the clients read it), the system session's in SYS; top (re)started on it.
start_sessions() {
  SYS=$(ok "{\"cmd\":\"system\"$FREQ}" | jget 'd["session"]["id"]')
  local live=$SYS p
  for p in "${W[@]}"; do
    live="$live $(ok "{\"cmd\":\"attach\",\"pid\":$p$FREQ}" | jget 'd["session"]["id"]')"
  done
  STARTED=$(now)
  echo "$live" >"$TMP/live.tmp"
  mv "$TMP/live.tmp" "$TMP/live"
  $TM kill-server 2>/dev/null || true
  RUN=$((RUN + 1))
  TM="tmux -L canopy-soak-$$-$RUN"
  $TM new-session -d -x 120 -y 30 \
    "env CANOPY_SOCKET=$CANOPY_SOCKET TERM=xterm-256color ASAN_OPTIONS=$ASAN_OPTIONS $CANOPY_BIN top $SYS; echo TOP-EXITED; sleep 100000"
}

daemon_up
start_sessions
$PY "$I/daemon_watch.py" watch "$SOCK" "$TMP/d.pid" "$TMP/watch.jsonl" 2 &
BG+=($!)

# ---- Ten clients: each query's start (ms since T0), exit status, wall ms, kind, and the
# wall ms of `canopy --version` just before it: the client's own start-up under this load
# (an ASan binary's is ~100 ms), which is not canopyd's to answer for.
for c in 1 2 3 4 5 6 7 8 9 10; do
  (
    trap - EXIT
    n=0
    while :; do
      read -r -a live <"$TMP/live" || true
      b=$(now)
      "$CANOPY_BIN" --version >/dev/null
      t=$(now)
      b=$((t - b))
      if [ $((c % 2)) = 1 ]; then
        k=tree
        s=${live[$(((c + n) % ${#live[@]}))]}
        "$CANOPY_BIN" tree "$s" >/dev/null 2>>"$TMP/client.err" && rc=0 || rc=$?
      else
        k=sessions
        "$CANOPY_BIN" sessions >/dev/null 2>>"$TMP/client.err" && rc=0 || rc=$?
      fi
      echo "$((t - T0)) $rc $(($(now) - t)) $k $b" >>"$TMP/q.$c"
      n=$((n + 1))
      sleep 1
    done
  ) &
  BG+=($!)
done

# ---- Restarts -------------------------------------------------------------------------
# Evenly spaced; in a run of 2 minutes or less at 60% and 80% of it, so that the first
# canopyd lives past its warm-up long enough to judge its resources (the later ones are
# too short to: daemon_watch.py skips them).
if [ "$MIN" -le 2 ]; then NR=2; else NR=$((MIN / 5)); fi
: >"$TMP/windows"
restarts=0
for ((r = 1; r <= NR; r++)); do
  at=$((r * DUR / (NR + 1)))
  [ "$MIN" -gt 2 ] || at=$(((r + 2) * DUR / 5))
  while [ "$(el)" -lt "$at" ]; do sleep 1; done
  kill -0 $D_PID 2>/dev/null || fail "canopyd died before restart $r"
  ! $TM capture-pane -p | grep -q TOP-EXITED || fail "canopy top exited before restart $r: $($TM capture-pane -p | tail -5)"
  before=$(ids)
  sig=TERM
  [ $((r % 2)) = 1 ] || sig=KILL
  # A SIGKILL keeps what the last checkpoint saved: the sessions get 3 checkpoints first.
  while [ $sig = KILL ] && [ $(($(now) - STARTED)) -lt 16000 ]; do sleep 1; done
  w0=$(now)
  stop_daemon $sig
  w1=$(now)
  daemon_up
  w2=$(now)
  after=$(ids)
  for id in $before; do
    [[ " $after " == *" $id "* ]] && continue
    grep -q "deleting session $id of" "$TMP/canopyd.log" ||
      fail "restart $r ($sig): session $id is gone (before: $before; after: $after)"
  done
  start_sessions
  echo "$((w0 - T0)) $(($(now) - T0))" >>"$TMP/windows"
  restarts=$((restarts + 1))
  echo "soak: restart $r by SIG$sig at $(((w0 - T0) / 1000)) s: stopped in $((w1 - w0)) ms," \
    "answering hello $((w2 - w1)) ms later, sessions started again $(($(now) - w2)) ms later;" \
    "$(wc -w <<<"$before") sessions before, $(wc -w <<<"$after") after" >&2
done
while [ "$(el)" -lt "$DUR" ]; do sleep 1; done
! $TM capture-pane -p | grep -q TOP-EXITED || fail "canopy top exited: $($TM capture-pane -p | tail -5)"
wait $CH || true # it stops by itself at DUR s; its counts go into the summary
kill "${BG[@]}" 2>/dev/null || true
wait "${BG[@]}" 2>/dev/null || true
BG=()
final=$(ok '{"cmd":"status"}')
stop_daemon TERM
! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|canopyd: fatal' "$TMP/canopyd.log" ||
  fail "sanitizer report or fatal signal in canopyd's log"

# ---- Summary ---------------------------------------------------------------------------
echo "== canopyd over $MIN min (daemon_watch.py: one row per ~10% of the run)"
K=1 C=16
[ "$SLOW" = 1 ] || K=4 C=64 # ASan (test_daemon_churn.sh says why)
rc_watch=0
$PY "$I/daemon_watch.py" report "$TMP/watch.jsonl" 30 --own-mb $C --own-k $K --fds 20 || rc_watch=$?
cat "$TMP"/q.* >"$TMP/queries"
$PY - "$TMP/queries" "$TMP/windows" $((50 * SLOW)) "$TMP/watch.jsonl" <<'PY' || fail "queries"
import json, os, statistics, sys
sys.path.insert(0, os.environ["I"])
import daemon_watch
q = [l.split() for l in open(sys.argv[1])]
win = [tuple(map(int, l.split())) for l in open(sys.argv[2])]
st = daemon_watch.stretch([json.loads(l) for l in open(sys.argv[4])])
limit = int(sys.argv[3]) * max(1.0, st)
def in_window(t, ms):
    return any(a - 3000 <= t + ms and t <= b + 3000 for a, b in win)
bad = [x for x in q if x[1] != "0" and not in_window(int(x[0]), int(x[2]))]
good = [x for x in q if x[1] == "0"]
print("== queries: %d (%d failed inside restart windows, %d outside); wall ms of the"
      " client, and less its start-up (canopyd's part)" % (
          len(q), sum(1 for x in q if x[1] != "0") - len(bad), len(bad)))
def row(name, ms):
    ms = sorted(ms)
    print("   %-18s n=%-5d median %5d ms  p95 %5d ms  max %5d ms" % (
        name, len(ms), statistics.median(ms), ms[int(0.95 * (len(ms) - 1))], ms[-1]))
for kind in ("tree", "sessions", None):
    sel = [x for x in good if kind is None or x[3] == kind]
    if sel:
        row("%s wall" % (kind or "all"), [int(x[2]) for x in sel])
        row("%s canopyd" % (kind or "all"), [max(0, int(x[2]) - int(x[4])) for x in sel])
    if kind is None:
        row("client start-up", [int(x[4]) for x in good])
if bad:
    sys.exit("queries failed outside restart windows: %s" % bad[:5])
part = statistics.median([max(0, int(x[2]) - int(x[4])) for x in good]) if good else None
print("   canopyd's loop thread waited for a CPU %.0f%% of the time it ran: wall times"
      " stretched x%.1f; bound %d ms x %.1f = %.0f ms" % (100 * (st - 1), st, int(sys.argv[3]),
                                                         max(1.0, st), limit))
if part is None or part > limit:
    sys.exit("canopyd's part of the query median: %s ms, over %.0f ms" % (part, limit))
PY
echo "== lost records (status, last canopyd): $(jget 'd["lost"]' <<<"$final"); state dir" \
  "$(jget 'd["state_dir_bytes"]' <<<"$final") bytes of $(sed -n 's/^state_dir_max = //p' "$TMP/canopyd.conf");" \
  "restarts: $restarts" \
  "($NR planned); evicted by the state dir's quota: $(grep -c 'deleting session' "$TMP/canopyd.log" || true);" \
  "compiles: $(wc -l <"$TMP/compiles" 2>/dev/null || echo 0); churn: $(cat "$TMP/churn.json" 2>/dev/null || echo '(killed)')"
[ $rc_watch = 0 ] || fail "resources grew after warm-up"
echo PASS
