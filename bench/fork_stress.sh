#!/usr/bin/env bash
# Query workers forked while canopyd's symbolizer loads objects (the twenty-first session:
# under ASan, a worker forked while another thread of canopyd held one of the allocator's
# locks hung at its first malloc until the wall-time bound killed it). A whole-system
# session at 999 Hz while a loop runs every program of /usr/bin and gcc's libexec with
# --version (each a new object for the symbolizer to load), and CLIENTS `canopy tree`
# loops on the session, with query_cpu = 1s (so a stuck worker ends after 4 s). Prints the
# queries, those that failed, and the stack of every worker still alive after 2 s (a save's
# writer may be one, legitimately).
#
#   bench/fork_stress.sh [--build DIR] [--seconds N] [--clients N]
# DIR defaults to build-asan (the sanitized build is the one at risk). Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-asan SECS=300 CLIENTS=4
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift ;;
    --seconds) SECS=$2; shift ;;
    --clients) CLIENTS=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fork_stress.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "fork_stress.sh: needs root (a system session)" >&2; exit 2; }
command -v eu-stack >/dev/null || { echo "fork_stress.sh: needs eu-stack (elfutils)" >&2; exit 2; }
export CANOPY_BIN=$BUILD/client/canopy CANOPYD_BIN=$BUILD/daemon/canopyd
source "$ROOT/tests/integration/lib.sh" # TMP, start_canopyd, finish_tmp
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0:quarantine_size_mb=32:allocator_release_to_os_interval_ms=500"
W=$TMP
D_PID= PIDS=()
cleanup() {
  local rc=$?
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -z "$D_PID" ] || kill "$D_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap cleanup EXIT
export CANOPY_SOCKET=$W/d.sock
printf 'query_cpu = 1s\nquery_workers = 4\n' >"$W/canopyd.conf"
start_canopyd --config "$W/canopyd.conf"
D=$D_PID
S=$("$CANOPY_BIN" system -F 999 --name stress)
END=$(($(date +%s) + SECS))
mkdir "$W/cwd"
( # new objects all the time: every program once, over and over (run in a scratch dir)
  cd "$W/cwd"
  while [ "$(date +%s)" -lt $END ]; do
    for b in /usr/bin/* /usr/lib/gcc/x86_64-linux-gnu/*/*; do
      [ -f "$b" ] && [ -x "$b" ] || continue
      timeout 0.2 "$b" --version </dev/null >/dev/null 2>&1 || true
      [ "$(date +%s)" -lt $END ] || break
    done
  done
) &
PIDS+=($!)
Q=()
for k in $(seq "$CLIENTS"); do
  (
    n=0 f=0
    while [ "$(date +%s)" -lt $END ]; do
      t0=$(date +%s%N)
      if ! "$CANOPY_BIN" tree "$S" >/dev/null 2>>"$W/q$k.err"; then
        f=$((f + 1))
        echo "failed after $((($(date +%s%N) - t0) / 1000000)) ms" >>"$W/q$k.err"
      fi
      n=$((n + 1))
    done
    echo "$n $f" >"$W/q$k.n"
  ) &
  Q+=($!)
done
( # the stack of every worker alive for 2 s or more, once
  while [ "$(date +%s)" -lt $END ]; do
    for c in $(pgrep -P "$D" || true); do
      et=$(ps -o etimes= -p "$c" 2>/dev/null || echo 0)
      [ "${et// /}" -ge 2 ] && [ ! -e "$W/stack.$c" ] && eu-stack -p "$c" >"$W/stack.$c" 2>&1 || true
    done
    sleep 0.5
  done
) &
PIDS+=($!)
wait "${Q[@]}"
cat "$W"/q*.n | awk '{n += $1; f += $2} END {print "queries", n, "failed", f}'
cat "$W"/q*.err | sort | uniq -c | sort -rn | head -5
for s in "$W"/stack.*; do
  [ -e "$s" ] || continue
  echo "== worker ${s##*.} after 2 s:"
  grep -E '^#([0-9]|1[0-2]) ' "$s" | sed 's/(.*//' | cut -c1-120
done
echo "canopyd's log:"
cat "$W/d.log"
