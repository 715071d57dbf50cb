#!/usr/bin/env bash
# A session's spec (live/'s cn_live_session_opts, docs/protocol.md "attach, run, system")
# end to end, through canopyd and in-process:
# 1. durations travel as integer ns: `attach --duration 500us` stops the session within a
#    moment (sent as the text "0ms" before, which canopyd read as no limit at all);
#    `--min-block 250us` arrives as 250000 ns;
# 2. one rule for `--last` (docs/cli.md): it counts back from the session's clock, whose
#    end is the end of sampling once the session stopped, in-process as in canopyd. The
#    target burns the CPU for 1 s, then sleeps: sampled 3 s, its last second is empty
#    whichever side samples (in-process counted back from its last sample before);
# 3. the CLI refuses what canopyd refuses, with one line and exit 2: an id-like name.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
W_PID=
trap 'rc=$?; kill $D_PID $W_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd
sleep 300 &
W_PID=$!

# ---- 1. durations in ns ------------------------------------------------------------------
SID=$("$C" attach $W_PID --duration 500us --min-block 250us --mode off-cpu --name short) ||
  fail "attach: $SID"
sleep 1
"$C" sessions --format json >"$TMP/s.json" || fail "sessions"
state=$(json "$TMP/s.json" "[s['state'] for s in d['sessions'] if s['id'] == '$SID'][0]")
[ "$state" = stopped ] || fail "--duration 500us: the session is $state after 1 s: $(cat "$TMP/s.json")"
dur=$(json "$TMP/s.json" "[s['duration_s'] for s in d['sessions'] if s['id'] == '$SID'][0]")
python3 -c "import sys; sys.exit(not float('$dur') < 0.5)" || fail "--duration 500us sampled ${dur} s"
"$C" rm "$SID" >/dev/null || fail "rm"
# The request itself: integer ns, no text.
python3 "$CANOPY_SOURCE_DIR/tests/integration/daemon_proto.py" call "$CANOPY_SOCKET" \
  "{\"cmd\":\"attach\",\"pid\":$W_PID,\"duration_ns\":500000,\"min_block_ns\":250000,\"mode\":\"off-cpu\"}" \
  >"$TMP/a.json" || fail "attach request: $(cat "$TMP/a.json")"
[ "$(json "$TMP/a.json" 'd["ok"]')" = True ] || fail "attach with duration_ns: $(cat "$TMP/a.json")"

# ---- 2. --last counts back from the session's clock, on both sides --------------------------
# burner: a process that burns the CPU for 1 s, 0.5 s after it starts, then sleeps; sets
# W_PID once it runs python (attaching before its exec is refused as a race).
burner() {
  python3 -c 'import time
time.sleep(0.5)
t = time.time()
while time.time() - t < 1.0:
    pass
time.sleep(300)' &
  W_PID=$!
  for ((i = 0; i < 50; i++)); do
    [[ "$(readlink /proc/$W_PID/exe)" == *python* ]] && return
    sleep 0.01
  done
  fail "the burner did not start"
}
kill $W_PID
burner
"$C" tree --pid $W_PID --no-daemon --duration 3s --last 1s --format json >"$TMP/in.json" \
  2>"$TMP/in.err" || fail "in-process tree: $(cat "$TMP/in.err")"
kill $W_PID
burner
"$C" tree --pid $W_PID --duration 3s --last 1s --format json >"$TMP/d.json" 2>"$TMP/d.err" ||
  fail "daemon tree: $(cat "$TMP/d.err")"
in_total=$(json "$TMP/in.json" 'd["total"]')
d_total=$(json "$TMP/d.json" 'd["total"]')
echo "last 1 s of 3: in-process total $in_total, canopyd total $d_total"
# The burn was sampled (the sessions' samples, all time): the empty window is the rule's.
# 1 s of CPU at 999 Hz is ~1000 samples alone; on a loaded 2-core machine the burner gets a
# fraction of a core for its 1 s of wall time, hence the low floor.
[ "$(json "$TMP/in.json" 'd["samples"] > 100')" = True ] || fail "in-process: too few samples"
[ "$(json "$TMP/d.json" 'd["samples"] > 100')" = True ] || fail "canopyd: too few samples"
[ "$d_total" = 0 ] || fail "canopyd: the last second of an idle tail holds $d_total"
[ "$in_total" = 0 ] || fail "in-process: --last counted back from the last sample ($in_total in the last second)"

# ---- 3. one rule set on both sides ---------------------------------------------------------
expect_fail 2 "$C" attach $W_PID --name s12
grep -q 'looks like a session id' "$TMP/f.err" || fail "id-like name: $(cat "$TMP/f.err")"
expect_fail 2 "$C" attach $W_PID --stack-size 12
echo "ok"
