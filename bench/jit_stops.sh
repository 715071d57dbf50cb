#!/usr/bin/env bash
# Where unwinding stops in JIT code (docs/perf-sampler.md, "Interpreters and JITs"): node
# --perf-basic-prof (V8 keeps frame pointers) and the JVM with and without
# -XX:+PreserveFramePointer, each ~2 s at 999 Hz, user space only, under
#   canopy run --no-daemon --unwind auto | dwarf  (--format folded)
# For each: the samples, the share whose root is the thread's start (_start, clone3,
# start_thread), and the share under the "[unwind stopped: JIT code without frame
# pointers]" pseudo-frame.
#   bench/jit_stops.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
C=$(cd "$BUILD" && pwd)/client/canopy
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/hot.js" <<'JS'
console.log(process.pid);
function canopyHotLoop(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + Math.imul(i, 2654435761)) | 0;
  return s;
}
function outer(n) { return canopyHotLoop(n) ^ 1; }
const end = Date.now() + 2000;
let acc = 0;
while (Date.now() < end) acc ^= outer(100000);
console.log(acc);
JS
javac -d "$TMP/cls" "$SRC/tests/data/src/Hot.java"
stat() {
  python3 - "$1" "$2" <<'PY'
import sys
tot = start = ps = 0
for l in open(sys.argv[1]):
    st, n = l.rstrip("\n").rsplit(" ", 1)
    fr, n = st.split(";"), int(n)
    tot += n
    start += n if fr[0] in ("_start", "clone3", "start_thread") else 0
    ps += n if fr[0].startswith("[unwind stopped") else 0
print(f"{sys.argv[2]:<22} {tot:6d} samples, root at the thread start {100 * start / tot:5.1f}%, "
      f"under the pseudo-frame {100 * ps / tot:5.1f}% ({ps})")
PY
}
uptime
for u in auto dwarf; do
  # (in $TMP: node --perf-basic-prof also writes an isolate-*-v8.log where it runs)
  pid=$(cd "$TMP" && "$C" run --no-daemon --no-kernel --unwind $u -F 999 --format folded \
    -o "$TMP/n.folded" -- node --perf-basic-prof "$TMP/hot.js" 2>/dev/null | head -1)
  rm -f "/tmp/perf-$pid.map"
  stat "$TMP/n.folded" "node $u"
  for pf in + -; do
    pid=$("$C" run --no-daemon --no-kernel --unwind $u -F 999 --format folded -o "$TMP/j.folded" \
      -- java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit -XX:${pf}PreserveFramePointer \
      -cp "$TMP/cls" Hot 2 2>/dev/null | head -1)
    rm -f "/tmp/perf-$pid.map"
    stat "$TMP/j.folded" "jvm ${pf}PFP $u"
  done
done
uptime
