#!/usr/bin/env bash
# Stack completeness on real programs (docs/perf-sampler.md, "Real programs"): Debian's
# python3 on a pure-Python CPU-bound script and xz -9 on generated data, ~3 s each, under
# `canopy run --no-daemon` with --unwind auto and --unwind dwarf, and under
# `perf record --call-graph dwarf -F 999` (+ perf script) as the oracle. For each, the
# fraction of samples whose stack reaches the program's root (_start, or a thread's
# start: clone3/start_thread; in a stripped program _start is the unnamed frame above
# __libc_start_main) is computed; auto must be within 2 points of dwarf and
# 5 points of perf. Set CANOPY_REAL_CC1=1 to also measure gcc's cc1 (-O2 -c on a C file
# of the repository; not asserted: slower). Prints the table.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
XZ=$(command -v xz || true)
[ -x "$PY" ] || fail "Debian's python3 ($PY) is missing (scripts/setup installs it)"
[ -n "$XZ" ] || fail "xz is missing (scripts/setup installs xz-utils)"
command -v perf >/dev/null || skip "perf not installed"
perf record -q -e cpu-clock -F 99 -o "$TMP/probe.data" -- true >/dev/null 2>&1 ||
  skip "perf record not permitted"
export CANOPY_SOCKET=$TMP/no-daemon.sock
SECS=${CANOPY_REAL_SECONDS:-3}

source "$(dirname "$0")/real_inputs.sh"
real_inputs "$TMP" "$SECS"

# frac KIND FILE: "PERCENT OK TOTAL" of samples whose root is _start (named, or the frame
# above __libc_start_main_impl) or a thread start.
frac() {
  $PY - "$1" "$2" <<'PYEOF'
import sys
ROOTS = {"_start", "clone3", "__clone3", "start_thread", "clone", "__clone"}
kind, path = sys.argv[1], sys.argv[2]
ok = tot = 0
def rooted(frames):  # root first
    return bool(frames) and (frames[0] in ROOTS or
                             (len(frames) > 1 and frames[1].startswith("__libc_start_main")))
if kind == "folded":  # root first: "a;b;c COUNT"
    for line in open(path):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        tot += int(n)
        ok += int(n) if rooted(stack.split(";")) else 0
else:  # perf script -F ip,sym: blocks of "ADDR SYM" lines, leaf first, blank-separated
    frames = []
    def done():
        global ok, tot
        if frames:
            tot += 1
            ok += rooted(frames[::-1])
    for line in open(path, errors="replace"):
        f = line.split()
        if not f:
            done(); frames = []
        elif line[0].isspace():
            frames.append(f[1].split("+")[0] if len(f) > 1 else "")
        else:
            done(); frames = []
    done()
print(f"{100.0 * ok / max(tot, 1):.1f} {ok} {tot}")
PYEOF
}

# measure NAME CMD...: fills R_<mode>[NAME] with "PERCENT OK TOTAL".
declare -A R_auto R_dwarf R_perf
measure() {
  local name=$1; shift
  for mode in auto dwarf; do
    "$CANOPY_BIN" run --no-daemon --no-kernel --unwind "$mode" --format folded \
      -o "$TMP/$name-$mode.folded" -- "$@" >/dev/null 2>"$TMP/$name-$mode.err" ||
      fail "canopy run --unwind $mode $name: $(cat "$TMP/$name-$mode.err")"
    local r; r=$(frac folded "$TMP/$name-$mode.folded")
    [ "$mode" = auto ] && R_auto[$name]=$r || R_dwarf[$name]=$r
  done
  perf record -q -e cpu-clock:u -F 999 --call-graph dwarf -o "$TMP/$name.data" -- "$@" \
    >/dev/null 2>"$TMP/$name-perf.err" || fail "perf record $name: $(cat "$TMP/$name-perf.err")"
  perf script -i "$TMP/$name.data" -F ip,sym >"$TMP/$name.perf" 2>/dev/null
  R_perf[$name]=$(frac perf "$TMP/$name.perf")
}

measure python3 "$PY" "$TMP/busy.py"
measure xz "$XZ" -9 -T1 -k -f -c "$TMP/data.txt"
names="python3 xz"
if [ "${CANOPY_REAL_CC1:-}" = 1 ]; then
  # aggregate/'s sources, one gcc each: cc1 takes ~all of the time.
  SRC=$(cd "$(dirname "$0")/../.." && pwd)
  measure cc1 sh -c 'for f in "$0"/aggregate/*.c; do
      gcc -O2 -c -I"$0"/common -I"$0"/aggregate/include -I"$0"/aggregate "$f" -o /dev/null || exit 1
    done' "$SRC"
  names="$names cc1"
fi

printf '%-8s %22s %22s %22s\n' program "canopy auto" "canopy dwarf" "perf dwarf"
bad=0
for n in $names; do
  read -r pa oa ta <<<"${R_auto[$n]}"
  read -r pd od td <<<"${R_dwarf[$n]}"
  read -r pp op tp <<<"${R_perf[$n]}"
  printf '%-8s %8s%% (%5s/%5s) %8s%% (%5s/%5s) %8s%% (%5s/%5s)\n' "$n" "$pa" "$oa" "$ta" \
    "$pd" "$od" "$td" "$pp" "$op" "$tp"
  [ "$ta" -ge 300 ] && [ "$td" -ge 300 ] && [ "$tp" -ge 300 ] || { echo "FAIL: $n: too few samples" >&2; bad=1; }
  [ "$n" = cc1 ] && continue
  $PY -c "import sys; a,d,p=map(float,sys.argv[1:]); sys.exit(0 if a >= d - 2 and a >= p - 5 else 1)" \
    "$pa" "$pd" "$pp" || { echo "FAIL: $n: auto $pa% < dwarf $pd% - 2 or perf $pp% - 5" >&2; bad=1; }
done
[ -z "${CANOPY_REAL_KEEP:-}" ] || cp "$TMP"/*.folded "$TMP"/*.perf "$CANOPY_REAL_KEEP"/
[ "$bad" = 0 ] || exit 1
echo "PASS real programs"
