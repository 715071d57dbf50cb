#!/usr/bin/env bash
# [vdso] frames (docs/cli-live.md, "Symbols"): a workload that spends its time in
# clock_gettime (the vDSO) must come out fully named — main, clock_loop and the vDSO's
# function — sampled in-process, through canopyd (`canopy run`), and in a system session
# that a process joins later. One frame the symbolizer could not take used to stop every
# later frame from being named; perf script is the oracle for the vDSO function's name.
# The system session also checks that the idle task is named swapper, as perf does.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_clockread
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
trap finish_daemon EXIT

# The vDSO function perf names for the same workload (empty when perf cannot sample).
ORACLE=
if command -v perf >/dev/null &&
  perf record -q -F 499 --call-graph dwarf -o "$TMP/p.data" -- "$WL" 1 clock >/dev/null 2>&1; then
  ORACLE=$(perf script -i "$TMP/p.data" -F sym,dso 2>/dev/null | awk '/\[vdso\]/ {print $1}' |
    sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
  echo "perf script names the vDSO leaf: ${ORACLE:-?}" >&2
fi

# check FOLDED WHAT: every frame of the workload named; main, clock_loop, vDSO function.
check() {
  python3 - "$1" "$ORACLE" <<'PY' || fail "$2: frames left unnamed"
import re, sys
folded, oracle = sys.argv[1], sys.argv[2]
total, inc, bare = 0, {}, {}
vdso_names = ("__vdso_clock_gettime", "clock_gettime", "__kernel_clock_gettime",
              "__vdso_clock_gettime64")
for line in open(folded):
    stack, n = line.rstrip("\n").rsplit(" ", 1)
    frames = stack.split(";")
    if "main" not in frames and not any(f.startswith("wl_clockread") for f in frames):
        continue  # another process (system session)
    n = int(n)
    total += n
    for f in set(frames):
        inc[f] = inc.get(f, 0) + n
        if re.match(r"^(wl_clockread|libc\.so\.6|\[vdso\])\+0x", f):
            bare[f] = bare.get(f, 0) + n
vdso = {f: inc[f] for f in vdso_names if f in inc}
print("total", total, "main", inc.get("main"), "clock_loop", inc.get("clock_loop"),
      "vdso", vdso, "bare", dict(list(bare.items())[:5]), file=sys.stderr)
assert total >= 50, total
assert not bare, bare
assert inc.get("main", 0) >= 0.9 * total, "main"
assert inc.get("clock_loop", 0) >= 0.8 * total, "clock_loop"
assert sum(vdso.values()) >= 0.3 * total, vdso
if oracle:
    assert oracle in inc, ("perf's vDSO name missing", oracle)
PY
}

"$C" run --no-daemon -F 499 --format folded -o "$TMP/inproc.folded" -- "$WL" 1.5 clock \
  >/dev/null 2>"$TMP/inproc.err" || fail "run --no-daemon: $(cat "$TMP/inproc.err")"
check "$TMP/inproc.folded" "in-process"

start_canopyd
"$C" run -F 499 --format folded -o "$TMP/daemon.folded" -- "$WL" 1.5 clock \
  >/dev/null 2>"$TMP/daemon.err" || fail "run through canopyd: $(cat "$TMP/daemon.err")"
check "$TMP/daemon.folded" "through canopyd"

if [ "$(id -u)" = 0 ]; then
  "$C" system -F 499 --name sys >/dev/null || fail "canopy system"
  "$WL" 1.5 clock >/dev/null &
  W=$!
  wait $W
  sleep 0.5 # the loop's next pump takes the last records
  "$C" stop sys >/dev/null || fail "canopy stop"
  # `canopy tree` prints what is named so far; the check wants every name the session will
  # get (this raced with a busy symbolizer: CANOPYD_TEST_SYMBOL_DELAY_MS=800 failed it)
  wait_symbols sys || fail "system session: symbols still pending after 60 s"
  "$C" tree sys --only-pid "$W" --format folded -o "$TMP/sys.folded" 2>"$TMP/sys.err" ||
    fail "tree --only-pid: $(cat "$TMP/sys.err")"
  check "$TMP/sys.folded" "system session"
  # The idle task (pid 0) is named as perf names it, never "? [0]".
  "$C" tree sys --group-by process --format json -o "$TMP/proc.json" || fail "tree --group-by process"
  python3 - "$TMP/proc.json" <<'PY' || fail "system session: pid 0 is not named swapper"
import json, sys
roots = [r["name"] for r in json.load(open(sys.argv[1]))["roots"]]
idle = [r for r in roots if r.endswith("[0]")]
# (A machine busy on every CPU for the whole session has no idle samples to check.)
print("pid 0 roots:", idle or "none: no CPU was idle", file=sys.stderr)
assert all(r.startswith("swapper ") for r in idle), idle
PY
fi
echo "PASS [vdso] frames and everything around them are named"
