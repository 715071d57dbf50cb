#!/usr/bin/env bash
# A restart is not refused by a dead canopyd's socket. connect() succeeds on a listening
# socket that any process still holds, and a child forked an instant before its canopyd
# was SIGKILLed holds it until its close_range (seen in CI: test_daemon_sessions' restart
# after SIGKILL failed with "another canopyd is already listening"). Here a helper holds a
# copy of canopyd's listening socket (pidfd_getfd, as root) across the SIGKILL: the new
# canopyd must find that socket silent and take the path over; a live canopyd still keeps a
# second one off its path.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
H=
trap 'rc=$?; stop_daemon KILL || true; kill $H 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

# hold PID FILE: copies PID's sockets into a helper (hold_fds.py) that sleeps until killed.
hold() {
  python3 "$(dirname "$0")/hold_fds.py" "$1" 'socket:' "$2" &
  H=$!
}

start_daemon epoll "$TMP/state"
# A live canopyd keeps the path: a second one is refused, and says why.
"$CANOPYD_BIN" --socket "$SOCK" --state-dir "$TMP/state2" >"$TMP/second.log" 2>&1 &&
  fail "a second canopyd started beside a live one"
grep -q 'another canopyd is already listening' "$TMP/second.log" ||
  fail "the second canopyd's refusal: $(cat "$TMP/second.log")"

hold $D_PID "$TMP/held"
wait_for 10 test -f "$TMP/held" || fail "the helper did not copy canopyd's sockets"
[ "$(cat "$TMP/held")" -ge 1 ] || fail "canopyd has no socket to copy"
stop_daemon KILL
# The dead canopyd's listening socket is alive in the helper: a connect() succeeds.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' "$SOCK" ||
  fail "the held socket does not take connections: the test would prove nothing"
# Started by hand, not by start_daemon: its hello would go to the held socket, which never
# answers, until canopyd has taken the path over.
t0=$(date +%s%N)
"$CANOPYD_BIN" --socket "$SOCK" --state-dir "$TMP/state" --event-loop epoll >>"$TMP/canopyd.log" 2>&1 &
D_PID=$!
listening() { [ "$(grep -c ': listening (event loop' "$TMP/canopyd.log")" -ge 2 ]; }
wait_for 10 listening || fail "canopyd did not restart beside the held socket"
ms=$((($(date +%s%N) - t0) / 1000000))
echo "restart beside a silent held socket: listening after $ms ms"
ok '{"cmd":"status"}' >/dev/null
stop_daemon TERM
echo ok
