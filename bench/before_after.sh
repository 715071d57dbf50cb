#!/usr/bin/env bash
# before_after.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]: the hot-path benches of two Release
# builds (say, the commit before a refactor and the one after), run alternately ROUNDS
# times (default 2) so that load drifts hit both sides alike. Prints, per bench and round,
# the figure docs/performance.md quotes for it:
#   ingest      bench_ingest, batched, steady state per CPU second (samples/s)
#   tree        bench_tree, 10 M samples / 1 M stacks, warm, thread CPU (ms)
#   round trip  bench_daemon tree, `canopy tree` round trip, raw payload (median ms)
#   sampler     bench_sampler on wl_deep_fp and wl_deep_nofp, fp/auto/dwarf (us/sample)
# Build each side with: cmake -S SRC -B DIR -DCMAKE_BUILD_TYPE=Release (its tests/workloads/
# are the sampler's targets)
set -euo pipefail
before=${1:?usage: before_after.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]}
after=${2:?usage: before_after.sh BEFORE_BUILD AFTER_BUILD [ROUNDS]}
rounds=${3:-2}

ingest() { "$1/bench/bench_ingest" | grep -m1 'batched.*per CPU second\|per CPU second' | awk '{print $(NF-5)}'; }
tree() {
  BENCH_SKIP_COLD=1 BENCH_TREE_ONLY=1 "$1/bench/bench_tree" | awk '$1 == "tree" && $2 == "cpu" {print $3; exit}'
}
round_trip() {
  BENCH_REPS=21 "$1/bench/bench_daemon" tree | grep 'canopy tree round trip' |
    sed -E 's/.*\((\w+), raw payload, ([a-z_]+)\): median ([0-9.]+) ms.*/\1\/\2 \3/' | tr '\n' ' '
}
sampler() {
  local b=$1 out="" wl mode
  for wl in wl_deep_fp wl_deep_nofp; do
    for mode in fp auto dwarf; do
      out+="$wl/$mode $("$b/bench/bench_sampler" --unwind $mode --freq 999 -- \
        "$b/tests/workloads/$wl" 3 0 2>/dev/null | awk '/us\/sample/ {v=$(NF-1)} END {print v}') "
    done
  done
  echo "$out"
}

printf 'load average at start: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
for bench in ingest tree round_trip sampler; do
  for ((r = 1; r <= rounds; r++)); do
    for side in before after; do
      dir=$before
      [ $side = after ] && dir=$after
      printf '%-10s round %d %-6s %s\n' "$bench" "$r" "$side" "$($bench "$dir")"
    done
  done
done
printf 'load average at end: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
