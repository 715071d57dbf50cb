#!/usr/bin/env bash
# Real programs under one whole-system session against a session of their own
# (docs/perf-sampler.md, "Whole-system sessions"): Debian's python3 (a pure-Python loop),
# xz -6, gcc's cc1 (-O2 on a preprocessed file of the repository), sort, gzip -9, a loop
# of short cmake runs (each spends most of its time in the dynamic loader, relocating a
# large C++ program) and "fork": children of shells that were waiting before the session
# started, each running the shell for a few milliseconds before it execs true. They run
# one after the other under `canopy system --no-kernel`, then each again under
# `canopy run --no-kernel` through the same canopyd. For each program: its user samples
# in the system session (its processes' pids, in the tree grouped by process) and in its
# run, and the share of them whose stack reaches a start (_start, ld.so's _dl_start_user,
# a thread start, or the frame above __libc_start_main: test_sampler_real.sh's rule).
# Asserted: the system session reaches the start as often as the program's own session
# (within 3 points or three sigma of sampling noise; fork's children reached it in 28-37%
# of their samples when a system session read their maps from /proc late); each run ends
# at most 2% of its stacks for want of CFI (cmake 5%: 88-92% while ld.so's _start was
# not known as the first frame, 1-7% while crti's _init was not compiled); the system session's no-CFI stacks are at most its other
# processes' stacks plus 2% of the programs'; every session's libunwind stacks by cause add
# up, and each run sends at most 2% of its stacks to libunwind (cmake 5%). Prints the table.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}" "${CANOPY_SOURCE_DIR:?}"
[ "$(id -u)" = 0 ] || skip "a system session needs root or CAP_PERFMON"
PY=/usr/bin/python3
[ -x "$PY" ] || fail "Debian's python3 ($PY) is missing (scripts/setup installs it)"
for t in xz gzip sort cmake gcc; do
  command -v $t >/dev/null || fail "$t is missing (scripts/setup installs it)"
done
CC1=$(gcc -print-prog-name=cc1)
[ -x "$CC1" ] || fail "gcc's cc1 not found ($CC1)"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
FREQ=999

D_PID=
PARENTS=()
on_exit() {
  local rc=$?
  kill $D_PID "${PARENTS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap on_exit EXIT
start_canopyd

source "$(dirname "$0")/real_inputs.sh"
real_inputs "$TMP" 2 # data.txt (busy.py's loop is timed: python3 gets a fixed amount of work)
cat >"$TMP/work.py" <<'EOF'
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
for _ in range(60):
    fib(20)
    d = {str(k * 7919 % 1000): k for k in range(20000)}
    "".join(sorted(d)).count("9")
EOF
head -c 1500000 "$TMP/data.txt" >"$TMP/small.txt"
tr ' ' '\n' <"$TMP/data.txt" >"$TMP/words.txt"
gcc -E -I"$CANOPY_SOURCE_DIR/common" -I"$CANOPY_SOURCE_DIR/aggregate/include" \
  -I"$CANOPY_SOURCE_DIR/aggregate" "$CANOPY_SOURCE_DIR/aggregate/profile.c" -o "$TMP/cc1.i"
# fork.sh N: forks N children in turn; fork.sh wait FIFO: forks one once FIFO is written.
# Each child runs the shell for a few milliseconds (less than records wait before they are
# handled), then execs true; the parent prints its pid.
cat >"$TMP/fork.sh" <<'EOF'
n=$1
if [ "$1" = wait ]; then read -r _ <"$2"; n=1; fi
for ((k = 0; k < n; k++)); do
  (i=0; while [ $i -lt 800 ]; do i=$((i + 1)); done; exec true) &
  echo $!
  wait
done
EOF
cat >"$TMP/cmake_loop.sh" <<'EOF'
# 60 short cmake runs; prints their pids
for i in $(seq 60); do cmake -E true & echo $!; wait $!; done
EOF

NAMES="python3 xz cc1 sort gzip cmake fork"
# cmd NAME: the program's command line (paths without spaces: $TMP, gcc's), split by argv
cmd() {
  case $1 in
    python3) echo "$PY $TMP/work.py" ;;
    xz) echo "xz -6 -T1 -k -f $TMP/small.txt" ;;
    cc1) echo "$CC1 -fpreprocessed -quiet -O2 $TMP/cc1.i -o /dev/null" ;;
    sort) echo "sort $TMP/words.txt -o /dev/null" ;;
    gzip) echo "gzip -9 -k -f $TMP/data.txt" ;;
    cmake) echo "bash $TMP/cmake_loop.sh" ;;
    fork) echo "bash $TMP/fork.sh 80" ;;
  esac
}

# fork: in the system session, 80 parents that exist before it and have nothing to sample
# until each forks its child (a session meets them at the fork).
for i in $(seq 80); do
  mkfifo "$TMP/fifo.$i"
  bash "$TMP/fork.sh" wait "$TMP/fifo.$i" >"$TMP/parent.$i" &
  PARENTS+=($!)
done

# The system session: each program in turn, its pids written to NAME.pids.
"$C" system -F $FREQ --no-kernel --name sys >/dev/null || fail "canopy system"
sleep 0.5 # the session's first reads: samples from here on
for n in $NAMES; do
  read -ra argv <<<"$(cmd $n)"
  if [ "$n" = cmake ]; then
    "${argv[@]}" >"$TMP/$n.pids"
  elif [ "$n" = fork ]; then
    for i in $(seq 80); do echo >"$TMP/fifo.$i"; done
    wait "${PARENTS[@]}" || fail "fork.sh parents failed"
    cat "$TMP"/parent.* >"$TMP/$n.pids"
  else
    "${argv[@]}" >/dev/null &
    echo $! >"$TMP/$n.pids"
    wait $! || fail "$n failed under the system session"
  fi
done
sleep 0.5
"$C" stop sys >/dev/null || fail "canopy stop sys"
echo "system session: ${SECONDS}s" >&2

# Each program in a session of its own (canopy run: from its exec on, children included).
for n in $NAMES; do
  read -ra argv <<<"$(cmd $n)"
  "$C" run -F $FREQ --no-kernel --name "run-$n" --group-by process --format json \
    -o "$TMP/run-$n.json" -- "${argv[@]}" >"$TMP/run-$n.out" 2>"$TMP/run-$n.err" ||
    fail "canopy run $n: $(cat "$TMP/run-$n.err")"
done

echo "runs: ${SECONDS}s" >&2
# The system session's symbols: every frame answered before its tree is read (it still
# samples the machine, so pending may not stay at 0: the tree is read after 60 s anyway).
wait_symbols sys || true
"$C" sessions --format json >"$TMP/sessions.json" || fail "canopy sessions"
"$C" tree sys --group-by process --format json -o "$TMP/sys.json" || fail "canopy tree sys"
echo "symbols and tree: ${SECONDS}s" >&2

$PY - "$TMP" "$NAMES" <<'PYEOF' || fail "system session against the programs' own sessions"
import json, math, re, sys
d, names = sys.argv[1], sys.argv[2].split()
ROOTS = {"_start", "_dl_start_user", "clone3", "__clone3", "start_thread", "clone", "__clone"}

def rooted(frames):  # root first
    return bool(frames) and (frames[0] in ROOTS or
                             (len(frames) > 1 and frames[1].startswith("__libc_start_main")))

def per_process(path):
    """{(comm, pid): [samples, reaching the start]} of a tree grouped by process."""
    out = {}
    def walk(node, frames, acc):
        frames = frames + [node["name"]]
        if node["self"]:
            acc[0] += node["self"]
            acc[1] += node["self"] if rooted(frames) else 0
        for c in node["children"]:
            walk(c, frames, acc)
    for r in json.load(open(path))["roots"]:
        m = re.match(r"^(.*) \[(\d+)\]$", r["name"])
        acc = out.setdefault((m.group(1), int(m.group(2))) if m else (r["name"], 0), [0, 0])
        for c in r["children"]:
            walk(c, [], acc)
    return out

sessions = {s["name"]: s for s in json.load(open(f"{d}/sessions.json"))["sessions"]}
sysp = per_process(f"{d}/sys.json")
mine, errs, rows = 0, [], []
allowed_nocfi = 0.0
for n in names:
    pids = {int(x) for x in open(f"{d}/{n}.pids").read().split()}
    s = [sum(v[i] for (c, p), v in sysp.items() if p in pids) for i in (0, 1)]
    # the run: the program's processes (fork: the children, whose pids its output lists)
    kids = {int(x) for x in open(f"{d}/run-{n}.out").read().split()} if n == "fork" else set()
    r = [sum(v[i] for (c, p), v in per_process(f"{d}/run-{n}.json").items()
             if (p in kids if kids else c == n)) for i in (0, 1)]
    o = sessions[f"run-{n}"]["unwind_outcomes"]
    u = max(sessions[f"run-{n}"]["user_stacks"], 1)
    nocfi, short = 100.0 * o["no_cfi"] / u, 100.0 * o["truncated_stack"] / u
    ps, pr = s[1] / max(s[0], 1), r[1] / max(r[0], 1)
    noise = 200 * math.sqrt(  # two sigma of the difference (two binomial samplings)
        ps * (1 - ps) / max(s[0], 1) + pr * (1 - pr) / max(r[0], 1))
    tol = max(3.0, 1.5 * noise)  # 3 sigma: six comparisons per run must not be flaky
    rows.append(f"{n:8s} {s[0]:7d} {100 * ps:7.1f}% {r[0]:7d} {100 * pr:7.1f}% (±{tol:4.1f})"
                f" {nocfi:6.1f}% {short:6.1f}%")
    mine += s[0]
    allowed_nocfi += s[0] * 0.02
    if s[0] < 50 or r[0] < 50:
        errs.append(f"{n}: too few samples (system {s[0]}, run {r[0]})")
    elif 100 * ps < 100 * pr - tol:
        errs.append(f"{n}: the system session reaches the start in {100 * ps:.1f}% of its "
                    f"samples, its own session in {100 * pr:.1f}% (tolerance {tol:.1f})")
    if pr < 0.8:
        errs.append(f"{n}: its own session reaches the start in {100 * pr:.1f}% only")
    # cmake: 88% before ld.so's entry code was known to be the first frame, 1-7% while
    # crti's _init and _fini of each library were not compiled; 0-1.2% remain, from code
    # that really has no CFI (nettle's and OpenSSL's cpuid in assembly) that every short
    # run goes through.
    if nocfi > (5 if n == "cmake" else 2):
        errs.append(f"{n}: {nocfi:.1f}% of its own session's stacks end without CFI")
# Stacks that went to libunwind, by cause (docs/perf-sampler.md, "Compiled CFI: what falls
# back"): the causes add up to the count in every session, and the programs' own runs
# (Debian's binaries: lazy binding through ld.so's trampoline and the PLT, cmake's
# library initialisers) print theirs.
for name, ses in sessions.items():
    w = ses["unwinder"]
    if sum(w.get("libunwind_causes", {}).values()) != w["libunwind"]:
        errs.append(f"{name}: libunwind causes {w.get('libunwind_causes')} do not add up to "
                    f"{w['libunwind']}")
for n in names:
    w = sessions[f"run-{n}"]["unwinder"]
    print(f"run-{n}: {w['libunwind']} of {w['dwarf']} stacks through libunwind "
          f"{w.get('libunwind_causes', {})}")
    # typical: 0, cmake 0-1.2% (the assembly above); 1-7% before crti's code compiled
    if w["libunwind"] > (0.05 if n == "cmake" else 0.02) * max(w["dwarf"], 50):
        errs.append(f"run-{n}: {w['libunwind']} of {w['dwarf']} stacks went to libunwind")
so = sessions["sys"]["unwind_outcomes"]
su = sessions["sys"]["user_stacks"]
others = max(su - mine, 0)
print("program  system  reach   run     reach   (tol)   run: no CFI  stack copy")
print("\n".join(rows))
print(f"system session: {su} user stacks ({others} of other processes): no CFI "
      f"{so['no_cfi']}, stack copy {so['truncated_stack']}, read fault {so['read_fault']}, "
      f"other {so['other']}")
if so["no_cfi"] > others + allowed_nocfi + 5:
    errs.append(f"the system session ends {so['no_cfi']} stacks without CFI: more than its "
                f"other processes' {others} stacks and 2% of the programs' {mine}")
for e in errs:
    print("FAIL:", e)
sys.exit(1 if errs else 0)
PYEOF
echo "PASS whole-system session against the programs' own sessions"
