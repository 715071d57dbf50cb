#!/usr/bin/env bash
# Overhead of sampling on the target: wl_shares_fp's own loop time (its CPU time, cpu_ms,
# for a fixed number of rounds: sampling interrupts are charged to it, other load is not) without profiling, under canopy's sampler (fp, auto, dwarf) and
# under `perf record` at the same settings, at each frequency. Runs are interleaved
# (every configuration once per iteration), RUNS iterations; prints median and spread
# (min..max, and the standard deviation) per cell, and the slowdown against no profiling.
#   bench/overhead.sh [BUILD_DIR] [RUNS] [ROUNDS] [FREQS...]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-10}
ROUNDS=${3:-40}
shift 3 2>/dev/null || true
FREQS=${*:-99 999 4999}
WL="$BUILD/tests/workloads/wl_shares_fp"
BENCH="$BUILD/bench/bench_sampler"
[ -x "$WL" ] && [ -x "$BENCH" ] || { echo "build $WL and $BENCH first" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

configs="none fp auto dwarf perf-fp perf-dwarf"
run() { # config freq -> total_ms
  local cfg=$1 f=$2 out
  case $cfg in
    perf-fp) out=$(perf record -q -e cpu-clock -F "$f" -g -o "$TMP/p.data" -- "$WL" --rounds "$ROUNDS" 2>/dev/null) ;;
    perf-dwarf) out=$(perf record -q -e cpu-clock -F "$f" --call-graph dwarf,8192 -o "$TMP/p.data" -- "$WL" --rounds "$ROUNDS" 2>/dev/null) ;;
    *) out=$("$BENCH" --run "$cfg" "$f" -- "$WL" --rounds "$ROUNDS") ;;
  esac
  echo "$out" | awk '/cpu_ms/ { print $8 }'
}

for f in $FREQS; do
  for i in $(seq "$RUNS"); do
    for c in $configs; do
      echo "$c $(run "$c" "$f")" >>"$TMP/f$f"
    done
  done
  echo "== $f Hz, $RUNS interleaved runs of $ROUNDS rounds (loop CPU time, ms)"
  awk -v f="$f" '
    { v[$1, ++n[$1]] = $2 }
    END {
      split("none fp auto dwarf perf-fp perf-dwarf", order, " ")
      for (k = 1; k <= 6; k++) {
        c = order[k]; m = n[c]
        for (i = 1; i <= m; i++) a[i] = v[c, i]
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        med[c] = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
        s = 0; ss = 0; for (i = 1; i <= m; i++) { s += a[i]; ss += a[i] * a[i] }
        sd = sqrt(ss / m - (s / m) ^ 2)
        printf "%-11s median %8.1f  min %8.1f  max %8.1f  sd %6.1f  overhead %+5.2f%%\n", c, med[c], a[1], a[m], sd, 100 * (med[c] / med["none"] - 1)
      }
    }' "$TMP/f$f"
done
