#!/usr/bin/env bash
# Access control from SO_PEERCRED: as an unprivileged user (setpriv), attaching to a root
# process is denied and changes nothing, attaching to its own process works, root's
# sessions are invisible to it (not listed, unknown by id), a system session is denied,
# and it cannot stop or remove root's sessions.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to an unprivileged user)"
command -v setpriv >/dev/null || skip "setpriv not installed"
NOBODY=65534
R_PID= U_PID=
trap 'rc=$?; stop_daemon KILL || true; kill $R_PID $U_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
as_user() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
cp "$(dirname "$0")/daemon_proto.py" "$TMP/" # readable by the user wherever the tree is
ucall() { as_user $PY "$TMP/daemon_proto.py" call "$SOCK" "$1"; }

for BACKEND in io_uring epoll; do
  rm -rf "$TMP/state"
  start_daemon $BACKEND "$TMP/state"
  [ "$(stat -c %a "$SOCK")" = 666 ] || fail "root daemon socket mode $(stat -c %a "$SOCK")"
  r=$(ucall '{"cmd":"hello"}')
  [ "$(jget 'd["uid"]' <<<"$r")" = $NOBODY ] || fail "peer uid: $r"

  # Killed at the end of the round (a loaded machine stretched the checks past 30 s).
  sleep 600 &
  R_PID=$!
  setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups sleep 600 &
  U_PID=$!
  sleep 0.3
  RS=$(ok "{\"cmd\":\"attach\",\"pid\":$R_PID,\"name\":\"rootsess\"}" | jget 'd["session"]["id"]')

  # Attaching to a root process: denied, nothing created.
  before=$(ok '{"cmd":"sessions"}' | jget 'len(d["sessions"])')
  r=$(ucall "{\"cmd\":\"attach\",\"pid\":$R_PID}")
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = permission_denied ] || fail "attach to root process: $r"
  [ "$(jget 'd["error"]["exit"]' <<<"$r")" = 1 ] || fail "exit status: $r"
  jget 'd["error"]["message"]' <<<"$r" | grep -q "$R_PID" || fail "message does not name the pid: $r"
  r=$(ucall '{"cmd":"attach","pid":1}')
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = permission_denied ] || fail "attach to pid 1: $r"
  r=$(ucall '{"cmd":"system"}')
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = permission_denied ] || fail "system as nobody: $r"
  after=$(ok '{"cmd":"sessions"}' | jget 'len(d["sessions"])')
  [ "$before" = "$after" ] || fail "a denied request changed the sessions ($before -> $after)"

  # A name spelled like a session id would shadow that session (for root's lookups, and
  # at restart): refused, nothing created.
  r=$(ucall "{\"cmd\":\"attach\",\"pid\":$U_PID,\"name\":\"$RS\"}")
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = bad_request ] || fail "an id-like name was accepted: $r"

  # Its own process: allowed, and owned by it.
  r=$(ucall "{\"cmd\":\"attach\",\"pid\":$U_PID,\"name\":\"mine\"}")
  [ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "attach to own process: $r"
  US=$(jget 'd["session"]["id"]' <<<"$r")
  [ "$(jget 'd["session"]["owner"]' <<<"$r")" = $NOBODY ] || fail "owner: $r"

  # Root's sessions are invisible to it; its own are visible to root.
  r=$(ucall '{"cmd":"sessions"}')
  [ "$(jget '[s["id"] for s in d["sessions"]]' <<<"$r")" = "['$US']" ] || fail "nobody sees: $r"
  for cmd in tree stop rm save lines timeline; do
    r=$(ucall "{\"cmd\":\"$cmd\",\"session\":\"$RS\",\"function\":\"main\"}")
    [ "$(jget 'd["error"]["code"]' <<<"$r")" = unknown_session ] || fail "$cmd on root's session: $r"
    r=$(ucall "{\"cmd\":\"$cmd\",\"session\":\"rootsess\",\"function\":\"main\"}")
    [ "$(jget 'd["error"]["code"]' <<<"$r")" = unknown_session ] || fail "$cmd on root's name: $r"
  done
  r=$(ucall "{\"cmd\":\"tree\",\"pid\":$R_PID}")
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = unknown_session ] || fail "tree --pid on root's: $r"
  [ "$(ok '{"cmd":"sessions"}' | jget 'len(d["sessions"])')" = 2 ] || fail "root does not see both"
  [ "$(ok "{\"cmd\":\"sessions\"}" | jget "[s['state'] for s in d['sessions'] if s['id']=='$RS'][0]")" = running ] ||
    fail "root's session disturbed"
  r=$(ucall '{"cmd":"status"}')
  [ "$(jget 'd["sessions"]' <<<"$r")" = 1 ] || fail "status counts others' sessions: $r"
  r=$(ucall '{"cmd":"shutdown"}')
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = permission_denied ] || fail "shutdown as nobody: $r"
  # Its own session works end to end.
  r=$(ucall "{\"cmd\":\"tree\",\"session\":\"$US\",\"format\":\"text\"}")
  [ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "tree on own session: $r"
  r=$(ucall "{\"cmd\":\"rm\",\"session\":\"$US\"}")
  [ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "rm own session: $r"
  kill $R_PID $U_PID
  wait $R_PID $U_PID 2>/dev/null || true
  R_PID= U_PID=
  stop_daemon TERM
done
echo PASS
