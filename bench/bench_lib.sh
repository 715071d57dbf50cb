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

# start_system_daemon DIR BUILD HZ NAME [CANOPYD_ARG...]: a private canopyd of BUILD
# (BUILD/daemon/canopyd, its socket DIR/sock, state DIR/state, log DIR/log, pid DIR/pid,
# also appended to the caller's PIDS array) with a whole-system session NAME at HZ.
start_system_daemon() {
  local dir=$1 build=$2 hz=$3 name=$4
  shift 4
  mkdir -p "$dir"
  "$build/daemon/canopyd" --socket "$dir/sock" --state-dir "$dir/state" "$@" >"$dir/log" 2>&1 &
  PIDS+=($!)
  echo $! >"$dir/pid"
  local i
  for ((i = 0; i < 100; i++)); do
    CANOPY_SOCKET=$dir/sock "$build/client/canopy" status >/dev/null 2>&1 && break
    sleep 0.1
  done
  CANOPY_SOCKET=$dir/sock "$build/client/canopy" system -F "$hz" --name "$name" >/dev/null
}
