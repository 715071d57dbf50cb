#!/usr/bin/env bash
# What one tree query costs canopyd's loop (issue 22: the 99 Hz goal while the session is
# read): a whole-system session at HZ while the project builds back to back; then, in
# pairs of WINDOW-second windows, one without a query and one that starts with a
# `canopy tree` of the session (its text saved, its size printed), each window's loop
# thread CPU (schedstat, ns) and minor faults (the copy-on-write faults the query's fork
# costs the loop). Prints a line per pair and the medians.
#
#   bench/query_cost.sh [--build DIR] [-F HZ] [--pairs N] [--window S] [--warm S]
# DIR defaults to build-rel (DIR/daemon/canopyd, DIR/client/canopy). Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-rel FREQ=99 PAIRS=10 WINDOW=5 WARM=20
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift ;;
    -F) FREQ=$2; shift ;;
    --pairs) PAIRS=$2; shift ;;
    --window) WINDOW=$2; shift ;;
    --warm) WARM=$2; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "query_cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "query_cost.sh: needs root (a system session)" >&2; exit 2; }
export CANOPY_BIN=$BUILD/client/canopy CANOPYD_BIN=$BUILD/daemon/canopyd
source "$ROOT/tests/integration/lib.sh" # TMP, start_canopyd, finish_tmp
W=$TMP
D_PID= BP=
cleanup() {
  local rc=$?
  [ -z "$BP" ] || kill "$BP" 2>/dev/null || true
  pkill -f "make -C $W/bld" 2>/dev/null || true
  [ -z "$D_PID" ] || kill "$D_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap cleanup EXIT
export CANOPY_SOCKET=$W/d.sock
start_canopyd
D=$D_PID
"$BUILD/client/canopy" system -F "$FREQ" --name sys >/dev/null
mkdir "$W/src"
git -C "$ROOT" archive HEAD | tar -x -C "$W/src"
(
  while :; do
    rm -rf "$W/bld"
    env -u CMAKE_C_COMPILER_LAUNCHER -u CCACHE_DIR cmake -S "$W/src" -B "$W/bld" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null 2>&1 && make -C "$W/bld" -j2 >/dev/null 2>&1 || true
  done
) &
BP=$!
sleep "$WARM"
# the loop thread's minor faults and run time (ns)
loop_stat() { echo "$(awk '{print $10}' /proc/$D/task/$D/stat) $(awk '{print $1}' /proc/$D/task/$D/schedstat)"; }
NQ=() WQ=()
for i in $(seq "$PAIRS"); do
  read -r f0 c0 < <(loop_stat); sleep "$WINDOW"; read -r f1 c1 < <(loop_stat)
  read -r g0 e0 < <(loop_stat)
  "$BUILD/client/canopy" tree sys >"$W/tree.txt"
  sleep "$WINDOW"
  read -r g1 e1 < <(loop_stat)
  n=$(((c1 - c0) / 1000)) q=$(((e1 - e0) / 1000))
  NQ+=("$n") WQ+=("$q")
  printf 'pair %d: no query %d us, %d faults; with a query (%d bytes) %d us, %d faults\n' \
    "$i" "$n" $((f1 - f0)) "$(stat -c %s "$W/tree.txt")" "$q" $((g1 - g0))
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf 'median loop CPU per %s s window: %s us without a query, %s us with one\n' "$WINDOW" \
  "$(median "${NQ[@]}")" "$(median "${WQ[@]}")"
