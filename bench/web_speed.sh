#!/usr/bin/env bash
# web_speed.sh — canopy web's speed (issue 21's goals; docs/web.md "Speed"): a generated
# Chrome .cpuprofile of 1 M samples over 100 k distinct stacks (2000 subtrees of equal
# weight, each a chain of 25 functions ending in 50 leaves: 150 k call nodes, of which the
# 50 k chain nodes are the boxes a 1200-pixel flame graph can show), served by `canopy web
# FILE`, loaded in Debian's headless chromium (bench/web_speed.js over the DevTools pipe).
# Prints the server's time for the whole tree (/api/tree, curl), then the page's first
# paint, a whole refresh, and a flame graph draw, with the boxes drawn.
# `live`: the same figures' goal on a LIVE canopyd session instead: canopyd-test's
# CANOPYD_TEST_SEED hook starts each session with bench_daemon tree's profile (1 M samples
# over 100 k distinct stacks, bench/bench_callgraph.h), the session then samples a real
# workload (wl_shares_fp at 99 Hz), `canopy web SESSION` serves it over the user's canopyd
# connection, and the page's own periodic refresh (every second; nothing changed by the
# bench) is timed end to end, ROUNDS refreshes whose answer changed.
#   bench/web_speed.sh [ROUNDS] [file|live]  (CANOPY_BIN, CANOPYD_TEST_BIN: default build-rel's)
set -euo pipefail
cd "$(dirname "$0")/.."
C=${CANOPY_BIN:-build-rel/client/canopy}
ROUNDS=${1:-5}
MODE=${2:-file}
[ -x "$C" ] || { echo "no canopy at $C (build build-rel, or set CANOPY_BIN)" >&2; exit 1; }
TMP=$(mktemp -d)
WEB_PID= D_PID= W_PID=
trap 'kill $WEB_PID $W_PID $D_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT

web_url() { # waits for canopy web's URL in $TMP/url
  for ((i = 0; i < 600; i++)); do [ -s "$TMP/url" ] && break; sleep 0.1; done
  URL=$(head -n 1 "$TMP/url")
  [ -n "$URL" ] || { cat "$TMP/log" "$TMP/d.log" >&2 2>/dev/null; exit 1; }
}

if [ "$MODE" = live ]; then
  D=${CANOPYD_TEST_BIN:-build-rel/daemon/canopyd-test}
  WL=${CANOPY_WORKLOADS:-build-rel/tests/workloads}/wl_shares_fp
  [ -x "$D" ] && [ -x "$WL" ] || { echo "no $D or $WL (build build-rel with tests)" >&2; exit 1; }
  export CANOPY_SOCKET=$TMP/d.sock
  CANOPYD_TEST_SEED=100000:1000000 "$D" --socket "$CANOPY_SOCKET" --state-dir "$TMP/state" \
    >"$TMP/d.log" 2>&1 &
  D_PID=$!
  for ((i = 0; i < 100; i++)); do [ -S "$CANOPY_SOCKET" ] && break; sleep 0.1; done
  "$WL" 100000 >/dev/null &
  W_PID=$!
  "$C" attach "$W_PID" --name big -F 99 >/dev/null
  grep seeded "$TMP/d.log"
  "$C" web big >"$TMP/url" 2>"$TMP/log" &
  WEB_PID=$!
  web_url
  TMPDIR=$TMP node bench/web_speed.js "$URL" "$ROUNDS" live
  exit
fi

python3 - "$TMP/big.cpuprofile" <<'PY'
import json, sys
COLS, DEPTH, LEAVES, PER_STACK = 2000, 25, 50, 10  # 100 k stacks, 1 M samples
nodes, leaves = [], []
def node(name, parent):
    i = len(nodes) + 1
    nodes.append({"id": i, "callFrame": {"functionName": name, "scriptId": "0", "url": "big.js",
                  "lineNumber": 0, "columnNumber": 0}, "hitCount": 0, "children": []})
    if parent:
        nodes[parent - 1]["children"].append(i)
    return i
root = node("(root)", 0)
main = node("f_main", root)
for c in range(COLS):
    at = node(f"f_col{c}", main)
    for d in range(DEPTH - 1):
        at = node(f"f{c % 97}_{d}", at)
    for l in range(LEAVES):
        leaves.append(node(f"f_leaf{l}", at))
samples = [leaves[i % len(leaves)] for i in range(len(leaves) * PER_STACK)]
for s in samples:
    nodes[s - 1]["hitCount"] += 1
prof = {"nodes": nodes, "startTime": 0, "endTime": len(samples) * 100,
        "samples": samples, "timeDeltas": [100] * len(samples)}
json.dump(prof, open(sys.argv[1], "w"), separators=(",", ":"))
print(f"generated: {len(samples)} samples, {len(leaves)} distinct stacks, {len(nodes) - 1} call nodes")
PY

"$C" web "$TMP/big.cpuprofile" >"$TMP/url" 2>"$TMP/log" &
WEB_PID=$!
web_url
TOKEN=${URL##*token=}
BASE=${URL%%/\?*}
for i in 1 2 3; do # the whole tree, then as the page asks for it (nodes under 0.01% left out)
  curl -s -o "$TMP/tree.json" -w "server /api/tree whole %{time_total} s, %{size_download} bytes\n" \
    "$BASE/api/tree?token=$TOKEN"
  curl -s -o "$TMP/tree.json" -w "server /api/tree page %{time_total} s, %{size_download} bytes\n" \
    "$BASE/api/tree?token=$TOKEN&arg=--min-percent&arg=0.01"
done
TMPDIR=$TMP node bench/web_speed.js "$URL" "$ROUNDS"
