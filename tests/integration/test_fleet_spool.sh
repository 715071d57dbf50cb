#!/usr/bin/env bash
# The fleet push under failures (docs/fleet.md "Failures"):
# 1. ClickHouse (a real server started here) stopped for 10 s and restarted mid-session:
#    nothing is lost (the fleet's total equals the session's), the spool drains, and
#    `canopy status` showed the failure while it lasted.
# 2. Against a stand-in receiver (fleet_receiver.py) that refuses requests on demand:
#    spooled batches arrive in order once it answers again, they survive a canopyd
#    restart, and with a small fleet_spool_max the oldest are dropped and counted.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
WL=$CANOPY_WORKLOADS/wl_shares_fp
PIDS=()
R_PID=
trap 'rc=$?; kill "${PIDS[@]}" $R_PID 2>/dev/null || true; ch_stop A; wait 2>/dev/null || true; finish_tmp $rc' EXIT

# start_d NAME URL [EXTRA CONFIG LINE]: canopyd NAME pushing to URL every 500 ms.
start_d() {
  printf 'fleet_url = %s\nfleet_host = %s\nfleet_interval = 500ms\n%s\n' "$2" "$1" "${3:-}" \
    >"$TMP/$1.conf"
  fleet_canopyd "$1"
}
fleet() { "$C" status --socket "$TMP/$1.sock" --format json | json /dev/stdin "d['fleet']$2"; }
# wait_until NAME PYEXPR: polls canopyd NAME's status until d['fleet'] satisfies PYEXPR (f).
wait_until() {
  local end=$((SECONDS + 60))
  while [ $SECONDS -lt $end ]; do
    "$C" status --socket "$TMP/$1.sock" --format json >"$TMP/st.json" 2>/dev/null &&
      [ "$(json "$TMP/st.json" "(lambda f: $2)(d['fleet'])")" = True ] && return 0
    sleep 0.1
  done
  fail "canopyd $1: never $2: $(cat "$TMP/st.json")"
}

# ---- 1. a real outage ---------------------------------------------------------------------
ch_start A
URL=$(ch_url A)
"$C" fleet init --url "$URL" >/dev/null || fail "fleet init"
start_d a "$URL"
"$WL" 120 >/dev/null & W=$!; PIDS+=($W)
S=$("$C" attach "$W" -F 999 --socket "$TMP/a.sock") || fail "attach"
wait_until a 'f["rows_sent"] > 0'
ch_stop A
sleep 10
"$C" status --socket "$TMP/a.sock" --format json >"$TMP/out.json"
[ "$(json "$TMP/out.json" 'd["running"] == 1 and d["fleet"]["failures"] > 0 and d["fleet"]["rows_queued"] > 0 and d["fleet"]["spool_bytes"] > 0 and d["fleet"]["lag_s"] >= 5')" = True ] ||
  fail "status during the outage: $(cat "$TMP/out.json")"
json "$TMP/out.json" 'd["fleet"]["last_error"]' | grep -q "ClickHouse at" || fail "last_error"
"$C" status --socket "$TMP/a.sock" | grep_all "^fleet: .*queued" || fail "status text has no fleet line"
ch_start A
sleep 2
kill "$W"; wait "$W" 2>/dev/null || true # the session exits: its last rows go out
wait_until a 'f["sessions"] == 0 and f["rows_queued"] == 0 and f["spool_bytes"] == 0'
[ -z "$(ls "$TMP/state-a/fleet-spool")" ] || fail "spool not drained: $(ls "$TMP/state-a/fleet-spool")"
T=$("$C" tree "$S" --socket "$TMP/a.sock" --format json | json /dev/stdin 'int(d["total"])')
F=$("$C" fleet tree --url "$URL" --format json | json /dev/stdin 'int(d["total"])')
[ "$T" -gt 100 ] && [ "$F" = "$T" ] || fail "after the outage: fleet total $F, session $T"
[ "$(fleet a '["rows_dropped"]')" = 0 ] || fail "rows dropped in the outage"
echo "outage: session $T samples, fleet $F"
kill "$D_PID"; wait "$D_PID" 2>/dev/null || true

# ---- 2. order, restart, bound (stand-in receiver) -----------------------------------------
/usr/bin/python3 "$(dirname "$0")/fleet_receiver.py" "$TMP/port" "$TMP/recv.log" "$TMP/failing" &
R_PID=$!
for ((i = 0; i < 100; i++)); do [ -s "$TMP/port" ] && break; sleep 0.1; done
RURL="http://127.0.0.1:$(cat "$TMP/port")/"
touch "$TMP/failing"
start_d b "$RURL"
# The workload runs until three batches are spooled, covering 4 s (rows carry whole seconds):
# batches that queue while the pusher is busy (an fsync, a refused request) become one file,
# so a fixed run time is not enough on a loaded machine.
"$WL" 120 >/dev/null & W=$!; PIDS+=($W)
S=$("$C" attach "$W" -F 999 --socket "$TMP/b.sock") || fail "attach b"
wait_until b 'f["batches_queued"] >= 3 and f["lag_s"] >= 4'
kill "$W"; wait "$W" 2>/dev/null || true
wait_until b 'f["sessions"] == 0 and f["batches_queued"] >= 3'
# canopyd stops with batches spooled; the next canopyd sends them.
"$C" tree "$S" --socket "$TMP/b.sock" --format json >"$TMP/sb.json" || fail "tree b"
kill "$D_PID"; wait "$D_PID" 2>/dev/null || true
N=$(ls "$TMP/state-b/fleet-spool" | wc -l)
[ "$N" -ge 3 ] || fail "only $N spooled batches left by canopyd"
rm "$TMP/failing"
start_d b "$RURL"
wait_until b 'f["batches_queued"] == 0 and f["batches_sent"] >= 3 and f["rows_queued"] == 0'
python3 - "$TMP/recv.log" "$(json "$TMP/sb.json" 'int(d["total"])')" <<'PY' || fail "received batches"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
times, total = [], 0
for r in rows:
    if r["query"].startswith("INSERT INTO canopy.samples"):
        for l in r["body"].splitlines():
            times.append(int(l.split("\t")[0]))
            total += int(l.split("\t")[7])
# Spooled intervals arrive oldest first (several files may share one request).
print("rows", len(times), "intervals", len(set(times)), "samples", total, "want", sys.argv[2])
sys.exit(times != sorted(times) or len(set(times)) < 3 or total != int(sys.argv[2]))
PY
kill "$D_PID"; wait "$D_PID" 2>/dev/null || true

# The bound: 700 bytes of spool keep a few small batches; older ones are dropped and
# counted.
touch "$TMP/failing"
start_d c "$RURL" "fleet_spool_max = 700"
"$WL" 120 >/dev/null & W=$!; PIDS+=($W)
"$C" attach "$W" -F 999 --socket "$TMP/c.sock" >/dev/null || fail "attach c"
wait_until c 'f["batches_dropped"] > 0'
kill "$W"; wait "$W" 2>/dev/null || true
wait_until c 'f["sessions"] == 0 and f["rows_dropped"] > 0 and f["batches_dropped"] > 0 and f["spool_bytes"] <= 700'
echo "bound: $(cat "$TMP/st.json")"
echo ok
