#!/usr/bin/env bash
# The fleet on a two-node ClickHouse cluster (docs/fleet.md "Cluster"): two servers on
# this machine form the remote_servers cluster `fleet2` of two shards; `canopy fleet init
# --cluster` creates the local tables on both and a Distributed table over them; canopyd
# a writes to node 1 and canopyd b to node 2, and a query on either node returns the
# whole fleet.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
WL=$CANOPY_WORKLOADS/wl_shares_fp
PIDS=()
trap 'rc=$?; kill "${PIDS[@]}" 2>/dev/null || true; ch_stop N1; ch_stop N2; wait 2>/dev/null || true; finish_tmp $rc' EXIT

for n in N1 N2; do
  eval "CH_${n}_HTTP=$(free_port) CH_${n}_TCP=$(free_port) CH_${n}_INTER=$(free_port)"
done
CLUSTER="<fleet2>
  <shard><replica><host>127.0.0.1</host><port>$CH_N1_TCP</port></replica></shard>
  <shard><replica><host>127.0.0.1</host><port>$CH_N2_TCP</port></replica></shard>
</fleet2>"
ch_start N1 "$CLUSTER"
ch_start N2 "$CLUSTER"
U1=$(ch_url N1)
U2=$(ch_url N2)
[ "$(ch_query N1 "SELECT count() FROM system.clusters WHERE cluster = 'fleet2'")" = 2 ] ||
  fail "cluster fleet2 not configured"
"$C" fleet init --url "$U1" --url "$U2" --cluster fleet2 >/dev/null || fail "fleet init --cluster"
"$C" fleet init --url "$U1" --url "$U2" --cluster fleet2 >/dev/null || fail "init not idempotent"
for n in N1 N2; do
  [ "$(ch_query $n "SELECT engine FROM system.tables WHERE database = 'canopy' AND name = 'samples_all'")" = Distributed ] ||
    fail "$n: no Distributed samples_all"
done

start_d() { # NAME URL
  printf 'fleet_url = %s\nfleet_host = %s\nfleet_interval = 500ms\n' "$2" "$1" >"$TMP/$1.conf"
  fleet_canopyd "$1"
}
start_d a "$U1"
start_d b "$U2"
"$WL" 4 >/dev/null & WA=$!; PIDS+=($WA)
"$WL" 4 >/dev/null & WB=$!; PIDS+=($WB)
SA=$("$C" attach "$WA" -F 999 --socket "$TMP/a.sock") || fail "attach a"
SB=$("$C" attach "$WB" -F 999 --socket "$TMP/b.sock") || fail "attach b"
wait "$WA" "$WB"
for h in a b; do
  end=$((SECONDS + 60))
  until "$C" status --socket "$TMP/$h.sock" --format json >"$TMP/st.json" &&
    [ "$(json "$TMP/st.json" 'd["fleet"]["sessions"] == 0 and d["fleet"]["rows_queued"] == 0')" = True ]; do
    [ $SECONDS -lt $end ] || fail "push of $h did not finish: $(cat "$TMP/st.json")"
    sleep 0.2
  done
done
TA=$("$C" tree "$SA" --socket "$TMP/a.sock" --format json | json /dev/stdin 'int(d["total"])')
TB=$("$C" tree "$SB" --socket "$TMP/b.sock" --format json | json /dev/stdin 'int(d["total"])')
# Each shard holds its own host's rows only.
[ "$(ch_query N1 'SELECT groupUniqArray(host) FROM canopy.samples')" = "['a']" ] || fail "shard 1 rows"
[ "$(ch_query N2 'SELECT groupUniqArray(host) FROM canopy.samples')" = "['b']" ] || fail "shard 2 rows"
for u in "$U1" "$U2"; do
  "$C" fleet tree --url "$u" --group-by host --format json >"$TMP/t.json" || fail "fleet tree on $u"
  [ "$(json "$TMP/t.json" 'sorted((r["name"], int(r["total"])) for r in d["roots"])')" = \
    "[('host=a', $TA), ('host=b', $TB)]" ] || fail "fleet tree on $u: $(head -c 300 "$TMP/t.json")"
  "$C" fleet tree --url "$u" --where host=b --format json >"$TMP/tb.json" || fail "where on $u"
  [ "$(json "$TMP/tb.json" 'int(d["total"])')" = "$TB" ] || fail "--where host=b on $u"
  "$C" fleet labels --url "$u" host | grep -Eq "^a +$TA\$" || fail "labels on $u"
  # Each node's view filled its own rollup; samples_hourly_all reads both, like --raw.
  "$C" fleet tree --url "$u" --format folded | sort >"$TMP/r.txt" || fail "tree on $u"
  "$C" fleet tree --url "$u" --raw --format folded | sort >"$TMP/w.txt" || fail "--raw on $u"
  [ -s "$TMP/r.txt" ] && cmp -s "$TMP/r.txt" "$TMP/w.txt" || fail "rollup != raw on $u"
done
[ "$(ch_query N1 'SELECT groupUniqArray(host) FROM canopy.samples_hourly')" = "['a']" ] ||
  fail "shard 1 rollup"
# The 10-minute rollup: each node's own rows, the whole fleet through samples_10m_all.
[ "$(ch_query N2 'SELECT groupUniqArray(host) FROM canopy.samples_10m')" = "['b']" ] ||
  fail "shard 2 10-minute rollup"
[ "$(ch_query N1 'SELECT sum(samples) FROM canopy.samples_10m_all')" = \
  "$(ch_query N2 'SELECT sum(samples) FROM canopy.samples_all')" ] || fail "samples_10m_all"
"$C" fleet prune --url "$U1" --url "$U2" --older 1d | grep_all 'dropped 0 ' || fail "prune on the cluster"
# A version 3 cluster (the definitions without kinds, on the nodes and their Distributed
# tables): readers ask for fleet init, which adds the column everywhere; the tree is back.
for n in N1 N2; do
  ch_query $n "ALTER TABLE canopy.stacks_all DROP COLUMN kinds" >/dev/null
  ch_query $n "ALTER TABLE canopy.stacks DROP COLUMN kinds" >/dev/null
  ch_query $n "DROP TABLE canopy.schema" >/dev/null
  ch_query $n "CREATE TABLE canopy.schema (version UInt32, cluster String, created DateTime)
    ENGINE = TinyLog" >/dev/null
  ch_query $n "INSERT INTO canopy.schema VALUES (3, 'fleet2', now())" >/dev/null
done
expect_fail 1 "$C" fleet tree --url "$U1" --where host=b
"$C" fleet init --url "$U1" --url "$U2" --cluster fleet2 >/dev/null || fail "migration from 3"
for n in N1 N2; do
  [ "$(ch_query $n "SELECT count() FROM system.columns WHERE database = 'canopy' AND
    table IN ('stacks', 'stacks_all') AND name = 'kinds'")" = 2 ] || fail "$n: no kinds after init"
done
"$C" fleet tree --url "$U2" --where host=b --format json >"$TMP/tb.json" || fail "tree after migration"
[ "$(json "$TMP/tb.json" 'int(d["total"])')" = "$TB" ] || fail "--where host=b after migration"
echo "cluster: a $TA, b $TB"
echo ok
