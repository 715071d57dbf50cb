#!/usr/bin/env bash
# `canopy open` output: the text tree's layout, --depth / --min-percent, folded output,
# -o with formats from extensions, and the time options (--last, --from/--to).
source "$(dirname "$0")/lib.sh"
V=$CANOPY_TEST_DATA/vectors
C=$CANOPY_BIN

# Text: a header, then one node per line (total and self as % and value, name indented).
"$C" open "$V/abc.folded" >"$TMP/t.txt" || fail "text: exit $?"
cat >"$TMP/want.txt" <<'TXT'
100.0%   3     0.0%   0   A
100.0%   3     0.0%   0     B
 66.7%   2     0.0%   0       C
 33.3%   1     0.0%   0         D
 33.3%   1    33.3%   1           E
 33.3%   1     0.0%   0         F
 33.3%   1    33.3%   1           G
 33.3%   1     0.0%   0       H
 33.3%   1     0.0%   0         F
 33.3%   1    33.3%   1           G
TXT
head -1 "$TMP/t.txt" | grep -q "abc.folded.*3 samples.*transforms: none" ||
  fail "text header: $(head -1 "$TMP/t.txt")"
tail -n +2 "$TMP/t.txt" | diff -u "$TMP/want.txt" - || fail "text tree differs"
echo "PASS text tree"

"$C" open "$V/abc.folded" -t merge:C -t 'focus:A;B' >"$TMP/t.txt" || fail "text: exit $?"
head -1 "$TMP/t.txt" | grep -q "transforms: merge:C, focus:A;B" || fail "header transforms: $(head -1 "$TMP/t.txt")"
echo "PASS text header lists transforms"

"$C" open "$V/abc.folded" --depth 3 >"$TMP/t.txt" || fail "--depth: exit $?"
[ "$(tail -n +2 "$TMP/t.txt" | wc -l)" -eq 4 ] || fail "--depth 3: $(cat "$TMP/t.txt")"
"$C" open "$V/abc.folded" --min-percent 50 >"$TMP/t.txt" || fail "--min-percent: exit $?"
[ "$(tail -n +2 "$TMP/t.txt" | wc -l)" -eq 3 ] || fail "--min-percent 50: $(cat "$TMP/t.txt")"
# the JSON tree honours --min-percent too (canopy web asks with it): the same nodes as text
"$C" open "$V/abc.folded" --min-percent 50 --format json >"$TMP/t.json" || fail "--min-percent json: exit $?"
python3 -c 'import json,sys
def n(l): return sum(1 + n(x["children"]) for x in l)
sys.exit(n(json.load(open(sys.argv[1]))["roots"]) != 3)' "$TMP/t.json" || fail "--min-percent 50 json: $(cat "$TMP/t.json")"
echo "PASS --depth, --min-percent (text and json)"

# Folded: one line per distinct stack after the transforms, sorted by the stack text.
"$C" open "$V/abc.folded" -t merge:C --format folded >"$TMP/f.folded" || fail "folded: exit $?"
printf 'A;B;D;E 1\nA;B;F;G 1\nA;B;H;F;G 1\n' | diff -u - "$TMP/f.folded" || fail "folded output"
# collapse:B turns every stack into A;B: equal stacks are one line
"$C" open "$V/abc.folded" -t collapse:B -o "$TMP/c.folded" || fail "-o .folded: exit $?"
printf 'A;B 3\n' | diff -u - "$TMP/c.folded" || fail "-o .folded output"
# folded output reads back as the same tree
"$C" open "$V/interpreter.folded" --format folded >"$TMP/i.folded" || fail "folded: exit $?"
"$C" open "$TMP/i.folded" --format json >"$TMP/a.json" || fail "reopen: exit $?"
"$C" open "$V/interpreter.folded" --format json >"$TMP/b.json" || fail "open: exit $?"
python3 - "$TMP/a.json" "$TMP/b.json" <<'PY' || fail "folded round trip changed the tree"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["roots"] == b["roots"] and a["total"] == b["total"], (a, b)
PY
LC_ALL=C sort -c "$TMP/i.folded" || fail "folded output not sorted"
# an empty profile gives empty folded output
"$C" open "$CANOPY_TEST_DATA/vectors-extra/zero.folded" --format folded >"$TMP/z.folded" ||
  fail "empty folded: exit $?"
[ ! -s "$TMP/z.folded" ] || fail "empty profile: folded output not empty: $(cat "$TMP/z.folded")"
echo "PASS folded"

# Two functions of one name from different libraries are told apart in text output (the
# library in parentheses), and only those; folded output keeps bare names.
cat >"$TMP/start.txt" <<'PS'
python3 100   1.000000:    1000000 cpu-clock: 
	            1000 main+0x10 (/usr/bin/python3.11)
	            2000 _start+0x20 (/usr/bin/python3.11)

python3 100   1.001000:    1000000 cpu-clock: 
	            3000 _dl_start+0x10 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
	            4000 _start+0x8 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)

PS
"$C" open "$TMP/start.txt" >"$TMP/s.txt" || fail "collisions: exit $?"
grep -q '^ 50.0%.*   _start (python3.11)$' "$TMP/s.txt" || fail "collisions: $(cat "$TMP/s.txt")"
grep -q '^ 50.0%.*   _start (ld-linux-x86-64.so.2)$' "$TMP/s.txt" || fail "collisions: $(cat "$TMP/s.txt")"
grep -q '     main$' "$TMP/s.txt" || fail "collisions: unique name changed: $(cat "$TMP/s.txt")"
"$C" open "$TMP/start.txt" --functions | grep_all '   _start (ld-linux-x86-64.so.2)$' ||
  fail "collisions: --functions"
"$C" open "$TMP/start.txt" --format folded | grep_all -x '_start;main 1000000' ||
  fail "collisions: folded output changed"
echo "PASS colliding names"

# canopy's JSON tree reads back (docs/cli.md "JSON tree"): the text of open(FILE) is the
# text of open(open(FILE) --format json), header aside from the file name, for every test
# vector, and for a tree larger than the importer's first read (streamed, and gzipped).
python3 - "$TMP/big.folded" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(6000):
        f.write(f"main;run_{i % 50};step_{i % 997};leaf_{i} {1 + i % 5}\n")
PY
n=0
for f in "$V"/*.folded "$CANOPY_TEST_DATA"/vectors-extra/*.folded "$TMP/big.folded"; do
  "$C" open "$f" --format json >"$TMP/rt.json" || fail "json of $f: exit $?"
  "$C" open "$f" | sed '1s/^[^:]*://' >"$TMP/rt.want"
  "$C" open "$TMP/rt.json" | sed '1s/^[^:]*://' | diff -u "$TMP/rt.want" - ||
    fail "JSON round trip of $f changed the text"
  n=$((n + 1))
done
[ "$(stat -c %s "$TMP/rt.json")" -gt 65536 ] || fail "big JSON tree is not larger than 64 KiB"
gzip -c "$TMP/rt.json" >"$TMP/rt.json.gz"
"$C" open "$TMP/rt.json.gz" --format folded >"$TMP/rt.folded" || fail "gzipped JSON: exit $?"
"$C" open "$TMP/big.folded" --format folded | diff -q - "$TMP/rt.folded" >/dev/null ||
  fail "gzipped JSON round trip differs"
"$C" open "$V/abc.folded" --functions --format json >"$TMP/fn.json"
expect_fail 2 "$C" open "$TMP/fn.json"
grep -q "cannot be read back" "$TMP/f.err" || fail "functions JSON: $(cat "$TMP/f.err")"
echo "PASS JSON tree round trip ($n files)"

# --format beats the extension; an unknown extension means text.
"$C" open "$V/abc.folded" --format folded -o "$TMP/x.json" || fail "exit $?"
grep -q '^A;B;C;D;E 1$' "$TMP/x.json" || fail "--format folded -o x.json: $(cat "$TMP/x.json")"
"$C" open "$V/abc.folded" -o "$TMP/x.out" || fail "exit $?"
grep -q "100.0%" "$TMP/x.out" || fail "-o x.out is not text"
echo "PASS -o and --format"

# Time options on a profile with times (docs/calltree.md §7.5.4: a, a, b, b every 100 µs).
T=$CANOPY_TEST_DATA/timeline/integrator.cpuprofile
"$C" open "$T" --format json >"$TMP/all.json" || fail "exit $?"
"$C" open "$T" --last 150us --format json >"$TMP/last.json" || fail "--last: exit $?"
"$C" open "$T" --from 1000 --format json >"$TMP/late.json" || fail "--from: exit $?"
python3 - "$TMP/all.json" "$TMP/last.json" "$TMP/late.json" <<'PY' || fail "time options"
import json, math, sys
full, last, late = (json.load(open(f)) for f in sys.argv[1:4])
# all: a (4 hits, 2 self), b 2 hits; --last 150us keeps the two b samples only
assert full["unit"] == "ms", full["unit"]
a = full["roots"][0]
assert a["name"] == "a" and math.isclose(a["self"] * 2, a["total"]), a
b = last["roots"][0]
assert b["name"] == "a" and b["self"] == 0 and b["children"][0]["name"] == "b", last
assert math.isclose(last["total"], full["total"] / 2), (last["total"], full["total"])
assert late["roots"] == [] and late["total"] == 0, late
PY
expect_rc() { local want=$1; shift; local rc=0; "$C" "$@" >/dev/null 2>&1 || rc=$?; [ "$rc" -eq "$want" ] || fail "$* exited $rc, expected $want"; }
expect_rc 2 open "$T" --last 1s --from 0
expect_rc 2 open "$T" --from 2 --to 1
expect_rc 2 open "$T" --invert --functions
expect_rc 2 open "$T" --callers-mode self
echo "PASS time options"

"$C" open --help | grep_all "usage: canopy open FILE" || fail "open --help"
echo "all passed"
