#!/usr/bin/env bash
# A session's rings closing while another process holds them (issue 22's test_daemon_load
# failure): when a read sees the target's exit, the session closes its perf fds, and only
# then did the loop unwatch them. On epoll, EPOLL_CTL_DEL of a closed fd fails (EBADF); if
# the ring's file is still open elsewhere, the registration outlives the watch, and its
# next event (POLLHUP, level-triggered) reads the freed watch: a heap-use-after-free under
# ASan, garbage or a spin otherwise. In canopyd the other holder is a forked query worker
# or writer between fork() and its close_range(), a short window that the load test hit
# about once in ten runs on a loaded machine. Made deterministic here: the test takes its
# own copies of canopyd's ring fds (pidfd_getfd, as root), and stops canopyd while the
# target exits, so that its first read after SIGCONT sees the exit (records wait 5 ms to be
# merged in order) before the rings' POLLHUP is handled.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload not built"
W= H=
trap 'rc=$?; stop_daemon KILL || true; kill $W $H 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
field() { ok '{"cmd":"sessions"}' | jget "[s['$2'] for s in d['sessions'] if s['id']=='$1'][0]"; }

# hold PID FILE: copies PID's perf_event fds into this process, writes how many to FILE,
# then sleeps until killed (hold_fds.py).
hold() { exec python3 "$(dirname "$0")/hold_fds.py" "$1" 'anon_inode:[perf_event]' "$2"; }

for BACKEND in epoll io_uring; do
  rm -rf "$TMP/state"
  start_daemon $BACKEND "$TMP/state"
  "$WL" 60 >/dev/null &
  W=$!
  S=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":999}" | jget 'd["session"]["id"]')
  rm -f "$TMP/held"
  hold $D_PID "$TMP/held" &
  H=$!
  wait_for 10 eval '[ -s "$TMP/held" ]' || fail "$BACKEND: could not copy canopyd's ring fds"
  [ "$(cat "$TMP/held")" -gt 0 ] || fail "$BACKEND: canopyd has no perf_event fd"
  kill -STOP $D_PID
  kill $W
  wait $W 2>/dev/null || true
  W=
  sleep 0.3
  t0=$(awk '{print $14 + $15}' /proc/$D_PID/stat)
  kill -CONT $D_PID
  sleep 1
  kill -0 $D_PID 2>/dev/null || fail "$BACKEND: canopyd died after the target exited"
  t1=$(awk '{print $14 + $15}' /proc/$D_PID/stat)
  echo "$BACKEND: $(cat "$TMP/held") ring fds held; canopyd used $((t1 - t0)) ticks in the second after the target exited" >&2
  [ $((t1 - t0)) -lt 50 ] || fail "$BACKEND: canopyd spins after the target exited"
  [ "$(field $S state)" = exited ] || fail "$BACKEND: session not exited"
  kill $H
  wait $H 2>/dev/null || true
  H=
  stop_daemon TERM
done
echo "PASS: rings closed while held elsewhere leave the loop sound on both backends"
