#!/usr/bin/env bash
# Python functions in mixed stacks (docs/python.md, "Phase 2"), through a real canopyd:
# a workload whose pure-Python functions work_a / work_b / Runner.work_c share its CPU
# 50/30/20 (each sizes its rounds by its own thread CPU time, so the split holds over any
# window: the truth is the workload's own measure, printed at its end) and each alternate,
# about every millisecond, a Python loop and a call into C (zlib.compress and crc32 in
# libz, a sum over map(math.sin, ...) in libm). Run under `canopy run` (Debian's python3
# 3.11, statically linked, and each pyenv CPython 3.8-3.13, libpython shared), attached to
# while it runs (`canopy attach`: pyenv's 3.12 when present, else Debian's), and under a
# system session started while it runs (Debian's). Asserted for each: the functions' shares
# within 3 points of the truth; at least
# 95% of the session's samples taken while the workload runs its loop carry Python frames
# (the JSON tree's "kind": "python"); at least 97% of the libz/libm samples (of stacks with
# Python frames) lie under the Python function that called them; the session says "python frames: on" in `canopy
# sessions` and in the tree's header. Then `--no-python` shows no Python frame and says
# "off (--no-python)". Last, against the runtime's own view: a CPython >= 3.12 under -X perf,
# two sessions on it at once, one with Python frames and one reading its perf map, give the
# same innermost Python functions within 2 points. canopyd is still alive at the end.
# Prints the measured shares.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "Python frames need a BPF program: root (CAP_BPF, CAP_PERFMON)"
PY=/usr/bin/python3
[ -x "$PY" ] || fail "Debian's python3 ($PY) is missing (scripts/setup installs it)"
PY_ATTACH=/root/.pyenv/versions/3.12.1/bin/python3
[ -x "$PY_ATTACH" ] || PY_ATTACH=$PY
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
FREQ=999
SECS=${CANOPY_PY_SECONDS:-6}

D_PID=
W_PID=
XP_PID= # the -X perf workload: its /tmp/perf-PID.map is removed at the end
on_exit() {
  local rc=$?
  kill $W_PID 2>/dev/null || true
  kill $D_PID 2>/dev/null || true
  wait 2>/dev/null || true
  [ -z "$XP_PID" ] || rm -f "/tmp/perf-$XP_PID.map"
  finish_tmp $rc
}
trap on_exit EXIT
start_canopyd

# The workload: wl.py SECONDS. Prints "ready" when its loop starts and "shares A B C" (% of
# the three functions' thread CPU time) at its end.
cat >"$TMP/wl.py" <<'EOF'
import math, sys, time, zlib

clock = time.thread_time_ns
BUF = bytes((i * 7919) & 255 for i in range(8192))
R = range(2000)


def cpart(r):
    if r & 1:
        return zlib.crc32(zlib.compress(BUF, 6))
    return int(sum(map(math.sin, R)))


def work_a(n):
    s = 0
    for r in range(n):
        for i in range(3000):
            s += i * i
        s += cpart(r)
    return s


def work_b(n):
    s = 0
    for r in range(n):
        for i in range(3000):
            s += i ^ 3
        s += cpart(r)
    return s


class Runner:
    def work_c(self, n):
        s = 0
        for r in range(n):
            for i in range(3000):
                s += i + 7
            s += cpart(r)
        return s


def main(seconds):
    r = Runner()
    funcs = (work_a, work_b, r.work_c)
    target = (0.5, 0.3, 0.2)
    per = [1e6, 1e6, 1e6]  # ns per round, learned
    spent = [0, 0, 0]
    print("ready", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for k in range(3):
            n = max(1, int(10e6 * target[k] / per[k]))
            t = clock()
            funcs[k](n)
            dt = clock() - t
            per[k] = 0.8 * per[k] + 0.2 * (dt / n)
            spent[k] += dt
    tot = sum(spent) or 1
    print("shares %.1f %.1f %.1f" % tuple(100 * x / tot for x in spent), flush=True)


main(float(sys.argv[1]))
EOF

# check NAME JSON TRUTH_FILE WANT_PY: the tree's shares against the truth ("shares A B C"
# in TRUTH_FILE); WANT_PY 1: Python frames expected, 0: none allowed.
check() {
  $PY - "$@" <<'PYEOF'
import json, sys
name, path, truth_file, want = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
t = json.load(open(path))
truth = [float(x) for x in open(truth_file).read().split("shares")[1].split()[:3]]
# co_qualname from 3.11 on; before it the code object has only co_name.
W = {"work_a": 0, "work_b": 1, "Runner.work_c": 2, "work_c": 2}
tot = loop = withpy = clib = clib_under = pyframes = 0
by = [0.0, 0.0, 0.0]
stack = [(n, []) for n in t["roots"]]
while stack:
    n, path = stack.pop()
    path = path + [n]
    s = n.get("self", 0)
    if n.get("kind") == "python":
        pyframes += 1
    if s:
        tot += s
        names = [p["name"] for p in path]
        ws = [W[x] for x in names if x in W]
        # The loop: stacks under main() (Python frames on) or under the eval loop's
        # native frames below PyEval_EvalCode (--no-python), not the interpreter's start
        # and exit.
        in_loop = "main" in names or (not want and "PyEval_EvalCode" in names)
        if in_loop:
            loop += s
            if any(p.get("kind") == "python" for p in path):
                withpy += s
        if ws:
            by[ws[-1]] += s
        lib = n.get("lib", "")
        # The libz/libm samples of stacks with Python frames: the process's samples before
        # its registration have none (counted "before", docs/python.md; the share with
        # Python frames above bounds them), and how many fall in the loop depends on the
        # machine's load, not on the splice.
        if (lib.startswith("libz.") or lib.startswith("libm.")) and (
                not want or any(p.get("kind") == "python" for p in path)):
            clib += s
            clib_under += s if ws else 0
            if want and not ws:
                print("  not under work_*: " + ";".join(names[-10:]), file=sys.stderr)
    stack.extend((c, path) for c in n.get("children", []))
ok = True
if not want:
    print("%s: %d samples, %d Python frames" % (name, tot, pyframes))
    sys.exit(1 if pyframes else 0)
w = sum(by) or 1
shares = [100 * x / w for x in by]
py_share = 100 * withpy / max(loop, 1)
under = 100 * clib_under / max(clib, 1)
print("%s: %d samples, %d in the loop; shares a/b/c %.1f/%.1f/%.1f (truth %.1f/%.1f/%.1f); "
      "with Python frames %.1f%%; libz/libm samples with Python frames %d, under their work_* %.1f%%"
      % (name, tot, loop, *shares, *truth, py_share, clib, under))
if loop < 500:
    print("FAIL: too few samples in the loop (%d)" % loop); ok = False
for k in range(3):
    if abs(shares[k] - truth[k]) > 3:
        print("FAIL: share %d: %.1f, truth %.1f" % (k, shares[k], truth[k])); ok = False
if py_share < 95:
    print("FAIL: %.1f%% of the loop's samples carry Python frames" % py_share); ok = False
if clib < 20 or under < 97:
    print("FAIL: %d libz/libm samples, %.1f%% under work_*" % (clib, under)); ok = False
sys.exit(0 if ok else 1)
PYEOF
}

# python_state NAME: the session's "python" state from `canopy sessions --format json`.
python_state() {
  "$C" sessions --format json >"$TMP/sessions.json"
  $PY - "$TMP/sessions.json" "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
s = [s for s in d["sessions"] if s.get("name") == sys.argv[2]][0]
p = s.get("python", {})
print(p.get("state", "?"), "registered=%s joined=%s/%s no_record=%s mismatch=%s" % (
    p.get("registered"), p.get("joined"), p.get("samples"), p.get("no_record"), p.get("mismatch")))
PYEOF
}

# 1. canopy run, Debian's python3.
"$C" run -F $FREQ --name run-py --format json -o "$TMP/run.json" -- "$PY" "$TMP/wl.py" "$SECS" \
  >"$TMP/run.out" 2>"$TMP/run.err" || fail "canopy run: $(cat "$TMP/run.err")"
state=$(python_state run-py)
echo "run-py: python frames $state" >&2
case $state in
  on*) ;;
  "off (BPF load:"*) skip "no BPF here: $state" ;;
  *) fail "run-py: python frames $state" ;;
esac
"$C" tree run-py --depth 1 >"$TMP/run.txt" || fail "canopy tree run-py"
grep -q "python frames: on" "$TMP/run.txt" || fail "the tree's header: $(head -1 "$TMP/run.txt")"
"$C" sessions >"$TMP/sessions.txt"
grep "run-py" "$TMP/sessions.txt" | grep -q " on *$" || fail "canopy sessions: $(cat "$TMP/sessions.txt")"
check "run $($PY -c 'import sys; print(sys.version.split()[0])')" "$TMP/run.json" "$TMP/run.out" 1 ||
  fail "canopy run: Python frames"

# 1b. Every CPython 3.8-3.13 of the machine's pyenv tree (shared libpython, while Debian's
# python3 links it statically), each through its own layout table (3.13: _Py_DebugOffsets).
nver=0
for v in 3.8 3.9 3.10 3.11 3.12 3.13; do
  for PYV in /root/.pyenv/versions/$v.*/bin/python$v; do
    [ -x "$PYV" ] || continue
    nver=$((nver + 1))
    "$C" run -F $FREQ --name "run-$v" --rm --format json -o "$TMP/run-$v.json" -- "$PYV" "$TMP/wl.py" 3 \
      >"$TMP/run-$v.out" 2>"$TMP/run-$v.err" || fail "canopy run $PYV: $(cat "$TMP/run-$v.err")"
    check "run $("$PYV" -c 'import sys; print(sys.version.split()[0])')" "$TMP/run-$v.json" \
      "$TMP/run-$v.out" 1 || fail "canopy run $PYV: Python frames"
  done
done
if [ "$nver" -lt 6 ]; then
  [ "${CI:-}" = true ] && fail "only $nver of CPython 3.8-3.13 under /root/.pyenv/versions"
  echo "note: only $nver of CPython 3.8-3.13 found under /root/.pyenv/versions" >&2
fi

# 2. canopy attach to a running interpreter.
"$PY_ATTACH" "$TMP/wl.py" $((SECS + 3)) >"$TMP/att.out" &
W_PID=$!
for _ in $(seq 100); do grep -q ready "$TMP/att.out" && break; sleep 0.1; done
grep -q ready "$TMP/att.out" || fail "the workload did not start"
"$C" attach $W_PID -F $FREQ --name att >/dev/null || fail "canopy attach"
sleep "$SECS"
"$C" stop att >/dev/null || fail "canopy stop att"
wait $W_PID || fail "the attached workload failed"
W_PID=
state=$(python_state att)
echo "att: python frames $state" >&2
case $state in on*) ;; *) fail "att: python frames $state" ;; esac
"$C" tree att --format json -o "$TMP/att.json" || fail "canopy tree att"
check "attach $("$PY_ATTACH" -c 'import sys; print(sys.version.split()[0])')" "$TMP/att.json" \
  "$TMP/att.out" 1 || fail "canopy attach: Python frames"

# 3. A system session: an interpreter that ran before it started (registered from the
# session's snapshot of every process's mappings), its tree grouped by process.
"$PY" "$TMP/wl.py" $((SECS + 3)) >"$TMP/sys.out" &
W_PID=$!
for _ in $(seq 100); do grep -q ready "$TMP/sys.out" && break; sleep 0.1; done
grep -q ready "$TMP/sys.out" || fail "the workload did not start"
"$C" system -F $FREQ --no-kernel --name sys >/dev/null || fail "canopy system"
sleep "$SECS"
"$C" stop sys >/dev/null || fail "canopy stop sys"
wait $W_PID || fail "the system session's workload failed"
state=$(python_state sys)
echo "sys: python frames $state" >&2
case $state in on*) ;; *) fail "sys: python frames $state" ;; esac
"$C" tree sys --group-by process --format json -o "$TMP/sys_all.json" || fail "canopy tree sys"
$PY - "$TMP/sys_all.json" "$W_PID" "$TMP/sys.json" <<'PYEOF' || fail "no process $W_PID in the system session"
import json, sys
t = json.load(open(sys.argv[1]))
mine = [r for r in t["roots"] if r["name"].endswith("[%s]" % sys.argv[2])]
json.dump({"roots": mine[0]["children"] if mine else []}, open(sys.argv[3], "w"))
sys.exit(0 if mine else 1)
PYEOF
W_PID=
check "system $($PY -c 'import sys; print(sys.version.split()[0])')" "$TMP/sys.json" "$TMP/sys.out" 1 ||
  fail "canopy system: Python frames"

# 4. --no-python: today's native view.
"$C" run -F $FREQ --no-python --name run-nopy --format json -o "$TMP/nopy.json" -- "$PY" \
  "$TMP/wl.py" 2 >"$TMP/nopy.out" 2>"$TMP/nopy.err" || fail "canopy run --no-python: $(cat "$TMP/nopy.err")"
state=$(python_state run-nopy)
case $state in "off (--no-python)"*) ;; *) fail "run-nopy: python frames $state" ;; esac
check "run --no-python" "$TMP/nopy.json" "$TMP/nopy.out" 0 || fail "--no-python shows Python frames"

# 5. Against the runtime's own view: a Python >= 3.12 run with -X perf names each Python
# function's trampoline in /tmp/perf-PID.map (canopy's perf-map support); a --no-python
# session's stacks end at the innermost trampoline, which names the running Python function.
# Two sessions attached to the same process at once: the innermost Python function's share
# of each (work_a, work_b, work_c, cpart, main) agrees within 2 points.
PYX=
for v in 3.13 3.12; do
  for x in /root/.pyenv/versions/$v.*/bin/python$v; do [ -x "$x" ] && [ -z "$PYX" ] && PYX=$x; done
done
if [ -z "$PYX" ]; then
  [ "${CI:-}" = true ] && fail "no CPython >= 3.12 under /root/.pyenv/versions for -X perf"
  echo "note: no CPython >= 3.12: -X perf comparison not run" >&2
else
  "$PYX" -X perf "$TMP/wl.py" 11 >"$TMP/xp.out" &
  W_PID=$!
  XP_PID=$W_PID
  for _ in $(seq 100); do grep -q ready "$TMP/xp.out" && break; sleep 0.1; done
  grep -q ready "$TMP/xp.out" || fail "the -X perf workload did not start"
  # 1999 Hz for 8 s: ~16 000 samples a session, so that the two sessions' different
  # sampling instants differ by well under the bound (≤ 0.3 points in four quiet runs).
  "$C" attach $W_PID -F 1999 --name xp-py >/dev/null || fail "canopy attach (Python frames)"
  "$C" attach $W_PID -F 1999 --no-python --name xp-map >/dev/null || fail "canopy attach --no-python"
  sleep 8
  "$C" stop xp-py >/dev/null && "$C" stop xp-map >/dev/null || fail "canopy stop"
  wait $W_PID || fail "the -X perf workload failed"
  W_PID=
  "$C" tree xp-py --format json -o "$TMP/xp-py.json" || fail "canopy tree xp-py"
  "$C" tree xp-map --format json -o "$TMP/xp-map.json" || fail "canopy tree xp-map"
  "$C" sessions | grep -E "^ID|xp-" >&2 # samples and lost of each, should the views differ
  $PY - "$TMP/xp-py.json" "$TMP/xp-map.json" "$("$PYX" -V)" <<'PYEOF' || fail "-X perf: the views differ"
import json, sys

FUNCS = ("work_a", "work_b", "work_c", "cpart", "main")


def short(name):
    return name.rsplit(".", 1)[-1]  # Runner.work_c -> work_c


def innermost(path_names, kinds, want_python):
    """The innermost Python function of one stack: a frame of kind python (canopy's frames)
    or a perf-map trampoline py::NAME:FILE (the interpreter's own)."""
    for name, kind in zip(reversed(path_names), reversed(kinds)):
        if want_python and kind == "python":
            return short(name)
        if not want_python and name.startswith("py::"):
            return short(name[4:].split(":", 1)[0])
    return None


def shares(path, want_python):
    t = json.load(open(path))
    by = dict.fromkeys(FUNCS, 0)
    stack = [(n, [], []) for n in t["roots"]]
    while stack:
        n, names, kinds = stack.pop()
        names, kinds = names + [n["name"]], kinds + [n.get("kind")]
        f = innermost(names, kinds, want_python) if n.get("self") else None
        if f in by:
            by[f] += n["self"]
        stack.extend((c, names, kinds) for c in n.get("children", []))
    tot = sum(by.values())
    return tot, {f: 100.0 * v / max(tot, 1) for f, v in by.items()}


na, a = shares(sys.argv[1], True)
nb, b = shares(sys.argv[2], False)
print("%s -X perf: canopy's Python frames (%d samples) / the perf map's trampolines (%d): %s" % (
    sys.argv[3], na, nb, ", ".join("%s %.1f/%.1f" % (f, a[f], b[f]) for f in FUNCS)))
bad = [f for f in FUNCS if abs(a[f] - b[f]) > 2]
if na < 1000 or nb < 1000:
    print("FAIL: too few samples"); sys.exit(1)
if bad:
    print("FAIL: differ by more than 2 points: " + ", ".join(bad)); sys.exit(1)
PYEOF
fi

kill -0 $D_PID 2>/dev/null || fail "canopyd died"
"$C" sessions >/dev/null || fail "canopyd does not answer"
echo "ok"
