#!/usr/bin/env bash
# Two canopyd builds side by side on the same busy machine (issue 22): each runs a
# whole-system session at HZ while the project builds once (a fresh `git archive` copy,
# cmake + make -j2), so both see exactly the same load, whatever else the machine is doing
# (bench/busy_machine.sh measures one canopyd against perf; on a shared machine its
# figures move with the other work, this one's comparison does not). Each daemon also
# samples the other: the same for both.
#
#   bench/busy_ab.sh BUILD_A BUILD_B [-F HZ] [--idle S] [--after S] [--retention DUR]
#                    [--minutes N] [--steady S] [--out DIR] [--conf-a 'KEY = VALUE'] [--conf-b ...]
# BUILD_X/daemon/canopyd and BUILD_X/client/canopy (Release builds). Prints, per daemon:
# RssAnon idle (session running, before the build), peak, at the build's end, and S
# seconds after; what `status` and `sessions` said they held nearest the peak; CPU per sample over the build, canopyd's own and with the children it
# forked and reaped (checkpoint writers; no queries are sent); samples and lost. --retention sets both
# daemons' raw-sample window (canopyd.conf's retention, default 10m), so that a short run
# reaches the steady state where the build's samples are folded. --conf-a / --conf-b add a
# canopyd.conf line to one daemon (repeatable): one build with two settings side by side
# (BUILD_A and BUILD_B may be the same). --minutes N: builds back to
# back (each from a fresh build dir) until N minutes have passed, the long run where a
# session's all-time tree would grow with every program the machine ran. --steady S also
# prints the CPU per sample over the build's last part, from S seconds before the N minutes
# are up to the build's end: with N past the retention window (default 10 minutes), the
# steady state where the oldest samples are folded out of the window. Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
A=$(cd "$1" && pwd)
B=$(cd "$2" && pwd)
shift 2
FREQ=999 IDLE=20 AFTER=60 OUT= RETENTION= MINUTES=0 STEADY=0
CONF_A=() CONF_B=()
while [ $# -gt 0 ]; do
  case $1 in
    --conf-a) CONF_A+=("$2"); shift ;;
    --conf-b) CONF_B+=("$2"); shift ;;
    -F) FREQ=$2; shift ;;
    --idle) IDLE=$2; shift ;;
    --after) AFTER=$2; shift ;;
    --out) OUT=$2; shift ;;
    --retention) RETENTION=$2; shift ;;
    --minutes) MINUTES=$2; shift ;;
    --steady) STEADY=$2; shift ;;
    *) echo "busy_ab.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "busy_ab.sh: a whole-system session needs root" >&2; exit 1; }
source "$ROOT/bench/bench_lib.sh"
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/canopy-ab-XXXXXX)
# a state dir left by an earlier run would bring back its saved sessions (and be read first)
[ -z "$(ls -A "$OUT" 2>/dev/null)" ] || { echo "busy_ab.sh: --out $OUT is not empty" >&2; exit 2; }
mkdir -p "$OUT/work"
PIDS=()
MAIN=$BASHPID
cleanup() {
  [ "$BASHPID" = "$MAIN" ] || return 0
  kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$OUT/work"
}
trap cleanup EXIT

start() { # NAME BUILD: a private canopyd and its system session
  local n=$1 d=$2
  mkdir -p "$OUT/$n"
  local conf=() lines=()
  [ -z "$RETENTION" ] || lines+=("retention = $RETENTION")
  if [ $n = a ]; then lines+=("${CONF_A[@]}"); else lines+=("${CONF_B[@]}"); fi
  if [ ${#lines[@]} -gt 0 ]; then
    printf '%s\n' "${lines[@]}" >"$OUT/$n/canopyd.conf"
    conf=(--config "$OUT/$n/canopyd.conf")
  fi
  start_system_daemon "$OUT/$n" "$d" "$FREQ" busy "${conf[@]}"
}
# watch NAME BUILD: "t anon_kb cpu_ticks child_ticks" every second while the daemon lives
# (the children: canopyd's reaped query workers and checkpoint writers), and every 5 s
# what it says it holds: "t profile_bytes symbol_heap debug_data unwind_tables
# malloc_in_use malloc_free" (held.txt).
watch() {
  local pid k=0
  pid=$(cat "$OUT/$1/pid")
  while [ -r "/proc/$pid/status" ]; do
    echo "$(date +%s.%N) $(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status") \
$(cpu_of "$pid")" >>"$OUT/$1/rss.txt"
    if ((k++ % 5 == 0)); then
      held "$1" "$2" >>"$OUT/$1/held.txt" 2>/dev/null || true
    fi
    sleep 1
  done
}
held() { # NAME BUILD: no Python here (a pyenv python's libpython carries 16 MiB of DWARF
  # that a system session would load to name its frames, inflating what it measures)
  local sock=$OUT/$1/sock st ses num
  st=$(CANOPY_SOCKET=$sock "$2/client/canopy" status --format json)
  ses=$(CANOPY_SOCKET=$sock "$2/client/canopy" sessions --format json)
  num() { grep -o "\"$1\": *[0-9]*" | head -1 | grep -o '[0-9]*$' || echo 0; }
  local ma
  ma=$(grep -o '"malloc": *{[^}]*}' <<<"$st" || true)
  echo "$(date +%s.%N) $(num memory <<<"$ses") $(num heap_bytes <<<"$st") \
$(num mapped_bytes <<<"$st") $(grep -o '"unwind_cache": *{[^}]*}' <<<"$st" | num bytes) \
$(num in_use_bytes <<<"$ma") $(num free_bytes <<<"$ma")"
}
sample_count() { # NAME BUILD (Debian's python3, stripped: see held)
  CANOPY_SOCKET=$OUT/$1/sock "$2/client/canopy" sessions --format json |
    /usr/bin/python3 -c 'import json,sys; s=json.load(sys.stdin)["sessions"][0]; print(s["samples"], s["lost"])'
}
mark() { echo "$1 $(date +%s.%N)" >>"$OUT/marks.txt"; }

start a "$A"
start b "$B"
watch a "$A" &
PIDS+=($!)
watch b "$B" &
PIDS+=($!)
sleep "$IDLE"
mark build
sa0=$(sample_count a "$A")
sb0=$(sample_count b "$B")
git -C "$ROOT" archive --format=tar HEAD | tar -x -C "$OUT/work"
t0=$(date +%s)
builds=0
if ((STEADY > 0)); then
  (
    sleep $((MINUTES * 60 - STEADY))
    mark steady
    echo "$(sample_count a "$A") $(sample_count b "$B")" >"$OUT/steady_samples.txt"
  ) &
  PIDS+=($!)
fi
while :; do
  rm -rf "$OUT/work/b"
  (cmake -S "$OUT/work" -B "$OUT/work/b" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    make -C "$OUT/work/b" -j2) >"$OUT/build.log" 2>&1 || echo "busy_ab.sh: the build failed" >&2
  builds=$((builds + 1))
  (($(date +%s) - t0 < MINUTES * 60)) || break
done
mark end
sa1=$(sample_count a "$A")
sb1=$(sample_count b "$B")
echo "build: $builds in $(($(date +%s) - t0)) s; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
sleep "$AFTER"
mark after
for n in a b; do # what each daemon says it holds, after
  d=$A
  [ $n = a ] || d=$B
  CANOPY_SOCKET=$OUT/$n/sock "$d/client/canopy" status --format json >"$OUT/$n/status.json"
  CANOPY_SOCKET=$OUT/$n/sock "$d/client/canopy" sessions --format json >"$OUT/$n/sessions.json"
done
python3 - "$OUT" "$FREQ" "$sa0" "$sa1" "$sb0" "$sb1" "$A" "$B" <<'PY'
import sys
out, freq = sys.argv[1], sys.argv[2]
s = {"a": (sys.argv[3].split(), sys.argv[4].split()), "b": (sys.argv[5].split(), sys.argv[6].split())}
marks = dict(l.split() for l in open(f"{out}/marks.txt"))
tb, te, ta = float(marks["build"]), float(marks["end"]), float(marks["after"])
print(f"| {freq} Hz, builds for {te - tb:.0f} s | A: {sys.argv[7]} | B: {sys.argv[8]} |")
print("|---|---|---|")
rows = {}
for n in "ab":
    pts = [tuple(map(float, l.split())) for l in open(f"{out}/{n}/rss.txt") if len(l.split()) == 4]
    idle = [p[1] for p in pts if p[0] < tb]
    during = [p for p in pts if tb <= p[0] <= te]
    end = min(pts, key=lambda p: abs(p[0] - te))
    after = [p for p in pts if p[0] <= ta][-1]
    (s0, l0), (s1, l1) = s[n]
    samples, lost = int(s1) - int(s0), int(l1) - int(l0)
    cpu = (during[-1][2] - during[0][2]) / 100.0
    mib = lambda kb: f"{kb / 1024:.0f}"
    rows.setdefault("RssAnon idle / peak / end / after, MiB", []).append(
        f"{mib(idle[-1])} / {mib(max(p[1] for p in during))} / {mib(end[1])} / {mib(after[1])}")
    rows.setdefault("CPU during the build", []).append(
        f"{cpu:.2f} s = {cpu * 1e6 / max(samples, 1):.1f} µs/sample, {100 * cpu / (te - tb):.2f}% of a core")
    kids = (during[-1][3] - during[0][3]) / 100.0
    rows.setdefault("CPU during the build, with its workers (queries, checkpoints)", []).append(
        f"{cpu + kids:.2f} s = {(cpu + kids) * 1e6 / max(samples, 1):.1f} µs/sample, {100 * (cpu + kids) / (te - tb):.2f}% of a core")
    rows.setdefault("samples, lost", []).append(f"{samples}, {lost} ({100 * lost / max(samples + lost, 1):.1f}%)")
import json, os
for n in "ab":
    pts = [tuple(map(float, l.split())) for l in open(f"{out}/{n}/rss.txt") if len(l.split()) == 4]
    peak = max((p for p in pts if tb <= p[0] <= te), key=lambda p: p[1])
    hf = f"{out}/{n}/held.txt"
    hs = [tuple(map(float, l.split())) for l in open(hf) if len(l.split()) == 7] if os.path.exists(hf) else []
    if hs:
        h = min(hs, key=lambda x: abs(x[0] - peak[0]))
        rows.setdefault("held near the peak, MiB (status, within 5 s of it)", []).append(
            f"RssAnon {peak[1] / 1024:.0f}: profile {h[1] / 2**20:.0f}, symbols {h[2] / 2**20:.0f} + debug data "
            f"{h[3] / 2**20:.0f}, unwind tables {h[4] / 2**20:.0f}; malloc in use {h[5] / 2**20:.0f}, "
            f"free {h[6] / 2**20:.0f}")
    else:
        rows.setdefault("held near the peak, MiB (status, within 5 s of it)", []).append("not recorded")
for n in "ab":
    st = json.load(open(f"{out}/{n}/status.json"))
    ses = json.load(open(f"{out}/{n}/sessions.json"))["sessions"][0]
    sc, uc = st.get("symbol_cache", {}), st.get("unwind_cache")
    held = f"profile {ses['memory'] / 2**20:.0f}, symbols {sc.get('heap_bytes', 0) / 2**20:.0f} + debug data {sc.get('mapped_bytes', 0) / 2**20:.0f}"
    held += f", unwind tables {uc['bytes'] / 2**20:.0f}" if uc else ", unwind images (not counted)"
    held += f"; {ses['compactions']} compactions" if "compactions" in ses else ""
    rows.setdefault("held after, MiB (status)", []).append(held)
    u = ses.get("unwind_outcomes", {})
    tot = max(sum(u.values()), 1)
    rows.setdefault("user stacks: complete / stack copy / no CFI / read fault", []).append(
        " / ".join(f"{100 * u.get(k, 0) / tot:.1f}%" for k in ("complete", "truncated_stack", "no_cfi", "read_fault")))
    w = ses.get("unwinder", {})
    why = ", ".join(f"{k} {v}" for k, v in sorted(w.get("libunwind_causes", {}).items(), key=lambda kv: -kv[1]))
    rows.setdefault("stacks through libunwind (of those unwound from a copy), by cause", []).append(
        f"{w.get('libunwind', 0)} of {w.get('dwarf', 0)} ({100 * w.get('libunwind', 0) / max(w.get('dwarf', 0), 1):.2f}%)"
        + (f": {why}" if why else ""))
if "steady" in marks:
    ts = float(marks["steady"])
    st = open(f"{out}/steady_samples.txt").read().split()
    s0 = {"a": int(st[0]), "b": int(st[2])}
    for n in "ab":
        pts = [tuple(map(float, l.split())) for l in open(f"{out}/{n}/rss.txt") if len(l.split()) == 4]
        part = [p for p in pts if ts <= p[0] <= te]
        cpu = (part[-1][2] - part[0][2]) / 100.0
        samples = int(s[n][1][0]) - s0[n]
        rows.setdefault(f"CPU over the last {te - ts:.0f} s of the build", []).append(
            f"{cpu:.2f} s = {cpu * 1e6 / max(samples, 1):.1f} µs/sample, {100 * cpu / (te - ts):.2f}% of a core")
for k, v in rows.items():
    print(f"| {k} | {v[0]} | {v[1]} |")
PY
