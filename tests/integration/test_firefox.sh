#!/usr/bin/env bash
# Firefox Profiler output (`--format firefox`, docs/cli.md "Firefox Profiler"): every file
# passes formats/firefox_check.py, which checks its structure against the processed profile
# format at the version canopy writes (tables, column lengths, indexes in range, prefixes
# before their stacks, the string table, categories, inline frames) and rebuilds its call
# trees from the samples as the profiler does, to compare them with canopy's own JSON for
# the same query: the whole tree (every path's total and self), the function list (self,
# total), each thread's tree and name (`--group-by thread`), and some threads' trees and
# function lists (`--tid`). On:
# - live sessions of a real canopyd: wl_shares_fp in CPU mode (also its 50/30/20 split,
#   read from the file; the transformed and --group-by tree path; `run -o FILE`; `save`;
#   the library's build id; start time and interval), wl_waits_fp in wall mode
#   (nanosecond weights as tracing-ms; the Off-CPU category on the thread-state frames);
# - files of every import format: folded, `perf script`, pprof (canopy's and Go's), the
#   JSON tree, .cpuprofile, and the session's .canopy (byte for byte what the session gave).
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
CHECK="python3 $(dirname "$0")/formats/firefox_check.py"
WL=$CANOPY_WORKLOADS/wl_shares_fp
WAITS=$CANOPY_WORKLOADS/wl_waits_fp
V=$CANOPY_TEST_DATA/vectors
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz
GO_PPROF=$CANOPY_SOURCE_DIR/tests/fuzz/corpus/fuzz_import_pprof/go-runtime.pb
[ -x "$WL" ] && [ -x "$WAITS" ] || fail "workloads not built"
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
trap 'rc=$?; kill $D_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd

# compare LABEL CMD SOURCE [ARGS...]: `canopy CMD SOURCE ARGS --format firefox` against
# canopy's JSON for the same query (CMD is tree for a session, open for a file): the whole
# tree, the functions, up to three threads' (--tid), and every thread's tree and name from
# --group-by thread when ARGS have no transform or grouping to move its roots.
compare() {
  local label=$1 cmd=$2 src=$3 grouped=- tid per_tid=()
  shift 3
  local out=$TMP/$label
  "$C" $cmd "$src" "$@" --format firefox -o "$out.ff.json" 2>"$out.err" || fail "$label: $(cat "$out.err")"
  "$C" $cmd "$src" "$@" --format json >"$out.tree.json" || fail "$label: json"
  "$C" $cmd "$src" "$@" --functions --format json >"$out.funcs.json" || fail "$label: functions"
  if [[ " $* " != *" --group-by "* && " $* " != *" -t "* ]]; then
    grouped=$out.grouped.json
    "$C" $cmd "$src" "$@" --group-by thread --format json >"$grouped" || fail "$label: grouped"
  fi
  for tid in $(json "$out.ff.json" '" ".join(sorted({str(t["tid"]) for t in d["threads"] if t["tid"]})[:3])'); do
    "$C" $cmd "$src" "$@" --tid "$tid" --format json >"$out.$tid.tree.json" || fail "$label: --tid $tid"
    "$C" $cmd "$src" "$@" --tid "$tid" --functions --format json >"$out.$tid.funcs.json" ||
      fail "$label: --tid $tid --functions"
    per_tid+=("$tid" "$out.$tid.tree.json" "$out.$tid.funcs.json")
  done
  $CHECK "$out.ff.json" "$out.tree.json" "$out.funcs.json" "$grouped" "${per_tid[@]}" >"$out.check" ||
    fail "$label: $(cat "$out.check")"
  echo "PASS $label: $(cat "$out.check")"
}

# ---- a CPU session of wl_shares_fp ------------------------------------------------------
before_ms=$(($(date +%s) * 1000))
"$C" run --name shares --format firefox -o "$TMP/run.firefox.json" -- "$WL" --rounds 40 \
  >/dev/null 2>"$TMP/run.err" || fail "run: $(cat "$TMP/run.err")"
after_ms=$(($(date +%s) * 1000 + 1000))
S=shares
compare live tree "$S"
compare live-merge tree "$S" -t merge:burn -t merge:work_b_inner
compare live-grouped tree "$S" --group-by thread
compare live-range tree "$S" --from 0.1 --to 0.5

# The file `run -o` wrote is the session's tree at its end: the same tables as `tree S`
# (symbols had arrived: run waits for them).
cmp -s "$TMP/run.firefox.json" "$TMP/live.ff.json" || fail "run -o FILE differs from tree S"
# save: the format from --format or the extension, the same bytes
"$C" save "$S" -o "$TMP/saved.firefox.json" || fail "save"
cmp -s "$TMP/saved.firefox.json" "$TMP/live.ff.json" || fail "save -o FILE.firefox.json differs"
"$C" save "$S" -o "$TMP/s.canopy" || fail "save .canopy"
"$C" open "$TMP/s.canopy" --format firefox -o "$TMP/file.ff.json" || fail "open .canopy"
cmp -s "$TMP/file.ff.json" "$TMP/live.ff.json" || fail "the saved .canopy exports differently"
echo "PASS run -o, save and open of the saved session give the same file"

BUILD_ID=$(readelf -n "$WL" 2>/dev/null | sed -n 's/.*Build ID: *//p')
python3 - "$TMP/live.ff.json" "$before_ms" "$after_ms" "$BUILD_ID" "$(basename "$WL")" <<'PY' ||
import json, sys
d = json.load(open(sys.argv[1]))
lo, hi, build_id, exe = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
m = d["meta"]
assert abs(m["interval"] - 1000 / 999) < 1e-9, m["interval"]  # run's default 999 Hz
assert lo - 1000 <= m["startTime"] <= hi, (lo, m["startTime"], hi)  # recorded to the second
libs = {l["name"]: l for l in d["libs"]}
assert exe in libs, sorted(libs)
if build_id:
    assert libs[exe]["codeId"] == build_id, (libs[exe]["codeId"], build_id)
sh = d["shared"]
strs, fr, fn = sh["stringArray"], sh["frameTable"], sh["funcTable"]
cats = [c["name"] for c in m["categories"]]
names = [strs[fn["name"][fr["func"][i]]] for i in range(fr["length"])]
work = [i for i, n in enumerate(names) if n == "work_a"]
assert work and all(cats[fr["category"][i]] == "User" for i in work), "work_a is not User code"
assert all(fr["address"][i] >= 0 and fr["nativeSymbol"][i] is not None for i in work), \
    "work_a's frames have no address or native symbol"
kernel = [i for i in range(fr["length"]) if cats[fr["category"][i]] == "Kernel"]
print(f"startTime {m['startTime']}, interval {m['interval']:.4f} ms, {len(d['libs'])} libs, "
      f"{len(kernel)} kernel frames")
# The known split, read from the file: per sample, each work_* once.
paths, tot, sums = [], 0.0, {"work_a": 0.0, "work_b": 0.0, "work_c": 0.0}
st = sh["stackTable"]
for i in range(st["length"]):
    p = st["prefix"][i]
    paths.append((paths[p] if p is not None else frozenset()) | {names[st["frame"][i]]})
for t in d["threads"]:
    s = t["samples"]
    assert s["weightType"] == "samples"
    for k in range(s["length"]):
        tot += s["weight"][k]
        for f in sums:
            sums[f] += s["weight"][k] if f in paths[s["stack"][k]] else 0
got = {f: 100 * v / tot for f, v in sums.items()}
want = {"work_a": 50, "work_b": 30, "work_c": 20}
print("shares: " + ", ".join(f"{f} {got[f]:.1f}% (want {want[f]})" for f in want))
assert all(abs(got[f] - want[f]) <= 5 for f in want), "shares off"
PY
  fail "live: meta, libs, categories or shares"
echo "PASS live: meta, libs, categories, shares"

# ---- a wall session of wl_waits_fp: nanosecond weights, off-CPU states -------------------
"$C" run --name waits --mode wall --format json -o "$TMP/waits.json" -- "$WAITS" 1 \
  >/dev/null 2>"$TMP/waits.err" || fail "run wall: $(cat "$TMP/waits.err")"
compare wall tree waits
compare wall-drop tree waits -t 'drop:[preempted]'
python3 - "$TMP/wall.ff.json" <<'PY' || fail "wall: weight type or Off-CPU category"
import json, sys
d = json.load(open(sys.argv[1]))
sh = d["shared"]
strs, fr, fn = sh["stringArray"], sh["frameTable"], sh["funcTable"]
cats = d["meta"]["categories"]
assert {t["samples"]["weightType"] for t in d["threads"]} == {"tracing-ms"}
state = {}
for i in range(fr["length"]):
    name = strs[fn["name"][fr["func"][i]]]
    c = cats[fr["category"][i]]
    if name in ("[blocked]", "[preempted]"):
        state[name] = (c["name"], c["subcategories"][fr["subcategory"][i]])
    else:
        assert c["name"] != "Off-CPU", name
assert state.get("[blocked]") == ("Off-CPU", "Blocked"), state
assert state.get("[preempted]", ("Off-CPU", "Preempted")) == ("Off-CPU", "Preempted"), state
print("Off-CPU:", state)
PY
echo "PASS wall: tracing-ms weights, [blocked]/[preempted] in Off-CPU"

# ---- files of every import format --------------------------------------------------------
compare folded open "$V/abc.folded"
compare folded-weighted open "$CANOPY_TEST_DATA/vectors-extra/weighted.folded"
compare perf-script open "$PERF"
compare perf-script-focus open "$PERF" -t focus-func:run_round -t drop:work_c
"$C" open "$PERF" --format pprof -o "$TMP/perf.pb.gz" || fail "pprof export"
compare pprof open "$TMP/perf.pb.gz"
compare pprof-go open "$GO_PPROF"
"$C" open "$PERF" --format json -o "$TMP/perf-tree.json" || fail "json export"
compare tree-json open "$TMP/perf-tree.json"
compare cpuprofile open "$CANOPY_TEST_DATA/cpuprofile/workload.cpuprofile"
compare canopy open "$TMP/s.canopy" -t collapse-rec:work_c

# -o FILE.firefox.json picks the format
"$C" open "$V/abc.folded" -o "$TMP/ext.firefox.json" || fail "extension: exit $?"
[ "$(json "$TMP/ext.firefox.json" 'd["meta"]["preprocessedProfileVersion"]')" = 61 ] ||
  fail ".firefox.json did not select the Firefox format"
echo "PASS .firefox.json extension"

# The checker fails where it should: weight moved to another function, a prefix after its
# stack, a string index out of range, a short column, an inlined frame at a root.
python3 - "$TMP/perf-script.ff.json" "$TMP/bad" <<'PY' || fail "could not make the broken files"
import copy, json, sys
d = json.load(open(sys.argv[1]))
def save(name, doc):
    json.dump(doc, open(f"{sys.argv[2]}-{name}.json", "w"))
b = copy.deepcopy(d)
s = b["threads"][0]["samples"]
sh = b["shared"]
leaf = lambda st: sh["frameTable"]["func"][sh["stackTable"]["frame"][st]]
k = next(i for i in range(1, s["length"]) if leaf(s["stack"][i]) != leaf(s["stack"][0]))
s["weight"][0], s["weight"][k] = s["weight"][0] + 1, s["weight"][k] - 1
save("weight", b)
b = copy.deepcopy(d)
st = b["shared"]["stackTable"]
st["prefix"][1] = 1
save("prefix", b)
b = copy.deepcopy(d)
b["shared"]["funcTable"]["name"][0] = len(b["shared"]["stringArray"])
save("string", b)
b = copy.deepcopy(d)
b["shared"]["frameTable"]["line"].pop()
save("column", b)
b = copy.deepcopy(d)
b["shared"]["frameTable"]["inlineDepth"][b["shared"]["stackTable"]["frame"][0]] = 1
save("inline", b)
PY
for bad in weight prefix string column inline; do
  if $CHECK "$TMP/bad-$bad.json" "$TMP/perf-script.tree.json" "$TMP/perf-script.funcs.json" \
    "$TMP/perf-script.grouped.json" >"$TMP/bad.out"; then
    fail "the checker passed a broken file ($bad)"
  fi
done
echo "PASS the checker fails on broken files (weight, prefix, string, column, inline)"
