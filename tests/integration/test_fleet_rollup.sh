#!/usr/bin/env bash
# The hourly rollup (docs/fleet.md "Schema"): rows spread over five hours are inserted
# into a ClickHouse server started here; every `canopy fleet tree` / `fleet labels` read
# through the rollup (whole hours) plus the raw rows (partial edge hours) equals the same
# query over the raw rows only (--raw), for --where, --from/--to, --last and --group-by.
# Detaching the raw rows then shows which table each part of a window came from. Also:
# the schema migration from version 1 (a v1 database gets its rollup filled from the
# rows it had) and the refusal of a newer version.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
C=$CANOPY_BIN
trap 'ch_stop A; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT

ch_start A
URL=$(ch_url A)
"$C" fleet init --url "$URL" >/dev/null || fail "fleet init"

# fill DB: 30 000 rows over five hours starting 1234 s past an hour, three hosts, two
# services and sessions, labels on 4 rows of 5, 40 stacks (the 40th without a
# definition). Weights are multiples of 1/4, so sums are exact in any order.
H0=$(( ($(date +%s) / 3600 - 5) * 3600 ))
T0=$((H0 + 1234))
fill() {
  ch_query A "INSERT INTO $1.samples (time, host, service, session, label_keys, label_values,
      stack, samples, weight)
    SELECT toDateTime($T0 + (number * 7919) % 18000), concat('h', toString(number % 3)),
      ['web', 'db'][number % 2 + 1], concat('s', toString(intDiv(number, 7) % 2)),
      if(number % 5 = 0, emptyArrayString(), ['env', 'dc']),
      if(number % 5 = 0, emptyArrayString(), ['t', concat('dc', toString(number % 4))]),
      number % 40 + 1, number % 7 + 1, (number % 7 + 1) * 0.25 + (number % 3) * 0.5
    FROM system.numbers LIMIT 30000" >/dev/null
  ch_query A "INSERT INTO $1.stacks (stack, host, time, funcs, libs, build_ids)
    SELECT number + 1, 'h0', now(), ['main', concat('f', toString(number % 6)),
      concat('g', toString(number))], ['app', concat('lib', toString(number % 3), '.so'), 'app'],
      ['', '', ''] FROM system.numbers LIMIT 39" >/dev/null
}
fill canopy
[ "$(ch_query A 'SELECT sum(samples) FROM canopy.samples_hourly')" = \
  "$(ch_query A 'SELECT sum(samples) FROM canopy.samples')" ] || fail "the rollup's sum"
[ "$(ch_query A 'SELECT count() FROM canopy.samples_hourly')" -lt 15000 ] ||
  fail "the rollup did not roll up: $(ch_query A 'SELECT count() FROM canopy.samples_hourly')"

# same DB ARGS...: the tree (folded, sorted) and total through the rollup and --raw agree.
same() {
  local db=$1; shift
  "$C" fleet tree --url "$URL" --database "$db" "$@" --format folded | sort >"$TMP/r.txt" ||
    fail "fleet tree $*"
  "$C" fleet tree --url "$URL" --database "$db" "$@" --raw --format folded | sort >"$TMP/w.txt" ||
    fail "fleet tree --raw $*"
  [ -s "$TMP/w.txt" ] || fail "empty tree for $*"
  cmp -s "$TMP/r.txt" "$TMP/w.txt" || fail "rollup != raw for $*: $(diff "$TMP/r.txt" "$TMP/w.txt" | head -5)"
}
same canopy
same canopy --where host=h1
same canopy --where dc=dc2 --where dc=dc3 --where service=web
same canopy --where session=s0
same canopy --from $((T0 + 1000)) --to $((T0 + 15000))  # partial hours at both ends
same canopy --from $((H0 + 3600)) --to $((H0 + 3 * 3600)) # whole hours only
same canopy --from $((T0 + 5000))
same canopy --to $((T0 + 9000))
same canopy --from $((T0 + 100)) --to $((T0 + 2000))     # within one hour: raw only
same canopy --last 3h
same canopy --group-by host --from $((T0 + 1000)) --to $((T0 + 15000))
same canopy --group-by dc --where env=t
same canopy --group-by session
grep -q ';\[unknown stack\] ' "$TMP/r.txt" || fail "the stack without a definition is not counted"
for k in "" host dc session; do
  "$C" fleet labels --url "$URL" $k --from $((T0 + 1000)) --to $((T0 + 15000)) >"$TMP/l1.txt" ||
    fail "labels $k"
  "$C" fleet labels --url "$URL" $k --from $((T0 + 1000)) --to $((T0 + 15000)) --raw >"$TMP/l2.txt"
  cmp -s "$TMP/l1.txt" "$TMP/l2.txt" || fail "labels $k: rollup != raw"
done

# Where each part comes from: with the raw rows gone, whole hours still read the rollup,
# partial hours read nothing.
total() { "$C" fleet tree --url "$URL" "$@" --format json | json /dev/stdin 'int(d["total"])'; }
W=$(total --from $((H0 + 3600)) --to $((H0 + 3 * 3600)))
E=$(total --from $((T0 + 1000)) --to $((T0 + 15000)))
[ "$W" -gt 0 ] && [ "$E" -gt "$W" ] || fail "window totals $W, $E"
ch_query A "RENAME TABLE canopy.samples TO canopy.samples_kept" >/dev/null
ch_query A "CREATE TABLE canopy.samples AS canopy.samples_kept" >/dev/null
[ "$(total --from $((H0 + 3600)) --to $((H0 + 3 * 3600)))" = "$W" ] || fail "whole hours not from the rollup"
E2=$(total --from $((T0 + 1000)) --to $((T0 + 15000)))
[ "$E2" -lt "$E" ] && [ "$E2" -ge "$W" ] || fail "edges not from the raw rows: $E2 vs $E, $W"
[ "$(total --raw)" = 0 ] || fail "--raw read the rollup"
echo "rollup: whole hours $W, with edges $E, edges gone $E2"

# Migration: a version 1 database (no batch column, no rollup) with rows; readers ask for
# fleet init, which migrates it once.
ch_query A "CREATE DATABASE old" >/dev/null
ch_query A "CREATE TABLE old.samples (time DateTime, host String, service String, session String,
  label_keys Array(String), label_values Array(String), stack UInt64, samples UInt64,
  weight Float64) ENGINE = MergeTree() PARTITION BY toYYYYMMDD(time) ORDER BY (service, host, time, stack)" >/dev/null
ch_query A "CREATE TABLE old.stacks (stack UInt64, host String, time DateTime, funcs Array(String),
  libs Array(String), build_ids Array(String)) ENGINE = ReplacingMergeTree() ORDER BY stack" >/dev/null
ch_query A "CREATE TABLE old.schema (version UInt32, cluster String, created DateTime) ENGINE = TinyLog" >/dev/null
ch_query A "INSERT INTO old.schema VALUES (1, '', now())" >/dev/null
fill old
expect_fail 1 "$C" fleet tree --url "$URL" --database old
grep -q 'version 1 .*fleet init' "$TMP/f.err" || fail "v1 message: $(cat "$TMP/f.err")"
"$C" fleet init --url "$URL" --database old >/dev/null || fail "migration"
"$C" fleet init --url "$URL" --database old >/dev/null || fail "migration is not idempotent"
[ "$(ch_query A 'SELECT max(version), count() FROM old.schema')" = "$(printf '2\t2')" ] ||
  fail "schema rows after migration: $(ch_query A 'SELECT * FROM old.schema')"
[ "$(ch_query A 'SELECT sum(samples) FROM old.samples_hourly')" = \
  "$(ch_query A 'SELECT sum(samples) FROM old.samples')" ] || fail "the migrated rollup's sum"
same old
same old --from $((T0 + 1000)) --to $((T0 + 15000)) --group-by host
# Rows written after the migration reach the rollup through the view.
ch_query A "INSERT INTO old.samples (time, host, service, session, label_keys, label_values,
  stack, samples, weight, batch) VALUES ($((H0 + 7200)), 'new', 'web', 's', [], [], 1, 9, 9, 77)" >/dev/null
same old --where host=new

# A newer schema is refused by init and by readers.
ch_query A "INSERT INTO old.schema VALUES (99, '', now())" >/dev/null
expect_fail 1 "$C" fleet init --url "$URL" --database old
grep -q 'version 99' "$TMP/f.err" || fail "init on version 99: $(cat "$TMP/f.err")"
expect_fail 1 "$C" fleet tree --url "$URL" --database old
echo ok
