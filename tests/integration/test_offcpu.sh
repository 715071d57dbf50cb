#!/usr/bin/env bash
# Off-CPU and wall-clock modes (docs/cli.md, "Modes") on tests/workloads/waits.c, whose
# main thread per round computes 40 ms, waits 30 ms in read() on a pipe its writer thread
# answers after 30 ms, and sleeps 30 ms. The oracle is the workload's own measurement of
# the wall time it spent in each activity (40/30/30 on an idle machine; it drifts under
# load), each profile share within 5 points of it:
#  1. in-process (`canopy run`), fp and dwarf: --mode wall gives main 40/30/30 and the
#     writer 0/70/30 (waiting in read while main computes and sleeps); --mode off-cpu gives
#     main 0/50/50 once preemption ([preempted]) is dropped; --no-kernel still samples
#     the switches (user frames only); units are time in text, JSON and pprof;
#     --group-by state on a saved file gives a root per state ([running], [blocked],
#     [preempted]) weighing what its pseudo-frame weighs ungrouped;
#  2. in-process `tree --pid` on a running workload (attached after its start);
#  3. through canopyd: run --mode off-cpu, attach --mode wall after the start, the mode in
#     sessions (JSON and text), --group-by state on the live wall session; a live off-cpu
#     session shows a thread blocked right now (its wait grows while it lasts); `diff`
#     refuses samples against ns.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
FP=$CANOPY_WORKLOADS/wl_waits_fp
NOFP=$CANOPY_WORKLOADS/wl_waits_nofp
[ -x "$FP" ] && [ -x "$NOFP" ] || fail "waits workloads not built"
SHARES="python3 $(dirname "$0")/offcpu_shares.py"
# check TREE OUT MODE THREAD: the tree's shares for THREAD against the workload's own
# figures (its output OUT) for MODE.
check() {
  local want
  want=$($SHARES --expect "$2" "$3" "$4") || fail "no measurement in $2: $(cat "$2")"
  $SHARES "$1" "$4" $want
}
D_PID=
W_PID=
B_PID=
T_PID=
trap 'rc=$?; kill $D_PID $W_PID $B_PID $T_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

"$C" run --no-daemon --mode off-cpu --duration 1s -o "$TMP/probe.json" -- true 2>"$TMP/probe.err" ||
  { grep -qi 'not permitted' "$TMP/probe.err" && skip "perf events not permitted"; fail "probe: $(cat "$TMP/probe.err")"; }

# ---- 1. in-process run -------------------------------------------------------------------
for u in fp dwarf; do
  wl=$FP
  [ $u = dwarf ] && wl=$NOFP
  "$C" run --no-daemon --mode wall --unwind $u --group-by thread --format json \
    -o "$TMP/wall_$u.json" -- "$wl" 1.5 >"$TMP/wall_$u.out" 2>"$TMP/err" || fail "run wall $u: $(cat "$TMP/err")"
  [ "$(json "$TMP/wall_$u.json" 'd["unit"]')" = ns ] || fail "wall $u: unit is not ns"
  check "$TMP/wall_$u.json" "$TMP/wall_$u.out" wall main || fail "wall $u: main's shares"
  check "$TMP/wall_$u.json" "$TMP/wall_$u.out" wall writer || fail "wall $u: the writer's shares"
  "$C" run --no-daemon --mode off-cpu --unwind $u -t 'drop:[preempted]' --group-by thread \
    --format json -o "$TMP/off_$u.json" -- "$wl" 1.5 >"$TMP/off_$u.out" 2>"$TMP/err" ||
    fail "run off-cpu $u: $(cat "$TMP/err")"
  check "$TMP/off_$u.json" "$TMP/off_$u.out" off-cpu main || fail "off-cpu $u: main's shares"
done
# Wall: each thread's tree totals its wall time (1.5 s of rounds, +- start and end).
python3 - "$TMP/wall_fp.json" <<'PY' || fail "wall: thread totals are not wall time"
import json, sys
d = json.load(open(sys.argv[1]))
t = [r["total"] / 1e9 for r in d["roots"]]
print("wall thread totals (s):", [round(x, 2) for x in t])
sys.exit(not all(1.4 < x < 1.9 for x in t))
PY
# --no-kernel: switches are still sampled (exclude_kernel would drop them all), user frames only.
"$C" run --no-daemon --mode off-cpu --unwind dwarf --no-kernel --format json -o "$TMP/nok.json" \
  -- "$NOFP" 0.5 >/dev/null 2>"$TMP/err" || fail "off-cpu --no-kernel: $(cat "$TMP/err")"
grep -q '"nap"' "$TMP/nok.json" || fail "off-cpu --no-kernel: no nap frame"
grep -q '"schedule"' "$TMP/nok.json" && fail "off-cpu --no-kernel: kernel frames"
# Text shows time; the state pseudo-frames; pprof's sample type.
"$C" run --no-daemon --mode off-cpu -o "$TMP/off.canopy" -- "$FP" 0.5 >/dev/null 2>&1 || fail "run -o .canopy"
"$C" open "$TMP/off.canopy" >"$TMP/off.txt" || fail "open .canopy"
head -1 "$TMP/off.txt" | grep -qE 'total [0-9.]+ (ms|s) off-cpu' || fail "text header: $(head -1 "$TMP/off.txt")"
grep -qE '^ *[0-9.]+% +[0-9.]+ ms ' "$TMP/off.txt" || fail "text rows are not in ms: $(head -5 "$TMP/off.txt")"
grep -q '\[blocked\]' "$TMP/off.txt" || fail "no [blocked] pseudo-frame"
# --group-by state on the saved file: a root per state, each the weight of its pseudo-frame
# in the ungrouped tree, and no pseudo-frame left below.
"$C" open "$TMP/off.canopy" --format json -o "$TMP/off_flat.json" || fail "open json"
"$C" open "$TMP/off.canopy" --group-by state --format json -o "$TMP/off_state.json" ||
  fail "open --group-by state"
python3 "$(dirname "$0")/offcpu_states.py" "$TMP/off_flat.json" "$TMP/off_state.json" ||
  fail "--group-by state (saved file)"
[ "$("$C" open "$TMP/off.canopy" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["unit"])')" = ns ] ||
  fail ".canopy lost the unit"
"$C" open "$TMP/off.canopy" --format pprof -o "$TMP/off.pb.gz" || fail "pprof"
gzip -dc "$TMP/off.pb.gz" | grep -aq off_cpu || fail "pprof: no off_cpu sample type"
"$C" open "$TMP/off.canopy" --format speedscope -o "$TMP/off.speedscope.json" || fail "speedscope"
grep -q '"unit":"nanoseconds"' "$TMP/off.speedscope.json" || fail "speedscope: not in nanoseconds"
# A CPU event means nothing to off-cpu mode: refused, not ignored.
"$C" run --no-daemon --mode off-cpu --event cycles -- true >/dev/null 2>"$TMP/err" &&
  fail "off-cpu --event cycles accepted"
grep -q "does not apply to off-cpu" "$TMP/err" || fail "off-cpu --event: $(cat "$TMP/err")"
echo "PASS in-process run (wall, off-cpu; fp, dwarf)"

# ---- 2. in-process tree --pid (attach after the start) ------------------------------------
# The oracle covers the workload's rounds: they start (SIGUSR1) once sampling is on, and
# sampling goes on until the workload exits.
"$FP" 1.5 --wait-signal >"$TMP/pid.out" &
W_PID=$!
"$C" tree --pid $W_PID --no-daemon --mode wall --duration 20s --group-by thread --format json \
  -o "$TMP/pid.json" 2>"$TMP/err" &
T_PID=$!
for ((i = 0; i < 200; i++)); do # canopy holds perf fds once the events are open
  ls -l /proc/$T_PID/fd 2>/dev/null | grep -q perf_event && break
  sleep 0.05
done
sleep 0.3
kill -USR1 $W_PID
wait $W_PID
wait $T_PID || fail "tree --pid: $(cat "$TMP/err")"
check "$TMP/pid.json" "$TMP/pid.out" wall main || fail "tree --pid wall: main's shares"
echo "PASS in-process tree --pid"

# ---- 3. through canopyd -------------------------------------------------------------------
export CANOPY_SOCKET=$TMP/d.sock
start_canopyd
"$C" run --mode off-cpu --unwind dwarf --format json -o "$TMP/d_run.json" -- "$NOFP" 1.5 \
  >"$TMP/d_off.out" 2>"$TMP/err" || fail "daemon run: $(cat "$TMP/err")"
grep -q in-process "$TMP/err" && fail "run went in-process with a daemon up"
SID=$(json "$TMP/d_run.json" 'd["session"]')
# run printed once the symbolizer had answered every frame: the names are there.
"$C" tree "$SID" -t 'drop:[preempted]' --group-by thread --format json -o "$TMP/d_off.json" ||
  fail "tree $SID"
check "$TMP/d_off.json" "$TMP/d_off.out" off-cpu main || fail "daemon off-cpu: main's shares"
"$C" rm "$SID" >/dev/null || fail "rm $SID"
"$FP" 1.5 --wait-signal >"$TMP/d_wall.out" &
W_PID=$!
"$C" attach $W_PID --mode wall --unwind fp --name w >/dev/null 2>"$TMP/err" || fail "attach: $(cat "$TMP/err")"
kill -USR1 $W_PID
wait $W_PID
# A live session's tree shows what is there now: wait until the daemon has seen the exit
# and the symbolizer has answered every frame (docs/cli-live.md, "Session counters").
for ((i = 0; i < 300; i++)); do
  "$C" sessions --format json >"$TMP/s.json" || fail "sessions"
  [ "$(json "$TMP/s.json" '[(s["state"], s["symbols"]["pending"]) for s in d["sessions"] if s["name"] == "w"][0]')" = "('exited', 0)" ] && break
  sleep 0.1
done
"$C" tree w --group-by thread --format json -o "$TMP/d_wall.json" || fail "tree w"
check "$TMP/d_wall.json" "$TMP/d_wall.out" wall main || fail "daemon wall (attached): main's shares"
# --group-by state on the live session (wall: CPU samples are [running]).
"$C" tree w --format json -o "$TMP/d_wall_flat.json" || fail "tree w"
"$C" tree w --group-by state --format json -o "$TMP/d_wall_state.json" || fail "tree w --group-by state"
python3 "$(dirname "$0")/offcpu_states.py" "$TMP/d_wall_flat.json" "$TMP/d_wall_state.json" ||
  fail "--group-by state (live wall session)"
check "$TMP/d_wall.json" "$TMP/d_wall.out" wall writer || fail "daemon wall (attached): the writer's shares"
"$C" sessions --format json >"$TMP/s.json"
[ "$(json "$TMP/s.json" '[s["mode"] for s in d["sessions"] if s["name"] == "w"][0]')" = wall ] ||
  fail "sessions JSON: no mode wall"
"$C" sessions | grep -E '^s[0-9]+ +w ' | grep -q ' wall ' || fail "sessions text: no mode"
# A thread blocked right now: it went to sleep after the attach and has not woken up. It
# execs sleep once told through a FIFO, after the attach (an exec during the attach is
# refused: the access check would not be the program's).
mkfifo "$TMP/go"
sh -c 'read x <"$0"; exec sleep 30' "$TMP/go" &
B_PID=$!
"$C" attach $B_PID --mode off-cpu --name blk >/dev/null 2>"$TMP/err" || fail "attach blk: $(cat "$TMP/err")"
echo go >"$TMP/go"
sleep 1.5
wait_ns() { "$C" tree blk --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
def walk(n):
    if "nanosleep" in n["name"]:
        return n["total"]
    return sum(walk(c) for c in n.get("children", []))
print(int(sum(walk(r) for r in d["roots"])))'; }
t1=$(date +%s%N)
w1=$(wait_ns)
sleep 1
w2=$(wait_ns)
t2=$(date +%s%N)
echo "blocked thread's current wait: $w1 ns, then $w2 ns, $((t2 - t1)) ns apart at most"
[ "$w1" -gt 700000000 ] || fail "live off-cpu: the current wait is not shown ($w1 ns)"
# It grows by the time between the two queries: at least the 1 s sleep (less the 5 ms the
# sampler holds records back and the pump period), never more than the time elapsed.
[ "$((w2 - w1))" -gt 800000000 ] || fail "live off-cpu: the current wait does not grow ($w1 -> $w2)"
[ "$((w2 - w1))" -le "$((t2 - t1))" ] || fail "live off-cpu: the wait grew faster than time"
"$C" tree blk | head -1 | grep -qE 'total [0-9.]+ s off-cpu' || fail "live text header not in time"
# diff: a CPU profile against a wall one is refused, clearly.
"$C" run --no-daemon --format json -o "$TMP/cpu.json" -- "$FP" 0.3 >/dev/null 2>&1 || fail "cpu run"
expect_fail 2 "$C" diff "$TMP/cpu.json" "$TMP/wall_fp.json"
grep -q 'samples.*ns' "$TMP/f.err" || fail "diff error does not name the units: $(cat "$TMP/f.err")"
echo "PASS through canopyd (run, attach, live wait, sessions, diff)"
