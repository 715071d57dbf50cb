#!/usr/bin/env bash
# The cost of Python frames (issue 20; docs/python.md, "Cost"): a CPU-bound pure-Python
# workload that also calls into C (zlib, libm), on each interpreter, run
#   none         alone (the baseline);
#   canopy       under a canopyd attach session at HZ (default unwinding), Python frames on;
#   canopy-nopy  the same session with --no-python;
#   canopy-stackN, canopy-nopy-stackN  the same with --stack-size N (a fixed copy of N bytes);
#   canopy-fp, canopy-nopy-fp  the same with --unwind fp (no stack copy);
#   perf-g       under `perf record -e cpu-clock -F HZ -g -p PID`;
#   perf-dwarf   under `perf record -e cpu-clock -F HZ --call-graph dwarf -p PID`;
#   base, base-nopy  canopy and canopy-nopy with a second canopyd, built from another commit
#                (--base DIR), running beside the first: before/after on the same run.
# Every run goes the same way: the workload starts and loops, the profiler attaches, WARM
# seconds later (SIGUSR1) the workload measures SECS seconds of its work (units done, its
# own thread CPU time, wall time), prints them and then sleeps (no more samples) while the
# profiler is read and stopped. Configurations are interleaved (each once per round),
# REPS rounds; canopyd is one private daemon (own socket and state dir) for all of them, so
# its caches are cold only in the first round.
# Measured per run:
# - the work rate: units per second of the workload's CPU time (as bench/overhead.sh: the
#   sampling interrupt and the BPF program run on the workload's CPU and are charged to it,
#   other load on the machine is not) and per wall second; slowdown = the baseline's
#   median rate / the run's rate - 1;
# - the profiler's CPU per sample (bench_lib.sh):
#     steady      over the measured window: canopyd's CPU (cpu_ns: its threads' schedstat)
#                 / the session's samples then (`canopy sessions --format json`); perf
#                 record's CPU (cpu_ns) / the samples of the window (its CPU time x HZ:
#                 perf.data does not tell them apart, see perf_end);
#     from start  from before the attach to the window's end: canopyd's CPU (`perf stat
#                 -p`: the attach's symbol and unwind-table loads, in threads that exit,
#                 included) / the session's samples; perf record's CPU from its start /
#                 all its samples;
#     all-in      perf record's whole task-clock, its final build-id pass included;
#   canopy's save at stop is a forked writer: its bytes are shown, its CPU is not counted;
# - the BPF program's own run time per run (run_time_ns / run_cnt from canopyd's program fd,
#   counted while this script holds a BPF_ENABLE_STATS fd: the kernel's reference, which
#   ends with the script; kernel.bpf_stats_enabled is not touched);
# - bytes written: perf.data, canopy's saved session (.canopy); canopy's joined samples.
# Prints a markdown table per interpreter (medians, min-max over the rounds), then issue
# 20's two goals side by side. Exits non-zero only when something could not be measured.
#
#   bench/python_cost.sh [--build DIR] [--reps N] [--seconds S | --units U] [--warm S]
#                        [-F HZ] [--depth D] [--python PATH]... [--configs "none canopy ..."]
#                        [--out DIR] [--base DIR] [--pin]
# DIR: build-rel (DIR/client/canopy, DIR/daemon/canopyd); REPS 5, SECS 8, WARM 3, HZ 999;
# D: the Python calls between the loop and each unit of work (8); interpreters: Debian's
# /usr/bin/python3 and the newest pyenv 3.13 or 3.12 under /root/.pyenv/versions, if any;
# --base: another build's DIR (its canopyd and canopy), for the configurations base and
# base-nopy (default configurations then: none base canopy base-nopy canopy-nopy perf-dwarf);
# --units U: the window is U units of work instead of S seconds (the same work in every run:
# at 9999 Hz, where a sample's cost is ten times what it is at 999 Hz, the rounds then
# spread ~1%, docs/python.md "Fifteenth session");
# --pin: the workload on the last CPU, canopyd(s) and perf on CPU 0 (taskset), so that the
# profilers' own work never shares the workload's CPU in any configuration (rounds then
# vary less with the machine's other work);
# --out keeps the raw runs (runs.txt) and the table (summary.md). Needs root (BPF, perf -p)
# and perf. 5 rounds on two interpreters: ~13 minutes.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-rel
REPS=5 SECS=8 UNITS=0 WARM=3 FREQ=999 DEPTH=8 OUT="" IDLE_S=2
PYS=()
CONFIGS="none canopy canopy-nopy perf-g perf-dwarf"
BASE="" CONFIGS_SET="" PIN=""

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift ;;
    --reps) REPS=$2; shift ;;
    --seconds) SECS=$2; shift ;;
    --units) UNITS=$2; shift ;;
    --warm) WARM=$2; shift ;;
    -F) FREQ=$2; shift ;;
    --depth) DEPTH=$2; shift ;;
    --python) PYS+=("$2"); shift ;;
    --configs) CONFIGS=$2 CONFIGS_SET=1; shift ;;
    --base) BASE=$(cd "$2" && pwd); shift ;;
    --out) OUT=$2; shift ;;
    --pin) PIN=1 ;;
    *) usage ;;
  esac
  shift
done
export CANOPY_BIN=$BUILD/client/canopy CANOPYD_BIN=$BUILD/daemon/canopyd
if [ -n "$BASE" ]; then
  [ -x "$BASE/client/canopy" ] && [ -x "$BASE/daemon/canopyd" ] || {
    echo "python_cost.sh: no canopy/canopyd in $BASE" >&2
    exit 1
  }
  [ -n "$CONFIGS_SET" ] || CONFIGS="none base canopy base-nopy canopy-nopy perf-dwarf"
fi
[ -x "$CANOPY_BIN" ] && [ -x "$CANOPYD_BIN" ] || {
  echo "python_cost.sh: no canopy/canopyd in $BUILD (build it first)" >&2
  exit 1
}
source "$ROOT/tests/integration/lib.sh" # TMP, fail, skip, start_canopyd, finish_tmp
source "$ROOT/bench/bench_lib.sh"       # cpu_ns, cpu_tids, task_clock_ms
[ "$(id -u)" = 0 ] || skip "Python frames and perf -p need root"
command -v perf >/dev/null || fail "perf is not installed (linux-perf)"
if [ ${#PYS[@]} = 0 ]; then
  PYS=(/usr/bin/python3)
  for v in 3.13 3.12; do
    p=$(ls -d /root/.pyenv/versions/$v.* 2>/dev/null | sort -V | tail -1)
    if [ -n "$p" ] && [ -x "$p/bin/python3" ]; then
      PYS+=("$p/bin/python3")
      break
    fi
  done
fi
for p in "${PYS[@]}"; do [ -x "$p" ] || fail "no interpreter $p"; done
[ -n "$OUT" ] || OUT=$TMP/out
mkdir -p "$OUT"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock

D_PID="" DB_PID="" W_PID="" PSTAT_PID="" PERF_PID="" STATS_PID=""
cleanup() {
  local rc=$?
  [ "$BASHPID" = "$TMP_OWNER" ] || return 0
  kill $W_PID $PERF_PID 2>/dev/null || true
  kill -INT $PSTAT_PID 2>/dev/null || true
  kill $STATS_PID $D_PID $DB_PID 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The workload: wl.py SECONDS DEPTH UNITS. Loops from the start ("ready PID"); on SIGUSR1
# prints "go", counts units of work for SECONDS (or does UNITS of them, when not 0), prints
# "done units N cpu_s C wall_s W" and sleeps until killed. A unit: a 3000-step Python loop, then zlib.compress + crc32 of 8 KiB (odd
# units) or sum(map(math.sin, range(2000))) (even ones), DEPTH Python calls down.
cat >"$TMP/wl.py" <<'EOF'
import math, os, signal, sys, time, zlib

BUF = bytes((i * 7919) & 255 for i in range(8192))
R = range(2000)
go = False


def on_go(sig, frame):
    global go
    go = True


def cpart(r):
    if r & 1:
        return zlib.crc32(zlib.compress(BUF, 6))
    return int(sum(map(math.sin, R)))


def unit(r):
    s = 0
    for i in range(3000):
        s += i * i
    return s + cpart(r)


def descend(d, r):
    return descend(d - 1, r) + 1 if d else unit(r)


def main(secs, depth, units):
    signal.signal(signal.SIGUSR1, on_go)
    print("ready %d" % os.getpid(), flush=True)
    r = 0
    while not go:
        descend(depth, r)
        r += 1
    print("go", flush=True)
    w0, c0, n = time.monotonic(), time.thread_time(), 0
    end = w0 + secs
    while n < units if units else time.monotonic() < end:
        descend(depth, r)
        r += 1
        n += 1
    c, w = time.thread_time() - c0, time.monotonic() - w0
    print("done units %d cpu_s %.6f wall_s %.6f" % (n, c, w), flush=True)
    signal.pause()


main(float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
EOF

# The kernel counts BPF programs' run time while someone holds a BPF_ENABLE_STATS fd.
cat >"$TMP/bpf_stats.py" <<'EOF'
import ctypes, os, signal, sys
SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(os.uname().machine)
libc = ctypes.CDLL(None, use_errno=True)
attr = ctypes.create_string_buffer(8)  # bpf_attr.enable_stats.type = BPF_STATS_RUN_TIME (0)
fd = libc.syscall(SYS_BPF, 32, attr, 8) if SYS_BPF else -1  # BPF_ENABLE_STATS
if fd < 0:
    print("off: %s" % (os.strerror(ctypes.get_errno()) if SYS_BPF else "unknown arch"), flush=True)
    sys.exit(0)
print("on", flush=True)
signal.pause()
EOF
python3 "$TMP/bpf_stats.py" >"$TMP/bpf_stats.out" 2>&1 &
STATS_PID=$!
for _ in $(seq 100); do [ -s "$TMP/bpf_stats.out" ] && break; sleep 0.05; done
BPF_STATS=$(head -1 "$TMP/bpf_stats.out")

# --pin: the workload's CPU and the profilers' (the same for every configuration).
W_CPU=$(($(nproc) - 1))
# Command prefixes (empty without --pin): taskset execs the command, so $! stays its pid.
PIN_W=() PIN_P=()
[ -z "$PIN" ] || PIN_W=(taskset -c "$W_CPU") PIN_P=(taskset -c 0)
start_canopyd
[ -z "$PIN" ] || taskset -a -p -c 0 "$D_PID" >/dev/null
if [ -n "$BASE" ]; then # the second canopyd: its own socket and state dir
  "$BASE/daemon/canopyd" --socket "$TMP/b.sock" --state-dir "$TMP/state-b" >"$TMP/db.log" 2>&1 &
  DB_PID=$!
  [ -z "$PIN" ] || taskset -a -p -c 0 "$DB_PID" >/dev/null
  for _ in $(seq 100); do [ -S "$TMP/b.sock" ] && break; sleep 0.1; done
  [ -S "$TMP/b.sock" ] || fail "the --base canopyd did not start: $(cat "$TMP/db.log")"
fi
# The canopyd a canopy configuration runs under (use_daemon CFG): C, CANOPY_SOCKET, DP, STATE.
use_daemon() {
  case $1 in
    base*) C=$BASE/client/canopy CANOPY_SOCKET=$TMP/b.sock DP=$DB_PID STATE=$TMP/state-b ;;
    *) C=$CANOPY_BIN CANOPY_SOCKET=$TMP/d.sock DP=$D_PID STATE=$TMP/state ;;
  esac
}
use_daemon canopy

# wait_line FILE WORD SECONDS: until a line of FILE starts with WORD (the workload alive).
wait_line() {
  local i
  for ((i = 0; i < $3 * 50; i++)); do
    grep -q "^$2" "$1" && return 0
    kill -0 "$W_PID" 2>/dev/null || fail "the workload exited: $(cat "$1")"
    sleep 0.02
  done
  fail "no '$2' from the workload in $3 s: $(cat "$1")"
}

# session NAME: "samples lost python_state joined python_samples" of a session.
session() {
  "$C" sessions --format json | python3 -c '
import json, sys
s = [s for s in json.load(sys.stdin)["sessions"] if s.get("name") == sys.argv[1]][0]
p = s.get("python", {})
print(s["samples"], s["lost"], p.get("state", "?").replace(" ", "_"), p.get("joined", 0), p.get("samples", 0))' "$1"
}

# bpf_run: "run_time_ns run_cnt" of canopyd's perf_event programs (prog_type 7), from
# their fds' fdinfo.
bpf_run() {
  local f
  for f in /proc/"$DP"/fdinfo/*; do
    awk '$1 == "prog_type:" { t = $2 } $1 == "run_time_ns:" { ns = $2 } $1 == "run_cnt:" { n = $2 }
         END { if (t == 7) print ns + 0, n + 0 }' "$f" 2>/dev/null || true
  done | awk '{ ns += $1; n += $2 } END { print ns + 0, n + 0 }'
}

# One run's figures, set by run() and the profiler's start/mark/end below.
#   samples    the profiler's samples (canopy: the session's at the window's end)
#   steady_ns  the profiler's CPU over the window;  steady_n  its samples then
#   session_ns its CPU from its start (canopy: before the attach) to the window's end
#   allin_ns   perf: its whole task-clock;  bpf  "run_time_ns run_cnt";  bytes  written
#   joined pys canopy: samples joined with a Python record, of the registered process's
#   same       canopyd's threads the same at both ends of the window (1) or not (0)
R_samples="" R_steady_ns="" R_steady_n="" R_session_ns="" R_allin_ns="" R_bpf="" R_bytes=""
R_joined="" R_pys="" R_same="" R_idle=""
C_id="" C_s0="" C_c0="" C_t0="" P_c0=""

canopy_start() { # CFG TAG
  perf stat -x, -e task-clock -p "$DP" -o "$TMP/dstat" 2>"$TMP/dstat.err" &
  PSTAT_PID=$!
  sleep 0.3 # perf stat's counters open
  local opts=() cfg=$1
  case $cfg in *-stack[0-9]*) opts+=(--stack-size "${cfg##*-stack}") cfg=${cfg%-stack*} ;; esac
  case $cfg in *-fp) opts+=(--unwind fp) cfg=${cfg%-fp} ;; esac
  [ "${cfg%-nopy}" = "$cfg" ] || opts+=(--no-python)
  C_id=$("$C" attach "$W_PID" -F "$FREQ" --name "$2" "${opts[@]}") || fail "canopy attach"
}
canopy_mark() { # TAG: the window starts
  read -r C_s0 _ <<<"$(session "$1")"
  C_c0=$(cpu_ns "$DP")
  C_t0=$(cpu_tids "$DP")
}
canopy_end() { # CFG TAG: the window ended; read, stop, wait for the save, remove
  local c1 t1 s1 st
  c1=$(cpu_ns "$DP")
  t1=$(cpu_tids "$DP")
  R_bpf=$(bpf_run)
  read -r s1 _ st R_joined R_pys <<<"$(session "$2")"
  kill -INT "$PSTAT_PID"
  wait "$PSTAT_PID" || true
  PSTAT_PID=
  R_session_ns=$(task_clock_ms "$TMP/dstat" | awk '{ printf "%.0f", $1 * 1e6 }')
  [ -n "$R_session_ns" ] || fail "no task-clock from perf stat -p canopyd: $(cat "$TMP/dstat.err")"
  R_samples=$s1 R_steady_n=$((s1 - C_s0)) R_steady_ns=$((c1 - C_c0))
  [ "$C_t0" = "$t1" ] || R_same=0
  local cfg=${1%-stack*}
  cfg=${cfg%-fp}
  case ${cfg/#base/canopy}:$st in
    canopy:on | canopy-nopy:off_\(--no-python\)) ;;
    *) fail "$2: python frames $st" ;;
  esac
  "$C" stop "$2" >/dev/null || fail "canopy stop $2"
  for _ in $(seq 200); do # the save, by a forked writer
    [ -e "$STATE/$C_id.canopy" ] && ! ls "$STATE/$C_id".canopy.*.tmp >/dev/null 2>&1 && break
    sleep 0.05
  done
  R_bytes=$(stat -c %s "$STATE/$C_id.canopy" 2>/dev/null || echo 0)
  "$C" rm "$2" >/dev/null || fail "canopy rm $2"
}

perf_start() { # CFG
  local cg=(-g)
  [ "$1" = perf-g ] || cg=(--call-graph dwarf)
  "${PIN_P[@]}" perf stat -x, -e task-clock -o "$TMP/pstat" -- perf record -e cpu-clock -F "$FREQ" \
    "${cg[@]}" -p "$W_PID" -o "$TMP/perf.data" 2>"$TMP/perf.log" &
  PSTAT_PID=$!
  PERF_PID=
  for _ in $(seq 100); do
    PERF_PID=$(pgrep -P "$PSTAT_PID" -x perf || true)
    [ -n "$PERF_PID" ] && break
    sleep 0.05
  done
  [ -n "$PERF_PID" ] || fail "perf record did not start: $(cat "$TMP/perf.log")"
}
perf_mark() { P_c0=$(cpu_ns "$PERF_PID"); }
perf_end() { # CFG TAG WINDOW_CPU_S: the window ended; stop perf, read its log and file
  R_session_ns=$(cpu_ns "$PERF_PID") # from its start: every sample is taken by now
  R_steady_ns=$((R_session_ns - P_c0))
  # perf's samples over the window, which perf.data does not tell apart: one per 1/HZ s of
  # the workload's CPU time (cpu-clock; canopy's exact counts over the same windows agree
  # within 1%: the summary shows them). perf writes samples in batches (when its ring is
  # half full: ~30 samples with dwarf, thousands with -g), so its CPU over a window is
  # that of the batches it wrote then, give or take one.
  R_steady_n=$(awk -v c="$3" -v f="$FREQ" 'BEGIN { printf "%d", c * f + 0.5 }')
  kill -INT "$PERF_PID"
  wait "$PSTAT_PID" || true
  PSTAT_PID="" PERF_PID=""
  R_allin_ns=$(task_clock_ms "$TMP/pstat" | awk '{ printf "%.0f", $1 * 1e6 }')
  R_samples=$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' "$TMP/perf.log" | tail -1)
  [ -n "$R_samples" ] && [ -n "$R_allin_ns" ] || fail "$2: no sample count or CPU: $(cat "$TMP/perf.log")"
  R_bytes=$(stat -c %s "$TMP/perf.data")
  rm -f "$TMP/perf.data"
}

# run CFG PY ROUND: one run; appends a line to $OUT/runs.txt:
#   cfg version round units cpu_s wall_s samples steady_ns steady_n session_ns allin_ns
#   bpf_ns bpf_cnt bytes joined pys same load1 idle_ns (canopyd's CPU in the IDLE_S
#   before the attach, no session: its fixed cost per second, ticks and all)
run() {
  local cfg=$1 py=$2 rep=$3 kind=${1%%-*} out=$TMP/wl.out ver tag units cpu wall
  [ "$kind" != base ] || kind=canopy
  use_daemon "$cfg"
  R_samples=0 R_steady_ns=0 R_steady_n=0 R_session_ns=0 R_allin_ns=0 R_bpf="0 0" R_bytes=0
  R_joined=0 R_pys=0 R_same=1 R_idle=0
  ver=$("$py" -c 'import sys; print(sys.version.split()[0])')
  tag=r$rep-$cfg-$ver
  # a fixed string hash: the same dict layouts in every run
  "${PIN_W[@]}" env PYTHONHASHSEED=0 "$py" "$TMP/wl.py" "$SECS" "$DEPTH" "$UNITS" >"$out" 2>&1 &
  W_PID=$!
  wait_line "$out" ready 10
  if [ "$kind" = canopy ]; then # canopyd's own cost with no session, over IDLE_S
    local i0
    i0=$(cpu_ns "$DP")
    sleep "$IDLE_S"
    R_idle=$(($(cpu_ns "$DP") - i0))
  fi
  case $kind in canopy) canopy_start "$cfg" "$tag" ;; perf) perf_start "$cfg" ;; esac
  sleep "$WARM"
  kill -USR1 "$W_PID"
  wait_line "$out" go 10
  case $kind in canopy) canopy_mark "$tag" ;; perf) perf_mark ;; esac
  wait_line "$out" "done" $((UNITS ? 900 : ${SECS%.*} + 60))
  read -r units cpu wall <<<"$(awk '$1 == "done" { print $3, $5, $7 }' "$out")"
  case $kind in canopy) canopy_end "$cfg" "$tag" ;; perf) perf_end "$cfg" "$tag" "$cpu" ;; esac
  kill "$W_PID"
  wait "$W_PID" 2>/dev/null || true
  W_PID=
  kill -0 "$D_PID" 2>/dev/null || fail "canopyd died"
  [ -z "$DB_PID" ] || kill -0 "$DB_PID" 2>/dev/null || fail "the --base canopyd died"
  echo "$cfg $ver $rep $units $cpu $wall $R_samples $R_steady_ns $R_steady_n $R_session_ns" \
    "$R_allin_ns $R_bpf $R_bytes $R_joined $R_pys $R_same $(cut -d' ' -f1 /proc/loadavg)" \
    "$R_idle" \
    >>"$OUT/runs.txt"
  echo "  $tag: $units units in $cpu s of CPU, $R_samples samples" >&2
}

: >"$OUT/runs.txt"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((rep = 1; rep <= REPS; rep++)); do
  echo "round $rep/$REPS (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  for py in "${PYS[@]}"; do
    for cfg in $CONFIGS; do run "$cfg" "$py" "$rep"; done
  done
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$OUT/runs.txt" "$FREQ" "$SECS" "$DEPTH" "$LOAD0" "$LOAD1" "$BPF_STATS" \
  "$CONFIGS" "$IDLE_S" >"$OUT/summary.md" <<'PY'
import statistics as st, sys
path, freq, secs, depth, load0, load1, bpf_stats, configs, idle_s = sys.argv[1:10]
idle_s = float(idle_s)
configs = configs.split()
F = ("cfg ver rep units cpu wall samples steady_ns steady_n session_ns allin_ns bpf_ns bpf_cnt "
     "bytes joined pys same load idle").split()
runs = []
for l in open(path):
    r = dict(zip(F, l.split()))
    for k in F[2:]:
        r[k] = float(r[k])
    r["rate"], r["wrate"] = r["units"] / r["cpu"], r["units"] / r["wall"]
    runs.append(r)
nan = float("nan")
med = lambda xs: st.median(xs) if xs else nan
def cell(xs, fmt="%.2f"):
    if not xs:
        return "–"
    return (fmt % med(xs)) + ((" (" + fmt % min(xs) + "–" + fmt % max(xs) + ")") if len(xs) > 1 else "")
p = print
loads = [r["load"] for r in runs]
p(f"## Python frames' cost: {freq} Hz, {secs} s measured per run, {depth} Python calls down")
p()
p(f"Load average {load0} at the start, {load1} at the end (1-minute load after each run "
  f"{min(loads):.2f}–{max(loads):.2f}); BPF run time counted: {bpf_stats}.")
goals = []
for ver in dict.fromkeys(r["ver"] for r in runs):
    rs = {c: [r for r in runs if r["ver"] == ver and r["cfg"] == c] for c in configs}
    base = med([r["rate"] for r in rs.get("none", [])])
    wbase = med([r["wrate"] for r in rs.get("none", [])])
    p()
    p(f"### Python {ver} ({max(len(v) for v in rs.values())} rounds; median (min–max))")
    p()
    p("| configuration | work, units/CPU-s | slowdown (CPU) | slowdown (wall) | samples | "
      "µs/sample: steady | of which idle | from start | all-in | BPF µs/run | written | joined |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|")
    figs = {}
    for c in configs:
        R = rs[c]
        if not R:
            continue
        prof = c != "none"
        slow = [100 * (base / r["rate"] - 1) for r in R]
        wslow = [100 * (wbase / r["wrate"] - 1) for r in R]
        steady = [r["steady_ns"] / 1e3 / r["steady_n"] for r in R if r["steady_n"]]
        # canopyd's CPU with no session (per second, measured just before the attach) spread
        # over the window's samples: the part of "steady" that is not per sample
        idle = [r["idle"] / idle_s * r["wall"] / 1e3 / r["steady_n"] for r in R
                if r["steady_n"] and r["idle"]]
        start = [r["session_ns"] / 1e3 / r["samples"] for r in R if r["samples"]]
        allin = [r["allin_ns"] / 1e3 / r["samples"] for r in R if r["samples"] and r["allin_ns"]]
        bpf = [r["bpf_ns"] / 1e3 / r["bpf_cnt"] for r in R if r["bpf_cnt"]]
        joined = [100 * r["joined"] / r["pys"] for r in R if r["pys"]]
        moved = any(not r["same"] for r in R)
        figs[c] = dict(slow=med(slow), steady=med(steady), start=med(start), allin=med(allin),
                       idle=med(idle) if idle else nan,
                       bpf=med(bpf) if bpf else 0.0)
        p(f"| {c} | {cell([r['rate'] for r in R], '%.0f')} | "
          + (cell(slow, "%+.1f%%") if prof else "–") + " | "
          + (cell(wslow, "%+.1f%%") if prof else "–") + " | "
          + (cell([r["samples"] for r in R], "%.0f") if prof else "–") + " | "
          + cell(steady) + ("*" if moved else "") + " | " + cell(idle) + " | " + cell(start) + " | "
          + cell(allin) + " | "
          + cell(bpf) + " | " + cell([r["bytes"] / 1e6 for r in R if r["bytes"]], "%.2f MB") + " | "
          + (cell(joined, "%.1f%%") if joined else "–") + " |")
    per = [r["steady_n"] / r["cpu"] for c in configs if c.startswith(("canopy", "base")) for r in rs[c] if r["cpu"]]
    if per:
        p()
        p(f"canopy's samples per CPU-second of the workload's window (perf's window count "
          f"assumes {freq}): {min(per):.0f}–{max(per):.0f}.")
    if "canopy" in configs and "canopy-nopy" in configs:
        p("\"from start\" of canopy's sessions: the first of a round on an interpreter usually finds "
          "that interpreter's symbol tables expired from canopyd's cache (30 s idle) and loads them "
          "again (~0.1–0.2 s of CPU); the next one, right after, finds them loaded.")
    if any(not r["same"] for c in configs if c.startswith(("canopy", "base")) for r in rs[c]):
        p("\\* canopyd's threads changed during a window: a thread that exited is not counted.")
    # Round by round, each profiler against the others (a round runs every configuration
    # in turn, under the same load): the slowdown of A relative to B (B's work per CPU-second
    # over A's, less one). Comparing each configuration's median slowdown against "none"
    # instead mixes two rounds' noise (the thirteenth session's "1 point with no copy and no
    # BPF" was that; pairwise the same runs gave +0.1%).
    profs = [c for c in configs if c != "none" and rs.get(c)]
    if len(profs) > 1:
        p()
        p("Paired by round: slowdown of the first relative to the second, median (mean; rounds "
          "where the first was slower):")
        p()
        p("| first | second | median | mean | slower in |")
        p("|---|---|---|---|---|")
        for i, a in enumerate(profs):
            for b in profs[i + 1:]:
                ra = {r["rep"]: r["rate"] for r in rs[a]}
                rb = {r["rep"]: r["rate"] for r in rs[b]}
                d = [100 * (rb[k] / ra[k] - 1) for k in ra if k in rb]
                if d:
                    p(f"| {a} | {b} | {med(d):+.2f}% | {st.mean(d):+.2f}% | "
                      f"{sum(x > 0 for x in d)} of {len(d)} |")
    goals.append((ver, figs))
rows = [(v, f) for v, f in goals if "canopy" in f and "perf-dwarf" in f]
if rows:
    p()
    p("### Issue 20's goals")
    p()
    p("| Python | canopy with Python frames, µs/sample, steady: canopyd + BPF | "
      "--no-python | perf dwarf: steady, from start, all-in | ratio to perf dwarf's steady "
      "(goal ≤ 1.5): canopyd + BPF, canopyd, canopyd + BPF less canopyd's idle cost | "
      "ratio to --no-python | "
      "slowdown (CPU; goal ≤ perf's): canopy / --no-python / perf -g / perf dwarf |")
    p("|---|---|---|---|---|---|---|")
    for ver, f in rows:
        c, d = f["canopy"], f["perf-dwarf"]
        n = f.get("canopy-nopy", dict(steady=nan, start=nan))
        tot = c["steady"] + c["bpf"]
        sl = " / ".join("%+.1f%%" % f[k]["slow"] if k in f else "–"
                        for k in ("canopy", "canopy-nopy", "perf-g", "perf-dwarf"))
        num = lambda x: "–" if x != x else "%.2f" % x
        p(f"| {ver} | {c['steady']:.2f} + {c['bpf']:.2f} = {tot:.2f} | {num(n['steady'])} | "
          f"{d['steady']:.2f}, {d['start']:.2f}, {d['allin']:.2f} | "
          f"{tot / d['steady']:.2f}, {c['steady'] / d['steady']:.2f}, "
          f"{num((tot - c['idle']) / d['steady'])} | {num(tot / n['steady'])} | {sl} |")
    base = [(v, f) for v, f in rows if "base" in f]
    if base:
        p()
        p("Before (--base, the second canopyd on the same runs) and after, µs/sample, steady:")
        p()
        p("| Python | base: canopyd + BPF | this build: canopyd + BPF | base --no-python | "
          "this build --no-python | ratio to perf dwarf's steady: base, this build | "
          "the same less canopyd's idle cost |")
        p("|---|---|---|---|---|---|---|")
        for ver, f in base:
            b, c, d = f["base"], f["canopy"], f["perf-dwarf"]
            bn, cn = f.get("base-nopy", dict(steady=nan)), f.get("canopy-nopy", dict(steady=nan))
            num = lambda x: "–" if x != x else "%.2f" % x
            bt, ct = b["steady"] + b["bpf"], c["steady"] + c["bpf"]
            p(f"| {ver} | {b['steady']:.2f} + {b['bpf']:.2f} = {bt:.2f} | "
              f"{c['steady']:.2f} + {c['bpf']:.2f} = {ct:.2f} | {num(bn['steady'])} | "
              f"{num(cn['steady'])} | {bt / d['steady']:.2f}, {ct / d['steady']:.2f} | "
              f"{num((bt - b['idle']) / d['steady'])}, {num((ct - c['idle']) / d['steady'])} |")
PY
[ -z "$PIN" ] || sed -i "2i (--pin: the workload on CPU $W_CPU, canopyd and perf on CPU 0.)\\n" "$OUT/summary.md"
cat "$OUT/summary.md"
