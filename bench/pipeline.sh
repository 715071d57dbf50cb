#!/usr/bin/env bash
# End-to-end cost per sample: canopy's whole pipeline (sample, unwind, intern, symbolize,
# build and print the tree) against perf's (perf record, then perf report), on the same
# workload at the same frequency. Prints CPU microseconds per sample for each.
#   bench/pipeline.sh BUILD_DIR [ROUNDS] [FREQ]
# canopy runs in-process (`canopy run --no-daemon`); its CPU is the run's total (rusage of
# canopy and its waited-for child) minus the workload's own CPU, which the workload
# prints. perf's is `perf record`'s total minus the workload's, plus `perf report`'s.
# Each pipeline runs REPS (default 5) pairs of runs, ROUNDS and 3×ROUNDS long: "us/sample"
# is the median marginal cost (Δcpu / Δsamples), so start-up costs (loading symbols,
# perf's session setup) cancel; "all-in us" is the long run's total per sample.
set -euo pipefail
build=${1:?usage: bench/pipeline.sh BUILD_DIR [ROUNDS] [FREQ]}
rounds=${2:-80}
freq=${3:-999}
wl=$build/tests/workloads/wl_shares_fp
canopy=$build/client/canopy
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# cpu_s CMD...: runs CMD, writes "total_cpu_seconds" to $tmp/cpu and its stdout to $tmp/out
cpu_s() {
  /usr/bin/env time -f '%U %S' -o "$tmp/time" "$@" >"$tmp/out" 2>"$tmp/err"
  awk '{print $1 + $2}' "$tmp/time" >"$tmp/cpu"
}
wl_cpu() { sed -n 's/.*cpu_ms \([0-9.]*\).*/\1/p' "$1" | tail -1 | awk '{print $1 / 1000}'; }

# canopy_run UNWIND ROUNDS: prints "samples cpu_seconds" of canopy's own work
canopy_run() {
  cpu_s "$canopy" run --no-daemon -F "$freq" --unwind "$1" -- "$wl" --rounds "$2"
  local total work samples
  total=$(cat "$tmp/cpu")
  work=$(wl_cpu "$tmp/err")
  [ -n "$work" ] || work=$(wl_cpu "$tmp/out")
  samples=$(sed -n 's/.*total \([0-9]*\) samples.*/\1/p' "$tmp/out" | head -1)
  echo "$samples $(awk -v t="$total" -v w="$work" 'BEGIN { print t - w }')"
}

# perf_run MODE[:report] ROUNDS: the same for perf record + perf report (with ":report",
# perf report alone: the cost of turning the same recorded samples into a report)
perf_run() {
  local cg=(-g) rec work rep samples
  [ "${1%:*}" = dwarf ] && cg=(--call-graph dwarf,8192)
  cpu_s perf record -q -e cpu-clock -F "$freq" "${cg[@]}" -o "$tmp/perf.data" -- "$wl" --rounds "$2"
  rec=$(cat "$tmp/cpu")
  work=$(wl_cpu "$tmp/out")
  [ -n "$work" ] || work=$(wl_cpu "$tmp/err")
  cpu_s perf report -i "$tmp/perf.data" --stdio
  rep=$(cat "$tmp/cpu")
  samples=$(perf script -i "$tmp/perf.data" -F period 2>/dev/null | wc -l)
  [ "${1#*:}" = report ] && rec=$work
  echo "$samples $(awk -v r="$rec" -v w="$work" -v p="$rep" 'BEGIN { print r - w + p }')"
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
printf '%-24s %12s %8s %8s %12s\n' "pipeline ($reps reps)" "us/sample" "min" "max" "all-in us"
for unwind in fp auto dwarf; do
  measure "canopy $unwind" canopy_run "$unwind"
done
for mode in fp dwarf; do
  measure "perf record+report $mode" perf_run "$mode"
  measure "perf report $mode" perf_run "$mode:report"
done
