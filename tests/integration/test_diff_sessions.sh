#!/usr/bin/env bash
# Live sessions in `canopy diff` and `canopy timeline --format speedscope`,
# against a real canopyd on a private socket and state dir:
# - diff SESSION@FROM..TO SESSION@FROM..TO (two windows of one session) and diff SESSION
#   SESSION (two sessions): JSON shape, raw side totals equal to `canopy tree` of the same
#   session and window, normalized totals that cancel on a steady workload;
# - diff FILE SESSION where FILE is the session saved: every node exactly zero;
# - errors: unknown session (exit 1), bad window (exit 2), no daemon (exit 1, one line);
# - timeline SESSION|FILE --format speedscope (and -o X.speedscope.json): valid against
#   speedscope's schema (tests/data/speedscope), balanced evented profiles, one open event
#   per estimated call, identical bytes for the session and its saved file.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
SCHEMA=$CANOPY_TEST_DATA/speedscope/file-format-schema.json
python3 -c 'import jsonschema' 2>/dev/null || skip "python3-jsonschema is not installed"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock

D_PID=
trap 'rc=$?; kill $D_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd

# Two sessions of the steady workload (~25 ms per round): 1 s and 2 s, through the daemon.
"$C" run --format json -o "$TMP/r1.json" -- "$WL" --rounds 40 >/dev/null 2>"$TMP/r1.err" ||
  fail "run 1: $(cat "$TMP/r1.err")"
"$C" run --format json -o "$TMP/r2.json" -- "$WL" --rounds 80 >/dev/null 2>"$TMP/r2.err" ||
  fail "run 2: $(cat "$TMP/r2.err")"
grep -q 'in-process' "$TMP/r1.err" "$TMP/r2.err" && fail "run went in-process with a daemon up"
S1=$(json "$TMP/r1.json" 'd["session"]')
S2=$(json "$TMP/r2.json" 'd["session"]')
[[ "$S1" == s* && "$S2" == s* && "$S1" != "$S2" ]] || fail "sessions '$S1' '$S2'"

# check_diff RAW NORM BASE_TREE NEW_TREE: the raw diff's side totals are the trees' totals;
# the normalized diff scales BASE to NEW's total, so its total is 0 and, the workload being
# steady, every work_* node changes by less than 8% of the total.
check_diff() {
  python3 - "$@" <<'PY'
import json, sys
raw, norm, bt, nt = (json.load(open(f)) for f in sys.argv[1:5])
for d in (raw, norm):
    for k in ("diff", "normalized", "factor", "base_total", "new_total", "total", "roots", "unit"):
        assert k in d, k
    assert d["diff"] is True
    assert d["roots"] and all({"name", "total", "self", "base", "new"} <= set(r) for r in d["roots"])
assert not raw["normalized"] and norm["normalized"], (raw["normalized"], norm["normalized"])
close = lambda a, b: abs(a - b) <= 1e-6 * max(1, abs(a), abs(b))
assert bt["total"] > 0 and nt["total"] > 0, (bt["total"], nt["total"])
assert close(raw["base_total"], bt["total"]), (raw["base_total"], bt["total"])
assert close(raw["new_total"], nt["total"]), (raw["new_total"], nt["total"])
assert close(raw["total"], nt["total"] - bt["total"]), (raw["total"], nt["total"], bt["total"])
assert close(norm["factor"], nt["total"] / bt["total"]), (norm["factor"], nt["total"], bt["total"])
assert abs(norm["total"]) <= 1e-6 * nt["total"], norm["total"]
assert close(sum(r["new"] for r in norm["roots"]), nt["total"])
assert close(sum(r["base"] for r in norm["roots"]), nt["total"]), "BASE not scaled to NEW"
worst = {}
def walk(n):
    if n["name"].startswith("work_"):
        worst[n["name"]] = max(worst.get(n["name"], 0), abs(n["total"]) / nt["total"])
    for c in n.get("children", []):
        walk(c)
for r in norm["roots"]:
    walk(r)
# A node whose normalized change is exactly 0 is left out of the tree (docs/cli.md "JSON
# tree"), which happens when both sides hold it in the same proportion (likely with few
# samples): presence is checked on the sides' own trees, the changes on what is shown.
seen = set()
def names(n):
    if n["name"].startswith("work_"):
        seen.add(n["name"])
    for c in n.get("children", []):
        names(c)
for t in (bt, nt):
    for r in t["roots"]:
        names(r)
assert {"work_a", "work_b", "work_c"} <= seen, seen
assert not worst or max(worst.values()) < 0.08, worst
print({k: round(100 * v, 1) for k, v in sorted(worst.items())}, "% of total")
PY
}

# ---- two windows of one session ---------------------------------------------------------
"$C" diff "$S2@0..0.9" "$S2@0.9.." --no-normalize --format json >"$TMP/w.raw.json" ||
  fail "diff windows (raw)"
"$C" diff "$S2@0..0.9" "$S2@0.9.." --format json >"$TMP/w.json" || fail "diff windows"
"$C" tree "$S2" --from 0 --to 0.9 --format json >"$TMP/w.base.json" || fail "tree window 1"
"$C" tree "$S2" --from 0.9 --format json >"$TMP/w.new.json" || fail "tree window 2"
out=$(check_diff "$TMP/w.raw.json" "$TMP/w.json" "$TMP/w.base.json" "$TMP/w.new.json") ||
  fail "diff of two windows: $out"
echo "PASS diff $S2@0..0.9 $S2@0.9..: $out"

# ---- two sessions -----------------------------------------------------------------------
"$C" diff "$S1" "$S2" --no-normalize --format json >"$TMP/s.raw.json" || fail "diff sessions (raw)"
"$C" diff "$S1" "$S2" --format json >"$TMP/s.json" || fail "diff sessions"
"$C" tree "$S1" --format json >"$TMP/s1.json" || fail "tree $S1"
"$C" tree "$S2" --format json >"$TMP/s2.json" || fail "tree $S2"
out=$(check_diff "$TMP/s.raw.json" "$TMP/s.json" "$TMP/s1.json" "$TMP/s2.json") ||
  fail "diff of two sessions: $out"
echo "PASS diff $S1 $S2: $out"
"$C" diff "$S1" "$S2" >"$TMP/s.txt" || fail "diff sessions, text"
grep -q "$S1 -> $S2" "$TMP/s.txt" || fail "text header: $(head -1 "$TMP/s.txt")"

# ---- a file against the session it was saved from: nothing changes ------------------------
"$C" save "$S1" -o "$TMP/s1.canopy" || fail "save"
"$C" diff "$TMP/s1.canopy" "$S1" --no-normalize --format json >"$TMP/same.json" ||
  fail "diff FILE SESSION"
python3 - "$TMP/same.json" <<'PY' || fail "diff of a session with its saved file is not zero"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["total"] == 0 and d["base_total"] == d["new_total"] > 0, d
def walk(n):
    assert n["total"] == 0 and n["self"] == 0 and n["base"] == n["new"], n
    for c in n.get("children", []):
        walk(c)
for r in d["roots"]:
    walk(r)
PY
# a window on a session of the same name as nothing on disk, from another directory: an
# existing file wins over a session name
(cd "$TMP" && cp s1.canopy "$S2" && "$C" diff "$S2" "$S1" --no-normalize --format json) \
  >"$TMP/wins.json" || fail "diff FILE-named-like-a-session SESSION"
[ "$(json "$TMP/wins.json" 'd["total"]')" = 0 ] || fail "an existing file did not win over a session"
echo "PASS diff FILE SESSION (saved copy: all zero; an existing file wins)"

# ---- errors -----------------------------------------------------------------------------
expect_fail 1 "$C" diff no-such-session "$S1"
grep -q "unknown session 'no-such-session'" "$TMP/f.err" || fail "unknown session: $(cat "$TMP/f.err")"
expect_fail 1 "$C" diff "$S1" no-such-session@1..2
expect_fail 2 "$C" diff "$S1@5..1" "$S2"
expect_fail 2 "$C" diff "$S1" "$TMP/missing.folded"
echo "PASS errors"

# ---- timeline --format speedscope -------------------------------------------------------
# check_evented SPEEDSCOPE TIMELINE_JSON: schema-valid; evented profiles whose open/close
# events nest (each close closes the innermost open frame) with non-decreasing times
# within [0, endValue]; one open event per call of the JSON timeline; frames cover names.
check_evented() {
  python3 - "$SCHEMA" "$@" <<'PY'
import json, sys
import jsonschema
schema, doc, tl = (json.load(open(f)) for f in sys.argv[1:4])
jsonschema.Draft7Validator(schema).validate(doc)
frames = doc["shared"]["frames"]
opens = 0
tids = set()
for p in doc["profiles"]:
    assert p["type"] == "evented" and p["unit"] == "nanoseconds", (p["type"], p["unit"])
    tids.add(int(p["name"].split()[-1]))
    stack, last = [], 0
    for e in p["events"]:
        assert 0 <= e["frame"] < len(frames), e
        assert last <= e["at"] <= p["endValue"] - p["startValue"], (e, last, p["endValue"])
        last = e["at"]
        if e["type"] == "O":
            stack.append(e["frame"])
            opens += 1
        else:
            assert stack and stack[-1] == e["frame"], ("unbalanced close", e, stack[-3:])
            stack.pop()
    assert not stack, "frames left open"
calls = tl["calls"]
assert calls and opens == len(calls), (opens, len(calls))
assert tids == {c["tid"] for c in calls}, (tids, {c["tid"] for c in calls})
names = {f["name"] for f in frames}
assert {c["name"] for c in calls} <= names
assert {"work_a", "work_b_inner", "burn"} <= names, sorted(names)[:20]
print(f"{len(doc['profiles'])} evented profile(s), {opens} calls")
PY
}
"$C" timeline "$S1" --format speedscope >"$TMP/tl.s.json" || fail "timeline SESSION speedscope"
"$C" timeline "$S1" --format json >"$TMP/tl.s.calls.json" || fail "timeline SESSION json"
out=$(check_evented "$TMP/tl.s.json" "$TMP/tl.s.calls.json") || fail "session speedscope: $out"
echo "PASS timeline $S1 --format speedscope: $out"
"$C" timeline "$TMP/s1.canopy" -o "$TMP/tl.f.speedscope.json" || fail "timeline FILE -o .speedscope.json"
"$C" timeline "$TMP/s1.canopy" --format json >"$TMP/tl.f.calls.json" || fail "timeline FILE json"
out=$(check_evented "$TMP/tl.f.speedscope.json" "$TMP/tl.f.calls.json") ||
  fail "file speedscope: $out"
cmp -s "$TMP/tl.s.json" "$TMP/tl.f.speedscope.json" ||
  fail "timeline speedscope differs between the session and its saved file"
echo "PASS timeline FILE -o X.speedscope.json: $out, same bytes as the session's"
# a range and a thread filter apply to the session's speedscope timeline as to its JSON one
"$C" timeline "$S2" --format json >"$TMP/tl.s2.json" || fail "timeline $S2 json"
TID=$(json "$TMP/tl.s2.json" 'd["calls"][0]["tid"]')
"$C" timeline "$S2" --from 0.5 --to 1 --tid "$TID" -o "$TMP/tl.r.speedscope.json" ||
  fail "timeline SESSION range speedscope"
"$C" timeline "$S2" --from 0.5 --to 1 --tid "$TID" --format json >"$TMP/tl.r.json" ||
  fail "timeline SESSION range json"
out=$(check_evented "$TMP/tl.r.speedscope.json" "$TMP/tl.r.json") || fail "range speedscope: $out"
[ "$(json "$TMP/tl.r.json" "len(d['calls']) < len(json.load(open('$TMP/tl.s2.json'))['calls'])")" = True ] ||
  fail "the range did not restrict the timeline"
expect_fail 1 "$C" timeline no-such-session --format speedscope
expect_fail 2 "$C" timeline "$S1" --format pprof
echo "PASS timeline speedscope: range, tid, errors"

# ---- no daemon ----------------------------------------------------------------------------
kill -TERM "$D_PID"
wait "$D_PID" 2>/dev/null || true
expect_fail 1 "$C" diff "$S1" "$S2"
grep -q 'no daemon answers' "$TMP/f.err" || fail "no daemon: $(cat "$TMP/f.err")"
expect_fail 1 "$C" timeline "$S1" --format speedscope
echo "PASS no daemon"
