#!/usr/bin/env bash
# pprof export and import: every pprof canopy writes is read by `go tool pprof`
# (-raw and -top show the same functions and totals as `canopy open --functions`), with
# and without transforms; folded -> pprof -> folded is identical; profiles written by Go's
# runtime/pprof import with the totals `go tool pprof` reports; bad input exits 2 with a
# one-line error naming the file.
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
H=$(dirname "$0")/formats/pprof_helper.py
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz
V=$CANOPY_TEST_DATA/vectors
command -v go >/dev/null || skip "go (golang-go) is not installed"
export GOCACHE=$TMP/gocache GO111MODULE=off HOME=${HOME:-$TMP}

# go tool pprof -top with every node shown, in the given unit.
pprof_top() { go tool pprof -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 "$@" 2>/dev/null; }

# check_against_pprof NAME UNIT CANOPY_ARGS...: writes a pprof with CANOPY_ARGS, then
# compares go tool pprof's -top and -raw with canopy's --functions for the same query.
check_against_pprof() {
  local name=$1 unit=$2
  shift 2
  "$C" open "$@" --format pprof -o "$TMP/$name.pb.gz" || fail "$name: export exit $?"
  "$C" open "$@" --functions --format json >"$TMP/$name.json" || fail "$name: functions exit $?"
  pprof_top -unit="$unit" "$TMP/$name.pb.gz" >"$TMP/$name.top" || fail "$name: go tool pprof -top failed"
  python3 "$H" compare-top "$TMP/$name.json" "$TMP/$name.top" || fail "$name: -top differs from canopy --functions"
  go tool pprof -raw "$TMP/$name.pb.gz" >"$TMP/$name.raw" 2>/dev/null || fail "$name: -raw failed"
  local raw want
  raw=$(python3 "$H" raw-total "$TMP/$name.raw")
  want=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["total"]))' "$TMP/$name.json")
  [ "$raw" = "$want" ] || fail "$name: -raw total $raw, canopy total $want"
  echo "PASS $name: go tool pprof -top/-raw agree with canopy --functions (total $want)"
}

check_against_pprof perf ns "$PERF"
check_against_pprof perf-merge ns "$PERF" -t merge:run_round
check_against_pprof perf-focus ns "$PERF" -t focus-func:run_round -t drop:work_c
check_against_pprof abc samples "$V/abc.folded"
check_against_pprof abc-collapse samples "$V/abc.folded" -t collapse:C

# The untransformed export keeps per-frame addresses, mappings with file names, and
# thread labels; the transformed one has one location per function.
go tool pprof -raw "$TMP/perf.pb.gz" 2>/dev/null >"$TMP/raw.txt"
grep -q '^PeriodType: cpu nanoseconds' "$TMP/raw.txt" || fail "period type: $(grep PeriodType "$TMP/raw.txt")"
grep -qE '^ +[0-9]+: 0x128f M=[0-9]+ work_a' "$TMP/raw.txt" || fail "no per-address location for work_a+0x3f"
grep -qE '/usr/lib/x86_64-linux-gnu/libc.so.6' "$TMP/raw.txt" || fail "libc mapping file name missing"
grep -q 'tid:\[10878\]' "$TMP/raw.txt" || fail "thread labels missing"
echo "PASS per-frame locations, mappings and thread labels"

# Round trip: folded -> pprof -> folded is identical (and pprof -> canopy -> pprof keeps
# totals).
for f in "$V"/*.folded "$CANOPY_TEST_DATA"/vectors-extra/*.folded; do
  b=$(basename "$f" .folded)
  "$C" open "$f" --format folded >"$TMP/$b.direct" || fail "$b: folded export exit $?"
  "$C" open "$f" --format pprof -o "$TMP/$b.pb.gz" || fail "$b: pprof export exit $?"
  "$C" open "$TMP/$b.pb.gz" --format folded >"$TMP/$b.back" || fail "$b: pprof import exit $?"
  diff -u "$TMP/$b.direct" "$TMP/$b.back" || fail "$b: folded -> pprof -> folded differs"
  # and against the input itself (blank lines dropped, sorted, duplicates merged)
  python3 - "$f" "$TMP/$b.back" <<'PY' || fail "$b: round trip differs from the input file"
import sys, collections
w = collections.OrderedDict()
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line.strip():
        continue
    stack, n = line.rsplit(" ", 1)
    if int(n):
        w[stack] = w.get(stack, 0) + int(n)
want = "".join(f"{s} {n}\n" for s, n in sorted(w.items()))
got = open(sys.argv[2]).read()
if want != got:
    print("want:\n" + want + "got:\n" + got)
    sys.exit(1)
PY
done
echo "PASS folded -> pprof -> folded identical"

# A profile written by Go's runtime/pprof (another tool's pprof) imports into the engine.
cat >"$TMP/main.go" <<'GO'
package main

import (
	"os"
	"runtime/pprof"
	"time"
)

//go:noinline
func spinA(n int) int { s := 0; for i := 0; i < n; i++ { s += i * i % 7 }; return s }

//go:noinline
func spinB(n int) int { s := 0; for i := 0; i < n; i++ { s ^= i * 31 }; return s }

func main() {
	f, _ := os.Create(os.Args[1])
	pprof.StartCPUProfile(f)
	end := time.Now().Add(500 * time.Millisecond)
	s := 0
	for time.Now().Before(end) { s += spinA(200000) + spinB(100000) }
	pprof.StopCPUProfile()
	f.Close()
	if s == 42 { println(s) }
}
GO
(cd "$TMP" && go run main.go "$TMP/go.pprof") || fail "go run failed"
"$C" open "$TMP/go.pprof" --functions --format json >"$TMP/go.json" || fail "go profile: import exit $?"
pprof_top -unit=ns "$TMP/go.pprof" >"$TMP/go.top"
python3 "$H" compare-top "$TMP/go.json" "$TMP/go.top" || fail "Go runtime/pprof profile: canopy and go tool pprof differ"
grep -q '"main.spinA"' "$TMP/go.json" || fail "main.spinA missing from the Go profile"
# go tool pprof's own re-encoding (-proto) of canopy's output reads back too
go tool pprof -proto "$TMP/perf.pb.gz" >"$TMP/reproto.pb.gz" 2>/dev/null || fail "go tool pprof -proto failed"
"$C" open "$TMP/reproto.pb.gz" --functions --format json >"$TMP/reproto.json" || fail "-proto output: import exit $?"
cmp -s <(python3 -m json.tool --sort-keys "$TMP/perf.json" | grep -v '"transforms"') \
       <(python3 -m json.tool --sort-keys "$TMP/reproto.json" | grep -v '"transforms"') ||
  fail "go tool pprof -proto output reads back differently"
echo "PASS profiles written by Go (runtime/pprof, go tool pprof -proto) import"

# Bad input: exit 2, one line on stderr naming the file, nothing on stdout.
bad() {
  local what=$1 file=$2 pattern=$3
  set +e
  "$C" open "$file" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$what: exit $rc, want 2"
  [ ! -s "$TMP/out" ] || fail "$what: wrote to stdout"
  [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "$what: stderr is not one line: $(cat "$TMP/err")"
  grep -q "$(basename "$file")" "$TMP/err" || fail "$what: error does not name the file"
  grep -qE "$pattern" "$TMP/err" || fail "$what: unexpected message: $(cat "$TMP/err")"
  echo "PASS bad input ($what): $(cat "$TMP/err")"
}
zcat "$TMP/perf.pb.gz" >"$TMP/perf.pb"
head -c 200 "$TMP/perf.pb" >"$TMP/truncated.pb"
bad "truncated pprof" "$TMP/truncated.pb" "byte [0-9]+"
head -c 120 "$TMP/perf.pb.gz" >"$TMP/truncated.pb.gz"
bad "truncated gzip" "$TMP/truncated.pb.gz" "gzip"
printf '\x1f\x8b\x08\x00garbage-not-deflate' >"$TMP/wrong.pb.gz"
bad "wrong gzip" "$TMP/wrong.pb.gz" "gzip"
for k in location string function strtab0; do
  python3 "$H" make-bad "$k" "$TMP/bad-$k.pb"
done
bad "location id out of range" "$TMP/bad-location.pb" "location id 42 does not exist"
bad "string index out of range" "$TMP/bad-string.pb" "string index out of range"
bad "function id out of range" "$TMP/bad-function.pb" "function id 7 does not exist"
bad "string_table[0] not empty" "$TMP/bad-strtab0.pb" 'string_table\[0\]'
python3 "$H" make-bad good "$TMP/good.pb"
"$C" open "$TMP/good.pb" --format folded | grep_all -x 'main;work 5' || fail "the defect-free variant does not read"
echo "PASS the defect-free crafted profile reads (main;work 5)"
