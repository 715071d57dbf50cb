#!/usr/bin/env bash
# The fleet benchmark (docs/perf-fleet.md): starts a ClickHouse server on free loopback
# ports, creates the schema, pushes a simulated fleet through the real push path
# (bench_fleet: cn_fleet_collect per host and interval, one pusher: spool, gzip, HTTP),
# then measures ClickHouse's bytes per host-hour and `canopy fleet tree` latency for one
# host-hour and for the whole fleet (best of 3, output to /dev/null through the whole
# renderer), with the load average beside each figure.
#   bench/fleet.sh BUILD_DIR [HOSTS [MINUTES [INTERVAL_S [STACKS]]]]
# FLEET_BENCH_DIR=DIR keeps ClickHouse's data dir in DIR: a second run with the same
# parameters skips the insert (100 host-hours take ~15 min to insert) and only measures.
set -euo pipefail
build=${1:?usage: bench/fleet.sh BUILD_DIR [HOSTS [MINUTES [INTERVAL_S [STACKS]]]]}
hosts=${2:-100} minutes=${3:-60} interval=${4:-10} stacks=${5:-6000}
fail() { echo "fleet.sh: $*" >&2; exit 1; }
source "$(dirname "$0")/../tests/integration/clickhouse_lib.sh"
if [ -n "${FLEET_BENCH_DIR:-}" ]; then
  TMP=$FLEET_BENCH_DIR
  mkdir -p "$TMP"
  trap 'ch_stop B' EXIT
  cfg=$TMP/ch-B/config.xml
  if [ -f "$cfg" ]; then # the kept server's ports
    port() { sed -n "s|.*<$1>\([0-9]*\)</$1>.*|\1|p" "$cfg"; }
    CH_B_HTTP=$(port http_port) CH_B_TCP=$(port tcp_port) CH_B_INTER=$(port interserver_http_port)
  fi
else
  TMP=$(mktemp -d)
  trap 'ch_stop B; rm -rf "$TMP"' EXIT
fi
ch_start B
url=$(ch_url B)
canopy=$build/client/canopy
params="$hosts $minutes $interval $stacks"
if [ "$(cat "$TMP/populated" 2>/dev/null)" = "$params" ]; then
  echo "fleet.sh: reusing the fleet in $TMP ($params)"
  # Also the migration of data kept by an older canopy (docs/fleet.md "Upgrading").
  s0=$(date +%s.%N)
  "$canopy" fleet init --url "$url" >/dev/null
  echo "fleet init (migrates an older schema): $(echo "$(date +%s.%N) - $s0" | bc) s ($(uptime | sed 's/.*load average: /load /'))"
else
  ch_query B "DROP DATABASE IF EXISTS canopy" >/dev/null
  rm -f "$TMP/populated"
  rm -rf "$TMP/spool"
  "$canopy" fleet init --url "$url" >/dev/null
  echo "insert: uptime $(uptime)"
  if "$build/bench/bench_fleet" "$url" "$TMP/spool" "$hosts" "$minutes" "$interval" "$stacks"; then
    echo "$params" >"$TMP/populated"
  else
    echo "fleet.sh: bench_fleet reported dropped rows or an unflushed spool" >&2
  fi
fi
# Stack definitions written by several hosts fold into one (ReplacingMergeTree); the
# sample parts are counted as ClickHouse left them (merges compress about alike).
ch_query B "OPTIMIZE TABLE canopy.stacks FINAL" >/dev/null || true
ch_query B "SELECT table, sum(rows), sum(data_compressed_bytes), sum(data_uncompressed_bytes),
            count() FROM system.parts WHERE database = 'canopy' AND active GROUP BY table
            ORDER BY table FORMAT TabSeparated" |
  awk -v h="$hosts" -v m="$minutes" '{ printf "%-15s %12d rows %10.1f MiB compressed (%.1f MiB raw), %.2f MiB per host-hour, %d parts\n", $1, $2, $3 / 1048576, $4 / 1048576, $3 / 1048576 / h / (m / 60), $5 }'
best() { # best of 3 wall seconds of "$@"
  local b=999 t0 t1 d
  for _ in 1 2 3; do
    t0=$(date +%s.%N); "$@" >/dev/null; t1=$(date +%s.%N)
    d=$(echo "$t1 - $t0" | bc); (( $(echo "$d < $b" | bc) )) && b=$d
  done
  echo "$b"
}
load() { uptime | sed 's/.*load average: /load /'; }
# Windows relative to the data (which starts MINUTES before the insert), as if now were
# its end: --last 1h and --last 10m (open end), 90 minutes with odd edges, and one with
# partial hours at both ends (every tier: hourly and 10-minute rollups, raw edges).
read -r t0 t1 < <(ch_query B "SELECT toUInt32(min(time)), toUInt32(max(time)) FROM canopy.samples FORMAT TabSeparated")
tree() { "$canopy" fleet tree --url "$url" "$@"; }
echo "fleet tree, one host-hour:          $(best tree --where host=host000 --format json -o /dev/null) s ($(load))"
echo "fleet tree, one host, text:         $(best tree --where host=host000) s ($(load))"
echo "fleet tree, whole fleet:            $(best tree --format json -o /dev/null) s ($(load))"
echo "fleet tree, whole fleet, --group-by host --depth 4 (text): $(best tree --group-by host --depth 4) s ($(load))"
echo "fleet tree, fleet's last 1 h:      $(best tree --from $((t1 + 10 - 3600)) --format json -o /dev/null) s ($(load))"
echo "fleet tree, fleet's last 10 min:    $(best tree --from $((t1 + 10 - 600)) --format json -o /dev/null) s ($(load))"
echo "fleet tree, fleet, 90 min odd edges: $(best tree --from $((t0 - 1793)) --to $((t0 + 3607)) --format json -o /dev/null) s ($(load))"
[ $((t1 - t0)) -gt 1200 ] &&
  echo "fleet tree, fleet, partial edges:   $(best tree --from $((t0 + 300)) --to $((t1 - 300)) --format json -o /dev/null) s ($(load))"
echo "fleet tree, whole fleet, --raw:     $(best tree --raw --format json -o /dev/null) s ($(load))"
echo "fleet labels, whole fleet:          $(best "$canopy" fleet labels --url "$url") s ($(load))"
