#!/usr/bin/env bash
# Sub-interpreters (issue 20, docs/python.md "Sub-interpreters"), through a real canopyd:
# `canopy run` of tests/data/python/work_subinterp.py under each pyenv CPython 3.12 and 3.13,
# whose main thread spins in main_spin while a worker thread spins in sub_spin inside a
# sub-interpreter the worker created. Asserted per version, from the JSON tree: sub_spin's
# samples (≥ 30 % of the session's) lie under a "[python: sub-interpreter N]" frame (N > 0)
# under the worker's own frames in the main interpreter (Thread.run > main.<locals>.worker); main_spin's (≥ 30 %) under no such frame; no stack holds both
# functions (never one thread's Python frames in another's stack); at most 1 % under
# "[python: sub-interpreter ?]" (a thread caught entering or leaving run_string, neither of
# its states active). The session's state in
# `canopy sessions` says the process runs sub-interpreters. Prints the shares.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "Python frames need a BPF program: root (CAP_BPF, CAP_PERFMON)"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
WL=$(dirname "$0")/../data/python/work_subinterp.py
PY=/usr/bin/python3

D_PID=
trap finish_daemon EXIT
start_canopyd

nver=0
for v in 3.12 3.13; do
  for PYV in /root/.pyenv/versions/$v.*/bin/python$v; do
    [ -x "$PYV" ] || continue
    nver=$((nver + 1))
    "$C" run -F 999 --name "sub-$v" --format json -o "$TMP/sub-$v.json" -- "$PYV" "$WL" 3 own \
      >"$TMP/sub-$v.out" 2>"$TMP/sub-$v.err" || fail "canopy run $PYV: $(cat "$TMP/sub-$v.err")"
    "$C" sessions --format json >"$TMP/sessions.json" || fail "canopy sessions"
    $PY - "$TMP/sub-$v.json" "$TMP/sessions.json" "sub-$v" <<'PYEOF' || fail "canopy run $PYV: sub-interpreter frames"
import json, re, sys
t = json.load(open(sys.argv[1]))
sessions = json.load(open(sys.argv[2]))["sessions"]
state = [s for s in sessions if s.get("name") == sys.argv[3]][0].get("python", {}).get("state", "?")
MARK = re.compile(r"^\[python: sub-interpreter (\d+|\?)\]$")
tot = sub = sub_marked = main = main_marked = both = unknown = 0
ids = set()
stack = [(n, []) for n in t["roots"]]
while stack:
    n, path = stack.pop()
    path = path + [n["name"]]
    s = n.get("self", 0)
    if s:
        tot += s
        marks = [MARK.match(x).group(1) for x in path if MARK.match(x)]
        if "?" in marks:
            unknown += s
        if "sub_spin" in path:
            sub += s
            i = path.index("sub_spin")
            m = [k for k in range(i) if MARK.match(path[k])]
            if m and marks[-1] not in ("?", "0") and "main.<locals>.worker" in path[:m[-1]]:
                sub_marked += s
                ids.add(marks[-1])
        if "main_spin" in path:
            main += s
            main_marked += s if marks else 0
        if "sub_spin" in path and "main_spin" in path:
            both += s
    stack.extend((c, path) for c in n.get("children", []))
print("%s: %d samples; sub_spin %d (%d under a sub-interpreter frame, ids %s), main_spin %d "
      "(%d under one), both %d, unknown %d; state: %s"
      % (sys.argv[3], tot, sub, sub_marked, sorted(ids), main, main_marked, both, unknown, state))
ok = True
if sub * 100 < tot * 30 or main * 100 < tot * 30:
    print("FAIL: too few samples in sub_spin or main_spin"); ok = False
if sub_marked != sub:
    print("FAIL: sub_spin samples without their sub-interpreter frame"); ok = False
if main_marked or both:
    print("FAIL: a wrong interpreter"); ok = False
# a thread between its two states (entering or leaving run_string: neither active) is unknown
if unknown * 100 > tot:
    print("FAIL: more than 1%% of the samples of an unknown interpreter"); ok = False
if "sub-interpreters" not in state:
    print("FAIL: the session's state does not say so"); ok = False
sys.exit(0 if ok else 1)
PYEOF
  done
done
if [ "$nver" -lt 2 ]; then
  [ "${CI:-}" = true ] && fail "only $nver of CPython 3.12, 3.13 under /root/.pyenv/versions"
  [ "$nver" = 0 ] && skip "no CPython 3.12 or 3.13 under /root/.pyenv/versions"
fi
kill -0 "$D_PID" || fail "canopyd died"
