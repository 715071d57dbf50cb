#!/usr/bin/env bash
# `canopy timeline` on .cpuprofile files: the SamplesIntegrator results of docs/calltree.md
# §7.1.16 and §7.5.4 (no trace events), in JSON, text and Chrome trace form.
source "$(dirname "$0")/lib.sh"
DATA=$CANOPY_TEST_DATA/timeline

# check_calls FILE EXPECTED: EXPECTED is "name depth start dur" per call (µs), any order.
check_calls() {
  local label=$1 file=$2 expected=$3
  "$CANOPY_BIN" timeline "$file" --format json >"$TMP/tl.json" 2>"$TMP/err" ||
    fail "$label: exit $?: $(cat "$TMP/err")"
  python3 - "$TMP/tl.json" "$expected" "$label" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
label = sys.argv[3]
assert doc.get("unit") == "us", f"{label}: unit {doc.get('unit')!r}"
got = sorted((c["name"], c["depth"], float(c["start"]), float(c["dur"])) for c in doc["calls"])
exp = []
for line in sys.argv[2].strip().splitlines():
    n, d, s, u = line.split()
    exp.append((n, int(d), float(s), float(u)))
exp.sort()
if got != exp:
    print(f"FAIL {label}:\n  got      {got}\n  expected {exp}")
    sys.exit(1)
for c in doc["calls"]:
    assert c.get("lib") == "app.js", f"{label}: lib {c.get('lib')!r}"
    assert isinstance(c.get("tid"), int), f"{label}: tid {c.get('tid')!r}"
print(f"PASS {label}: {len(got)} calls")
PY
}

# §7.1.16: timestamps 1, 2, 3 ms. A [1,3) 2, B 2, C [1,3) 2, D [1,2) 1, E 1, F [2,3) 1,
# G 1, H [3,3) 0, F 0, G 0.
check_calls "7.1.16 SamplesIntegrator" "$DATA/abc.cpuprofile" "
A 0 1000 2000
B 1 1000 2000
C 2 1000 2000
D 3 1000 1000
E 4 1000 1000
F 3 2000 1000
G 4 2000 1000
H 2 3000 0
F 3 3000 0
G 4 3000 0"

# §7.5.4: samples a, a, b, b at 100..400 µs: a ts 100 dur 300; b ts 300 dur 100.
check_calls "7.5.4 SamplesIntegrator" "$DATA/integrator.cpuprofile" "
a 0 100 300
b 1 300 100"

# Chrome trace: parses as JSON, one complete event per call with numeric ts/dur/pid/tid.
"$CANOPY_BIN" timeline "$DATA/abc.cpuprofile" --format chrome-trace >"$TMP/trace.json" 2>"$TMP/err" ||
  fail "chrome-trace: exit $?: $(cat "$TMP/err")"
python3 - "$TMP/trace.json" <<'PY' || exit 1
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"] if isinstance(doc, dict) else doc
x = [e for e in events if e.get("ph") == "X"]
assert len(x) == 10, f"{len(x)} X events, expected 10"
for e in x:
    for k in ("ts", "dur", "pid", "tid"):
        assert isinstance(e.get(k), (int, float)) and not isinstance(e.get(k), bool), f"{k} in {e}"
    assert isinstance(e.get("name"), str)
a = [e for e in x if e["name"] == "A"]
assert len(a) == 1 and a[0]["ts"] == 1000 and a[0]["dur"] == 2000, a
print("PASS chrome-trace: 10 X events")
PY

# -o with the .trace.json extension picks chrome-trace.
"$CANOPY_BIN" timeline "$DATA/integrator.cpuprofile" -o "$TMP/out.trace.json" ||
  fail "-o .trace.json: exit $?"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert sum(e.get("ph")=="X" for e in d["traceEvents"])==2' \
  "$TMP/out.trace.json" || fail "-o .trace.json is not a chrome trace with 2 X events"
echo "PASS -o FILE.trace.json"

# Text: a header and one line per call, indented by depth.
"$CANOPY_BIN" timeline "$DATA/integrator.cpuprofile" >"$TMP/tl.txt" || fail "text: exit $?"
[ "$(wc -l <"$TMP/tl.txt")" -eq 3 ] || fail "text: expected 3 lines, got: $(cat "$TMP/tl.txt")"
grep -Eq '^ +100\.000 +300\.000 +-?[0-9]+   a  \[app\.js\]$' "$TMP/tl.txt" || fail "text: no line for a: $(cat "$TMP/tl.txt")"
grep -Eq '^ +300\.000 +100\.000 +-?[0-9]+     b  \[app\.js\]$' "$TMP/tl.txt" || fail "text: no line for b: $(cat "$TMP/tl.txt")"
echo "PASS text timeline"

# A real node --cpu-prof profile with GC (tests/data/src/gc_heavy.js: 210 of 589 samples are
# `(garbage collector)`), committed, and a fresh one from this machine's node: the calls must
# be exactly those of DevTools' model (devtools_timeline.py, §5.5): GC samples extend the
# calls around them, `(program)`/`(idle)` end them and are no calls.
check_devtools() {
  local label=$1 file=$2
  "$CANOPY_BIN" timeline "$file" --format json >"$TMP/real.json" 2>"$TMP/err" ||
    fail "$label: exit $?: $(cat "$TMP/err")"
  /usr/bin/python3 "$(dirname "$0")/devtools_timeline.py" "$file" >"$TMP/oracle.json" ||
    fail "$label: the DevTools model failed"
  "$CANOPY_BIN" timeline "$file" --format chrome-trace >"$TMP/real.trace.json" ||
    fail "$label: chrome-trace: exit $?"
  /usr/bin/python3 - "$TMP/real.json" "$TMP/oracle.json" "$TMP/real.trace.json" "$label" <<'PY' || exit 1
import json, sys
got = json.load(open(sys.argv[1]))["calls"]
exp = json.load(open(sys.argv[2]))
label = sys.argv[4]
key = lambda c: (c["name"], c["depth"], round(float(c["start"]), 3), round(float(c["dur"]), 3))
g, e = sorted(map(key, got)), sorted(map(key, exp))
if g != e:
    print(f"FAIL {label}: {len(g)} calls, DevTools {len(e)}")
    print("  only canopy:  ", sorted(set(g) - set(e))[:8])
    print("  only DevTools:", sorted(set(e) - set(g))[:8])
    sys.exit(1)
assert len(e) > 20, f"{label}: only {len(e)} calls"
meta = ("(program)", "(idle)", "(garbage collector)", "(root)")
events = json.load(open(sys.argv[3]))["traceEvents"]
x = [ev for ev in events if ev.get("ph") == "X"]
assert len(x) == len(e), f"{label}: {len(x)} trace events for {len(e)} calls"
bad = [ev["name"] for ev in x if ev["name"] in meta]
assert not bad, f"{label}: meta nodes as calls in the chrome trace: {bad[:5]}"
print(f"PASS {label}: {len(g)} calls = DevTools' model")
PY
}
prof=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); n={x["id"]:x["callFrame"]["functionName"] for x in d["nodes"]}; print(sum(n[s]=="(garbage collector)" for s in d["samples"]))' "$DATA/node-gc.cpuprofile")
[ "$prof" -gt 50 ] || fail "node-gc.cpuprofile: only $prof GC samples"
check_devtools "node-gc.cpuprofile (committed)" "$DATA/node-gc.cpuprofile"
if command -v node >/dev/null; then
  node --cpu-prof --cpu-prof-dir="$TMP/prof" --cpu-prof-interval 1000 \
    "$CANOPY_TEST_DATA/src/gc_heavy.js" >/dev/null || fail "node --cpu-prof: exit $?"
  check_devtools "node --cpu-prof (fresh)" "$(ls "$TMP"/prof/*.cpuprofile | head -1)"
elif [ "${CI:-}" = true ]; then
  fail "node is not installed (scripts/setup installs it)"
fi

# --help
"$CANOPY_BIN" timeline --help | grep_all "usage: canopy timeline" || fail "timeline --help"
echo "all passed"
