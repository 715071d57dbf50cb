#!/usr/bin/env bash
# JIT code: a node process run with --perf-basic-prof writes /tmp/perf-PID.map. Its
# sampled instruction pointers (perf record, cpu-clock) that fall in JIT code resolve
# through the symbolizer's perf-map reader to the JS function that burns the CPU.
source "$(dirname "$0")/lib.sh"
Q="$CANOPY_BUILD_DIR/tests/sym_query"
command -v node >/dev/null || skip "node not installed"
command -v perf >/dev/null || skip "perf not installed"
cat >"$TMP/hot.js" <<'JS'
function canopyHotLoop(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s = (s + Math.imul(i, 2654435761)) | 0;
  return s;
}
const end = Date.now() + 4000;
let acc = 0;
while (Date.now() < end) acc ^= canopyHotLoop(100000);
console.log(acc);
JS
node --perf-basic-prof --no-turbo-inlining "$TMP/hot.js" >/dev/null &
pid=$!
trap 'rc=$?; kill $pid 2>/dev/null || true; rm -f /tmp/perf-$pid.map; finish_tmp $rc' EXIT
sleep 1
perf record -q -e cpu-clock -F 999 -p "$pid" -o "$TMP/perf.data" -- sleep 1.5 >/dev/null 2>&1 ||
  skip "perf record failed"
perf script -i "$TMP/perf.data" -F ip 2>/dev/null | awk '{print $1}' >"$TMP/ips"
[ -s "$TMP/ips" ] || fail "no samples"
[ -s "/tmp/perf-$pid.map" ] || fail "node wrote no perf map"
"$Q" --worker --jit "$pid" <"$TMP/ips" >"$TMP/names"
hits=$(grep -c canopyHotLoop "$TMP/names" || true)
total=$(wc -l <"$TMP/ips")
echo "samples $total, in canopyHotLoop $hits"
sort "$TMP/names" | uniq -c | sort -rn | head -5
[ "$hits" -gt $((total / 4)) ] || fail "canopyHotLoop not found by name in the JIT samples"
echo "ok"
