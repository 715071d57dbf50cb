#!/usr/bin/env bash
# Overhead of off-CPU sampling (docs/perf-sampler.md, "Off-CPU overhead"): a fixed amount
# of work done through context switches (bench/wl_switches.c: two threads ping-pong over
# pipes) without profiling, under `canopy run --mode off-cpu` (fp; dwarf with an 8 KiB
# stack copy) and under `perf record -e context-switches -c 1` with the same unwinding
# (-g; --call-graph dwarf,8192), and perf -g with --switch-events (the switch-in records
# canopy also asks for: without them perf records no interval), at two switch rates. Runs are interleaved (every
# configuration once per iteration), RUNS iterations. Per cell: medians of the target's
# own CPU time (user + system: the kernel's work at each sampled switch is charged to the
# switching thread), of the CPU time of everything (target + profiler, /usr/bin/time), the
# extra CPU per switch against no profiling, the switch rate, and the records dropped
# (canopy: lost samples; perf: LOST records, each a run of dropped samples). Wall time is
# not the measure: on an idle-ish VM the wake-up latency of a ping-pong changes with
# whatever else keeps the CPUs awake, profiler included.
#   bench/offcpu_overhead.sh [BUILD_DIR] [RUNS]
set -euo pipefail
BUILD=${1:-build}
RUNS=${2:-10}
WL="$BUILD/bench/wl_switches"
C="$BUILD/client/canopy"
[ -x "$WL" ] && [ -x "$C" ] || { echo "build $WL and $C first" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf is not installed" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is not installed (package time)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# name:rounds:work per round (ns), tuned on a 2-core VM for ~20k and ~100k switches/s.
RATES=${RATES:-"20k:20000:15000 100k:60000:3000"}
configs="none canopy-fp canopy-dwarf perf-fp perf-fp-sw perf-dwarf"
timed() { /usr/bin/time -f "%U %S" -o "$TMP/t" "$@"; }
run() { # config rounds work -> "target_cpu_ms total_cpu_ms switches switches_per_s lost"
  local cfg=$1 r=$2 w=$3 out lost=0
  case $cfg in
    none) out=$(timed "$WL" "$r" "$w") ;;
    canopy-fp | canopy-dwarf)
      out=$(timed "$C" run --no-daemon --mode off-cpu --unwind "${cfg#canopy-}" --stack-size 8192 \
        --format json -o "$TMP/c.json" -- "$WL" "$r" "$w" 2>/dev/null)
      lost=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["lost"])' "$TMP/c.json") ;;
    perf-fp | perf-fp-sw | perf-dwarf)
      local g=-g
      [ "$cfg" = perf-dwarf ] && g="--call-graph=dwarf,8192"
      [ "$cfg" = perf-fp-sw ] && g="-g --switch-events"
      out=$(timed perf record -q -e context-switches -c 1 $g -o "$TMP/p.data" -- "$WL" "$r" "$w" 2>/dev/null)
      lost=$(perf report -i "$TMP/p.data" --stats 2>/dev/null |
        awk '$1 == "LOST" && $2 == "events:" { s += $3 } END { print s + 0 }') ;;
  esac
  echo "$out" | awk -v l="$lost" -v t="$(cat "$TMP/t")" \
    '/elapsed_ms/ { split(t, u, " "); print $4, (u[1] + u[2]) * 1000, $6, $8, l }'
}

for spec in $RATES; do
  IFS=: read -r name r w <<<"$spec"
  for i in $(seq "$RUNS"); do
    for c in $configs; do
      echo "$c $(run "$c" "$r" "$w")" >>"$TMP/$name"
    done
  done
  echo "== ~$name switches/s: $r rounds, 2 x $w ns of work each; $RUNS interleaved runs; medians"
  printf "%-13s %12s %12s %14s %12s %10s %8s\n" config "target CPU" "total CPU" "extra/switch" switches "per s" lost
  awk '
    function med(c, col,   m, i, j, t, a) {
      m = n[c]
      for (i = 1; i <= m; i++) a[i] = v[c, i, col]
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    { k = ++n[$1]; for (f = 2; f <= 6; f++) v[$1, k, f] = $f }
    END {
      split("none canopy-fp canopy-dwarf perf-fp perf-fp-sw perf-dwarf", order, " ")
      base = med("none", 3)
      for (k = 1; k <= 6; k++) {
        c = order[k]; sw = med(c, 4)
        printf "%-13s %9.0f ms %9.0f ms %11.2f us %12d %10d %8d\n", c, med(c, 2), med(c, 3),
          (med(c, 3) - base) * 1000 / sw, sw, med(c, 5), med(c, 6)
      }
    }' "$TMP/$name"
done
