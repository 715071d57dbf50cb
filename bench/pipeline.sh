#!/usr/bin/env bash
# End-to-end cost per sample: canopy's whole pipeline (sample, unwind, intern, symbolize,
# build and print the tree) against perf's (perf record, then perf report), on the same
# workload at the same frequency. Prints CPU microseconds per sample for each.
#   [REPS=N] [CASES="canopy-fp perf-report-fp ..."] bench/pipeline.sh BUILD_DIR [ROUNDS] [FREQ]
# The workload is started first and both profilers attach to it (canopy in-process:
# `canopy tree --pid PID --no-daemon`; `perf record -p PID`), so each profiler's CPU is
# measured alone, as perf stat's task-clock of its own process (nanosecond resolution; no
# subtraction of the workload's CPU, whose run-to-run noise would swamp fp's cost).
# perf's cost is `perf record`'s CPU plus `perf report`'s. Each pipeline runs REPS
# (default 5) pairs of runs, ROUNDS and 3×ROUNDS long: "us/sample" is the median marginal
# cost (Δcpu / Δsamples), so start-up costs (loading symbols, perf's session setup)
# cancel; "all-in us" is the long run's total per sample.
set -euo pipefail
build=${1:?usage: bench/pipeline.sh BUILD_DIR [ROUNDS] [FREQ]}
rounds=${2:-80}
freq=${3:-999}
wl=$build/tests/workloads/wl_shares_fp
canopy=$build/client/canopy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/bench_lib.sh"

# cpu_s CMD...: runs CMD, writes its CPU seconds to $tmp/cpu and its stdout to $tmp/out.
# The CPU time is perf stat's task-clock of CMD (its threads included).
cpu_s() {
  perf stat -x, -e task-clock -o "$tmp/stat" -- "$@" >"$tmp/out" 2>"$tmp/err"
  task_clock_ms "$tmp/stat" | awk '{ print $1 / 1000 }' >"$tmp/cpu"
  [ -s "$tmp/cpu" ] || { echo "pipeline.sh: no task-clock from perf stat" >&2; exit 1; }
}

# start_wl ROUNDS: starts the workload in the background; its pid in $wpid
start_wl() {
  "$wl" --rounds "$1" >"$tmp/wl.out" 2>&1 &
  wpid=$!
}

# canopy_run UNWIND ROUNDS: prints "samples cpu_seconds" of canopy's own work
canopy_run() {
  start_wl "$2"
  cpu_s "$canopy" tree --pid "$wpid" --no-daemon -F "$freq" --unwind "$1" --duration 10m
  wait "$wpid"
  local samples
  samples=$(sed -n 's/.*total \([0-9]*\) samples.*/\1/p' "$tmp/out" | head -1)
  echo "$samples $(cat "$tmp/cpu")"
}

# perf_run MODE[:report] ROUNDS: the same for perf record + perf report (with ":report",
# perf report alone: the cost of turning the same recorded samples into a report)
perf_run() {
  local cg=(-g) rec rep samples
  [ "${1%:*}" = dwarf ] && cg=(--call-graph dwarf,8192)
  start_wl "$2"
  cpu_s perf record -q -e cpu-clock -F "$freq" "${cg[@]}" -p "$wpid" -o "$tmp/perf.data"
  wait "$wpid"
  rec=$(cat "$tmp/cpu")
  cpu_s perf report -i "$tmp/perf.data" --stdio
  rep=$(cat "$tmp/cpu")
  samples=$(perf script -i "$tmp/perf.data" -F period 2>/dev/null | wc -l)
  [ "${1#*:}" = report ] && rec=0
  echo "$samples $(awk -v r="$rec" -v p="$rep" 'BEGIN { print r + p }')"
}

# measure NAME FN ARG: REPS pairs of runs; prints the median marginal cost per sample
# (with min and max) and the median cost per sample of the long run, fixed costs included.
measure() {
  local name=$1 fn=$2 arg=$3 i
  : >"$tmp/pairs"
  for ((i = 0; i < reps; i++)); do
    echo "$($fn "$arg" "$rounds") $($fn "$arg" $((rounds * 3)))" >>"$tmp/pairs"
  done
  awk '{ printf "%.6f %.6f\n", ($4 - $2) * 1e6 / ($3 - $1), $4 * 1e6 / $3 }' "$tmp/pairs" |
    sort -g >"$tmp/m"
  local mid=$(((reps + 1) / 2))
  awk -v name="$name" -v mid="$mid" '
    { m[NR] = $1 } NR == mid { med = $1 } NR == 1 { lo = $1 } { hi = $1 }
    END { printf "%-24s %12.2f %8.2f %8.2f", name, med, lo, hi }' "$tmp/m"
  sort -g -k2 "$tmp/m" | awk -v mid="$mid" 'NR == mid { printf " %12.2f\n", $2 }'
}

reps=${REPS:-5}
# CASES (optional): which pipelines to run, e.g. CASES="canopy-fp perf-report-fp"
cases=${CASES:-"canopy-fp canopy-auto canopy-dwarf perf-fp perf-report-fp perf-dwarf perf-report-dwarf"}
want() { [[ " $cases " == *" $1 "* ]]; }
printf '%-24s %12s %8s %8s %12s\n' "pipeline ($reps reps)" "us/sample" "min" "max" "all-in us"
for unwind in fp auto dwarf; do
  want "canopy-$unwind" && measure "canopy $unwind" canopy_run "$unwind"
done
for mode in fp dwarf; do
  want "perf-$mode" && measure "perf record+report $mode" perf_run "$mode"
  want "perf-report-$mode" && measure "perf report $mode" perf_run "$mode:report"
done
exit 0
