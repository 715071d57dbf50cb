#!/usr/bin/env bash
# The JVM's perf maps (docs/perf-sampler.md, "Interpreters and JITs"): a real Java program
# (tests/data/src/Hot.java) whose time is in the JIT-compiled method hotLoop, profiled in
# canopy's default mode (--unwind auto) and by `perf record -g` on the same run shape.
#  1. -XX:+DumpPerfMapAtExit (the map appears as the JVM exits) with
#     -XX:+PreserveFramePointer: hotLoop is canopy's top self function, named as perf names
#     it, with perf's share ±5 points; its stacks run through the JIT and interpreter
#     frames down to the thread's start, as perf's do.
#     No hotLoop stack carries the "[unwind stopped: …]" pseudo-frame.
#  2. A live JVM without either flag, attached, `jcmd PID Compiler.perfmap` halfway: the
#     frames sampled before the map existed are named too. Without frame pointers the
#     stack ends at the JIT frame, and says so: its root is the pseudo-frame "[unwind
#     stopped: JIT code without frame pointers]" right above hotLoop (docs/calltree.md
#     §4.6), not hotLoop itself.
source "$(dirname "$0")/lib.sh"
command -v java >/dev/null && command -v javac >/dev/null && command -v jcmd >/dev/null ||
  skip "no JDK (scripts/setup installs openjdk-17-jdk-headless)"
command -v perf >/dev/null || skip "perf not installed"
C=$CANOPY_BIN
PIDS=()
on_exit() {
  for p in "${PIDS[@]}"; do rm -f "/tmp/perf-$p.map"; done
  rm -rf "$TMP"
}
trap on_exit EXIT
HOT="long Hot.hotLoop(long, long)"
STOP="[unwind stopped: JIT code without frame pointers]"

javac -d "$TMP/cls" "$CANOPY_TEST_DATA/src/Hot.java" || fail "javac"
JAVA=(java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit -XX:+PreserveFramePointer
  -cp "$TMP/cls" Hot 2)

# 1. At exit, frame pointers preserved.
"$C" run --no-daemon --no-kernel -F 999 --format folded -o "$TMP/c.folded" -- "${JAVA[@]}" \
  >"$TMP/c.out" 2>"$TMP/c.err" || fail "canopy run: $(cat "$TMP/c.err")"
PIDS+=("$(head -1 "$TMP/c.out")")
perf record -q -e cpu-clock:u -F 999 -g -o "$TMP/perf.data" -- "${JAVA[@]}" >"$TMP/p.out" 2>"$TMP/p.err" ||
  fail "perf record: $(cat "$TMP/p.err")"
PIDS+=("$(head -1 "$TMP/p.out")")
perf script -i "$TMP/perf.data" -F ip,sym 2>/dev/null >"$TMP/perf.txt" || fail "perf script"
python3 - "$TMP/c.folded" "$TMP/perf.txt" "$HOT" "$STOP" <<'PY' || exit 1
import collections, sys
hot, stop = sys.argv[3], sys.argv[4]

def summary(stacks):  # stacks: (frames root first, count)
    total = sum(n for _, n in stacks)
    leaf = collections.Counter()
    for fr, n in stacks:
        leaf[fr[-1]] += n
    top, top_n = leaf.most_common(1)[0]
    in_hot = [(fr, n) for fr, n in stacks if fr[-1] == hot]
    deep = sum(n for fr, n in in_hot if "JavaCalls::call_helper" in " ".join(fr)
               and fr[0] in ("clone3", "start_thread", "_start"))
    bare = sum(n for fr, n in stacks if any(f.startswith("[jit]") or f == "[unknown]" for f in fr[-1:]))
    return total, top, 100.0 * top_n / total, 100.0 * deep / max(1, sum(n for _, n in in_hot)), 100.0 * bare / total

c = []
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    c.append((st.split(";"), int(n)))
p, cur = [], []
for line in list(open(sys.argv[2])) + [""]:  # blocks of "ip sym" lines, leaf first
    line = line.strip()
    if not line:
        if cur:
            p.append((cur[::-1], 1))
        cur = []
        continue
    cur.append(line.split(" ", 1)[1] if " " in line else "[unknown]")
ct, ctop, cshare, cdeep, cbare = summary(c)
pt, ptop, pshare, pdeep, pbare = summary(p)
print(f"canopy: {ct} samples, top {ctop!r} {cshare:.1f}%, through the JIT to the thread start {cdeep:.1f}%, bare JIT leaves {cbare:.1f}%")
print(f"perf:   {pt} samples, top {ptop!r} {pshare:.1f}%, through the JIT to the thread start {pdeep:.1f}%, bare JIT leaves {pbare:.1f}%")
assert ct >= 200, "too few samples"  # 2 s at 999 Hz, fewer on a loaded machine
assert ctop == hot and ptop == hot, (ctop, ptop)
assert abs(cshare - pshare) <= 5, (cshare, pshare)
assert cdeep >= 90 and cdeep >= pdeep - 5, (cdeep, pdeep)
assert cbare <= 2, cbare
stopped = sum(n for fr, n in c if fr[-1] == hot and stop in fr)
assert stopped == 0, f"{stopped} hotLoop stacks say the unwind stopped, with frame pointers"
PY
echo "PASS DumpPerfMapAtExit + PreserveFramePointer: $HOT named and unwound through"

# 2. Live JVM, map written on request while sampled.
java -cp "$TMP/cls" Hot 4 >"$TMP/live.out" &
J=$!
for ((i = 0; i < 50; i++)); do [ -s "$TMP/live.out" ] && break; sleep 0.1; done
PIDS+=("$J")
(sleep 1.5; jcmd "$J" Compiler.perfmap >"$TMP/jcmd.out" 2>&1) &
"$C" tree --pid "$J" --duration 3s -F 499 --no-kernel --format folded -o "$TMP/live.folded" \
  2>"$TMP/live.err" || fail "tree --pid: $(cat "$TMP/live.err")"
wait
grep -q "Command executed successfully" "$TMP/jcmd.out" || fail "jcmd Compiler.perfmap: $(cat "$TMP/jcmd.out")"
python3 - "$TMP/live.folded" "$HOT" "$STOP" <<'PY' || exit 1
import sys
total = hot = bare = stopped = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    fr, n = st.split(";"), int(n)
    total += n
    hot += n if fr[-1] == sys.argv[2] else 0
    bare += n if any(f.startswith("[jit]") for f in fr) else 0
    stopped += n if fr[-1] == sys.argv[2] and fr[:2] == [sys.argv[3], sys.argv[2]] else 0
print(f"live: {total} samples, {hot} in {sys.argv[2]!r}, {bare} with a bare [jit] frame, "
      f"{stopped} of those in hotLoop rooted at {sys.argv[3]!r}")
assert total >= 100 and hot >= 0.8 * total and bare <= 0.02 * total, (total, hot, bare)
assert stopped >= 0.9 * hot, (stopped, hot)
PY
echo "PASS live JVM, jcmd Compiler.perfmap while attached"

# 3. --unwind fp (the kernel's frame-pointer chain): without -XX:+PreserveFramePointer the
#    chain ends at hotLoop, in JIT code, and says so as the other modes do; with it, the
#    chain runs through the JIT to the thread's start and carries no pseudo-frame.
for pf in - +; do
  "$C" run --no-daemon --no-kernel --unwind fp -F 999 --format folded -o "$TMP/fp$pf.folded" -- \
    java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit -XX:${pf}PreserveFramePointer \
    -cp "$TMP/cls" Hot 1.5 >"$TMP/fp$pf.out" 2>"$TMP/fp$pf.err" || fail "run fp: $(cat "$TMP/fp$pf.err")"
  PIDS+=("$(head -1 "$TMP/fp$pf.out")")
  python3 - "$TMP/fp$pf.folded" "$HOT" "$STOP" "$pf" <<'PY' || exit 1
import sys
hot, stop, pf = sys.argv[2], sys.argv[3], sys.argv[4]
total = in_hot = stopped = start = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    fr, n = st.split(";"), int(n)
    total += n
    if fr[-1] != hot:
        continue
    in_hot += n
    stopped += n if stop in fr else 0
    start += n if fr[0] in ("clone3", "start_thread") else 0
print(f"fp, {pf}PreserveFramePointer: {total} samples, {in_hot} in hotLoop, {stopped} of them "
      f"under the pseudo-frame, {start} rooted at the thread start")
assert total >= 100 and in_hot >= 0.8 * total, (total, in_hot)
if pf == "-":
    assert stopped >= 0.9 * in_hot, (stopped, in_hot)
else:
    assert stopped == 0 and start >= 0.9 * in_hot, (stopped, start, in_hot)
PY
done
echo "PASS --unwind fp: JIT stops said with the pseudo-frame, none with frame pointers"
