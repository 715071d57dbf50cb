#!/usr/bin/env bash
# Privilege decided on credentials captured at connect/accept, never re-read by pid:
# - capabilities borrowed through exec: an unprivileged client connects, the daemon accepts
#   it, then the client's process execs a setuid-root program (su, waiting at its password
#   prompt) while a forked child keeps the socket and asks for a system session: denied,
#   and no session is created;
# - the same user holding CAP_PERFMON itself (ambient) is allowed a system session, so the
#   captured capabilities are really used;
# - the capability-subset rule of the kernel's ptrace check: a process of the same uid
#   that holds capabilities the caller lacks cannot be attached to; without them it can;
# - kernel frames and addresses only where the caller could read them itself: with
#   perf_event_paranoid > 1 an unprivileged user's session of a read()-bound process has no
#   kernel frame (not even a raw address), while root's session of the same workload does.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to an unprivileged user)"
command -v setpriv >/dev/null || skip "setpriv not installed"
[ -u /usr/bin/su ] || skip "no setuid su"
NOBODY=65534
T1= T2=
trap 'rc=$?; stop_daemon KILL || true; kill $T1 $T2 ${W1:-} ${W2:-} 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
PY=/usr/bin/python3
as_user() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
cp "$(dirname "$0")/daemon_proto.py" "$(dirname "$0")/attack_borrow_caps.py" "$TMP/"
chmod 755 "$TMP"
ucall() { as_user $PY "$TMP/daemon_proto.py" call "$SOCK" "$1"; }

start_daemon epoll "$TMP/state"
n_sessions() { ok '{"cmd":"sessions"}' | jget 'len(d["sessions"])'; }

# 1. Borrowing su's capabilities through exec.
before=$(n_sessions)
out=$(as_user $PY "$TMP/attack_borrow_caps.py" "$SOCK" /usr/bin/su 2>/dev/null | grep '^{' || true)
[ -n "$out" ] || fail "the attack printed no reply"
[ "$(jget 'd["ok"]' <<<"$out")" = False ] || fail "a system session through su's capabilities: $out"
[ "$(jget 'd["error"]["code"]' <<<"$out")" = permission_denied ] || fail "code: $out"
[ "$(n_sessions)" = "$before" ] || fail "the denied request created a session"

# 2. The same user with CAP_PERFMON of its own may.
r=$(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps +perfmon \
  --ambient-caps +perfmon $PY "$TMP/daemon_proto.py" call "$SOCK" \
  '{"cmd":"system","duration":"1s"}')
[ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "nobody with CAP_PERFMON: $r"

# 3. Capability subset: a nobody process holding CAP_PERFMON is out of reach of a nobody
#    caller without it; a plain nobody process is not.
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps +perfmon \
  --ambient-caps +perfmon sleep 30 &
T1=$!
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups sleep 30 &
T2=$!
sleep 0.3
grep -q '^CapPrm:.*[1-9a-f]' /proc/$T1/status || fail "the capable target holds no capability"
r=$(ucall "{\"cmd\":\"attach\",\"pid\":$T1}")
[ "$(jget 'd["error"]["code"]' <<<"$r")" = permission_denied ] || fail "attach to a capable process: $r"
jget 'd["error"]["message"]' <<<"$r" | grep -q 'capabilities' || fail "message: $r"
r=$(ucall "{\"cmd\":\"attach\",\"pid\":$T2}")
[ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "attach to an equal process: $r"

# 4. Kernel frames: nobody's session of its own read()-heavy process vs root's.
WL="$CANOPY_WORKLOADS/wl_clockread"
[ -x "$WL" ] || fail "no workload $WL"
cp "$WL" "$TMP/wl"
chmod 755 "$TMP/wl"
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
# Long enough for a slow (sanitized, loaded) daemon; killed once both trees are read.
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$TMP/wl" 30 kernel >/dev/null &
W1=$!
"$TMP/wl" 30 kernel >/dev/null &
W2=$!
sleep 0.2
r=$(ucall "{\"cmd\":\"attach\",\"pid\":$W1,\"freq\":499}")
US=$(jget 'd["session"]["id"]' <<<"$r") || fail "attach as nobody: $r"
RS=$(ok "{\"cmd\":\"attach\",\"pid\":$W2,\"freq\":499}" | jget 'd["session"]["id"]')
# Samples and symbols arrive asynchronously: poll until both trees name the workload's loop.
for ((i = 0; i < 150; i++)); do
  ufold=$(ucall "{\"cmd\":\"tree\",\"session\":\"$US\",\"format\":\"folded\"}" | jget 'd["output"]')
  rfold=$(ok "{\"cmd\":\"tree\",\"session\":\"$RS\",\"format\":\"folded\"}" | jget 'd["output"]')
  grep -q zero_loop <<<"$ufold" && grep -q zero_loop <<<"$rfold" && break
  sleep 0.2
done
kill $W1 $W2 2>/dev/null || true
wait $W1 $W2 2>/dev/null || true
grep -q zero_loop <<<"$ufold" || fail "nobody's session has no samples of the workload: $ufold"
grep -q '\[kernel\]\|vfs_read\|0xffff' <<<"$rfold" || fail "root's session shows no kernel frames: $rfold"
if [ "$paranoid" -gt 1 ]; then
  if grep -q '\[kernel\]\|vfs_read\|read_zero\|0xffff' <<<"$ufold"; then
    fail "nobody got kernel frames with perf_event_paranoid=$paranoid: $(head -3 <<<"$ufold")"
  fi
fi

stop_daemon
echo "PASS: capabilities captured at accept; exec'ed setuid denied; capability subset enforced"
