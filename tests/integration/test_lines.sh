#!/usr/bin/env bash
# `canopy lines` says why a table is empty (docs/cli.md "canopy lines"): on `perf script`
# input (addresses, no lines) one line explains the missing line info and the per-address
# table still shows; on folded input (neither) one line explains that; the JSON is the same
# as before (empty arrays), and a function that occurs nowhere is still exit 2.
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz

"$C" lines "$PERF" work_a >"$TMP/a.txt" || fail "lines perf: exit $?"
sed -n 2p "$TMP/a.txt" | grep -q '^no line info for work_a: no debug info for workload' ||
  fail "no explanation: $(cat "$TMP/a.txt")"
! grep -q 'LINE' "$TMP/a.txt" || fail "empty LINE table printed: $(cat "$TMP/a.txt")"
grep -q '^    OFFSET     SELF   SELF%$' "$TMP/a.txt" || fail "no OFFSET table: $(cat "$TMP/a.txt")"
# the per-address rows are the JSON's, one per address
"$C" lines "$PERF" work_a --format json >"$TMP/a.json" || fail "lines json: exit $?"
want=$(json "$TMP/a.json" 'len(d["addresses"])')
[ "$want" -gt 0 ] || fail "no addresses in $(cat "$TMP/a.json")"
[ "$(json "$TMP/a.json" 'len(d["lines"])')" = 0 ] || fail "perf script input has lines?"
[ "$(grep -c '^ *0x[0-9a-f]* ' "$TMP/a.txt")" = "$want" ] || fail "address rows: $(cat "$TMP/a.txt")"
echo "PASS lines without line info"

"$C" lines "$CANOPY_TEST_DATA/vectors/abc.folded" E >"$TMP/e.txt" || fail "lines folded: exit $?"
[ "$(wc -l <"$TMP/e.txt")" = 2 ] || fail "folded: $(cat "$TMP/e.txt")"
sed -n 2p "$TMP/e.txt" | grep -q '^no line or address info for E: ' || fail "folded: $(cat "$TMP/e.txt")"
expect_fail 2 "$C" lines "$CANOPY_TEST_DATA/vectors/abc.folded" nosuch
echo "PASS lines without addresses"
