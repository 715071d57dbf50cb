#!/usr/bin/env bash
# `canopy run` through canopyd prints its tree only once the symbolizer has answered every
# frame of the session (symbols.pending reaches 0, docs/cli-live.md "Session counters"),
# however slow it is. canopyd's test hook CANOPYD_TEST_SYMBOL_DELAY_MS makes the
# symbolizer pause 1.5 s before each batch, as a loaded machine or a cold cache would:
# a client that gives up when pending stops shrinking for a moment prints LIB+0xOFFSET
# frames. The run's tree must name the workload's functions and hold no bare address
# in the workload's binary; the session then has nothing pending.
source "$(dirname "$0")/lib.sh"
# The hook is canopyd-test's only (the installed canopyd reads no test variable).
CANOPYD_BIN=${CANOPYD_TEST_BIN:?run through ctest}
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
D_PID=
trap 'rc=$?; kill $D_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
export CANOPY_SOCKET=$TMP/d.sock
export CANOPYD_TEST_SYMBOL_DELAY_MS=1500
start_canopyd
unset CANOPYD_TEST_SYMBOL_DELAY_MS

"$CANOPY_BIN" run --unwind fp --format json -o "$TMP/run.json" -- "$WL" 0.5 >/dev/null 2>"$TMP/err" ||
  { grep -qi 'not permitted' "$TMP/err" && skip "perf events not permitted"; fail "run: $(cat "$TMP/err")"; }
grep -q in-process "$TMP/err" && fail "run went in-process with a daemon up"
SID=$(json "$TMP/run.json" 'd["session"]')
python3 - "$TMP/run.json" <<'PY' || fail "run printed its tree before the symbols arrived"
import json, sys
d = json.load(open(sys.argv[1]))
names = set()
def walk(n):
    names.add(n["name"])
    for c in n.get("children", []):
        walk(c)
for r in d["roots"]:
    walk(r)
bare = sorted(n for n in names if n.startswith("wl_shares_fp+0x"))
missing = [f for f in ("main", "work_b", "work_c", "burn") if f not in names]
print(f"{len(names)} names; bare workload addresses: {bare[:5]}; missing: {missing}")
sys.exit(1 if bare or missing else 0)
PY
"$CANOPY_BIN" sessions --format json >"$TMP/s.json"
[ "$(json "$TMP/s.json" "[s['symbols']['pending'] for s in d['sessions'] if s['id'] == '$SID'][0]")" = 0 ] ||
  fail "session $SID still has symbols pending"
echo "PASS run waits for a slow symbolizer"
