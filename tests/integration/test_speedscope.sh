#!/usr/bin/env bash
# speedscope output: valid against speedscope's file-format schema (vendored
# from the speedscope npm package, tests/data/speedscope), one sampled profile per thread,
# and the weighted stacks give back canopy's per-function self and total, with and
# without transforms. (speedscope's own importer is a browser app that does not settle in
# headless Chromium, so the schema plus these checks stand in for loading it.)
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
CHECK=$(dirname "$0")/formats/speedscope_check.py
SCHEMA=$CANOPY_TEST_DATA/speedscope/file-format-schema.json
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz
V=$CANOPY_TEST_DATA/vectors
python3 -c 'import jsonschema' 2>/dev/null || skip "python3-jsonschema is not installed"

check() {
  local name=$1
  shift
  "$C" open "$@" --format speedscope -o "$TMP/$name.speedscope.json" || fail "$name: exit $?"
  "$C" open "$@" --functions --format json >"$TMP/$name.json" || fail "$name: functions exit $?"
  python3 "$CHECK" "$SCHEMA" "$TMP/$name.speedscope.json" "$TMP/$name.json" >"$TMP/$name.out" ||
    fail "$name: $(cat "$TMP/$name.out")"
  echo "PASS $name: $(cat "$TMP/$name.out")"
}

check perf "$PERF"
check perf-merge "$PERF" -t merge:run_round
check perf-range "$PERF" --from 0.5 --to 1.5
check abc "$V/abc.folded"
check abc-focus "$V/abc.folded" -t 'focus:A;B' -t merge:F
check cpuprofile "$CANOPY_TEST_DATA/cpuprofile/workload.cpuprofile"

# one profile per thread, named after it; time units map to speedscope units
python3 - "$TMP/perf.speedscope.json" <<'PY' || fail "perf: profile names/units"
import json, sys
d = json.load(open(sys.argv[1]))
names = [p["name"] for p in d["profiles"]]
assert names and all("[" in n for n in names), names
assert all(p["unit"] == "nanoseconds" for p in d["profiles"])
PY
# -o FILE.speedscope.json picks the format from the extension
"$C" open "$V/abc.folded" -o "$TMP/ext.speedscope.json" || fail "extension: exit $?"
grep -q '"\$schema":"https://www.speedscope.app/file-format-schema.json"' "$TMP/ext.speedscope.json" ||
  fail ".speedscope.json extension did not select speedscope"
echo "PASS per-thread profiles, units, extension"
