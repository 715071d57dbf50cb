#!/usr/bin/env bash
# Two canopyd builds side by side, each with a whole-system session, on a machine that is
# idle but for a program with DWARF run every few seconds (by default the python3 in PATH
# reading a JSON file: with pyenv's CPythons, a libpython with 12 MiB of debug sections,
# and libc with libc6-dbg's). Each run of it asks the symbolizer for new addresses (its
# sampled leaves are new), so debug data is needed now and then for as long as the
# machine runs: what canopyd holds then is its steady state (issue 22, "≤ 64 MiB steady").
#
#   bench/debug_idle.sh BUILD_A BUILD_B [-F HZ] [--every S] [--seconds N] [--out DIR]
#                       [--program 'CMD']
# Prints, per daemon: RssAnon and the debug data `status` counts (median and maximum over
# the second half of the run, and at its end), libdw's openings, units indexed and
# releases, and canopyd's CPU over the run. Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
shift 2
FREQ=999 EVERY=5 SECONDS_=180 OUT=
PROGRAM=
while [ $# -gt 0 ]; do
  case $1 in
    -F) FREQ=$2; shift ;;
    --every) EVERY=$2; shift ;;
    --seconds) SECONDS_=$2; shift ;;
    --out) OUT=$2; shift ;;
    --program) PROGRAM=$2; shift ;;
    *) echo "debug_idle.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "debug_idle.sh: a whole-system session needs root" >&2; exit 1; }
source "$ROOT/bench/bench_lib.sh"
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/canopy-dbgidle-XXXXXX)
[ -z "$(ls -A "$OUT" 2>/dev/null)" ] || { echo "debug_idle.sh: --out $OUT is not empty" >&2; exit 2; }
mkdir -p "$OUT"
PIDS=()
cleanup() {
  kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
if [ -z "$PROGRAM" ]; then
  echo '{"a": [1, 2, 3], "b": {"c": "d"}}' >"$OUT/in.json"
  PROGRAM="python3 -c 'import json, sys; json.load(open(sys.argv[1]))' $OUT/in.json"
fi

start_system_daemon "$OUT/a" "$A" "$FREQ" idle
start_system_daemon "$OUT/b" "$B" "$FREQ" idle
cpu0_a=$(cpu_of "$(cat "$OUT/a/pid")") cpu0_b=$(cpu_of "$(cat "$OUT/b/pid")")
t0=$(date +%s)
next_status=$t0
while [ $(($(date +%s) - t0)) -lt "$SECONDS_" ]; do
  sh -c "$PROGRAM" >/dev/null 2>&1 || true
  now=$(date +%s)
  if [ "$now" -ge "$next_status" ]; then
    for n in a b; do
      d=$A
      [ $n = a ] || d=$B
      CANOPY_SOCKET=$OUT/$n/sock "$d/client/canopy" status --format json >"$OUT/$n/st.json"
      echo "$((now - t0)) $(awk '/^RssAnon:/ {print $2}' "/proc/$(cat "$OUT/$n/pid")/status") \
$(tr -d '\n' <"$OUT/$n/st.json" | sed 's/.*"symbol_cache": *{\([^}]*\)}.*/\1/' | tr -d ' ')" >>"$OUT/$n/series.txt"
    done
    next_status=$((now + 5))
  fi
  sleep "$EVERY"
done
cpu1_a=$(cpu_of "$(cat "$OUT/a/pid")") cpu1_b=$(cpu_of "$(cat "$OUT/b/pid")")
secs=$(($(date +%s) - t0))
python3 - "$OUT" "$A" "$B" "$secs" "$cpu0_a" "$cpu1_a" "$cpu0_b" "$cpu1_b" <<'PY'
import json, statistics, sys
out, a, b, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
cpu = {"a": (sys.argv[5], sys.argv[6]), "b": (sys.argv[7], sys.argv[8])}
tck = 100.0
cols = {}
for n in "ab":
    rows = []
    for line in open(f"{out}/{n}/series.txt"):
        t, anon, sc = line.split(" ", 2)
        sc = json.loads("{" + sc.strip() + "}")
        rows.append((int(t), int(anon) / 1024.0, sc))
    late = [r for r in rows if r[0] >= secs / 2] or rows
    anon = [r[1] for r in late]
    dbg = [r[2]["mapped_bytes"] / 2**20 for r in late]
    end = rows[-1][2]
    c0, c1 = (sum(map(float, x.split())) for x in cpu[n])
    cols[n] = [
        f"{statistics.median(anon):.0f} / {max(anon):.0f} / {rows[-1][1]:.0f}",
        f"{statistics.median(dbg):.1f} / {max(dbg):.1f} / {end['mapped_bytes'] / 2**20:.1f}",
        f"{end.get('debug_opens', '-')} / {end.get('debug_units', '-')} / {end['debug_releases']}",
        f"{(c1 - c0) / tck:.2f} s = {(c1 - c0) / tck / secs * 100:.2f}% of a core",
    ]
names = ["RssAnon, MiB: median / max over the second half / at the end",
         "debug data, MiB: median / max / at the end",
         "libdw opened / units indexed / debug releases",
         f"canopyd CPU over {secs} s"]
print(f"| {secs} s, a program with DWARF every few s | A: {a} | B: {b} |")
print("|---|---|---|")
for i, name in enumerate(names):
    print(f"| {name} | {cols['a'][i]} | {cols['b'][i]} |")
PY
