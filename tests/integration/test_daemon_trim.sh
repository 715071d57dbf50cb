#!/usr/bin/env bash
# Trimming the folded call paths (docs/calltree.md §4.6, aggregate/trim.c): a canopyd whose
# session reaches its memory bound folds its raw samples and trims the long tail of rare
# call paths into "[trimmed]" children. Debian's python3 runs a hot function from its main
# loop and, in between, random chains of 300 small functions (thousands of distinct
# stacks, most sampled once). After the trim: `sessions` counts it and the weight it
# moved, the tree has "[trimmed]" nodes, its total is still every sample taken, and the
# hot function's node under the main loop (a path far above the threshold) keeps the
# share of the time the program measured itself in it. Twice: a bound the trim meets at the
# configured share, and one it meets only by raising the share (cn_live__enforce_memory).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || fail "no $PY"
W=
trap 'rc=$?; stop_daemon KILL || true; kill $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

cat >"$TMP/tail.py" <<'PY'
import random, sys, threading, time

def hot(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

FUNCS = []
for i in range(300):
    exec(f"def f{i}(d):\n    if d > 0:\n        return FUNCS[random.randrange(300)](d - 1)\n"
         f"    return sum(range(300))\n", globals())
    FUNCS.append(globals()[f"f{i}"])

def rare_paths(budget):
    end = time.thread_time() + budget
    while time.thread_time() < end:
        FUNCS[random.randrange(300)](random.randrange(1, 6))

# Every other round's rare paths run in a thread of their own that exits: hundreds of
# exited threads, whose folded rows go to one "python3 [exited]" thread.
def main(seconds):
    spent_hot = 0.0
    start = time.process_time()
    rounds = 0
    while time.process_time() - start < seconds:
        t = time.thread_time()
        hot(30000)
        spent_hot += time.thread_time() - t
        rounds += 1
        if rounds % 2:
            rare_paths(0.002)
        else:
            th = threading.Thread(target=rare_paths, args=(0.002,))
            th.start()
            th.join()
    print(f"hot {100 * spent_hot / (time.process_time() - start):.1f}", flush=True)

random.seed(7)
sys.stdout.write("ready\n")
sys.stdout.flush()
sys.stdin.readline()
main(float(sys.argv[1]))
PY

# case_run NAME SHARE BOUND: a canopyd with session_memory BOUND and fold_trim SHARE
# profiles the workload; the checks above, and: at 0.2% the trim fits 1 MiB (seen: 0.9 of
# it); at 0.0001% (under one sample here) it cannot, and 640 KiB is under what the folded
# rows take untrimmed (~960 KiB seen), so the share is raised (x4 a step) until the tables
# fit; either way no sample is refused (every sample taken is in the tree) and
# the exited threads' rows are folded into one "python3 [exited]" thread, and the frames
# only trimmed paths used are removed (cn_agg_compact_frames).
case_run() {
    local name=$1 share=$2 bound=$3
    printf 'session_memory = %s\nfold_trim = %s\n' "$bound" "$share" >"$TMP/$name.conf"
    start_daemon io_uring "$TMP/state-$name" --config "$TMP/$name.conf"
    rm -f "$TMP/go"
    mkfifo "$TMP/go"
    "$PY" "$TMP/tail.py" 6 <"$TMP/go" >"$TMP/wl.out" &
    W=$!
    W_PID=$W
    exec 3>"$TMP/go"
    wait_for 10 grep -q ready "$TMP/wl.out" || fail "$name: the workload did not start"
    S=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":999}" | jget 'd["session"]["id"]')
    echo go >&3
    exec 3>&-
    wait $W || fail "$name: the workload failed"
    W=
    # Read once the session has ended with its target: no sample can arrive between the
    # sessions answer and the tree's.
    wait_for 10 ended || fail "$name: the session did not end with its target"
    ok '{"cmd":"sessions"}' >"$TMP/sessions.json"
    CANOPY_SOCKET=$SOCK "$CANOPY_BIN" tree "$S" --format json >"$TMP/tree.json" ||
        fail "$name: canopy tree"
    # The exited threads' rows under one root; the main thread's under its own tid.
    CANOPY_SOCKET=$SOCK "$CANOPY_BIN" tree "$S" --group-by thread --depth 1 >"$TMP/threads.txt" ||
        fail "$name: canopy tree --group-by thread"
    grep -q 'python3 \[exited\]' "$TMP/threads.txt" ||
        fail "$name: no python3 [exited] root: $(cat "$TMP/threads.txt")"
    grep -q "python3 \[$W_PID\]" "$TMP/threads.txt" ||
        fail "$name: no main thread root: $(cat "$TMP/threads.txt")"
    python3 - "$TMP/sessions.json" "$S" "$TMP/tree.json" "$TMP/wl.out" "$name" "$bound" <<'PYCHECK' ||
import json, sys
s = [x for x in json.load(open(sys.argv[1]))["sessions"] if x["id"] == sys.argv[2]][0]
tree = json.load(open(sys.argv[3]))
own = float(open(sys.argv[4]).read().split("hot ")[1])
name = sys.argv[5]
bound = int(sys.argv[6].rstrip("KM")) << (20 if sys.argv[6].endswith("M") else 10)
trim = s.get("trim", {})
print(f"{name}: samples {s['samples']}, dropped {s['dropped']}, memory {s['memory']}, "
      f"limited {s['memory_limited']}, trim {trim}, tree total {tree['total']}")
assert trim.get("trims", 0) >= 1, "no trim at the memory bound"
assert trim["weight"] > 0, trim
# the share in force: the configured one, raised x4 a step at the bound, at most 1%
configured = 0.002 if name == "fits" else 1e-6
want = min(configured * 4 ** trim["raised"], 0.01)
assert abs(trim["share"] - want) < 1e-12, trim
assert name == "fits" or trim["raised"] >= 1, trim
assert not trim["refusing"] and s["dropped"] == 0, "samples were refused"
assert trim["exited_rows"] > 0, "no exited thread's rows were folded"
assert trim["frames_removed"] > 0 and trim["funcs_removed"] > 0, "no frame left with the trim"
assert trim["strings_removed"] > 0, "no name left with the frames"
assert s["memory"] <= bound, "over the bound"
assert tree["total"] == s["samples"], "the tree lost samples"

trimmed = 0
hot_main = 0
def walk(n, path):
    global trimmed, hot_main
    name = n["name"]
    if name == "[trimmed]":
        trimmed += n["total"]
    if name == "hot" and any(p == "main" for p in path) and not any(p.startswith("f") and p[1:].isdigit() for p in path):
        hot_main += n["total"]
    for c in n.get("children", []):
        walk(c, path + [name])
for r in tree["roots"]:
    walk(r, [])
share = 100 * hot_main / tree["total"]
print(f"[trimmed] {trimmed} samples ({100 * trimmed / tree['total']:.1f}%); hot under main "
      f"{share:.1f}% (the program's own measure {own:.1f}%)")
assert trimmed > 0, "no [trimmed] node in the tree"
# Frames made after the frames were renumbered are named too: no Python frame is left
# with its placeholder name (a watermark remapped wrong would leave some unnamed).
unnamed = []
def placeholders(n):
    if ".py+0x" in n["name"]:
        unnamed.append(n["name"])
    for c in n.get("children", []):
        placeholders(c)
for r in tree["roots"]:
    placeholders(r)
assert not unnamed, f"Python frames left unnamed: {unnamed[:5]}"
assert trimmed == trim["weight"], "sessions' trim weight is not the tree's [trimmed] total"
assert abs(share - own) <= 6, "the hot path's share moved"
PYCHECK
        fail "$name: trim: $(cat "$TMP/sessions.json")"
    kill -0 $D_PID || fail "$name: canopyd died"
    stop_daemon TERM
}
ended() { [ "$(ok '{"cmd":"sessions"}' | jget "[s['state'] for s in d['sessions'] if s['id']=='$S'][0]")" = exited ]; }

case_run fits 0.2% 1M
case_run raised 0.0001% 640K
echo PASS
