#!/usr/bin/env bash
# Python frames in threads and in the off-CPU and wall modes (docs/python.md), through a real
# canopyd, on Debian's python3: a workload of four `threading` threads — spin_a and spin_b
# (pure Python loops, contending for the GIL on two cores), sleeper (time.sleep(0.002) in a
# loop) and waiter (Event.wait(0.05) in a loop) — while the main thread sits in
# Thread.join. Asserted:
# - cpu (`canopy run`): each thread has its own Python stack: per thread, the one worker
#   function holds at least 90% of its samples and no other worker appears; spin_a and
#   spin_b take at least 90% of the process's samples between them;
# - wall (`canopy attach` to the running process): every thread's wall time is under its
#   own Python function (spin_a, spin_b, sleeper, waiter; Thread.join for the main thread)
#   for at least 90% of the thread's time; the sleeper's time includes its nanosleep, as
#   kernel frames under `sleeper` (the rest of it is mostly the wait for the GIL); the main
#   thread, in one Thread.join since before the attach, is read at the attach
#   (sampler/waiting.c); then the same under `canopy run --mode wall`;
# - off-cpu (`canopy run`): the spinners' waits for the GIL (futex under take_gil) are under
#   spin_a/spin_b, the sleeper's nanosleep under sleeper, the waiter's futex under waiter
#   (each at least 90% of that thread's off-CPU time), and at least 95% of the process's
#   off-CPU time carries Python frames.
# Also: focus-func, collapse-lib and merge on Python functions, and the cpu rules in-process
# (`canopy run --no-daemon`). Prints the per-thread figures.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "Python frames need a BPF program: root (CAP_BPF, CAP_PERFMON)"
PY=/usr/bin/python3
[ -x "$PY" ] || fail "Debian's python3 ($PY) is missing (scripts/setup installs it)"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
SECS=${CANOPY_PY_SECONDS:-4}

D_PID=
W_PID=
on_exit() {
  local rc=$?
  kill $W_PID 2>/dev/null || true
  kill $D_PID 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap on_exit EXIT
start_canopyd

cat >"$TMP/thr.py" <<'EOF'
import sys, threading, time


def spin_a(end):
    s = 0
    while time.monotonic() < end:
        for i in range(1000):
            s += i
    return s


def spin_b(end):
    s = 0
    while time.monotonic() < end:
        for i in range(1000):
            s ^= i
    return s


def sleeper(end):
    while time.monotonic() < end:
        time.sleep(0.002)


def waiter(ev, end):
    while time.monotonic() < end:
        ev.wait(0.05)


end = time.monotonic() + float(sys.argv[1])
ev = threading.Event()
ts = [threading.Thread(target=f, args=a) for f, a in
      ((spin_a, (end,)), (spin_b, (end,)), (sleeper, (end,)), (waiter, (ev, end)))]
for t in ts:
    t.start()
print("ready", flush=True)
# One join() right after the starts: under `canopy run` it can block before the process is
# registered (its stack then read again with Python frames: sampler/waiting.c), under
# `canopy attach` it waits since before the session (read at the attach).
for t in ts:
    t.join()
EOF

# check MODE JSON: the tree grouped by thread (roots "python3 [TID]"), against the rules
# above for MODE.
check() {
  $PY - "$@" <<'PYEOF'
import json, sys
mode, path = sys.argv[1], sys.argv[2]
t = json.load(open(path))
WORKERS = ("spin_a", "spin_b", "sleeper", "waiter")
OWN = WORKERS + ("Thread.join",)
ok = True
total = withpy = 0
threads = []
for root in t["roots"]:
    by, tot, paths = {}, 0, {}
    kernel_under_sleeper = 0
    stack = [(c, []) for c in root.get("children", [])]
    while stack:
        n, path = stack.pop()
        path = path + [n]
        s = n.get("self", 0)
        if s:
            tot += s
            py = [p["name"] for p in path if p.get("kind") == "python"]
            withpy += s if py else 0
            mine = [f for f in py if f in OWN]
            key = mine[-1] if mine else "(none)"
            by[key] = by.get(key, 0) + s
            paths.setdefault(key, []).append((s, [p["name"] for p in path]))
            if key == "sleeper" and any("nanosleep" in p["name"] for p in path):
                kernel_under_sleeper += s
        stack.extend((c, path) for c in n.get("children", []))
    total += tot
    if tot:
        top = max(by, key=by.get)
        threads.append((root["name"], top, 100.0 * by[top] / tot, tot, by, kernel_under_sleeper, paths))
unit = t.get("unit", "samples")
for name, top, share, tot, by, ks, _ in sorted(threads, key=lambda x: -x[3]):
    print("%s %s: %s %.1f%% of %s %s%s" % (mode, name, top, share, tot, unit,
          "; nanosleep under sleeper %.1f%%" % (100.0 * ks / tot) if top == "sleeper" else ""))
tops = {}
for name, top, share, tot, by, ks, paths in threads:
    if top in OWN and tot >= 0.2 * max(x[3] for x in threads):
        tops[top] = (name, share, tot, by, ks, paths)
# The main thread waits in Thread.join from before an attach (read at the attach) or from
# before its process was registered (read again then): checked in every mode but cpu.
want = {"cpu": ("spin_a", "spin_b")}.get(mode, OWN)
for f in want:
    if f not in tops:
        print("FAIL: no thread mostly in %s" % f); ok = False
        continue
    name, share, tot, by, ks, paths = tops[f]
    if share < 90:
        print("FAIL: %s: %s holds %.1f%% of its thread's time" % (name, f, share)); ok = False
    others = [g for g in WORKERS if g != f and by.get(g)]
    if others:
        print("FAIL: %s (%s) also shows %s" % (name, f, others)); ok = False
        # the stacks that show them, heaviest first, leaf first (a failure to explain)
        for g in others:
            for w, names in sorted(paths[g], key=lambda x: -x[0])[:4]:
                print("  %s %s: %s" % (g, w, " < ".join(reversed(names))[:1200]))
    if f == "sleeper" and mode != "cpu" and ks < 0.05 * tot:
        print("FAIL: the sleeper's nanosleep under sleeper: %.1f%%" % (100.0 * ks / tot)); ok = False
py_share = 100.0 * withpy / max(total, 1)
print("%s: %.1f%% of the process's %s carry Python frames" % (mode, py_share, unit))
if mode == "cpu":
    spin = sum(tops[f][2] for f in ("spin_a", "spin_b") if f in tops)
    if spin < 0.9 * total:
        print("FAIL: spin_a + spin_b hold %.1f%% of the samples" % (100.0 * spin / total)); ok = False
if py_share < 95:
    print("FAIL: %.1f%% with Python frames" % py_share); ok = False
sys.exit(0 if ok else 1)
PYEOF
}

# cpu: canopy run.
"$C" run -F 999 --name cpu --format json --group-by thread -o "$TMP/cpu.json" -- "$PY" \
  "$TMP/thr.py" "$SECS" >/dev/null 2>"$TMP/cpu.err" || fail "canopy run: $(cat "$TMP/cpu.err")"
check cpu "$TMP/cpu.json" || fail "cpu mode"

# Transforms on Python functions (docs/calltree.md), on the cpu session: focus-func makes
# spin_a the root with all its samples; collapse-lib folds threading.py's frames into one
# node named for the file (a Python library is its .py file); merge removes Thread.run
# (spin_a then hangs under Thread._bootstrap_inner).
for t in focus-func:spin_a collapse-lib:threading.py merge:Thread.run; do
  "$C" tree cpu -t "$t" --format json -o "$TMP/t-${t%%:*}.json" || fail "canopy tree cpu -t $t"
done
"$C" tree cpu --format json -o "$TMP/t-none.json" || fail "canopy tree cpu"
$PY - "$TMP" <<'PYEOF' || fail "transforms on Python functions"
import json, sys
d = sys.argv[1]


def paths(name):
    t = json.load(open("%s/t-%s.json" % (d, name)))
    stack = [(n, []) for n in t["roots"]]
    while stack:
        n, p = stack.pop()
        p = p + [n]
        yield p
        stack.extend((c, p) for c in n.get("children", []))


def spin_a_total(name):
    return sum(p[-1].get("total", 0) for p in paths(name)
               if p[-1]["name"] == "spin_a" and not any(x["name"] == "spin_a" for x in p[:-1]))


ok = True
want = spin_a_total("none")
roots = json.load(open(d + "/t-focus-func.json"))["roots"]
if [r["name"] for r in roots] != ["spin_a"] or roots[0].get("kind") != "python" or roots[0]["total"] != want:
    print("focus-func:spin_a: roots %s, want spin_a with %d" % ([(r["name"], r.get("total")) for r in roots], want)); ok = False
for name, gone, parent in (("collapse-lib", "Thread.run", "threading.py"),
                           ("merge", "Thread.run", "Thread._bootstrap_inner")):
    ps = list(paths(name))
    if any(p[-1]["name"] == gone for p in ps):
        print("%s: %s still there" % (name, gone)); ok = False
    above = {[x for x in p[:-1] if x.get("kind") == "python"][-1]["name"] for p in ps
             if p[-1]["name"] == "spin_a" and any(x.get("kind") == "python" for x in p[:-1])}
    if above != {parent}:
        print("%s: spin_a's Python caller is %s, want %s" % (name, above, parent)); ok = False
    if spin_a_total(name) != want:
        print("%s: spin_a holds %d, want %d" % (name, spin_a_total(name), want)); ok = False
print("transforms: spin_a %d samples; focus-func, collapse-lib:threading.py, merge:Thread.run %s"
      % (want, "as expected" if ok else "WRONG"))
sys.exit(0 if ok else 1)
PYEOF

# cpu, in-process (no canopyd): the same rules.
"$C" run --no-daemon -F 999 --format json --group-by thread -o "$TMP/inproc.json" -- "$PY" \
  "$TMP/thr.py" "$SECS" >/dev/null 2>"$TMP/inproc.err" || fail "canopy run --no-daemon: $(cat "$TMP/inproc.err")"
check cpu "$TMP/inproc.json" || fail "cpu mode in-process"

# wall: canopy attach to the running process.
"$PY" "$TMP/thr.py" $((SECS + 2)) >"$TMP/wall.out" &
W_PID=$!
for _ in $(seq 100); do grep -q ready "$TMP/wall.out" && break; sleep 0.1; done
grep -q ready "$TMP/wall.out" || fail "the workload did not start"
"$C" attach $W_PID -F 999 --mode wall --name wall >/dev/null || fail "canopy attach --mode wall"
sleep "$SECS"
"$C" stop wall >/dev/null || fail "canopy stop wall"
wait $W_PID || fail "the workload failed"
W_PID=
"$C" tree wall --group-by thread --format json -o "$TMP/wall.json" || fail "canopy tree wall"
check wall "$TMP/wall.json" || fail "wall mode"

# wall: canopy run, the main thread's join included.
"$C" run -F 999 --mode wall --name wall-run --format json --group-by thread -o "$TMP/wall-run.json" \
  -- "$PY" "$TMP/thr.py" "$SECS" >/dev/null 2>"$TMP/wall-run.err" ||
  fail "canopy run --mode wall: $(cat "$TMP/wall-run.err")"
check wall-run "$TMP/wall-run.json" || fail "wall mode (run)"

# off-cpu: canopy run.
"$C" run -F 999 --mode off-cpu --name off --format json --group-by thread -o "$TMP/off.json" -- \
  "$PY" "$TMP/thr.py" "$SECS" >/dev/null 2>"$TMP/off.err" || fail "canopy run --mode off-cpu: $(cat "$TMP/off.err")"
check off-cpu "$TMP/off.json" || fail "off-cpu mode"

kill -0 $D_PID 2>/dev/null || fail "canopyd died"
echo "ok"
