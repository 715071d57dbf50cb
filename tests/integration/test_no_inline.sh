#!/usr/bin/env bash
# --no-inline (docs/calltree.md §4.5) on a real binary with inline frames: python3 calling
# math.sin, where libm's __sin_fma inlines do_sin/do_sincos (libc6-dbg provides the DWARF).
# By default the inlined functions are call nodes below __sin_fma; with --no-inline they
# fold into it, in the tree, folded and pprof outputs, with the same total.
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/no-daemon.sock
command -v python3 >/dev/null || fail "python3 missing"

"$C" run -o "$TMP/sin.canopy" -- python3 -c '
import math, time
t = time.time(); s = 0.0
while time.time() - t < 1.0:
    for i in range(20000):
        s += math.sin(0.1 + i)
' 2>"$TMP/run.err" || fail "canopy run: $(cat "$TMP/run.err")"

"$C" open "$TMP/sin.canopy" --format json >"$TMP/in.json" || fail "open: exit $?"
"$C" open "$TMP/sin.canopy" --format json --no-inline >"$TMP/no.json" || fail "--no-inline: exit $?"
python3 - "$TMP/in.json" "$TMP/no.json" <<'PY' || fail "inline frames"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
INL = {"do_sin", "do_cos", "do_sincos"}
def names(d):
    out, todo = {}, list(d["roots"])
    while todo:
        n = todo.pop()
        out.setdefault(n["name"], []).append(n)
        todo += n.get("children", [])
    return out
na, nb = names(a), names(b)
assert "__sin_fma" in na, "no __sin_fma in the profile"
under = [c["name"] for n in na["__sin_fma"] for c in n.get("children", [])]
assert INL & set(under), f"default: no inline frame below __sin_fma: {under}"
assert not INL & set(nb), f"--no-inline: inline frames remain: {INL & set(nb)}"
assert a["total"] == b["total"], (a["total"], b["total"])
sa = sum(n["total"] for n in na["__sin_fma"])
sb = sum(n["self"] for n in nb["__sin_fma"])
kids = sum(c["total"] for n in nb["__sin_fma"] for c in n.get("children", []))
assert abs(sa - sb - kids) < 1e-6, (sa, sb, kids)
print(f"__sin_fma total {sa}: self {sb} with --no-inline, inline callees {sorted(INL & set(under))}")
PY
echo "PASS --no-inline tree"

"$C" open "$TMP/sin.canopy" --no-inline --format folded >"$TMP/no.folded" || fail "folded: exit $?"
grep -q '__sin_fma' "$TMP/no.folded" || fail "folded: no __sin_fma"
! grep -qE ';do_(sin|cos|sincos)( |;)' "$TMP/no.folded" || fail "folded: inline frames remain"
"$C" open "$TMP/sin.canopy" --no-inline -o "$TMP/no.pb.gz" || fail "pprof: exit $?"
"$C" open "$TMP/no.pb.gz" --format folded >"$TMP/pb.folded" || fail "reopen pprof: exit $?"
! grep -qE ';do_(sin|cos|sincos)( |;)' "$TMP/pb.folded" || fail "pprof: inline frames remain"
echo "PASS --no-inline folded, pprof"
