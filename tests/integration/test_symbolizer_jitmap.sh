#!/usr/bin/env bash
# JIT frames named by a perf map that appears late (docs/cli-live.md, "Symbols"): the
# workload runs code from an anonymous executable mapping and writes /tmp/perf-PID.map
# only as it exits (as a JVM with -XX:+DumpPerfMapAtExit does), or after a delay while it
# runs. Its frames must end up named `jitted_spin` in-process, through canopyd after the
# process has exited, and in a session attached to it while it runs; also when a stale map
# of an earlier process with the same pid was there first.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_jitmap
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
W_PID=
PLANTED=() # stale maps this test left at the next pids (plant_stale), and their line
STALE=
on_exit() {
  local rc=$? f content
  kill $D_PID $W_PID 2>/dev/null || true
  wait 2>/dev/null || true
  # Only the planted maps still as planted: a process of another test may have been given
  # one of those pids and written its own map there, which it still needs.
  for f in "${PLANTED[@]}"; do
    content=
    IFS= read -r -d '' content <"$f" 2>/dev/null || true
    [ "$content" != "$STALE"$'\n' ] || rm -f "$f"
  done
  # The maps the workloads wrote (their paths are in their output: every run's output goes
  # to a file of its own, or its map stays in /tmp, where a later process of the same pid
  # finds it).
  cat "$TMP"/*.out 2>/dev/null | grep '^/tmp/perf-[0-9]*\.map$' | xargs -r rm -f
  finish_tmp $rc
}
trap on_exit EXIT

# plant_stale LINE N: LINE as /tmp/perf-PID.map for the N pids after the last one given
# out (wrapping at pid_max; an existing map is left alone), recorded in PLANTED and
# STALE. Builtins only, so that planting takes no pid.
plant_stale() {
  local last max p i
  STALE=$1
  read -r last </proc/sys/kernel/ns_last_pid
  read -r max </proc/sys/kernel/pid_max
  for ((i = 1; i <= $2; i++)); do
    p=$((last + i))
    [ $p -lt $max ] || p=$((p - max + 300)) # the kernel wraps to 300
    [ -e /tmp/perf-$p.map ] && continue
    printf '%s\n' "$1" >/tmp/perf-$p.map
    PLANTED+=(/tmp/perf-$p.map)
  done
}

# check FOLDED WHAT: the JIT frames are named, and carry most of the samples.
check() {
  python3 - "$1" <<'PY' || fail "$2: JIT frames not named"
import sys
total, jit, bare = 0, 0, 0
for line in open(sys.argv[1]):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    if "jit_driver" not in frames:
        continue
    n = int(n)
    total += n
    jit += n if "jitted_spin" in frames else 0
    bare += n if any(f.startswith("[jit]") for f in frames) else 0
print("samples in jit_driver", total, "named jitted_spin", jit, "bare [jit]", bare,
      file=sys.stderr)
assert total >= 50, total
assert bare == 0, bare
assert jit >= 0.8 * total, (jit, total)
PY
}

"$C" run --no-daemon -F 499 --format folded -o "$TMP/inproc.folded" -- "$WL" 1.5 \
  >"$TMP/inproc.out" 2>"$TMP/inproc.err" || fail "run --no-daemon: $(cat "$TMP/inproc.err")"
check "$TMP/inproc.folded" "in-process, map written at exit"

# A map left in /tmp by an earlier process of the same pid (pids are reused, perf maps
# stay): the shell that execs the workload writes a larger one of other names under its own
# pid, which the workload inherits; the workload truncates and rewrites it as it exits. Its
# frames are looked up in the stale map while it runs, and must be named from its own map at
# the end (a retry on any change of size, not only growth; a rewrite read whole).
"$C" run --no-daemon -F 499 --format folded -o "$TMP/stale.folded" -- sh -c \
  'yes "7f0000000000 10 stale_name" | head -2000 >/tmp/perf-$$.map; echo /tmp/perf-$$.map; exec "$0" 1.5' \
  "$WL" >"$TMP/stale.out" 2>"$TMP/stale.err" || fail "run --no-daemon (stale map): $(cat "$TMP/stale.err")"
grep -q stale_name "$TMP/stale.folded" && fail "a stale map's names in the tree: $(grep stale_name "$TMP/stale.folded")"
check "$TMP/stale.folded" "in-process, a stale map of the same pid rewritten at exit"

start_canopyd
"$C" run -F 499 --name late --format folded -o "$TMP/daemon.folded" -- "$WL" 1.5 \
  >"$TMP/daemon.out" 2>"$TMP/daemon.err" || fail "run through canopyd: $(cat "$TMP/daemon.err")"
# The map appeared as the process exited: the names may land after `run` printed its
# tree; the session, queried again, has them.
for ((i = 0; i < 20; i++)); do
  "$C" tree late --format folded -o "$TMP/daemon2.folded" 2>"$TMP/tree.err" ||
    fail "tree late: $(cat "$TMP/tree.err")"
  grep -q jitted_spin "$TMP/daemon2.folded" && break
  sleep 0.25
done
check "$TMP/daemon2.folded" "through canopyd, queried after the exit"

"$WL" 3 1 >"$TMP/delay.out" &
W_PID=$!
"$C" tree --pid "$W_PID" --duration 2.5s -F 499 --format folded -o "$TMP/attach.folded" \
  2>"$TMP/attach.err" || fail "tree --pid: $(cat "$TMP/attach.err")"
wait $W_PID
W_PID=
check "$TMP/attach.folded" "attached, map written after 1 s"
echo "PASS JIT frames named by late perf maps"

# JIT code that keeps no frame pointer (docs/perf-sampler.md, "Interpreters and JITs"):
# wl_jitmap's badfp JIT code calls a C loop with %rbp at a fake frame record whose return
# address is mapped nowhere. The default unwinding must end the stack at the JIT frame (an
# early stop, no unwind info) instead of making that address a frame (a false root), and
# say so per stack: an outermost pseudo-frame "[unwind stopped: JIT code without frame
# pointers]" above the JIT frame (docs/calltree.md §4.6). Without badfp the JIT code is a
# frameless leaf under C code built with frame pointers, and with spslot it keeps a frame
# pointer while the word at its stack pointer is a stack address (as in HotSpot's
# interpreter, and in C2 code at its epilogue's `pop %rbp`, where 1 JVM stack in ~2 000
# ended before libunwind's frame was fixed): both stacks are whole, every frame from
# _start to the JIT frame, and carry no such frame.
STOP="[unwind stopped: JIT code without frame pointers]"
if [ "$(uname -m)" = x86_64 ]; then
  for u in auto dwarf; do
    for shape in badfp fp spslot; do
      "$C" run --no-daemon --no-kernel --unwind $u -F 499 --format json -o "$TMP/$shape.json" \
        -- "$WL" 1 0 $shape >"$TMP/$u-$shape.out" 2>"$TMP/$shape.err" ||
        fail "run $shape: $(cat "$TMP/$shape.err")"
    done
    python3 - "$TMP/badfp.json" "$TMP/fp.json" "$TMP/spslot.json" "$STOP" "$u" <<'PY' || fail "$u: JIT stops"
import json, sys
stop, u = sys.argv[4], sys.argv[5]
def stacks(path, depth):
    d = json.load(open(path))
    out = {}
    def walk(n, path):
        if not n.get("children") or n["self"] > 0:
            key = ";".join(path[:depth])
            out[key] = out.get(key, 0) + n["self"]
        for c in n.get("children", []):
            walk(c, path + [c["name"]])
    for r in d["roots"]:
        walk(r, [r["name"]])
    return out, d["unwind"]
bad, ubad = stacks(sys.argv[1], 2)
print(u, "badfp: first two frames", bad, "unwind", ubad, file=sys.stderr)
total = sum(bad.values())
bare = sum(v for k, v in bad.items() if k.startswith("0x"))
assert total > 0 and bare == 0, bad
assert bad.get(stop + ";jitted_spin", 0) >= 0.8 * total, bad
assert ubad["no_cfi"] >= 0.8 * ubad["user_stacks"] > 0, ubad
whole = "_start;__libc_start_main_impl;__libc_start_call_main;main;jit_driver;jitted_spin"
for shape, path in (("fp", sys.argv[2]), ("spslot", sys.argv[3])):
    good, ugood = stacks(path, 99)
    top = sorted(good.items(), key=lambda kv: -kv[1])[:3]
    print(u, shape + ": stacks", top, "unwind", ugood, file=sys.stderr)
    gtotal = sum(good.values())
    assert gtotal > 0 and not any(k.startswith(stop) for k in good), (shape, top)
    assert good.get(whole, 0) >= 0.8 * gtotal, (shape, top)
    assert ugood["complete"] >= 0.8 * ugood["user_stacks"] > 0, (shape, ugood)
PY
  done
  # The pseudo-frame is an ordinary frame of the profile: kept by .canopy, named by every
  # writer, and read back from pprof.
  # The workload's pid is given a stale map first, as pids wrap (a map another process of
  # that pid left in /tmp): the line this workload writes at its exit, at another address,
  # so the same size. The stale map's lookup names nothing; the rewrite must be seen
  # (its modification time: the size did not change) and the frame named from it.
  map=$(grep -m1 '^/tmp/perf-[0-9]*\.map$' "$TMP/auto-badfp.out") || fail "no map path in auto-badfp.out"
  line=$(head -1 "$map")
  addr=${line%% *}
  stale="$(printf '%0*x' ${#addr} 4096) ${line#* }"
  [ ${#stale} -eq ${#line} ] || fail "stale line '$stale' is not as long as '$line'"
  plant_stale "$stale" 1000
  "$C" run --no-daemon --no-kernel -F 499 -o "$TMP/badfp.canopy" -- "$WL" 1 0 badfp \
    >"$TMP/c.out" 2>"$TMP/c.err" || fail "run badfp -o .canopy: $(cat "$TMP/c.err")"
  map=$(grep -m1 '^/tmp/perf-[0-9]*\.map$' "$TMP/c.out") || fail "no map path in c.out"
  planted=0
  for f in "${PLANTED[@]}"; do [ "$f" != "$map" ] || planted=1; done
  [ $planted = 1 ] ||
    fail "the workload's pid ($map) was not among the ${#PLANTED[@]} planted: pids moved too fast"
  "$C" open "$TMP/badfp.canopy" --format pprof -o "$TMP/badfp.pb.gz" || fail "open → pprof"
  for f in "$TMP/badfp.canopy" "$TMP/badfp.pb.gz"; do
    "$C" open "$f" --format folded -o "$TMP/reopen.folded" || fail "open $f"
    grep -qF "$STOP;jitted_spin" "$TMP/reopen.folded" ||
      fail "the pseudo-frame did not survive $f: $(head -3 "$TMP/reopen.folded")"
  done
  # Through canopyd too (the same live session code, run by the daemon).
  "$C" run --rm --no-kernel -F 499 --format folded -o "$TMP/d_badfp.folded" -- "$WL" 1 0 badfp \
    >"$TMP/d_badfp.out" 2>"$TMP/d_badfp.err" || fail "run badfp via canopyd: $(cat "$TMP/d_badfp.err")"
  grep -qF "$STOP;jitted_spin" "$TMP/d_badfp.folded" ||
    fail "canopyd: no pseudo-frame: $(head -3 "$TMP/d_badfp.folded")"
  for fmt in json speedscope chrome-trace svg text; do
    "$C" open "$TMP/badfp.canopy" --format $fmt -o "$TMP/out.$fmt" || fail "open → $fmt"
    grep -qF "$STOP" "$TMP/out.$fmt" || fail "$fmt output lacks the pseudo-frame"
  done
  echo "PASS JIT code without frame pointers: the stack ends at the JIT frame, under $STOP"
fi
