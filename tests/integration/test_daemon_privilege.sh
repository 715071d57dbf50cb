#!/usr/bin/env bash
# Privilege decided on credentials captured at connect/accept, never re-read by pid:
# - capabilities borrowed through exec: an unprivileged client connects, the daemon accepts
#   it, then the client's process execs a setuid-root program (su, waiting at its password
#   prompt) while a forked child keeps the socket and asks for a system session: denied,
#   and no session is created;
# - the same user holding CAP_PERFMON itself (ambient) is allowed a system session, so the
#   captured capabilities are really used;
# - the capability-subset rule of the kernel's ptrace check: a process of the same uid
#   that holds capabilities the caller lacks cannot be attached to; without them it can.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to an unprivileged user)"
command -v setpriv >/dev/null || skip "setpriv not installed"
[ -u /usr/bin/su ] || skip "no setuid su"
NOBODY=65534
T1= T2=
trap 'stop_daemon KILL || true; kill $T1 $T2 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$TMP"' EXIT
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

stop_daemon
echo "PASS: capabilities captured at accept; exec'ed setuid denied; capability subset enforced"
