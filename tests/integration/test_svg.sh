#!/usr/bin/env bash
# SVG flame graphs, rendered in headless Chromium (formats/svg_check.py): no
# script errors, rect widths = totals, frames match canopy's JSON tree by call path,
# zoom and search work, and the PNG screenshot's root row is as wide as its rects.
# Also: the icicle graph for --invert, a transformed tree, kernel frames coloured apart
# from library frames, names truncated with an ellipsis, small nodes merged.
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
CHECK=$(dirname "$0")/formats/svg_check.py
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz
V=$CANOPY_TEST_DATA/vectors
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || skip "chromium is not installed"

render() {
  local name=$1
  shift
  "$C" open "$@" --format svg -o "$TMP/$name.svg" || fail "$name: exit $?"
  "$C" open "$@" --format json >"$TMP/$name.json" || fail "$name: json exit $?"
  mkdir -p "$TMP/$name.d"
  python3 "$CHECK" "$TMP/$name.svg" "$TMP/$name.json" "$TMP/$name.d" >"$TMP/$name.out" ||
    fail "$name: $(tail -1 "$TMP/$name.out")"
  sed "s/^ok/PASS $name:/" "$TMP/$name.out"
}

render perf "$PERF"
render abc "$V/abc.folded"
render abc-invert "$V/abc.folded" --invert
render perf-transformed "$PERF" -t merge:run_round -t collapse:work_a
grep -q 'data-icicle="1"' "$TMP/abc-invert.svg" || fail "--invert did not draw an icicle graph"
grep -q 'data-icicle="0"' "$TMP/abc.svg" || fail "the tree is not a flame graph"

# kernel frames are distinguishable: above 0.1% they get their own colour family
python3 - "$TMP" <<'PY' || fail "kernel/library colours"
import random, subprocess, sys, os
tmp = sys.argv[1]
# a perf script profile with a big kernel share: library frames and kernel frames
lines = []
for i in range(200):
    lines.append("w 1 1 %d.%06d: 1000 cpu-clock:" % (1 + i // 1000, i % 1000 * 1000))
    if i % 2:
        lines.append("\tffffffff81000010 do_syscall_64+0x10 ([kernel.kallsyms])")
    lines.append("\t1111 compute+0x11 (/usr/bin/w)")
    lines.append("\t2222 main+0x22 (/usr/bin/w)")
    lines.append("")
open(os.path.join(tmp, "k.perf"), "w").write("\n".join(lines) + "\n")
PY
"$C" open "$TMP/k.perf" --format svg -o "$TMP/k.svg" || fail "kernel profile: exit $?"
python3 - "$TMP/k.svg" <<'PY' || fail "kernel frames are not coloured apart"
import re, sys
svg = open(sys.argv[1]).read()
fills = {}
for k, fill in re.findall(r'data-k="(\w+)"[^>]*>.*?fill="(hsl\([^"]+\))"', svg, re.S):
    fills.setdefault(k, set()).add(fill)
hue = lambda f: int(f[4:].split(",")[0])
assert "kernel" in fills and "lib" in fills, fills
assert all(200 <= hue(f) <= 280 for f in fills["kernel"]), fills
assert all(hue(f) < 60 for f in fills["lib"]), fills
PY
echo "PASS kernel frames blue-violet, library frames warm"

# long names are truncated with an ellipsis; the tooltip keeps the full name
long=$(printf 'very_long_function_name_%.0s' $(seq 1 12))
printf 'main;%s 5\nmain;other 5\n' "$long" >"$TMP/long.folded"
"$C" open "$TMP/long.folded" --format svg -o "$TMP/long.svg" || fail "long: exit $?"
grep -q "<title>$long" "$TMP/long.svg" || fail "tooltip lost the full name"
grep -q ">very_long_function_name_very_l[^<]*…</text>" "$TMP/long.svg" || fail "no ellipsis"
echo "PASS names truncated with an ellipsis, full name in the tooltip"

# nodes below 0.1% of the width are merged into one box
python3 -c '
for i in range(3000): print("main;tiny_%d 1" % i)
print("main;big 10000")' >"$TMP/small.folded"
"$C" open "$TMP/small.folded" --format svg -o "$TMP/small.svg" || fail "small: exit $?"
grep -q 'data-n="(3000 small frames)"' "$TMP/small.svg" || fail "small frames not merged"
[ "$(grep -c 'class="f"' "$TMP/small.svg")" -lt 10 ] || fail "too many boxes"
echo "PASS 3000 nodes below 0.1% merged into one box"
