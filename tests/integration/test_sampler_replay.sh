#!/usr/bin/env bash
# auto against dwarf and fp on IDENTICAL samples (docs/perf-sampler.md, "Real programs"):
# bench_replay captures a run in auto's record layout (callchain + registers + 16 KiB stack
# copy) through the sampler's record tap, then replays the capture into auto, dwarf and fp
# sessions and compares every sample's three stacks. Debian's python3 on a pure-Python
# script, xz -9 (stripped liblzma) and node --perf-basic-prof (JIT code), ~2 s each at
# 999 Hz, and a Go binary built here (Go
# switches to the thread's system stack in runtime.systemstack: auto follows the frame
# pointer across it, dwarf cannot). Asserted per sample: wherever dwarf's stack reaches the
# start, auto's does; wherever fp's does, auto's does (Go: all but 1%); python3, xz, node:
# auto's stacks are dwarf's for >= 99% of the samples; the capture run's own auto stacks
# are the replay's (replaying is faithful); the capture replayed through live/ sessions
# (bench_replay --folded: named as `canopy run --no-inline --format folded` names them)
# gives auto no more distinct roots than dwarf (node: plus the samples auto unwound
# further than dwarf without reaching the start, each a deeper truncation point).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
B=$CANOPY_BUILD_DIR/bench/bench_replay
[ -x "$B" ] || fail "$B missing (configure with -DCANOPY_BENCH=ON)"
[ -x "$PY" ] || fail "Debian's python3 ($PY) is missing (scripts/setup installs it)"
command -v xz >/dev/null || fail "xz is missing (scripts/setup installs xz-utils)"
"$B" -F 99 -- true >"$TMP/probe.out" 2>"$TMP/probe.err" ||
  skip "perf events not permitted: $(cat "$TMP/probe.err")"
SECS=${CANOPY_REPLAY_SECONDS:-2}

source "$(dirname "$0")/real_inputs.sh"
real_inputs "$TMP" "$SECS"

# check NAME GO CMD...: captures CMD, replays it, asserts (GO=1: the Go rules).
check() {
  local name=$1 go=$2
  shift 2
  "$B" --show 3 --folded "$TMP/$name" -- "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
    fail "$name: bench_replay failed: $(cat "$TMP/$name.err")"
  $PY - "$name" "$go" "$TMP/$name.out" "$TMP/$name" <<'PYEOF' ||
import sys
name, go, path, folded = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4]
v = {}
for line in open(path):
    f = line.split()
    if len(f) >= 2 and f[1].isdigit():
        v[f[0]] = int(f[1])
n = v["samples"]
pct = lambda k: 100.0 * v[k] / max(n, 1)
print(f"{name}: {n} samples; reach start auto {pct('reach_auto'):.1f}% dwarf "
      f"{pct('reach_dwarf'):.1f}% fp {pct('reach_fp'):.1f}%; dwarf-not-auto "
      f"{v['dwarf_not_auto']}, fp-not-auto {v['fp_not_auto']}, auto == dwarf "
      f"{pct('same_auto_dwarf'):.1f}%, live == replay {v['live_same_auto']}")
# roots of the folded files: the replay through live/, named as `canopy run --no-inline`
roots, total = {}, {}
for m in ("auto", "dwarf", "fp"):
    r, t = set(), 0
    for line in open(f"{folded}.{m}.folded"):
        st, _, w = line.rstrip("\n").rpartition(" ")
        r.add(st.split(";")[0])
        t += int(w)
    roots[m], total[m] = r, t
print(f"{name}: folded roots auto {len(roots['auto'])} dwarf {len(roots['dwarf'])} fp "
      f"{len(roots['fp'])}; auto's stacks longer than dwarf's, not reaching the start: "
      f"{v['auto_longer_unrooted']}")
errs = []
if any(total[m] != n for m in total):
    errs.append(f"folded files hold {total} samples, not {n}")
# On identical samples auto has no more roots than dwarf (docs/perf-sampler.md, "Real
# programs"). Exception, node only: a sample that auto unwinds further than dwarf without
# reaching the start (the 16 KiB copy ends in node's deep bootstrap stacks) is cut at a
# deeper frame, which can be a root of its own; each such sample may add one.
slack = v["auto_longer_unrooted"] if name == "node" else 0
if len(roots["auto"]) > len(roots["dwarf"]) + slack:
    errs.append(f"auto has {len(roots['auto'])} roots, dwarf {len(roots['dwarf'])}: "
                f"{sorted(roots['auto'] - roots['dwarf'])[:5]}")
if n < 200:  # a loaded machine gives the timed programs little CPU
    errs.append(f"only {n} samples")
if pct("reach_dwarf") < 80:  # the replay unwinds at all
    errs.append(f"dwarf reaches the start in {pct('reach_dwarf'):.1f}% only")
if v["dwarf_not_auto"]:
    errs.append(f"{v['dwarf_not_auto']} samples reach the start in dwarf, not in auto")
if v["live_same_auto"] != n:
    errs.append(f"replayed auto differs from the capture run's in {n - v['live_same_auto']} samples")
if go:
    if v["fp_not_auto"] > n / 100:
        errs.append(f"{v['fp_not_auto']} samples reach the start in fp, not in auto")
    if v["reach_auto"] < v["reach_fp"] or v["reach_auto"] < v["reach_dwarf"]:
        errs.append("auto reaches the start less often than fp or dwarf")
else:
    if v["fp_not_auto"]:
        errs.append(f"{v['fp_not_auto']} samples reach the start in fp, not in auto")
    if pct("same_auto_dwarf") < 99:
        errs.append(f"auto's stacks are dwarf's in {pct('same_auto_dwarf'):.1f}% only")
for e in errs:
    print("FAIL:", e)
sys.exit(1 if errs else 0)
PYEOF
    fail "$name: $(tail -n 30 "$TMP/$name.out" | cut -c1-400)"
}

check python3 0 "$PY" "$TMP/busy.py"
check xz 0 xz -9 -T1 -k -f "$TMP/data.txt"
if command -v node >/dev/null; then
  # JIT code without unwind tables: libunwind's frame-chain guess, not the kernel's chain
  # (in $TMP: --perf-basic-prof writes isolate-*-v8.log files where node runs)
  (cd "$TMP" && check node 0 node --perf-basic-prof "$CANOPY_SOURCE_DIR/bench/real/busy.js" "$SECS")
  { grep -l "bench/real/busy.js" /tmp/perf-*.map 2>/dev/null || true; } | xargs -r rm -f
elif [ "${CI:-}" = "true" ]; then
  fail "node is missing (scripts/setup installs nodejs)"
fi
if command -v go >/dev/null; then
  (cd "$CANOPY_SOURCE_DIR/bench/real" &&
    GOCACHE=$TMP/gocache GO111MODULE=off go build -o "$TMP/busy-go" busy.go) ||
    fail "go build of bench/real/busy.go failed"
  check go 1 "$TMP/busy-go" "$SECS"
elif [ "${CI:-}" = "true" ]; then
  fail "go is missing (scripts/setup installs golang-go)"
fi
echo "PASS"
