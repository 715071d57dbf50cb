#!/usr/bin/env bash
# The sampler side by side with `perf record` (Debian's linux-perf) on the same workload:
# function shares (samples whose stack contains the function, over samples reaching main)
# agree within ±5 points, with frame pointers (perf -g vs --unwind fp) and with DWARF
# (perf --call-graph dwarf vs --unwind dwarf). Our samples come from test_sampler's
# --record mode, which runs the command the way `canopy run` does.
source "$(dirname "$0")/lib.sh"
REC="$CANOPY_BUILD_DIR/tests/test_sampler"
WL="$CANOPY_WORKLOADS/wl_shares_fp"
[ -x "$REC" ] || fail "missing $REC"
[ -x "$WL" ] || fail "missing $WL"
command -v perf >/dev/null || skip "perf not installed"
perf record -q -e cpu-clock -F 999 -g -o "$TMP/probe.data" -- true >/dev/null 2>&1 ||
  skip "perf record not permitted"

# period-weighted folded stacks from perf script (leaf-first frames) -> "a;b;c W" lines
perf_folded() {
  perf script -i "$1" -F period,ip,sym 2>/dev/null | awk '
    function flush() { if (n) { s = f[n]; for (i = n - 1; i >= 1; i--) s = s ";" f[i]; print s " " w } n = 0 }
    NF == 0 { flush(); next }
    /^[ ]/ && NF == 1 { flush(); w = $1; next }
    { n++; f[n] = $2 }
    END { flush() }'
}

# share FILE FUNC: percent of the weight of stacks reaching main that contain ";FUNC;" or end in it
share() {
  awk -v fn="$2" '{ w = $NF; $NF = ""; sub(/ $/, ""); st = ";" $0 ";"
                    if (index(st, ";main;")) { all += w; if (index(st, ";" fn ";")) hit += w } }
                  END { if (all == 0) print "0"; else printf "%.1f\n", 100 * hit / all }' "$1"
}

compare() { # mode perf-callgraph funcs...
  local mode=$1 cg=$2; shift 2
  perf record -q -e cpu-clock -F 999 $cg -o "$TMP/$mode.data" -- "$WL" 3 >/dev/null 2>&1 ||
    fail "perf record ($cg) failed"
  perf_folded "$TMP/$mode.data" >"$TMP/perf-$mode.folded"
  "$REC" --record "$mode" "$WL" 3 >"$TMP/ours-$mode.folded" 2>"$TMP/ours-$mode.err" ||
    fail "sampler --record $mode failed: $(cat "$TMP/ours-$mode.err")"
  grep -v '^rounds ' "$TMP/ours-$mode.folded" >"$TMP/ours-$mode.f2"
  for f in "$@"; do
    local p o
    p=$(share "$TMP/perf-$mode.folded" "$f")
    o=$(share "$TMP/ours-$mode.f2" "$f")
    echo "$mode $f: perf $p% canopy $o%"
    awk -v p="$p" -v o="$o" 'BEGIN { d = p - o; if (d < 0) d = -d; exit !(d <= 5) }' ||
      fail "$mode: share of $f differs by more than 5 points (perf $p%, canopy $o%)"
  done
}

compare fp -g burn work_b work_c
compare dwarf "--call-graph dwarf,8192" work_a work_b_inner work_c burn
echo "sampler agrees with perf record"
