#!/usr/bin/env bash
# The fleet benchmark (docs/perf-fleet.md): starts a ClickHouse server on free loopback
# ports with a temporary data dir, creates the schema, pushes a simulated fleet through
# the real push path (bench_fleet: cn_fleet_collect per host and interval, one pusher:
# spool, gzip, HTTP), then measures ClickHouse's bytes per host-hour and `canopy fleet
# tree` latency for one host-hour and for the whole fleet (best of 3, output to
# /dev/null through the whole renderer).
#   bench/fleet.sh BUILD_DIR [HOSTS [MINUTES [INTERVAL_S [STACKS]]]]
set -euo pipefail
build=${1:?usage: bench/fleet.sh BUILD_DIR [HOSTS [MINUTES [INTERVAL_S [STACKS]]]]}
hosts=${2:-100} minutes=${3:-60} interval=${4:-10} stacks=${5:-6000}
TMP=$(mktemp -d)
fail() { echo "fleet.sh: $*" >&2; exit 1; }
source "$(dirname "$0")/../tests/integration/clickhouse_lib.sh"
trap 'ch_stop B; rm -rf "$TMP"' EXIT
ch_start B
url=$(ch_url B)
canopy=$build/client/canopy
"$canopy" fleet init --url "$url" >/dev/null
"$build/bench/bench_fleet" "$url" "$TMP/spool" "$hosts" "$minutes" "$interval" "$stacks" ||
  echo "fleet.sh: bench_fleet reported dropped rows or an unflushed spool" >&2
# Stack definitions written by several hosts fold into one (ReplacingMergeTree); the
# sample parts are counted as ClickHouse left them (merges compress about alike).
ch_query B "OPTIMIZE TABLE canopy.stacks FINAL" >/dev/null || true
ch_query B "SELECT table, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes)
            FROM system.parts WHERE database = 'canopy' AND active GROUP BY table
            ORDER BY table FORMAT TabSeparated" |
  awk -v h="$hosts" -v m="$minutes" '{ printf "%-8s %12d rows %10.1f MiB compressed (%.1f MiB raw), %.2f MiB per host-hour\n", $1, $2, $3 / 1048576, $4 / 1048576, $3 / 1048576 / h / (m / 60) }'
best() { # best of 3 wall seconds of "$@"
  local b=999 t0 t1 d
  for _ in 1 2 3; do
    t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
    d=$(echo "$t1 - $t0" | bc); (( $(echo "$d < $b" | bc) )) && b=$d
  done
  echo "$b"
}
echo "fleet tree, one host-hour:   $(best "$canopy" fleet tree --url "$url" --where host=host000 --format json -o /dev/null) s"
echo "fleet tree, one host, text:  $(best "$canopy" fleet tree --url "$url" --where host=host000) s"
echo "fleet tree, whole fleet:     $(best "$canopy" fleet tree --url "$url" --format json -o /dev/null) s"
echo "fleet tree, fleet --last 10m: $(best "$canopy" fleet tree --url "$url" --last 10m --format json -o /dev/null) s"
