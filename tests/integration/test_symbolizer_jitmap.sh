#!/usr/bin/env bash
# JIT frames named by a perf map that appears late (docs/cli-live.md, "Symbols"): the
# workload runs code from an anonymous executable mapping and writes /tmp/perf-PID.map
# only as it exits (as a JVM with -XX:+DumpPerfMapAtExit does), or after a delay while it
# runs. Its frames must end up named `jitted_spin` in-process, through canopyd after the
# process has exited, and in a session attached to it while it runs.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_jitmap
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
W_PID=
on_exit() {
  local rc=$?
  [ "$rc" = 0 ] || [ ! -f "$TMP/d.log" ] || { echo "canopyd's log:" >&2; tail -20 "$TMP/d.log" >&2; }
  kill $D_PID $W_PID 2>/dev/null || true
  wait 2>/dev/null || true
  # The maps the workloads wrote (their paths are in their output).
  cat "$TMP"/*.out 2>/dev/null | grep '^/tmp/perf-[0-9]*\.map$' | xargs -r rm -f
  rm -rf "$TMP"
}
trap on_exit EXIT

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
# address is mapped nowhere. The default unwinding must end the stack at the JIT frame (an early stop,
# no unwind info) instead of making that address a frame (a false root).
if [ "$(uname -m)" = x86_64 ]; then
  "$C" run --no-daemon --no-kernel -F 499 --format json -o "$TMP/badfp.json" -- "$WL" 1.5 0 badfp \
    >"$TMP/badfp.out" 2>"$TMP/badfp.err" || fail "run badfp: $(cat "$TMP/badfp.err")"
  python3 - "$TMP/badfp.json" <<'PY' || fail "badfp: a guessed frame above JIT code"
import json, sys
d = json.load(open(sys.argv[1]))
roots = {}
def walk(n, depth):
    if depth == 0:
        roots[n["name"]] = roots.get(n["name"], 0) + n["total"]
    for c in n.get("children", []):
        walk(c, depth + 1)
for r in d["roots"]:
    walk(r, 0)
u = d["unwind"]
print("badfp roots", roots, "unwind", u, file=sys.stderr)
total = sum(roots.values())
bare = sum(v for k, v in roots.items() if k.startswith("0x"))
assert total > 0 and bare == 0, roots
assert roots.get("jitted_spin", 0) >= 0.8 * total, roots
assert u["no_cfi"] >= 0.8 * u["user_stacks"] > 0, u
PY
  echo "PASS JIT code without frame pointers: the stack ends at the JIT frame"
fi
