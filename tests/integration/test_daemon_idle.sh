#!/usr/bin/env bash
# An idle canopyd stays asleep (daemon/server.c, "the loop's tick"; docs/perf-daemon.md):
# each wakeup costs it ~35 us of kernel time on a loaded VM, and a fixed 50 ms tick cost
# 0.77 ms of CPU a second with nothing to do and half of the loop thread's CPU in a
# 999 Hz attach session. The loop thread's voluntary context switches are counted over a
# few seconds: with no session and no client, then with a session of a sleeping target
# (the target gives no samples to wake it): tick 1 s in both. The 200 ms tick of a
# sampling daemon before the twenty-third session made 20 in 4 s, a 50 ms tick 80.
# Counts of timer wakeups do not grow with the machine's load.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
SLEEPER=
trap 'rc=$?; kill $D_PID $SLEEPER 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

# Voluntary switches of canopyd's loop thread (its main thread) over $1 seconds.
switches_over() {
  local a b
  a=$(awk '/^voluntary_ctxt_switches/ {print $2}' /proc/$D_PID/task/$D_PID/status)
  sleep "$1"
  b=$(awk '/^voluntary_ctxt_switches/ {print $2}' /proc/$D_PID/task/$D_PID/status)
  echo $((b - a))
}

for BACKEND in io_uring epoll; do
  start_daemon $BACKEND "$TMP/state-$BACKEND"
  sleep 1.5 # the first ticks after the hello's connection closed
  idle=$(switches_over 4)
  echo "$BACKEND: idle, $idle wakeups in 4 s"
  [ "$idle" -le 12 ] || fail "$BACKEND: an idle canopyd woke $idle times in 4 s (tick 1 s: about 4)"

  sleep 60 &
  SLEEPER=$!
  S=$($PROTO call "$SOCK" "{\"cmd\":\"attach\",\"pid\":$SLEEPER,\"freq\":99}" | jget 'd["session"]["id"]')
  [ -n "$S" ] || fail "$BACKEND: attach failed"
  sleep 1.5
  sampling=$(switches_over 4)
  echo "$BACKEND: a session of a sleeping target, $sampling wakeups in 4 s"
  [ "$sampling" -le 12 ] ||
    fail "$BACKEND: canopyd woke $sampling times in 4 s with one quiet session (tick 1 s: about 4)"
  # Still live: a query reads the rings first, whatever the tick.
  $PROTO call "$SOCK" "{\"cmd\":\"sessions\"}" | jget "[s['state'] for s in d['sessions'] if s['id']=='$S'][0]" |
    grep -qx running || fail "$BACKEND: the session is not running"
  kill $SLEEPER $D_PID
  wait $SLEEPER $D_PID 2>/dev/null || true
  SLEEPER=
done
echo PASS
