#!/usr/bin/env bash
# How user stacks end in a whole-system session on a busy machine (docs/perf-sampler.md,
# "Whole-system sessions"): canopyd (BUILD_DIR's) samples the whole system (`canopy
# system`) while this repository compiles (`make -j2` in a fresh Release build directory
# of a copy of HEAD: cc1, as, ld, cmake -E, make, sh), for SECS seconds; then, for
# comparison, the same build again under `canopy run` (a session of the build's processes
# only). Prints each session's user stacks and their end (complete, no CFI, stack copy,
# read fault, other: docs/cli-live.md, "Session counters") and, per program of the build,
# its samples and the share of them whose stack reaches a start (_start, the dynamic
# loader's _start/_dl_start_user, a thread start, or the frame above __libc_start_main;
# samples without user frames left out). Programs are told by name: in the system session
# other processes of the same name (another user's sh) count too.
#   bench/system_build.sh [BUILD_DIR] [SECS] [FREQ]     (defaults: build 60 999; root)
#   CANOPY_BENCH_KEEP=DIR keeps the trees (JSON, grouped by process) and sessions.json.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
SECS=${2:-60}
FREQ=${3:-999}
SRC=$(cd "$(dirname "$0")/.." && pwd)
C=$BUILD/client/canopy
D=$BUILD/daemon/canopyd
[ -x "$C" ] && [ -x "$D" ] || { echo "build $C and $D first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "a system session needs root" >&2; exit 1; }
export CANOPY_BIN=$C CANOPYD_BIN=$D
source "$SRC/tests/integration/lib.sh" # TMP, start_canopyd, finish_daemon
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
trap finish_daemon EXIT
start_canopyd

mkdir "$TMP/src"
git -C "$SRC" archive HEAD | tar -x -C "$TMP/src"
# configure: a fresh build directory whose make -j2 the sessions watch
fresh() {
  rm -rf "$TMP/b"
  cmake -S "$TMP/src" -B "$TMP/b" -DCMAKE_BUILD_TYPE=Release >/dev/null
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
fresh
"$C" system -F "$FREQ" --name sys >/dev/null
(cd "$TMP/b" && timeout "$SECS" make -j2 >/dev/null 2>&1) || true
"$C" stop sys >/dev/null
fresh
"$C" run -F "$FREQ" --name run --format folded -o "$TMP/run.folded" -- \
  timeout "$SECS" make -C "$TMP/b" -j2 >/dev/null 2>&1 || true
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
for _ in $(seq 600); do # the system session's symbols (canopy run waited for its own)
  "$C" sessions --format json >"$TMP/sessions.json"
  python3 -c 'import json, sys
s = [s for s in json.load(open(sys.argv[1]))["sessions"] if s["name"] == "sys"][0]
sys.exit(s["symbols"]["pending"] != 0)' "$TMP/sessions.json" && break
  sleep 0.1
done
for s in sys run; do
  "$C" tree "$s" --group-by process --no-inline --format json -o "$TMP/$s.byproc.json"
done

python3 - "$TMP" "$SECS" "$FREQ" "$LOAD0" "$LOAD1" <<'PYEOF'
import collections, json, re, sys
d, secs, freq, load0, load1 = sys.argv[1:6]
ss = {s["name"]: s for s in json.load(open(f"{d}/sessions.json"))["sessions"]}
print(f"<!-- bench/system_build.sh, {freq} Hz, {secs} s of make -j2 per session; load "
      f"average {load0} at the start, {load1} at the end -->\n")
print("| session | user stacks | complete | no CFI | stack copy | read fault | other |")
print("|---|---|---|---|---|---|---|")
for name, label in (("sys", "canopy system"), ("run", "canopy run make")):
    s = ss[name]
    u, o = s["user_stacks"], s["unwind_outcomes"]
    pct = lambda k: f"{100.0 * o[k] / max(u, 1):.1f}%"
    print(f"| {label} | {u} | {pct('complete')} | {pct('no_cfi')} | "
          f"{pct('truncated_stack')} | {pct('read_fault')} | {pct('other')} |")
ROOTS = {"_start", "_dl_start_user", "clone3", "__clone3", "start_thread", "clone", "__clone"}
KERNEL = {"[kernel]", "[module]"}
def per_program(path):
    """{program: [samples with user frames, of those reaching a start]} from a tree grouped
    by process (roots "comm [pid]"; frames root first, kernel frames at the leaf end)."""
    out = collections.defaultdict(lambda: [0, 0])
    def walk(prog, node, user):
        if node.get("lib") not in KERNEL:
            user = user + [node["name"]]
        if node["self"] and user:
            rooted = user[0] in ROOTS or (len(user) > 1 and user[1].startswith("__libc_start_main"))
            out[prog][0] += node["self"]
            out[prog][1] += node["self"] if rooted else 0
        for c in node["children"]:
            walk(prog, c, user)
    for r in json.load(open(path))["roots"]:
        prog = re.sub(r" \[\d+\]$", "", r["name"])
        for c in r["children"]:
            walk(prog, c, [])
    return out
a, b = per_program(f"{d}/sys.byproc.json"), per_program(f"{d}/run.byproc.json")
progs = sorted(b, key=lambda p: -b[p][0])[:10]
print("\n| program | system: samples | reach start | run: samples | reach start |")
print("|---|---|---|---|---|")
for p in progs:
    f = lambda x: f"{x[0]} | {100.0 * x[1] / max(x[0], 1):.1f}%"
    print(f"| {p} | {f(a.get(p, [0, 0]))} | {f(b[p])} |")
PYEOF
[ -z "${CANOPY_BENCH_KEEP:-}" ] || cp "$TMP"/*.byproc.json "$TMP/sessions.json" "$CANOPY_BENCH_KEEP"/
