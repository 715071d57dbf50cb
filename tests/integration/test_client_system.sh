#!/usr/bin/env bash
# A whole-system session through canopyd and the client, as root: `canopy system` starts
# it, a workload started afterwards is sampled with its pid and comm, `--only-pid` and
# `--group-by process` find it, its shares are right, and `canopy stop` keeps the data.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "a system session needs root or CAP_PERFMON"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock

D_PID=
W_PID=
on_exit() {
  local rc=$?
  kill $D_PID $W_PID 2>/dev/null || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap on_exit EXIT
start_canopyd

S=$("$C" system -F 499 --name everything) || fail "canopy system: $S"
[ -n "$S" ] || fail "canopy system printed no session id"
"$WL" --rounds 60 >"$TMP/wl.out" &
W_PID=$!
wait "$W_PID"
W=$W_PID
W_PID=
sleep 0.5 # the loop's next pump takes the last records

"$C" tree everything --only-pid "$W" --format json >"$TMP/only.json" || fail "tree --only-pid"
python3 - "$TMP/only.json" <<'PY' || fail "system session: workload shares"
import json, sys
d = json.load(open(sys.argv[1]))
assert d.get("session") and d.get("event"), d.keys()
total = d["total"]
inc = {}
def walk(n, path):
    path = path + [n["name"]]
    for f in set(path):
        if f.startswith("work_"):
            inc[f] = inc.get(f, 0) + n["self"]
    for c in n["children"]:
        walk(c, path)
for r in d["roots"]:
    walk(r, [])
shares = {f: round(100.0 * v / total, 1) for f, v in inc.items()}
print("only-pid shares:", shares, "of", total, file=sys.stderr)
assert total > 100, total
for f, want in (("work_a", 50), ("work_b", 30), ("work_c", 20)):
    assert abs(shares.get(f, 0) - want) <= 6, (f, shares)
PY

"$C" tree everything --group-by process --format json >"$TMP/proc.json" || fail "tree --group-by process"
python3 - "$TMP/proc.json" "$W" <<'PY' || fail "system session: process roots"
import json, sys
d = json.load(open(sys.argv[1]))
want = "[%s]" % sys.argv[2]
roots = [r["name"] for r in d["roots"]]
mine = [r for r in roots if r.endswith(want)]
print("process roots (first 5):", roots[:5], file=sys.stderr)
assert mine and mine[0].startswith("wl_shares_fp"), roots
PY

"$C" stop everything >/dev/null || fail "canopy stop"
"$C" sessions --format json >"$TMP/s.json"
state=$(json "$TMP/s.json" '[s["state"] for s in d["sessions"] if s["name"] == "everything"][0]')
target=$(json "$TMP/s.json" '[s["target"] for s in d["sessions"] if s["name"] == "everything"][0]')
[ "$state" = stopped ] || [ "$state" = saved ] || fail "state after stop: $state"
[ "$target" = system ] || fail "target of a system session: $target"
"$C" tree everything --only-pid "$W" --format json | python3 -c '
import json, sys; assert json.load(sys.stdin)["total"] > 100' || fail "data lost after stop"
echo "PASS system session"
