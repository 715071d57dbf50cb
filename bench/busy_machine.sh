#!/usr/bin/env bash
# canopyd on a real, busy machine (issue 22): a whole-system session while the project
# itself builds, against `perf record -a` on the same build.
#
# Each run is one fresh build of this repository (a `git archive` copy of REV, cmake
# configure + `make -j2`, RelWithDebInfo, in a scratch dir); with --minutes N, builds
# repeat (each from a new copy, the previous one deleted: new binaries every time) until N
# minutes have passed. Runs, in order:
#   baseline   the build alone (its wall time; skipped with --no-baseline)
#   canopy     a private canopyd (own socket, own state dir), `canopy system -F HZ`, IDLE
#              seconds idle, the build(s) with `canopy tree` + `sessions` + `status` every
#              5 s, then 60 s more of the same polls (RSS 10 s and 60 s after the build)
#   perf-fp    the build under `perf record -e cpu-clock -a -g -F HZ`
#   perf-dwarf the build under `perf record -e cpu-clock -a --call-graph dwarf -F HZ`, then
#              `perf report --stdio` over each perf.data (its CPU time)
# Every second: the profiler's VmRSS, RssAnon and CPU (utime+stime, and of reaped children,
# cutime+cstime: canopyd's query workers) from /proc. Output in OUT (printed at the end):
# summary.md (the table), rss.csv (the time series), queries.jsonl (the 5 s polls), logs.
# Duration: each build ~35 s alone on 2 cores (2-8x that on a loaded machine); a 999 Hz run
# is 4 builds + 80 s + perf report (the dwarf one: minutes of CPU), ~20 min when loaded.
# With --minutes N each of the canopy and perf runs lasts N minutes (--no-perf: N + 1.5).
#
#   bench/busy_machine.sh [--build DIR] [-F HZ] [--minutes N] [--idle S]
#                         [--rev REV] [--out DIR] [--no-baseline] [--no-perf]
#                         [--report-timeout S] [--build-timeout S]
# DIR defaults to build-rel (DIR/client/canopy, DIR/daemon/canopyd). Needs root (a
# system-wide session), perf (linux-perf) and GNU time.
#   bench/busy_machine.sh                        # 999 Hz, one full build
#   bench/busy_machine.sh -F 99 --minutes 10 --no-perf --no-baseline  # 10 min at 99 Hz
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-rel
FREQ=999
MINUTES=
IDLE=20
REV=HEAD
OUT=
BASELINE=1
PERF=1
REPORT_TIMEOUT=1800
BUILD_TIMEOUT=1800
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd); shift ;;
    -F) FREQ=$2; shift ;;
    --minutes) MINUTES=$2; shift ;;
    --idle) IDLE=$2; shift ;;
    --rev) REV=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-baseline) BASELINE=0 ;;
    --no-perf) PERF=0 ;;
    --report-timeout) REPORT_TIMEOUT=$2; shift ;;
    --build-timeout) BUILD_TIMEOUT=$2; shift ;;
    *) usage ;;
  esac
  shift
done
CANOPY=$BUILD/client/canopy
CANOPYD=$BUILD/daemon/canopyd
die() { echo "busy_machine.sh: $*" >&2; exit 1; }
[ -x "$CANOPY" ] && [ -x "$CANOPYD" ] || die "no canopy/canopyd in $BUILD (build it first)"
[ "$(id -u)" = 0 ] || die "a whole-system session needs root"
if [ "$PERF" = 1 ]; then command -v perf >/dev/null || die "perf not installed (linux-perf)"; fi
[ -x /usr/bin/time ] || die "GNU time not installed (time)"
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/canopy-busy-XXXXXX)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$OUT/work
mkdir -p "$WORK"
TICK=$(getconf CLK_TCK)
T0=$(date +%s.%N)

# Everything started here, stopped on any exit.
D_PID= MON_PID= POLL_PID= BUILD_PID= PERF_TIME_PID= PERF_PID=
MAIN_PID=$BASHPID
cleanup() {
  local rc=$?
  # A background subshell (monitor, poll) ending runs this trap too: only the script's
  # own shell stops things.
  [ "$BASHPID" = "$MAIN_PID" ] || return 0
  [ -z "$POLL_PID" ] || kill "$POLL_PID" 2>/dev/null || true
  [ -z "$MON_PID" ] || kill "$MON_PID" 2>/dev/null || true
  [ -z "$BUILD_PID" ] || kill -- "-$BUILD_PID" 2>/dev/null || true
  [ -z "$PERF_PID" ] || kill -INT "$PERF_PID" 2>/dev/null || true
  [ -z "$D_PID" ] || kill "$D_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK" "$OUT/src.tar" "$OUT/state"
  [ $rc = 0 ] || echo "busy_machine.sh: failed ($rc); logs in $OUT" >&2
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now() { python3 -c 'import time; print("%.3f" % time.time())'; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "[$(since "$T0") s] $*" >&2; }

git -C "$ROOT" archive --format=tar "$REV" >"$OUT/src.tar" || die "git archive $REV"

# monitor ROLE PID: one CSV row a second while PID lives (the caller kills it).
echo "t_s,role,phase,vmrss_kb,rssanon_kb,cpu_ticks,child_cpu_ticks" >"$OUT/rss.csv"
monitor() {
  local role=$1 pid=$2 rss anon k v rest
  while [ -r "/proc/$pid/stat" ]; do
    rss=0 anon=0
    while read -r k v _; do
      case $k in VmRSS:) rss=$v ;; RssAnon:) anon=$v ;; esac
    done <"/proc/$pid/status" 2>/dev/null || break
    rest=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || break
    # After the comm: state is field 3, utime..cstime are fields 14..17.
    set -- $rest
    echo "$(since "$T0"),$role,$(cat "$OUT/phase"),$rss,$anon,$((${12} + ${13})),$((${14} + ${15}))" \
      >>"$OUT/rss.csv"
    sleep 1
  done
}
echo setup >"$OUT/phase"

# build_once TAG N: one fresh copy and build; appends "TAG wall_s status" to builds.txt.
build_once() {
  local tag=$1 n=$2 dir=$WORK/$1-$2 t rc=0
  mkdir -p "$dir/src"
  tar -x -C "$dir/src" -f "$OUT/src.tar"
  t=$(date +%s.%N)
  local limit=$BUILD_TIMEOUT
  if [ -n "$MINUTES" ]; then
    limit=$(awk -v m="$MINUTES" -v s="$LOAD_START" -v now="$(date +%s.%N)" \
      'BEGIN { r = m * 60 - (now - s); printf "%d", r < 1 ? 1 : r }')
  fi
  # Stopped at its limit (the --minutes deadline, or --build-timeout): GNU timeout leads
  # its own process group and signals all of it (cleanup kills the group too).
  timeout "$limit" bash -c "cmake -S '$dir/src' -B '$dir/b' -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
                  make -C '$dir/b' -j2" >"$OUT/build-$tag-$n.log" 2>&1 &
  BUILD_PID=$!
  wait "$BUILD_PID" || rc=$?
  BUILD_PID=
  echo "$tag $n $(since "$t") $rc" >>"$OUT/builds.txt"
  rm -rf "$dir"
  return 0
}

# load TAG: the build, or builds until --minutes have passed.
load() {
  local tag=$1 n=0
  LOAD_START=$(date +%s.%N)
  while :; do
    n=$((n + 1))
    say "$tag: build $n"
    build_once "$tag" "$n"
    [ -n "$MINUTES" ] || break
    awk -v m="$MINUTES" -v s="$LOAD_START" -v now="$(date +%s.%N)" \
      'BEGIN { exit !(now - s < m * 60 - 1) }' || break
  done
  echo "$tag $(since "$LOAD_START") $n" >>"$OUT/loads.txt"
}

# cpu_of PID: "self_ticks child_ticks" (bench_lib.sh)
source "$ROOT/bench/bench_lib.sh"
rss_of() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

: >"$OUT/builds.txt"
: >"$OUT/loads.txt"
: >"$OUT/marks.txt"
mark() { echo "$1 $(since "$T0") ${2:-}" >>"$OUT/marks.txt"; }
mark start "$(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$BASELINE" = 1 ]; then
  echo baseline >"$OUT/phase"
  load baseline
fi

# ---- canopy ----
SOCK=$OUT/canopyd.sock
export CANOPY_SOCKET=$SOCK
C() { "$CANOPY" "$@"; }
"$CANOPYD" --socket "$SOCK" --state-dir "$OUT/state" >"$OUT/canopyd.log" 2>&1 &
D_PID=$!
for ((i = 0; i < 100; i++)); do C status >/dev/null 2>&1 && break; sleep 0.1; done
C status >/dev/null || die "canopyd did not start: $(cat "$OUT/canopyd.log")"
echo idle >"$OUT/phase"
monitor canopyd "$D_PID" &
MON_PID=$!
S=$(C system -F "$FREQ" --name busy) || die "canopy system: $S"
say "canopy: session $S at $FREQ Hz, canopyd $D_PID; ${IDLE} s idle"

# snap NAME: canopyd's CPU, RSS and the session's counters now (snap-NAME.json).
snap() {
  local cpu
  cpu=$(cpu_of "$D_PID")
  C sessions --format json >"$OUT/snap-$1.sessions.json"
  C status --format json >"$OUT/snap-$1.status.json"
  echo "{\"t\": $(since "$T0"), \"cpu\": ${cpu% *}, \"child_cpu\": ${cpu#* }, \"rss_kb\": $(rss_of "$D_PID")}" \
    >"$OUT/snap-$1.json"
}
# The 5 s poll: `canopy tree` (its wall time), then sessions and status (queries.jsonl).
poll() {
  while :; do
    local t q
    t=$(now)
    C tree "$S" >/dev/null 2>>"$OUT/poll.err" || echo "tree failed" >>"$OUT/poll.err"
    q=$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.1f", (b - a) * 1000 }')
    printf '{"t": %s, "phase": "%s", "tree_ms": %s, "s": %s, "st": %s}\n' "$(since "$T0")" \
      "$(cat "$OUT/phase")" "$q" "$(C sessions --format json)" "$(C status --format json)" \
      >>"$OUT/queries.jsonl"
    sleep 5
  done
}
poll &
POLL_PID=$!
sleep "$IDLE"
snap idle
echo build >"$OUT/phase"
mark canopy-build
load canopy
snap build_end
mark canopy-after
echo after >"$OUT/phase"
sleep 10
snap after10
sleep 50
snap after60
kill "$POLL_PID" 2>/dev/null || true
wait "$POLL_PID" 2>/dev/null || true
POLL_PID=
# What a `canopy save` writes (the counterpart of perf.data), and its wall time.
t=$(now)
C save "$S" -o "$OUT/busy.canopy" >/dev/null 2>"$OUT/save.err" || echo "save failed" >>"$OUT/save.err"
echo "$(awk -v a="$t" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }') $(stat -c %s "$OUT/busy.canopy" 2>/dev/null || echo 0)" \
  >"$OUT/save.txt"
rm -f "$OUT/busy.canopy"
C stop "$S" >/dev/null || true
kill "$D_PID"
wait "$D_PID" || say "canopyd exited $?"
D_PID=
kill "$MON_PID" 2>/dev/null || true
wait "$MON_PID" 2>/dev/null || true
MON_PID=
say "canopy: done"

# ---- perf ----
perf_run() { # TAG CALLGRAPH-ARGS...
  local tag=$1
  shift
  echo "$tag" >"$OUT/phase"
  /usr/bin/time -f '%U %S %M %e' -o "$OUT/$tag.time" \
    perf record -e cpu-clock -a -F "$FREQ" "$@" -o "$OUT/$tag.data" 2>"$OUT/$tag.log" &
  PERF_TIME_PID=$!
  for ((i = 0; i < 100; i++)); do
    PERF_PID=$(pgrep -P "$PERF_TIME_PID" -x perf || true)
    [ -n "$PERF_PID" ] && break
    sleep 0.1
  done
  [ -n "$PERF_PID" ] || die "$tag: perf did not start: $(cat "$OUT/$tag.log")"
  monitor "$tag" "$PERF_PID" &
  MON_PID=$!
  sleep 2
  mark "$tag-build"
  load "$tag"
  mark "$tag-end"
  kill -INT "$PERF_PID"
  wait "$PERF_TIME_PID" || true
  PERF_PID=
  kill "$MON_PID" 2>/dev/null || true
  wait "$MON_PID" 2>/dev/null || true
  MON_PID=
  stat -c %s "$OUT/$tag.data" >"$OUT/$tag.bytes"
  say "$tag: $(tail -1 "$OUT/$tag.log")"
}
perf_report() { # TAG
  local tag=$1 rc=0
  echo "$tag-report" >"$OUT/phase"
  say "$tag: perf report --stdio (at most $REPORT_TIMEOUT s)"
  { /usr/bin/time -f '%U %S %M %e' -o "$OUT/$tag.report.time" \
    timeout "$REPORT_TIMEOUT" perf report --stdio -i "$OUT/$tag.data" 2>"$OUT/$tag.report.err" |
    wc -c >"$OUT/$tag.report.bytes"; } || rc=$?
  echo "$rc" >"$OUT/$tag.report.rc"
  # perf's own count of lost samples (PERF_RECORD_LOST, LOST_SAMPLES)
  perf report --stats -i "$OUT/$tag.data" 2>/dev/null | awk '/LOST/ { print $1, $3 }' >"$OUT/$tag.lost" || true
  rm -f "$OUT/$tag.data"
}
if [ "$PERF" = 1 ]; then
  perf_run perf-fp -g
  perf_run perf-dwarf --call-graph dwarf
  perf_report perf-fp
  perf_report perf-dwarf
fi
mark end "$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$OUT" "$FREQ" "$TICK" "$IDLE" "${MINUTES:-}" >"$OUT/summary.md" <<'PY'
import json, os, sys, statistics
out, freq, tick, idle_s, minutes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def rd(name, default=None):
    p = os.path.join(out, name)
    return open(p).read().strip() if os.path.exists(p) else default
def js(name):
    return json.load(open(os.path.join(out, name)))
MiB = 1024.0
rows = [l.split(",") for l in open(os.path.join(out, "rss.csv")).read().split("\n")[1:] if l]
loads = {l.split()[0]: (float(l.split()[1]), int(l.split()[2])) for l in rd("loads.txt", "").splitlines()}
builds = [l.split() for l in rd("builds.txt", "").splitlines()]
marks = {l.split()[0]: l.split()[1:] for l in rd("marks.txt", "").splitlines()}
p = print
p(f"## canopyd on a busy machine: {freq} Hz, " + (f"builds for {minutes} min" if minutes else "one full build"))
p()
p(f"load average at start {' '.join(marks['start'][1:])}, at end {' '.join(marks['end'][1:])}; "
  "builds (tag n wall_s status): " + "; ".join(" ".join(b) for b in builds))
p()

# canopy
snaps = {k: js(f"snap-{k}.json") for k in ("idle", "build_end", "after10", "after60")}
sess = {k: [s for s in js(f"snap-{k}.sessions.json")["sessions"] if s["name"] == "busy"][0]
        for k in ("idle", "build_end")}
st_end = js("snap-build_end.status.json")
q = [json.loads(l) for l in open(os.path.join(out, "queries.jsonl"))]
crow = [r for r in rows if r[1] == "canopyd"]
build_rss = [int(r[3]) for r in crow if r[2] == "build"]
build_anon = [int(r[4]) for r in crow if r[2] == "build"]
half = build_rss[len(build_rss) // 2:] or [0]
idle_kb = snaps["idle"]["rss_kb"]
wall = snaps["build_end"]["t"] - snaps["idle"]["t"]
cpu_self = (snaps["build_end"]["cpu"] - snaps["idle"]["cpu"]) / tick
cpu_all = cpu_self + (snaps["build_end"]["child_cpu"] - snaps["idle"]["child_cpu"]) / tick
n = sess["build_end"]["samples"] - sess["idle"]["samples"]
lost = sess["build_end"]["lost"] - sess["idle"]["lost"]
dropped = sess["build_end"]["dropped"] - sess["idle"]["dropped"]
us = sess["build_end"]["user_stacks"] - sess["idle"]["user_stacks"]
oc = {k: sess["build_end"]["unwind_outcomes"][k] - sess["idle"]["unwind_outcomes"][k]
      for k in sess["build_end"]["unwind_outcomes"]}
sc = st_end["symbol_cache"]
tree_ms = [x["tree_ms"] for x in q if x["phase"] == "build"] or [0]
save_s, save_b = (rd("save.txt", "0 0").split() + ["0"])[:2]
pct = lambda a, b: f"{100.0 * a / b:.1f}%" if b else "-"
p("### canopyd (whole-system session, default mode)")
p()
p("| figure | value |")
p("|---|---|")
p(f"| RSS at the session's start (first poll, {q[0]['t'] - snaps['idle']['t'] + float(idle_s):.0f} s in) | {q[0]['st']['rss_bytes'] / 2**20:.1f} MiB |")
p(f"| RSS idle (session running, {idle_s} s, before the build) | {idle_kb / MiB:.1f} MiB |")
p(f"| RSS peak during the build (VmRSS / RssAnon) | {max(build_rss or [0]) / MiB:.1f} / {max(build_anon or [0]) / MiB:.1f} MiB |")
p(f"| RSS steady (median of the build's second half) | {statistics.median(half) / MiB:.1f} MiB |")
p(f"| RSS at the build's end | {snaps['build_end']['rss_kb'] / MiB:.1f} MiB |")
p(f"| RSS 10 s after the build | {snaps['after10']['rss_kb'] / MiB:.1f} MiB ({snaps['after10']['rss_kb'] / idle_kb:.2f}× idle) |")
p(f"| RSS 60 s after the build | {snaps['after60']['rss_kb'] / MiB:.1f} MiB ({snaps['after60']['rss_kb'] / idle_kb:.2f}× idle) |")
p(f"| build window | {wall:.1f} s, {n} samples ({n / wall:.0f}/s) |")
p(f"| CPU, canopyd alone (utime+stime) | {cpu_self:.2f} s = {1e6 * cpu_self / max(n, 1):.1f} µs/sample, {100 * cpu_self / wall:.2f}% of a core |")
p(f"| CPU all-in (with its query workers) | {cpu_all:.2f} s = {1e6 * cpu_all / max(n, 1):.1f} µs/sample, {100 * cpu_all / wall:.2f}% of a core |")
p(f"| lost / dropped | {lost} / {dropped} of {n + lost} ({pct(lost, n + lost)} lost) |")
p(f"| user stacks | {us} ({pct(us, n)} of samples) |")
p(f"| unwind outcomes (of user stacks) | complete {pct(oc['complete'], us)}, stack copy {pct(oc['truncated_stack'], us)}, "
  f"no CFI {pct(oc['no_cfi'], us)}, read fault {pct(oc['read_fault'], us)}, other {pct(oc['other'], us)} |")
p(f"| stack copy at the end | {sess['build_end'].get('stack_copy', {}).get('bytes', '-')} bytes |")
p(f"| symbol cache at the build's end | {sc['objects']} objects, {sc['heap_bytes'] / 2**20:.1f} MiB heap, "
  f"{sc['mapped_bytes'] / 2**20:.1f} MiB mapped, {sc['evictions']} evicted" +
  "".join(f"; {k} {v}" for k, v in sc.items() if k not in ("objects", "heap_bytes", "mapped_bytes", "evictions")) + " |")
anon_end = st_end["rss_anon_bytes"]
p(f"| anonymous memory at the build's end, by owner | {anon_end / 2**20:.1f} MiB: session tables (`memory`) {sess['build_end']['memory'] / 2**20:.1f}, "
  f"symbol cache heap {sc['heap_bytes'] / 2**20:.1f}, the rest (unwind images, ...) {(anon_end - sess['build_end']['memory'] - sc['heap_bytes']) / 2**20:.1f} MiB |")
p(f"| `canopy tree` every 5 s during the build | median {statistics.median(tree_ms):.0f} ms, max {max(tree_ms):.0f} ms ({len(tree_ms)} queries) |")
p(f"| `canopy save` at the end | {int(save_b) / 1e6:.1f} MB in {save_s} s |")
p()

# perf
perf = [t for t in ("perf-fp", "perf-dwarf") if rd(f"{t}.time")]
if perf:
    p("### the same build under perf record (-e cpu-clock -a -F %d)" % freq)
    p()
    p("| | perf record -g | perf record --call-graph dwarf |")
    p("|---|---|---|")
    cells = {}
    for t in perf:
        u, s_, m, e = rd(f"{t}.time").splitlines()[-1].split()
        log = rd(f"{t}.log", "")
        ns = 0
        for l in log.splitlines():
            if "samples)" in l:
                ns = int(l.split("(")[-1].split()[0])
        cpu = float(u) + float(s_)
        lw, nb = loads.get(t, (0, 0))
        rep = rd(f"{t}.report.time", "")
        rrc = rd(f"{t}.report.rc", "?")
        if rep:
            ru, rs, rm, re_ = rep.splitlines()[-1].split()
            rtxt = f"{float(ru) + float(rs):.1f} s CPU, {float(re_):.1f} s wall, {int(rm) / 1024:.0f} MiB peak, {int(rd(f'{t}.report.bytes', '0')) / 1e6:.1f} MB of text"
            if rrc not in ("0",):
                rtxt += f" (exit {rrc}: timed out or failed)"
        else:
            rtxt = "-"
        # While recording (the 1 s rows up to the build's end) and in all (GNU time: with
        # the final pass, where perf reads perf.data back for build ids).
        end_t = float(marks.get(f"{t}-end", ["1e18"])[0])
        rec = [r for r in rows if r[1] == t and float(r[0]) <= end_t] or [[0, t, t, 0, 0, 0, 0]]
        rec_cpu = int(rec[-1][5]) / tick
        chunks = ""
        for l in (rd(f"{t}.report.err", "") + "\n" + log).splitlines():
            if "lost" in l and "chunks" in l:
                chunks = l.split("lost")[1].split("chunks")[0].strip() + " chunks lost; "
        stats = ", ".join(l.replace(" ", " ") for l in rd(f"{t}.lost", "").splitlines())
        cells[t] = [
            f"{lw:.1f} s, {ns} samples",
            f"{rec_cpu:.2f} s = {1e6 * rec_cpu / max(ns, 1):.1f} µs/sample, {100 * rec_cpu / max(lw, 1e-9):.2f}% of a core",
            f"{cpu:.2f} s = {1e6 * cpu / max(ns, 1):.1f} µs/sample, {100 * cpu / max(lw, 1e-9):.2f}% of a core",
            f"{max(int(r[3]) for r in rec) / 1024:.1f} MiB",
            f"{int(m) / 1024:.1f} MiB",
            f"{int(rd(f'{t}.bytes', '0')) / 1e6:.1f} MB",
            (chunks + ("--stats: " + stats if stats else "")) or "none reported",
            rtxt,
        ]
    names = ["build window, samples", "perf record CPU while recording", "perf record CPU in all (with its final build-id pass)",
             "RSS while recording (1 s samples)", "RSS peak (with the final pass)",
             "perf.data written", "lost", "`perf report --stdio`"]
    for i, nm in enumerate(names):
        p(f"| {nm} | " + " | ".join(cells.get(t, ["-"] * len(names))[i] for t in ("perf-fp", "perf-dwarf")) + " |")
    p()
p(f"RSS time series: {out}/rss.csv (t_s since start; role; phase; VmRSS, RssAnon in kB; CPU ticks of {tick}/s)")
PY
cat "$OUT/summary.md"
echo "output: $OUT" >&2
