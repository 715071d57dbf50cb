#!/usr/bin/env bash
# canopyd's added CPU for the fleet push (docs/perf-fleet.md): a ClickHouse server on free
# loopback ports, canopyd pushing every 10 s, four 2-thread workloads (8 busy threads)
# attached at 99 Hz for SECONDS; then the push's CPU per interval: the collection on the
# event loop (status: collect_ms_total) and the pusher thread "cn-fleet" (/proc's
# utime + stime), against one core.
#   bench/fleet_daemon.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=${1:?usage: bench/fleet_daemon.sh BUILD_DIR [SECONDS]}
secs=${2:-120}
TMP=$(mktemp -d)
fail() { echo "fleet_daemon.sh: $*" >&2; exit 1; }
source "$(dirname "$0")/../tests/integration/clickhouse_lib.sh"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; ch_stop D; rm -rf "$TMP"' EXIT
ch_start D
url=$(ch_url D)
canopy=$build/client/canopy
"$canopy" fleet init --url "$url" >/dev/null
printf 'fleet_url = %s\nfleet_interval = 10s\n' "$url" >"$TMP/d.conf"
"$build/daemon/canopyd" --socket "$TMP/d.sock" --state-dir "$TMP/state" --config "$TMP/d.conf" \
  2>"$TMP/d.log" &
d=$!
pids+=($d)
for ((i = 0; i < 100; i++)); do [ -S "$TMP/d.sock" ] && break; sleep 0.1; done
for _ in 1 2 3 4; do
  "$build/tests/workloads/wl_threads_fp" "$((secs + 5))" 0 >/dev/null &
  pids+=($!)
  "$canopy" attach $! --socket "$TMP/d.sock" -F 99 >/dev/null
done
sleep "$secs"
tid=$(grep -l '^cn-fleet$' /proc/$d/task/*/comm | head -1 | cut -d/ -f5)
tick=$(getconf CLK_TCK)
read -r ut st < <(awk '{print $14, $15}' "/proc/$d/task/$tid/stat")
read -r dut dst < <(awk '{print $14, $15}' "/proc/$d/stat")
"$canopy" status --socket "$TMP/d.sock" --format json >"$TMP/st.json"
python3 - "$TMP/st.json" "$secs" "$ut" "$st" "$dut" "$dst" "$tick" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
secs, ut, st, dut, dst, tick = (float(x) for x in sys.argv[2:])
f = d["fleet"]
intervals = secs / 10
collect = f["collect_ms_total"] / intervals
pusher = (ut + st) / tick * 1000 / intervals
daemon = (dut + dst) / tick * 1000 / intervals
print(f"{secs:.0f} s, {intervals:.0f} intervals, {f['rows_sent']} rows sent, samples/s {d['samples_per_s']:.0f}")
print(f"per 10 s interval: collect {collect:.2f} ms (event loop), pusher thread {pusher:.2f} ms,"
      f" = {100 * (collect + pusher) / 10000:.3f}% of one core; all of canopyd {daemon:.1f} ms"
      f" ({100 * daemon / 10000:.2f}%)")
PY
