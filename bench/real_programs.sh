#!/usr/bin/env bash
# Real programs, canopy against perf (docs/perf-sampler.md, "Real programs"): Debian's
# python3 (a pure-Python script), gcc's cc1 (-O2 -c on aggregate/*.c), xz -9 (liblzma),
# node --perf-basic-prof (JIT code named by its perf map) and a Go binary built here,
# each ~SECS seconds at FREQ Hz, user space only (cpu-clock:u). One command gives the
# whole table (the load average is printed with it):
#   bench/real_programs.sh [BUILD_DIR] [SECS] [PROGRAMS...]   (default: all five)
#   CANOPY_REAL_FREQ=HZ (default 3999); CANOPY_REAL_KEEP=DIR keeps the folded files and
#   perf scripts there.
# Main table, one execution per program: bench_replay captures it in auto's record layout
# and replays the capture into live sessions (live/: sampler + symbolizer + aggregate, as
# `canopy run` hosts them) unwinding with auto, dwarf and fp, written as `canopy run
# --no-inline --format folded` writes them: the three canopy columns are the SAME samples,
# only the unwinder differs. perf record --call-graph dwarf attaches (-p) to the same
# process once it has exec'd (perf script --no-inline): perf's column samples the same
# execution (its own samples of it, from a few milliseconds after the start). perf -g
# (frame pointers) is a separate run.
# Second table: what a user running canopy gets, `canopy run --no-daemon --unwind
# auto|dwarf|fp --no-inline --format folded`, three separate runs (they differ by their
# samples and by what the workload did in each run).
# Every cell: samples; "reach start", the share of samples whose stack reaches the
# program's start (_start, the unnamed frame above __libc_start_main in a stripped
# program, a thread start, Go's runtime.goexit/mstart/rt0_go); "roots", the number of
# distinct root frames; "unnamed leaf", the share of samples whose leaf has no name (0x…,
# LIB+0x…, [jit]+0x…, perf's [unknown]); "top-10 self, max gap", the largest difference,
# in points, between the column's self shares and the same-run perf dwarf's over perf
# dwarf's top-10 self functions (unnamed leaves counted as one "[unknown]", as perf does),
# with the two-sigma sampling noise of that one comparison (binomial, two independent
# samplings of n1 and n2 samples, shares p1 and p2: 2·sqrt(p1(1-p1)/n1 + p2(1-p2)/n2)).
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SECS=${2:-3}
shift 2 2>/dev/null || true
PROGRAMS=${*:-python3 cc1 xz node go}
SRC=$(cd "$(dirname "$0")/.." && pwd)
FREQ=${CANOPY_REAL_FREQ:-3999}
C=$BUILD/client/canopy
R=$BUILD/bench/bench_replay
[ -x "$C" ] && [ -x "$R" ] || { echo "build $C and $R first" >&2; exit 1; }
PY=/usr/bin/python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export CANOPY_SOCKET=$TMP/no-daemon.sock

source "$SRC/tests/integration/real_inputs.sh"
real_inputs "$TMP" "$SECS"
cd "$TMP" # node --perf-basic-prof writes isolate-*-v8.log files where it runs

cmd_for() {
  case $1 in
    python3) echo "$PY $TMP/busy.py" ;;
    cc1) echo "sh -c 'for f in $SRC/aggregate/*.c; do gcc -O2 -c -I$SRC/common -I$SRC/aggregate/include -I$SRC/aggregate \$f -o /dev/null || exit 1; done'" ;;
    xz) echo "xz -9 -T1 -k -f $TMP/data.txt" ;;
    node) echo "node --perf-basic-prof $SRC/bench/real/busy.js $SECS" ;;
    go) echo "$TMP/busy-go $SECS" ;;
  esac
}
if [[ " $PROGRAMS " == *" go "* ]]; then
  (cd "$SRC/bench/real" && GOCACHE=$TMP/gocache GO111MODULE=off go build -o "$TMP/busy-go" busy.go)
fi

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for prog in $PROGRAMS; do
  cmd=$(cmd_for "$prog")
  # The main table's execution: bench_replay captures it and writes PROG.{auto,dwarf,fp}
  # .folded from the capture. perf record --call-graph dwarf attaches (-p) to the command
  # once it has exec'd (bench_replay prints its pid before letting it exec): attached
  # before the exec, or following bench_replay's fork from the start, this perf (6.1)
  # unwinds the exec'd program wrongly (python3 or xz stacks cut to one or a few frames).
  eval "\"$R\" -F $FREQ --folded \"$TMP/$prog\" -- $cmd" >"$TMP/$prog.replay" 2>"$TMP/err" &
  rpid=$!
  child=
  for _ in $(seq 1000); do
    child=$(awk '$1 == "pid_command" {print $2}' "$TMP/$prog.replay")
    [ -n "$child" ] && [ "$(readlink /proc/$child/exe 2>/dev/null)" != "$R" ] && break
    kill -0 $rpid 2>/dev/null || break
    sleep 0.005
  done
  [ -n "$child" ] && perf record -q -e cpu-clock:u -F $FREQ --call-graph dwarf -p "$child" \
    -o "$TMP/$prog.same.data" >/dev/null 2>"$TMP/perf.err" &
  wait "$rpid" || { echo "bench_replay $prog failed: $(cat "$TMP/err")" >&2; exit 1; }
  wait
  perf script --no-inline -i "$TMP/$prog.same.data" -F ip,sym >"$TMP/$prog.perf-dwarf.txt" \
    2>>"$TMP/perf.err" || : >"$TMP/$prog.perf-dwarf.txt"
  [ -s "$TMP/$prog.perf-dwarf.txt" ] ||
    echo "$prog: perf --call-graph dwarf -p ${child:-?} gave nothing: $(cat "$TMP/perf.err")" >&2
  rm -f "$TMP/$prog.same.data"
  # perf -g: a separate run
  eval "perf record -q -e cpu-clock:u -F $FREQ -g -o \"$TMP/$prog.fp.data\" -- $cmd" >/dev/null 2>&1
  perf script --no-inline -i "$TMP/$prog.fp.data" -F ip,sym >"$TMP/$prog.perf-fp.txt" 2>/dev/null
  rm -f "$TMP/$prog.fp.data"
  # canopy run end to end: three separate runs
  for mode in auto dwarf fp; do
    eval "\"$C\" run --no-daemon --no-kernel --unwind $mode -F $FREQ --no-inline --format folded \
      -o \"$TMP/$prog.run-$mode.folded\" -- $cmd" >/dev/null 2>"$TMP/err" ||
      { echo "canopy $mode $prog failed: $(cat "$TMP/err")" >&2; exit 1; }
  done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
# node's perf maps (perf script and the replay have read them): those naming this script's functions
{ grep -l "$SRC/bench/real/busy.js" /tmp/perf-*.map 2>/dev/null || true; } | xargs -r rm -f

$PY - "$TMP" "$FREQ" "$SECS" "$LOAD_START" "$LOAD_END" $PROGRAMS <<'PYEOF'
import collections, math, re, sys
d = sys.argv[1]
ROOTS = {"_start", "clone3", "__clone3", "start_thread", "clone", "__clone",
         "runtime.goexit", "runtime.goexit.abi0", "runtime.mstart", "runtime.rt0_go",
         "runtime.rt0_go.abi0", "runtime.mstart.abi0"}
UNNAMED = re.compile(r"^(0x[0-9a-f]+|.*\+0x[0-9a-f]+|\[unknown\]|)$")

def canopy(path):
    out = []
    for line in open(path):
        st, _, n = line.rstrip("\n").rpartition(" ")
        if st:
            out.append((st.split(";"), int(n)))
    return out

def perf(path):
    out, fr = [], []
    for line in list(open(path, errors="replace")) + [""]:
        f = line.split(None, 1)
        if not f:
            if fr:
                out.append((fr[::-1], 1))
            fr = []
        elif line.startswith("\t"):  # a frame; other lines: the sample's PID header
            fr.append(f[1].strip().split("+0x")[0] if len(f) > 1 else "[unknown]")
    return out

def rooted(fr):
    return bool(fr) and (fr[0] in ROOTS or (len(fr) > 1 and fr[1].startswith("__libc_start_main")))

def norm(name):
    """perf lumps unnamed code as [unknown] and prints C++ names without their parameter
    lists; canopy may add " (LIB)" to tell same-named functions apart."""
    if UNNAMED.match(name):
        return "[unknown]"
    name = re.sub(r" \([^()]*\.so[^()]*\)$", "", name)
    name = re.sub(r" const$", "", name)
    if name.endswith(")") and not name.startswith("JS:"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                return name[:i] if i > 0 else name
    return name

def stats(stacks):
    tot = sum(n for _, n in stacks) or 1
    self_ = collections.Counter()
    for fr, n in stacks:
        self_[norm(fr[-1])] += n
    return dict(
        n=tot,
        reach=100.0 * sum(n for fr, n in stacks if rooted(fr)) / tot,
        roots=len({fr[0] for fr, _ in stacks}),
        unnamed=100.0 * sum(n for fr, n in stacks if UNNAMED.match(fr[-1])) / tot,
        self={k: 100.0 * v / tot for k, v in self_.items()})

def noise2(a, na, b, nb):  # two sigma of the difference of two independent binomial shares
    return 200 * math.sqrt(a * (1 - a) / max(na, 1) + b * (1 - b) / max(nb, 1))

def gap(x, ref, top):
    """The largest |x's self share - ref's| over ref's top functions, and its ±2σ."""
    k = max(top, key=lambda k: abs(x["self"].get(k, 0.0) - ref["self"][k]))
    a, b = x["self"].get(k, 0.0) / 100, ref["self"][k] / 100
    return k, abs(a - b) * 100, noise2(a, x["n"], b, ref["n"])

def table(cols, progs, reach_pm):
    print("| program | measure | " + " | ".join(c for c, _, _ in cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    notes, verdict = [], []
    for p in progs:
        s = [stats(f(f"{d}/{p}.{suffix}")) for _, suffix, f in cols]
        ref = stats(perf(f"{d}/{p}.perf-dwarf.txt"))
        top = sorted(ref["self"], key=lambda k: -ref["self"][k])[:10]
        gaps = [gap(x, ref, top) if ref["n"] > 1 and x["n"] > 1 else ("", 0.0, 0.0) for x in s]
        reach = [f"{x['reach']:.1f}%" + (f" (±{noise2(x['reach'] / 100, x['n'], 0, 1):.1f})"
                                         if reach_pm else "") for x in s]
        rows = [("samples", [f"{x['n']}" for x in s]),
                ("reach start", reach),
                ("roots", [f"{x['roots']}" for x in s]),
                ("unnamed leaf", [f"{x['unnamed']:.1f}%" for x in s]),
                ("top-10 self, max gap (±2σ)",
                 ["0.0 pt" if c.startswith("perf dwarf") else f"{g:.1f} pt (±{e:.1f})"
                  for (c, _, _), (_, g, e) in zip(cols, gaps)])]
        for label, vals in rows:
            print(f"| {p} | {label} | " + " | ".join(vals) + " |")
        notes.append(f"<!-- {p} perf dwarf top-10 self: " +
                     ", ".join(f"{k} {ref['self'][k]:.1f}" for k in top) + " -->")
        for (c, _, _), x, (k, g, e) in zip(cols, s, gaps):
            if not c.startswith("perf dwarf") and k:
                notes.append(f"<!-- {p} {c}'s largest gap: {k}: {x['self'].get(k, 0):.1f} "
                             f"vs perf dwarf {ref['self'][k]:.1f} -->")
        # auto >= dwarf, cell by cell (the first two columns)
        a, w = s[0], s[1]
        worse = [m for m, bad in (("reach start", a["reach"] < w["reach"]),
                                  ("roots", a["roots"] > w["roots"]),
                                  ("unnamed leaf", a["unnamed"] > w["unnamed"]),
                                  ("top-10 gap", gaps[0][1] > gaps[1][1] + 1e-9)) if bad]
        verdict.append(f"{p}: " + ("auto ≥ dwarf in every cell" if not worse else
                                   "auto worse than dwarf in: " + ", ".join(worse)))
    return notes, verdict

freq, secs, load0, load1 = sys.argv[2:6]
progs = sys.argv[6:]
print(f"<!-- bench/real_programs.sh, {freq} Hz, {secs} s per run; load average "
      f"{load0} at the start, {load1} at the end -->\n")
print("Same execution per program: canopy columns = one capture replayed (identical "
      "samples); perf dwarf attached (-p) to that execution; perf fp a separate run.\n")
notes, verdict = table([("canopy auto", "auto.folded", canopy),
                        ("canopy dwarf", "dwarf.folded", canopy),
                        ("canopy fp", "fp.folded", canopy),
                        ("perf dwarf (same run)", "perf-dwarf.txt", perf),
                        ("perf fp (separate run)", "perf-fp.txt", perf)], progs, False)
print("\n".join(notes))
for p in progs:
    rp = {}
    for line in open(f"{d}/{p}.replay"):
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            rp[f[0]] = int(f[1])
    print(f"<!-- {p} replay, per sample: dwarf reaches the start and auto not: "
          f"{rp['dwarf_not_auto']}, fp and not auto: {rp['fp_not_auto']}, auto's stacks = "
          f"dwarf's: {rp['same_auto_dwarf']} of {rp['samples']} -->")
print("\n".join(f"<!-- {v} -->" for v in verdict))
print("\n`canopy run` end to end, three separate runs (reach start ±2σ: binomial; the top-10 "
      "gap is against the main table's perf dwarf, another run: run-to-run variance of the "
      "workload is not in its ±2σ).\n")
notes, _ = table([("canopy run auto", "run-auto.folded", canopy),
                  ("canopy run dwarf", "run-dwarf.folded", canopy),
                  ("canopy run fp", "run-fp.folded", canopy)], progs, True)
print("\n".join(notes))
PYEOF
[ -z "${CANOPY_REAL_KEEP:-}" ] || cp "$TMP"/*.folded "$TMP"/*.txt "$TMP"/*.replay "$CANOPY_REAL_KEEP"/
