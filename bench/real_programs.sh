#!/usr/bin/env bash
# Real programs, canopy against perf (docs/perf-sampler.md, "Real programs"): Debian's
# python3 (a pure-Python script), gcc's cc1 (-O2 -c on aggregate/*.c), xz -9 (liblzma),
# node --perf-basic-prof (JIT code named by its perf map) and a Go binary built here,
# each ~SECS seconds at FREQ Hz, user space only (cpu-clock:u), under
#   canopy run --no-daemon --unwind auto | dwarf | fp  (--no-inline, --format folded)
#   perf record -g | --call-graph dwarf                 (perf script --no-inline -F ip,sym)
#   bench_replay: one run captured in auto's layout, replayed into auto, dwarf and fp
# For each cell: the share of samples whose stack reaches the program's start (_start,
# the unnamed frame above __libc_start_main in a stripped program, a thread start, Go's
# runtime.goexit/mstart/rt0_go), the number of distinct roots, the share of samples whose
# leaf has no name (0x…, LIB+0x…, [jit]+0x…, perf's [unknown]), and the largest gap, in
# points, between the cell's self shares and perf --call-graph dwarf's over perf dwarf's
# top-10 self functions (unnamed leaves counted as one "[unknown]", as perf does), with
# the two-sigma sampling noise of that one comparison (binomial: two independent runs of
# n1 and n2 samples, shares p1 and p2: 2·sqrt(p1(1-p1)/n1 + p2(1-p2)/n2)). The replay row
# is reach-start on identical samples (separate runs differ by their samples too); in the
# auto run, perf --call-graph dwarf attaches to the same process (-p), and a last row
# gives auto's top-10 self gap against it: sampling noise alone, no run-to-run variance.
#   bench/real_programs.sh [BUILD_DIR] [SECS] [PROGRAMS...]   (default: all five)
#   CANOPY_REAL_FREQ=HZ (default 3999)
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
# CANOPY_REAL_KEEP=DIR keeps the folded files and perf scripts there.
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

for prog in $PROGRAMS; do
  cmd=$(cmd_for "$prog")
  for mode in auto dwarf fp; do
    eval "\"$C\" run --no-daemon --no-kernel --unwind $mode -F $FREQ --no-inline --format folded \
      -o \"$TMP/$prog.$mode.folded\" -- $cmd" >/dev/null 2>"$TMP/err" &
    cpid=$!
    # auto's run: perf --call-graph dwarf samples the same process too (attached once the
    # command is spawned), so that the two self shares differ by sampling alone, not by
    # what two runs of the workload did (docs/perf-sampler.md)
    if [ $mode = auto ]; then
      child= par=$cpid
      for _ in $(seq 200); do
        # the command is canopy's child (the subshell may have become canopy, or not)
        [ "$(cat /proc/$par/comm 2>/dev/null)" = canopy ] ||
          par=$(pgrep -P "$cpid" -x canopy | head -1) || true
        child=$(pgrep -P "${par:-0}" | head -1) && [ -n "$child" ] && break
        sleep 0.01
      done
      [ -n "$child" ] && perf record -q -e cpu-clock:u -F $FREQ --call-graph dwarf -p "$child" \
        -o "$TMP/$prog.same.data" >/dev/null 2>&1 &
    fi
    wait "$cpid" || { echo "canopy $mode $prog failed: $(cat "$TMP/err")" >&2; exit 1; }
    wait
  done
  perf script --no-inline -i "$TMP/$prog.same.data" -F ip,sym >"$TMP/$prog.perf-same.txt" 2>/dev/null ||
    : >"$TMP/$prog.perf-same.txt"
  rm -f "$TMP/$prog.same.data"
  for pm in fp dwarf; do
    cg=$([ $pm = fp ] && echo "-g" || echo "--call-graph dwarf")
    eval "perf record -q -e cpu-clock:u -F $FREQ $cg -o \"$TMP/$prog.$pm.data\" -- $cmd" >/dev/null 2>&1
    perf script --no-inline -i "$TMP/$prog.$pm.data" -F ip,sym >"$TMP/$prog.perf-$pm.txt" 2>/dev/null
    rm -f "$TMP/$prog.$pm.data"
  done
  eval "\"$R\" -F $FREQ -- $cmd" >"$TMP/$prog.replay" 2>"$TMP/err" ||
    { echo "bench_replay $prog failed: $(cat "$TMP/err")" >&2; exit 1; }
done
# node's perf maps (perf script has read them): those naming this script's functions
{ grep -l "$SRC/bench/real/busy.js" /tmp/perf-*.map 2>/dev/null || true; } | xargs -r rm -f

$PY - "$TMP" $PROGRAMS <<'PYEOF'
import collections, math, re, sys
d, progs = sys.argv[1], sys.argv[2:]
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
        elif line[0].isspace():
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

cols = [("canopy auto", "auto.folded", canopy), ("canopy dwarf", "dwarf.folded", canopy),
        ("canopy fp", "fp.folded", canopy), ("perf fp", "perf-fp.txt", perf),
        ("perf dwarf", "perf-dwarf.txt", perf)]
print("| program | measure | " + " | ".join(c for c, _, _ in cols) + " |")
print("|---|---|" + "---|" * len(cols))
for p in progs:
    s = [stats(f(f"{d}/{p}.{suffix}")) for _, suffix, f in cols]
    ref = s[-1]["self"]
    top = sorted(ref, key=lambda k: -ref[k])[:10]
    def noise(x, k):  # two sigma of the difference of two independent binomial shares
        a, b = x["self"].get(k, 0.0) / 100, ref[k] / 100
        return 200 * math.sqrt(a * (1 - a) / x["n"] + b * (1 - b) / s[-1]["n"])
    worst = [max(top, key=lambda k: abs(x["self"].get(k, 0.0) - ref[k])) for x in s]
    gap = [(abs(x["self"].get(k, 0.0) - ref[k]), noise(x, k)) for x, k in zip(s, worst)]
    rp = {}
    for line in open(f"{d}/{p}.replay"):
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            rp[f[0]] = int(f[1])
    rn = max(rp["samples"], 1)
    replay = [f"{100.0 * rp[k] / rn:.1f}%" for k in ("reach_auto", "reach_dwarf", "reach_fp")]
    rows = [("samples", [f"{x['n']}" for x in s]),
            ("reach start", [f"{x['reach']:.1f}%" for x in s]),
            ("roots", [f"{x['roots']}" for x in s]),
            ("unnamed leaf", [f"{x['unnamed']:.1f}%" for x in s]),
            ("top-10 self, max gap (±2σ)", ["0.0 pt" if x is s[-1] else f"{g:.1f} pt (±{e:.1f})"
                                           for x, (g, e) in zip(s, gap)]),
            (f"reach start, same {rp['samples']} samples (replay)", replay + ["—", "—"])]
    same = stats(perf(f"{d}/{p}.perf-same.txt"))
    if same["n"] > 1:
        sref = same["self"]
        stop = sorted(sref, key=lambda k: -sref[k])[:10]
        k = max(stop, key=lambda k: abs(s[0]["self"].get(k, 0.0) - sref[k]))
        a, b = s[0]["self"].get(k, 0.0) / 100, sref[k] / 100
        e = 200 * math.sqrt(a * (1 - a) / s[0]["n"] + b * (1 - b) / same["n"])
        rows.append((f"top-10 self, max gap vs perf dwarf on the same run ({same['n']} samples)",
                     [f"{abs(a - b) * 100:.1f} pt (±{e:.1f})", "—", "—", "—", "—"]))
        notes = [f"<!-- {p} same run: auto's largest gap: {k}: {a * 100:.1f} vs perf dwarf {b * 100:.1f} -->"]
    else:
        notes = []
    for label, vals in rows:
        print(f"| {p} | {label} | " + " | ".join(vals) + " |")
    print("\n".join(notes)) if notes else None
    print(f"<!-- {p} perf dwarf top-10 self: " +
          ", ".join(f"{k} {ref[k]:.1f}" for k in top) + " -->")
    for (c, _, _), x, k in list(zip(cols, s, worst))[:-1]:
        print(f"<!-- {p} {c}'s largest gap: {k}: {x['self'].get(k, 0):.1f} vs perf dwarf {ref[k]:.1f} -->")
    print(f"<!-- {p} replay: dwarf reaches the start and auto not: {rp['dwarf_not_auto']}, "
          f"fp and not auto: {rp['fp_not_auto']}, auto's stacks = dwarf's: {rp['same_auto_dwarf']} -->")
PYEOF
[ -z "${CANOPY_REAL_KEEP:-}" ] || cp "$TMP"/*.folded "$TMP"/*.txt "$CANOPY_REAL_KEEP"/
