#!/usr/bin/env bash
# Threads already waiting when an off-CPU or wall session attaches (sampler/waiting.c,
# docs/perf-sampler.md "Off-CPU"), through a real canopyd, on programs we did not write:
# - Debian's `sleep 60` (stripped): attached in wall mode, its one thread, asleep since before
#   the attach and never waking, holds ≥ 80% of the session's time; its stack is the one gdb
#   prints for the same process, frame for frame (gdb stops it: the oracle only);
# - Debian's python3 (3.11) and pyenv's 3.8, 3.9, 3.10 and 3.13 (each required under CI=true),
#   running a script whose main thread sleeps in sleepy() <- deep() and another thread waits in
#   Event.wait() <- waits_on_event() <- worker_main(): attached in wall and in off-cpu mode,
#   each thread's time (≥ 80% of a 1 s session) is under its own Python function, and `canopy
#   sessions` counts both threads as found waiting (offcpu.waiting). 3.8-3.10 have no
#   native_thread_id: before this their waiting threads had native frames only;
# - a system session (wall, off-cpu) started while Debian's 3.11 and pyenv's 3.10 run that
#   script: the same, per process (`tree --only-pid`); before, a system session did not see
#   threads waiting since its start at all.
# Before waiting.c such threads had no samples at all in an attach session.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "attaching canopyd to another process: root"
command -v gdb >/dev/null || fail "gdb (the oracle for the native stack) is missing"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
SECS=2
PIDS=()
D_PID=
on_exit() {
  local rc=$?
  kill "${PIDS[@]}" 2>/dev/null || true
  kill $D_PID 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap on_exit EXIT
start_canopyd

# session NAME PID MODE [SECONDS]: attach, wait SECONDS (SECS), stop; the tree by thread in $TMP/NAME.json and
# the session's counters in $TMP/NAME.sess.json.
session() {
  "$C" attach "$2" -F 99 --mode "$3" --name "$1" >/dev/null || fail "canopy attach $2 --mode $3"
  sleep "${4:-$SECS}"
  "$C" stop "$1" >/dev/null || fail "canopy stop $1"
  "$C" tree "$1" --group-by thread --format json -o "$TMP/$1.json" || fail "canopy tree $1"
  "$C" sessions --format json >"$TMP/$1.sess.json" || fail "canopy sessions"
}

# --- a native program: Debian's sleep, against gdb's backtrace -------------------------
sleep 60 &
S_PID=$!
PIDS+=($S_PID)
sleep 0.3
gdb -p $S_PID -batch -ex bt 2>/dev/null | grep '^#' >"$TMP/gdb.txt" || true
[ -s "$TMP/gdb.txt" ] || fail "gdb printed no backtrace of sleep"
session native $S_PID wall
python3 - "$TMP/native.json" "$TMP/gdb.txt" $SECS <<'EOF' || fail "sleep's waiting thread"
import json, re, sys
t = json.load(open(sys.argv[1]))
secs = float(sys.argv[3])
# gdb's frames, innermost first: "#N [0x... in ]NAME (...)"; "??" where sleep (stripped) has
# no symbol, where canopy says sleep+0x...; glibc's internal aliases (__GI___nanosleep) and
# leading underscores aside, the names are the same
norm = lambda s: "??" if "+0x" in s else re.sub(r"^__GI_", "", s).lstrip("_")
gdb = []
for line in open(sys.argv[2]):
    m = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?(\S+)", line)
    if m:
        gdb.append(norm(m.group(1)))
roots = t["roots"]
if len(roots) != 1:
    sys.exit("want one thread, got %s" % [r["name"] for r in roots])
path, n = [], roots[0]
while n.get("children"):
    n = max(n["children"], key=lambda c: c.get("total", 0))
    path.append(n["name"])
total_s = roots[0]["total"] / 1e9
got = [norm(f) for f in path if not f.startswith("[")]  # [blocked]: the state, not a frame
want = list(reversed(gdb))
print("sleep: %.2f s of a %.1f s session; stack %s" % (total_s, secs, " > ".join(path)))
print("gdb:   %s" % " > ".join(want))
ok = total_s >= 0.8 * secs
if not ok:
    print("FAIL: the waiting thread holds %.2f s" % total_s)
if got != want:
    print("FAIL: canopy's stack %s is not gdb's %s" % (got, want)); ok = False
sys.exit(0 if ok else 1)
EOF
kill $S_PID

# --- Python: threads waiting in Python functions -----------------------------------------
cat >"$TMP/waits.py" <<'EOF'
import threading, time


def waits_on_event(ev):
    ev.wait()


def worker_main(ev):
    waits_on_event(ev)


def sleepy():
    time.sleep(60)


def deep():
    sleepy()


ev = threading.Event()
threading.Thread(target=worker_main, args=(ev,), daemon=True).start()
print("ready", flush=True)
deep()
EOF
# 3.8-3.10 have no native_thread_id: their thread states are matched to threads by the tid in
# the glibc descriptor their thread_id points at (interp/ctx.c); before 3.11 a code object has
# no qualname, so Event.wait is "wait"
pys=(/usr/bin/python3)
for v in 3.8 3.9 3.10 3.13; do
  pv=
  for x in /root/.pyenv/versions/$v.*/bin/python$v; do [ -x "$x" ] && [ -z "$pv" ] && pv=$x; done
  if [ -n "$pv" ]; then
    pys+=("$pv")
  elif [ "${CI:-}" = true ]; then
    fail "no pyenv CPython $v (scripts/setup installs it)"
  else
    echo "note: no pyenv CPython $v under /root/.pyenv/versions" >&2
  fi
done
# check.py TREE SESSIONS NAME SECS LABEL WAIT_FN [LEAST]: each thread's time under its Python
# function, and LEAST (2) threads counted as found waiting
cat >"$TMP/check.py" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
secs = float(sys.argv[4])
wait_fn = sys.argv[6]
want = {"sleepy": ["deep", "sleepy"], "waits_on_event": ["worker_main", "waits_on_event", wait_fn]}
found = {}
ok = True
for root in t["roots"]:
    stack = [(root, [])]
    while stack:
        n, p = stack.pop()
        p = p + [n["name"]] if n is not root else p
        if n.get("self"):
            py = [x for x in p if x in ("deep", "sleepy", "worker_main", "waits_on_event", wait_fn)]
            for key, chain in want.items():
                if py[:len(chain)] == chain:
                    found[key] = found.get(key, 0) + n["self"]
        stack.extend((c, p) for c in n.get("children", []))
total = sum(r.get("total", 0) for r in t["roots"]) / 1e9
for key in want:
    s = found.get(key, 0) / 1e9
    print("%s: %s under %s: %.2f s (tree %.2f s, two threads; a %.1f s session)"
          % (sys.argv[5], key, " > ".join(want[key]), s, total, secs))
    if s < 0.8 * secs:
        print("FAIL: %s holds %.2f s" % (key, s)); ok = False
sess = [s for s in json.load(open(sys.argv[2]))["sessions"] if s.get("name") == sys.argv[3]]
waiting = sess[0].get("offcpu", {}).get("waiting", 0) if sess else 0
print("offcpu.waiting: %d" % waiting)
least = int(sys.argv[7]) if len(sys.argv) > 7 else 2
if waiting < least:
    print("FAIL: %d threads counted as found waiting" % waiting); ok = False
sys.exit(0 if ok else 1)
EOF
PY_SECS=1 # each waiting thread's share of a 1 s session, per interpreter and mode
k=0
for py in "${pys[@]}"; do
  wait_fn=$("$py" -c 'import sys; print("Event.wait" if sys.version_info >= (3, 11) else "wait")')
  for mode in wall off-cpu; do
    k=$((k + 1))
    "$py" "$TMP/waits.py" >"$TMP/py$k.out" &
    P=$!
    PIDS+=($P)
    for _ in $(seq 100); do grep -q ready "$TMP/py$k.out" && break; sleep 0.1; done
    sleep 0.3 # both threads asleep
    session "py$k" $P $mode $PY_SECS
    kill $P
    python3 - "$TMP/py$k.json" "$TMP/py$k.sess.json" "py$k" $PY_SECS "$py $mode" "$wait_fn" \
      <"$TMP/check.py" || fail "$py --mode $mode: waiting threads"
  done
done
# --- A system session: the waiting threads of the CPython processes running at its start ---
# (waiting.c, cn_smp__waiting_system): pyenv's 3.10 (matched by its glibc descriptor) and
# Debian's 3.11 (by native_thread_id), each thread under its Python function, per process
# (`tree --only-pid`); before, a system session saw no thread that waited since its start.
sys_pys=(/usr/bin/python3)
for x in /root/.pyenv/versions/3.10.*/bin/python3.10; do [ -x "$x" ] && sys_pys+=("$x") && break; done
for mode in wall off-cpu; do
  SP=()
  for py in "${sys_pys[@]}"; do
    k=$((k + 1))
    "$py" "$TMP/waits.py" >"$TMP/py$k.out" &
    SP+=($!)
    PIDS+=($!)
    for _ in $(seq 100); do grep -q ready "$TMP/py$k.out" && break; sleep 0.1; done
  done
  sleep 0.3 # every thread asleep
  name="sys-$mode"
  "$C" system -F 99 --no-kernel --mode $mode --name "$name" >/dev/null || fail "canopy system --mode $mode"
  sleep $PY_SECS
  "$C" stop "$name" >/dev/null || fail "canopy stop $name"
  "$C" sessions --format json >"$TMP/$name.sess.json" || fail "canopy sessions"
  for i in "${!SP[@]}"; do
    py=${sys_pys[$i]}
    P=${SP[$i]}
    kill $P
    wait_fn=$("$py" -c 'import sys; print("Event.wait" if sys.version_info >= (3, 11) else "wait")')
    "$C" tree "$name" --only-pid $P --group-by thread --format json -o "$TMP/$name.$P.json" ||
      fail "canopy tree $name --only-pid $P"
    python3 - "$TMP/$name.$P.json" "$TMP/$name.sess.json" "$name" $PY_SECS "system: $py $mode" "$wait_fn" \
      $((2 * ${#SP[@]})) <"$TMP/check.py" || fail "canopy system --mode $mode: $py's waiting threads"
  done
done
kill -0 $D_PID 2>/dev/null || fail "canopyd died"
echo "ok"
