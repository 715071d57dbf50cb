#!/usr/bin/env bash
# Retried inserts are idempotent (docs/fleet.md "Failures"): a stand-in proxy
# (fleet_proxy.py) between canopyd and a real ClickHouse forwards an INSERT of sample rows,
# lets ClickHouse take it, and drops the answer (closes the connection) once. canopyd
# cannot know whether the rows landed; it asks ClickHouse by batch id before sending again,
# so the fleet's totals still equal the session's exactly. Then a canopyd restart that
# adopts spool files whose rows already landed does not insert them twice either.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
WL=$CANOPY_WORKLOADS/wl_shares_fp
PIDS=()
P_PID=
trap 'rc=$?; kill "${PIDS[@]}" $P_PID 2>/dev/null || true; ch_stop A; wait 2>/dev/null || true; finish_tmp $rc' EXIT

ch_start A
URL=$(ch_url A)
"$C" fleet init --url "$URL" >/dev/null || fail "fleet init"
/usr/bin/python3 "$(dirname "$0")/fleet_proxy.py" "$TMP/port" "$TMP/proxy.log" "$CH_A_HTTP" 2 &
P_PID=$!
for ((i = 0; i < 100; i++)); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || fail "proxy did not start"
PURL="http://127.0.0.1:$(cat "$TMP/port")/"

printf 'fleet_url = %s\nfleet_host = r\nfleet_interval = 500ms\n' "$PURL" >"$TMP/d.conf"
fleet_canopyd d

"$WL" 4 >/dev/null & W=$!; PIDS+=($W)
S=$("$C" attach "$W" -F 999 --socket "$TMP/d.sock") || fail "attach"
wait "$W"
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
  "$C" status --socket "$TMP/d.sock" --format json >"$TMP/st.json" 2>/dev/null &&
    [ "$(json "$TMP/st.json" 'd["fleet"]["sessions"] == 0 and d["fleet"]["rows_queued"] == 0')" = True ] &&
    break
  sleep 0.2
done
[ "$(json "$TMP/st.json" 'd["fleet"]["rows_queued"]')" = 0 ] || fail "rows still queued: $(cat "$TMP/st.json")"
grep -q '^DROPPED INSERT INTO canopy.samples' "$TMP/proxy.log" ||
  fail "no answer was dropped: $(cat "$TMP/proxy.log")"
[ "$(json "$TMP/st.json" 'd["fleet"]["failures"] >= 1')" = True ] || fail "the lost answer is not a failure"
grep -A1 '^DROPPED' "$TMP/proxy.log" | grep -q 'SELECT DISTINCT batch' ||
  fail "canopyd did not ask before resending: $(cat "$TMP/proxy.log")"
T=$("$C" tree "$S" --socket "$TMP/d.sock" --format json | json /dev/stdin 'int(d["total"])')
F=$("$C" fleet tree --url "$URL" --format json | json /dev/stdin 'int(d["total"])')
R=$("$C" fleet tree --url "$URL" --raw --format json | json /dev/stdin 'int(d["total"])')
[ "$T" -gt 100 ] && [ "$F" = "$T" ] && [ "$R" = "$T" ] ||
  fail "after a lost answer: fleet total $F (raw $R), session $T"
echo "lost answer: session $T samples, fleet $F"

# A restart adopting spool files whose rows already landed: copies of batches ClickHouse
# has, put back in the spool as if canopyd had died before deleting them.
kill "$D_PID"; wait "$D_PID" 2>/dev/null || true
[ -z "$(ls "$TMP/state-d/fleet-spool")" ] || fail "spool not empty: $(ls "$TMP/state-d/fleet-spool")"
# Two files with the batch ids of rows ClickHouse has and one with a new id (4242).
ch_query A "SELECT batch, toUInt32(min(time)) FROM canopy.samples GROUP BY batch ORDER BY batch
  LIMIT 2 FORMAT TabSeparated" >"$TMP/ids"
[ "$(wc -l <"$TMP/ids")" = 2 ] || fail "batch ids: $(cat "$TMP/ids")"
printf '4242\t%s\n' "$(date +%s)" >>"$TMP/ids"
n=900
# A spool file: header (rows, stack rows, sample bytes, stack bytes, time, batch id), the
# sample rows, the stack rows; CNFLEET2, as canopyd wrote them before the definitions had
# kinds (their stack rows are sent with an empty kinds array).
while read -r id t; do
  body=$(printf '%s\tr\twl\tx\t[]\t[]\t1\t1000\t1000\n' "$t")
  stack=$(printf '1\tr\t%s\t[%s]\t[%s]\t[%s]\n' "$t" "'old_main'" "'app'" "''")
  { printf 'CNFLEET2 1 1 %d %d %d %s\n' $((${#body} + 1)) $((${#stack} + 1)) "$t" "$id"
    printf '%s\n%s\n' "$body" "$stack"; } >"$TMP/state-d/fleet-spool/$(printf '%020d' $n).batch"
  n=$((n + 1))
done <"$TMP/ids"
# The adopted files are checked against ClickHouse before they are sent: only 4242 is.
"$CANOPYD_BIN" --socket "$TMP/d.sock" --state-dir "$TMP/state-d" --config "$TMP/d.conf" \
  >>"$TMP/d-d.log" 2>&1 &
D_PID=$!
PIDS+=($D_PID)
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do
  [ -S "$TMP/d.sock" ] && [ -z "$(ls "$TMP/state-d/fleet-spool")" ] && break
  sleep 0.1
done
[ -z "$(ls "$TMP/state-d/fleet-spool")" ] || fail "adopted spool not drained"
F2=$("$C" fleet tree --url "$URL" --format json | json /dev/stdin 'int(d["total"])')
[ "$F2" = $((T + 1000)) ] || fail "after the restart: fleet total $F2, want $T + 1000 (batch 4242 only)"
[ "$(ch_query A "SELECT count() FROM canopy.samples WHERE session = 'x'")" = 1 ] ||
  fail "landed spool files were inserted again"
[ "$(ch_query A "SELECT funcs, kinds FROM canopy.stacks WHERE stack = 1 AND host = 'r' LIMIT 1")" = \
  "$(printf "['old_main']\t[]")" ] || fail "an old spool file's stack row: $(ch_query A \
  "SELECT * FROM canopy.stacks WHERE stack = 1")"
echo ok
