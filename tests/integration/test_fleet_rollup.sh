#!/usr/bin/env bash
# The rollups (docs/fleet.md "Schema"): rows spread over five hours are inserted into a
# ClickHouse server started here; every `canopy fleet tree` / `fleet labels` read through
# the hourly rollup (whole hours), the 10-minute rollup (whole 10-minute blocks of the
# rest) and the raw rows (the edges) equals the same query over the raw rows only
# (--raw), for --where, --from/--to, --last and --group-by. Detaching the raw rows, then
# the 10-minute rollup, shows which table each part of a window came from. Also: the
# schema migrations from versions 1, 2 and 3 (the rollups filled from the rows the database
# had, the stack definitions' kinds column added) and the refusal of a newer version or of
# a half-done migration.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
C=$CANOPY_BIN
trap 'rc=$?; ch_stop A; wait 2>/dev/null || true; finish_tmp $rc' EXIT

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
[ "$(ch_query A 'SELECT sum(samples) FROM canopy.samples_10m')" = \
  "$(ch_query A 'SELECT sum(samples) FROM canopy.samples')" ] || fail "the 10-minute rollup's sum"
[ "$(ch_query A 'SELECT count() FROM canopy.samples_hourly')" -lt 15000 ] ||
  fail "the rollup did not roll up: $(ch_query A 'SELECT count() FROM canopy.samples_hourly')"
[ "$(ch_query A 'SELECT count() FROM canopy.samples_10m')" -lt 29000 ] ||
  fail "the 10-minute rollup did not roll up: $(ch_query A 'SELECT count() FROM canopy.samples_10m')"

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
same canopy --from $((T0 + 1000)) --to $((T0 + 15000))  # all three tiers, both edges
same canopy --from $((H0 + 4834)) --to $((H0 + 10234))   # 90 minutes, odd edges
same canopy --from $((H0 + 3600)) --to $((H0 + 5400))    # whole 10-minute blocks only
same canopy --from $((H0 + 1805)) --to $((H0 + 2390))    # inside one 10-minute block: raw
same canopy --from $((H0 + 3600)) --to $((H0 + 3 * 3600)) # whole hours only
same canopy --from $((T0 + 5000))
same canopy --to $((T0 + 9000))
same canopy --from $((T0 + 100)) --to $((T0 + 2000))     # within one hour: raw only
# --last reads the clock: the two reads may fall in different seconds, whose rows differ
# (the data has one or two rows a second), so a difference gets one retry.
(same canopy --last 3h) 2>/dev/null || same canopy --last 3h
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

# Where each part comes from: with the raw rows gone, whole hours still read the hourly
# rollup and whole 10-minute blocks the 10-minute one, edges read nothing; with the
# 10-minute rollup gone too, only whole hours remain. The expected totals are summed
# from the kept raw rows over exactly those parts.
total() { "$C" fleet tree --url "$URL" "$@" --format json | json /dev/stdin 'int(d["total"])'; }
# kept COND: the total weight of the kept raw rows where COND.
kept() { ch_query A "SELECT toInt64(sum(weight)) FROM canopy.samples_kept WHERE $1"; }
F=$((T0 + 1000)) T=$((T0 + 15000)) # hours H0+1h..H0+4h, blocks H0+40m..H0+1h and H0+4h..H0+4h30m
E=$(total --from $F --to $T)
[ "$E" = "$(ch_query A "SELECT toInt64(sum(weight)) FROM canopy.samples WHERE time >= $F AND time < $T")" ] ||
  fail "window total $E"
ch_query A "RENAME TABLE canopy.samples TO canopy.samples_kept" >/dev/null
ch_query A "CREATE TABLE canopy.samples AS canopy.samples_kept" >/dev/null
HOURS="time >= $((H0 + 3600)) AND time < $((H0 + 4 * 3600))"
BLOCKS="time >= $((H0 + 2400)) AND time < $((H0 + 3600)) OR time >= $((H0 + 4 * 3600)) AND time < $((H0 + 16200))"
E2=$(total --from $F --to $T)
[ "$E2" = "$(kept "$HOURS OR $BLOCKS")" ] && [ "$E2" -lt "$E" ] ||
  fail "edges not from the raw rows: $E2 vs $(kept "$HOURS OR $BLOCKS"), $E"
W=$(total --from $((H0 + 3600)) --to $((H0 + 3 * 3600)))
[ "$W" -gt 0 ] && [ "$W" = "$(kept "time >= $((H0 + 3600)) AND time < $((H0 + 3 * 3600))")" ] ||
  fail "whole hours not from the rollup: $W"
[ "$(total --raw)" = 0 ] || fail "--raw read a rollup"
ch_query A "RENAME TABLE canopy.samples_10m TO canopy.samples_10m_kept" >/dev/null
ch_query A "CREATE TABLE canopy.samples_10m AS canopy.samples_10m_kept" >/dev/null
E3=$(total --from $F --to $T)
[ "$E3" = "$(kept "$HOURS")" ] && [ "$E3" -lt "$E2" ] ||
  fail "10-minute blocks not from their rollup: $E3 vs $(kept "$HOURS"), $E2"
echo "rollup: all $E, raw rows gone $E2, 10-minute rollup gone too $E3, whole hours $W"

# migrate_and_check DB VERSION: readers refuse DB (at schema VERSION) and ask for fleet
# init; fleet init migrates it, twice without harm; both rollups then hold every sample,
# and the definitions written before have the kinds column, empty.
migrate_and_check() {
  local db=$1 v=$2 t
  expect_fail 1 "$C" fleet tree --url "$URL" --database "$db"
  grep -q "version $v .*fleet init" "$TMP/f.err" || fail "$db: v$v message: $(cat "$TMP/f.err")"
  "$C" fleet init --url "$URL" --database "$db" >/dev/null || fail "$db: migration from $v"
  "$C" fleet init --url "$URL" --database "$db" >/dev/null || fail "$db: migration is not idempotent"
  [ "$(ch_query A "SELECT max(version), count() FROM $db.schema")" = "$(printf '4\t2')" ] ||
    fail "$db: schema rows after migration: $(ch_query A "SELECT * FROM $db.schema")"
  [ "$(ch_query A "SELECT count(), countIf(empty(kinds)) FROM $db.stacks")" = "$(printf '39\t39')" ] ||
    fail "$db: kinds after migration: $(ch_query A "SELECT count(), countIf(empty(kinds)) FROM $db.stacks")"
  for t in hourly 10m; do
    [ "$(ch_query A "SELECT sum(samples) FROM $db.samples_$t")" = \
      "$(ch_query A "SELECT sum(samples) FROM $db.samples")" ] ||
      fail "$db: the migrated $t rollup: $(ch_query A "SELECT sum(samples) FROM $db.samples_$t")"
  done
}

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
migrate_and_check old 1
same old
same old --from $((T0 + 1000)) --to $((T0 + 15000)) --group-by host
# Rows written after the migration reach the rollup through the view.
ch_query A "INSERT INTO old.samples (time, host, service, session, label_keys, label_values,
  stack, samples, weight, batch) VALUES ($((H0 + 7200)), 'new', 'web', 's', [], [], 1, 9, 9, 77)" >/dev/null
same old --where host=new

# Migration from version 2 (samples with batch ids, the hourly rollup and its view, as
# version 2's fleet init made them): the 10-minute rollup is created and filled once.
ch_query A "CREATE DATABASE v2" >/dev/null
ch_query A "CREATE TABLE v2.samples (time DateTime, host String, service String, session String,
  label_keys Array(String), label_values Array(String), stack UInt64, samples UInt64,
  weight Float64, batch UInt64) ENGINE = MergeTree() PARTITION BY toYYYYMMDD(time)
  ORDER BY (service, host, time, stack)" >/dev/null
ch_query A "CREATE TABLE v2.samples_hourly (time DateTime, host String, service String,
  session String, label_keys Array(String), label_values Array(String), stack UInt64,
  samples UInt64, weight Float64) ENGINE = SummingMergeTree((samples, weight))
  PARTITION BY toYYYYMMDD(time) ORDER BY (service, host, time, stack, session, label_keys, label_values)" >/dev/null
ch_query A "CREATE MATERIALIZED VIEW v2.samples_hourly_mv TO v2.samples_hourly AS
  SELECT toDateTime(intDiv(toUInt32(time), 3600) * 3600) AS time, host, service, session,
  label_keys, label_values, stack, sum(samples) AS samples, sum(weight) AS weight
  FROM v2.samples GROUP BY time, host, service, session, label_keys, label_values, stack" >/dev/null
ch_query A "CREATE TABLE v2.stacks (stack UInt64, host String, time DateTime, funcs Array(String),
  libs Array(String), build_ids Array(String)) ENGINE = ReplacingMergeTree() ORDER BY stack" >/dev/null
ch_query A "CREATE TABLE v2.schema (version UInt32, cluster String, created DateTime) ENGINE = TinyLog" >/dev/null
ch_query A "INSERT INTO v2.schema VALUES (2, '', now())" >/dev/null
fill v2
migrate_and_check v2 2
same v2 --from $((T0 + 1000)) --to $((T0 + 15000))
same v2 --from $((H0 + 4834)) --to $((H0 + 10234)) --group-by dc
# Migration from version 3 (today's tables but the definitions' kinds column).
"$C" fleet init --url "$URL" --database v3 >/dev/null || fail "fleet init v3"
ch_query A "ALTER TABLE v3.stacks DROP COLUMN kinds" >/dev/null
ch_query A "DROP TABLE v3.schema" >/dev/null
ch_query A "CREATE TABLE v3.schema (version UInt32, cluster String, created DateTime) ENGINE = TinyLog" >/dev/null
ch_query A "INSERT INTO v3.schema VALUES (3, '', now())" >/dev/null
fill v3
migrate_and_check v3 3
same v3 --from $((T0 + 1000)) --to $((T0 + 15000)) --group-by host
# A migration from 2 that stopped after creating the 10-minute rollup is not redone.
ch_query A "CREATE DATABASE half" >/dev/null
ch_query A "CREATE TABLE half.schema (version UInt32, cluster String, created DateTime) ENGINE = TinyLog" >/dev/null
ch_query A "INSERT INTO half.schema VALUES (2, '', now())" >/dev/null
ch_query A "CREATE TABLE half.samples_10m AS v2.samples_10m" >/dev/null
expect_fail 1 "$C" fleet init --url "$URL" --database half
grep -q 'did not finish.*samples_10m' "$TMP/f.err" || fail "half-done migration: $(cat "$TMP/f.err")"

# A newer schema is refused by init and by readers.
ch_query A "INSERT INTO old.schema VALUES (99, '', now())" >/dev/null
expect_fail 1 "$C" fleet init --url "$URL" --database old
grep -q 'version 99' "$TMP/f.err" || fail "init on version 99: $(cat "$TMP/f.err")"
expect_fail 1 "$C" fleet tree --url "$URL" --database old
echo ok
