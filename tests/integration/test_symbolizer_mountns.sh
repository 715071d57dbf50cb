#!/usr/bin/env bash
# A process in another mount namespace (as in a container): its executable exists only on
# a tmpfs mounted inside that namespace, so the path in its maps names nothing in ours.
# canopy must read it through /proc/PID/root and name the workload's functions.
source "$(dirname "$0")/lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
DIR=/tmp/canopy-ns-$$
unshare --mount --propagation private sh -c \
  "mkdir -p $DIR && mount -t tmpfs none $DIR && cp '$WL' $DIR/app && exec $DIR/app 8" \
  >/dev/null 2>"$TMP/ns.err" &
NS_PID=$!
trap 'rc=$?; kill $NS_PID 2>/dev/null || true; wait 2>/dev/null || true; rmdir "$DIR" 2>/dev/null || true; finish_tmp $rc' EXIT
for ((i = 0; i < 50; i++)); do
  [ "$(readlink /proc/$NS_PID/exe 2>/dev/null)" = "$DIR/app" ] && break
  sleep 0.1
done
[ "$(readlink /proc/$NS_PID/exe 2>/dev/null)" = "$DIR/app" ] ||
  skip "cannot start a process in its own mount namespace: $(cat "$TMP/ns.err")"
[ ! -e "$DIR/app" ] || fail "the namespace's tmpfs is visible here; the test would prove nothing"

"$CANOPY_BIN" tree --pid "$NS_PID" --duration 2s --no-daemon --format folded \
  >"$TMP/t.folded" 2>"$TMP/t.err" || fail "tree --pid: $(cat "$TMP/t.err")"
python3 - "$TMP/t.folded" <<'PY' || fail "functions of a binary seen only through /proc/PID/root"
import sys
total, inc = 0, {}
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    n = int(n)
    total += n
    for f in set(stack.split(";")):
        inc[f] = inc.get(f, 0) + n
shares = {f: round(100.0 * inc.get(f, 0) / total, 1) for f in ("work_a", "work_b", "work_c", "burn")}
print("shares:", shares, "of", total, file=sys.stderr)
assert total > 200, total
assert not any(f.startswith("app+0x") for f in inc), "unresolved frames in app"
for f, want in (("work_a", 50), ("work_b", 30), ("work_c", 20)):
    assert abs(shares[f] - want) <= 6, (f, shares)
PY
echo "PASS symbolized through /proc/PID/root"
