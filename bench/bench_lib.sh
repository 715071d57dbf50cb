# shellcheck shell=bash
# Helpers shared by the bench scripts (sourced): a process's CPU time, the one way each
# bench reads it. Three sources, each right for one job:
#   cpu_of PID         "self_ticks child_ticks": /proc/PID/stat utime+stime and
#                      cutime+cstime (reaped children: canopyd's forked query workers and
#                      savers), in clock ticks (getconf CLK_TCK, 100/s): every thread's,
#                      those that exited too, at 10 ms resolution (long windows).
#   cpu_ns PID         ns on a CPU of PID's live threads (/proc/PID/task/*/schedstat):
#                      exact, but a thread that exited is not counted (short windows over
#                      which the threads stay the same; cpu_tids says whether they did).
#   task_clock_ms FILE the task-clock, in ms, of `perf stat -x, -e task-clock -o FILE`
#                      (of a command, or -p PID until SIGINT): every thread, exited ones
#                      too, exact.
cpu_of() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13, $14 + $15 }'; }
cpu_ns() { cat "/proc/$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
cpu_tids() { ls "/proc/$1/task" | sort -n | tr '\n' ' '; }
task_clock_ms() { awk -F, '$3 ~ /^task-clock/ { print $1 }' "$1"; }

# private_canopyd CANOPYD DIR: a canopyd of its own (socket DIR/d.sock, exported as
# CANOPY_SOCKET; state DIR/state; log DIR/d.log) for a bench; sets D_PID and returns once
# the socket exists, or exits with the log.
private_canopyd() {
  export CANOPY_SOCKET=$2/d.sock
  "$1" --socket "$CANOPY_SOCKET" --state-dir "$2/state" >"$2/d.log" 2>&1 &
  D_PID=$!
  for _ in $(seq 100); do [ -S "$CANOPY_SOCKET" ] && return 0; sleep 0.1; done
  echo "canopyd did not start: $(cat "$2/d.log")" >&2
  exit 1
}
