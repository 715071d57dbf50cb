#!/usr/bin/env bash
# Session lifecycle in canopyd: `run` (the client holds its child before exec, the daemon
# attaches with enable-on-exec, then the child is released), duration, stop, periodic
# checkpoints surviving SIGKILL, rm, the state dir's size bound, the per-session memory
# bound (reported, never a crash), and the retention window (ranged queries see only
# raw samples; all-time totals keep every sample).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload not built"
W= W2=
trap 'rc=$?; stop_daemon KILL || true; kill $W $W2 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
field() { ok '{"cmd":"sessions"}' | jget "[s['$2'] for s in d['sessions'] if s['id']=='$1'][0]"; }

cat >"$TMP/c.conf" <<'CONF'
checkpoint = 1s
retention = 2s
CONF
start_daemon io_uring "$TMP/state" --config "$TMP/c.conf"

# ---- run: held child, attach, release ------------------------------------------------------
python3 - "$SOCK" "$WL" "$(dirname "$0")" >"$TMP/run.out" <<'PY' || fail "run: $(cat "$TMP/run.out")"
import json, os, sys
sys.path.insert(0, sys.argv[3])
import daemon_proto as dp
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)  # held before exec until the daemon has attached
    fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(fd, 1)
    os.execv(sys.argv[2], [sys.argv[2], "--rounds", "40"])
os.close(r)
resp = dp.call(sys.argv[1], {"cmd": "run", "pid": pid, "name": "held"})
assert resp["ok"], resp
assert resp["session"]["kind"] == "run" and resp["session"]["freq"] == 999, resp
os.write(w, b"x")
os.waitpid(pid, 0)
print(resp["session"]["id"])
PY
RS=$(cat "$TMP/run.out")
wait_for 10 eval '[ "$(field $RS state)" = exited ]' || fail "run session not exited"
ok "{\"cmd\":\"tree\",\"session\":\"$RS\",\"format\":\"folded\"}" | jget 'd["output"]' >"$TMP/run.folded"
grep -q 'main;work_a' "$TMP/run.folded" || fail "run: no main;work_a stack: $(head -3 "$TMP/run.folded")"
[ "$(ok '{"cmd":"sessions"}' | jget "[s['target']['comm'] for s in d['sessions'] if s['id']=='$RS'][0]")" = wl_shares_fp ] ||
  fail "run session's comm not updated at exec"

# ---- duration, stop -------------------------------------------------------------------------
"$WL" 60 >/dev/null &
W=$!
DS=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"duration\":\"1s\"}" | jget 'd["session"]["id"]')
wait_for 10 eval '[ "$(field $DS state)" = stopped ]' || fail "duration did not stop the session"
[ -f "$TMP/state/$DS.canopy" ] || fail "stopped session not saved"

# ---- retention: ranged queries see the window, all-time keeps everything ------------------
RT=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":499}" | jget 'd["session"]["id"]')
sleep 4.5
ok "{\"cmd\":\"stop\",\"session\":\"$RT\"}" >/dev/null
all=$(ok "{\"cmd\":\"tree\",\"session\":\"$RT\"}" | jget 'd["tree"]["total"]')
n=$(field "$RT" samples)
last=$(ok "{\"cmd\":\"tree\",\"session\":\"$RT\",\"last\":\"1s\"}" | jget 'd["tree"]["total"]')
early=$(ok "{\"cmd\":\"tree\",\"session\":\"$RT\",\"from\":0,\"to\":1}" | jget 'd["tree"]["total"]')
echo "retention: all-time $all of $n samples, last 1s $last, first second $early" >&2
[ "$all" = "$n" ] || fail "all-time total $all != samples $n"
python3 -c "import sys; a,l,e=map(float,sys.argv[1:]); sys.exit(not (0 < l < a and e == 0))" "$all" "$last" "$early" ||
  fail "retention window: all $all, last $last, first second $early (should be folded away)"

# ---- checkpoint, SIGKILL, restart ---------------------------------------------------------
CS=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":499,\"name\":\"ckpt\"}" | jget 'd["session"]["id"]')
sleep 2.5
[ -f "$TMP/state/$CS.canopy" ] || fail "no checkpoint after 2.5 s"
stop_daemon KILL
start_daemon epoll "$TMP/state" --config "$TMP/c.conf"
[ "$(field "$CS" state)" = saved ] || fail "checkpointed session not listed: $(call '{"cmd":"sessions"}')"
[ "$(field "$CS" samples)" -gt 0 ] || fail "checkpoint has no samples"
t=$(ok '{"cmd":"tree","session":"ckpt"}' | jget 'd["tree"]["total"]')
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > 0)" "$t" || fail "checkpoint tree empty"
[ "$(field "$RS" state)" = saved ] || fail "run session lost across SIGKILL"

# ---- rm -------------------------------------------------------------------------------------
ok "{\"cmd\":\"rm\",\"session\":\"$CS\"}" >/dev/null
[ ! -e "$TMP/state/$CS.canopy" ] || fail "rm left the file"
r=$(call "{\"cmd\":\"tree\",\"session\":\"$CS\"}")
[ "$(jget 'd["error"]["code"]' <<<"$r")" = unknown_session ] || fail "rm'd session still there: $r"
stop_daemon TERM

# ---- state dir bound: the oldest saved sessions go first, and that is reported --------------
size=$(du -cb "$TMP"/state/*.canopy | tail -1 | cut -f1)
printf 'state_dir_max = %s\n' $((size - 1)) >"$TMP/small.conf"
start_daemon io_uring "$TMP/state" --config "$TMP/small.conf"
ev=$(ok '{"cmd":"status"}' | jget 'd["evicted_sessions"]')
[ "$ev" -ge 1 ] || fail "nothing evicted over the state dir bound"
[ ! -e "$TMP/state/$RS.canopy" ] || fail "the oldest session ($RS) was not the one evicted"
left=$(du -cb "$TMP"/state/*.canopy 2>/dev/null | tail -1 | cut -f1)
[ "${left:-0}" -lt "$size" ] || fail "state dir still $left bytes"
stop_daemon TERM

# ---- memory bound: reported, sampling goes on being counted, no crash -------------------------
printf 'session_memory = 64K\n' >"$TMP/mem.conf"
start_daemon epoll "$TMP/state2" --config "$TMP/mem.conf"
kill $W 2>/dev/null || true
wait $W 2>/dev/null || true
"$WL" 10 >/dev/null &
W=$!
MS=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":999}" | jget 'd["session"]["id"]')
sleep 2
[ "$(field "$MS" memory_limited)" = True ] || fail "memory bound not reported: $(call '{"cmd":"sessions"}')"
# Counters move when canopyd pumps the rings (a watermark or its tick): on a loaded machine
# a fixed 0.5 s window could see no pump at all, so wait up to 5 s for the next one.
d1=$(field "$MS" dropped)
still_counting() { [ "$(field "$MS" dropped)" -gt "$d1" ] || [ "$(field "$MS" samples)" -gt 0 ]; }
wait_for 5 still_counting || fail "memory-bound session stopped counting (dropped $d1)"
ok "{\"cmd\":\"tree\",\"session\":\"$MS\"}" >/dev/null
kill -0 $D_PID || fail "canopyd died at the memory bound"
stop_daemon TERM
kill $W 2>/dev/null || true # it may have ended while a loaded machine ran the checks
wait $W 2>/dev/null || true
W=
echo PASS
