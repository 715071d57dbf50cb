#!/usr/bin/env bash
# The client against a real canopyd (on a private socket and state dir): run through the
# daemon's session, sessions/status JSON, tree with QUERY options (--group-by, --last,
# --tid, transforms), lines, save + open, attach/stop/rm, tree --pid with a temporary
# session, the progress line on a terminal, timeline on a session, and the errors when
# no daemon answers.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock

D_PID=
W_PID=
trap 'rc=$?; kill $D_PID $W_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd

# ---- status ------------------------------------------------------------------------------
"$C" status --format json >"$TMP/status.json" || fail "status"
[ "$(json "$TMP/status.json" 'sorted(k for k in ("version","uptime_s","sessions","samples_per_s","lost","rss_bytes","event_loop") if k in d) == sorted(("version","uptime_s","sessions","samples_per_s","lost","rss_bytes","event_loop"))')" = True ] ||
  fail "status JSON keys: $(cat "$TMP/status.json")"
[ -z "${CANOPY_EVENT_LOOP:-}" ] ||
  [ "$(json "$TMP/status.json" 'd["event_loop"]')" = "$CANOPY_EVENT_LOOP" ] ||
  fail "event loop is not $CANOPY_EVENT_LOOP: $(cat "$TMP/status.json")"
"$C" status | grep_all '^canopyd ' || fail "status text"

# ---- run through the daemon --------------------------------------------------------------
"$C" run --unwind dwarf --format json -o "$TMP/run.json" -- "$WL" --rounds 60 >/dev/null \
  2>"$TMP/run.err" || fail "run via daemon: $(cat "$TMP/run.err")"
grep -q 'in-process' "$TMP/run.err" && fail "run went in-process with a daemon up"
SID=$(json "$TMP/run.json" 'd["session"]')
[[ "$SID" == s* ]] || fail "run JSON session '$SID'"
TOTAL=$(json "$TMP/run.json" 'd["total"]')
python3 - "$TMP/run.json" <<'PY' || fail "run via daemon: shares off"
import json, sys
d = json.load(open(sys.argv[1]))
sums = {}
def walk(n, seen):
    if n["name"].startswith("work_") and n["name"] not in seen:
        sums[n["name"]] = sums.get(n["name"], 0) + n["total"]
        seen = seen | {n["name"]}
    for c in n.get("children", []):
        walk(c, seen)
for r in d["roots"]:
    walk(r, frozenset())
got = {k: 100 * sums.get(k, 0) / d["total"] for k in ("work_a", "work_b", "work_c")}
print("daemon run:", {k: round(v, 1) for k, v in got.items()})
sys.exit(any(abs(got[k] - w) > 5 for k, w in (("work_a", 50), ("work_b", 30), ("work_c", 20))))
PY
"$C" run -o "$TMP/x.json" -- sh -c 'exit 5' 2>/dev/null && rc=0 || rc=$?
[ "$rc" = 5 ] || fail "run via daemon: exit status $rc, expected 5"
# --rm: the tree is printed and the daemon keeps no session of it.
n_before=$("$C" sessions --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')
"$C" run --rm --format json -o "$TMP/rm.json" -- "$WL" --rounds 5 >/dev/null 2>"$TMP/rm.err" ||
  fail "run --rm: $(cat "$TMP/rm.err")"
RMID=$(json "$TMP/rm.json" 'd["session"]')
n_after=$("$C" sessions --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')
[ "$n_before" = "$n_after" ] || fail "run --rm left a session ($n_before -> $n_after)"
grep -q 'stays in canopyd' "$TMP/rm.err" && fail "run --rm says the session stays"
expect_fail 1 "$C" tree "$RMID"
echo "PASS run via daemon"

# ---- sessions ----------------------------------------------------------------------------
"$C" sessions --format json >"$TMP/sessions.json" || fail "sessions"
python3 - "$TMP/sessions.json" "$SID" <<'PY' || fail "sessions JSON: $(cat "$TMP/sessions.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = [x for x in d["sessions"] if x["id"] == sys.argv[2]]
assert len(s) == 1, s
s = s[0]
for k in ("id", "name", "target", "state", "event", "freq", "samples", "lost", "threads", "started"):
    assert k in s, k
assert s["state"] in ("exited", "stopped"), s["state"]
# its tables were compacted when sampling ended (the trees below read the compacted ones)
assert s["compactions"] >= 1, s.get("compactions")
assert s["freq"] == 999, s["freq"]
assert isinstance(s["target"], dict) and s["target"]["pid"] > 0
PY
"$C" sessions | grep_all -E "^$SID " || fail "sessions text has no $SID"

# ---- tree with QUERY options on the session ------------------------------------------------
"$C" tree "$SID" --format json >"$TMP/t.json" || fail "tree SESSION"
[ "$(json "$TMP/t.json" 'd["total"]')" = "$TOTAL" ] || fail "tree total differs from run's"
"$C" tree "$SID" --group-by thread --format json >"$TMP/g.json" || fail "--group-by thread"
TID=$(json "$TMP/g.json" 'd["roots"][0]["name"].rsplit("[",1)[1].rstrip("]")')
[[ "$TID" =~ ^[0-9]+$ ]] || fail "--group-by thread root: $(json "$TMP/g.json" 'd["roots"][0]["name"]')"
"$C" tree "$SID" --tid "$TID" --format json >"$TMP/tid.json" || fail "--tid"
[ "$(json "$TMP/tid.json" 'd["total"]')" = "$TOTAL" ] || fail "--tid of the only thread != total"
"$C" tree "$SID" --tid 1 --format json >"$TMP/tid1.json" || fail "--tid 1"
[ "$(json "$TMP/tid1.json" 'd["total"]')" = 0 ] || fail "--tid 1 should be empty"
"$C" tree "$SID" --last 0.2s --format json >"$TMP/last.json" || fail "--last"
[ "$(json "$TMP/last.json" "0 < d['total'] < $TOTAL")" = True ] || fail "--last 0.2s total"
"$C" tree "$SID" -t focus-func:work_b --format json >"$TMP/ff.json" || fail "-t focus-func"
[ "$(json "$TMP/ff.json" 'd["roots"][0]["name"] == "work_b" and d["transforms"] == ["focus-func:work_b"]')" = True ] ||
  fail "focus-func result"
"$C" tree "$SID" --invert --format json >"$TMP/inv.json" || fail "--invert"
[ "$(json "$TMP/inv.json" 'd["view"] == "inverted" and d["roots"][0]["name"] == "burn"')" = True ] ||
  fail "inverted view"
expect_fail 2 "$C" tree "$SID" -t merge:no_such_function
expect_fail 1 "$C" tree no-such-session
expect_fail 2 "$C" tree "$SID" --bogus
echo "PASS tree queries"

# ---- lines, save + open, timeline ---------------------------------------------------------
"$C" lines "$SID" burn --format json >"$TMP/lines.json" || fail "lines"
python3 - "$TMP/lines.json" "$CANOPY_SOURCE_DIR/tests/workloads/shares.c" <<'PY' ||
import json, sys
d = json.load(open(sys.argv[1]))
src = open(sys.argv[2]).read().splitlines()
# burn's body: from its definition line to the first line that is a lone "}".
first = next(i for i, l in enumerate(src, 1) if "burn(uint64_t x)" in l)
last = next(i for i, l in enumerate(src, 1) if i > first and l == "}")
assert d["function"] == "burn" and d["lib"] == "wl_shares_fp", d
assert d["file"].endswith("shares.c"), d.get("file")
assert d["lines"] and all(first <= l["line"] <= last for l in d["lines"]), (first, last, d["lines"])
assert abs(sum(a["self"] for a in d["addresses"]) - sum(l["self"] for l in d["lines"])) < 1e-6
PY
  fail "lines JSON: $(cat "$TMP/lines.json")"
"$C" lines "$SID" burn | grep_all 'LINE' || fail "lines text"
"$C" save "$SID" -o "$TMP/s.canopy" || fail "save"
"$C" open "$TMP/s.canopy" --format json >"$TMP/o.json" || fail "open the saved session"
[ "$(json "$TMP/o.json" 'd["total"]')" = "$TOTAL" ] || fail "saved session total differs"
"$C" save "$SID" -o "$TMP/s.folded" || fail "save folded"
grep -q 'work_a;burn ' "$TMP/s.folded" || fail "folded save"
"$C" timeline "$SID" --format json >"$TMP/tl.json" || fail "timeline SESSION"
[ "$(json "$TMP/tl.json" 'd["unit"] == "us" and len(d["calls"]) > 0')" = True ] || fail "timeline"
echo "PASS lines, save, timeline"

# ---- attach, stop, rm; tree --pid with a temporary session; progress ------------------------
"$WL" 30 >/dev/null &
W_PID=$!
AID=$("$C" attach "$W_PID" --name wl -F 499) || fail "attach"
[[ "$AID" == s* ]] || fail "attach printed '$AID'"
sleep 1.5
"$C" tree wl --format json >"$TMP/a.json" || fail "tree by name"
[ "$(json "$TMP/a.json" 'd["samples"] > 0')" = True ] || fail "attached session has no samples"
"$C" sessions --format json | grep_all '"name":"wl"' || fail "sessions lacks wl"
"$C" stop wl | grep_all "$AID" || fail "stop"
[ "$(json <("$C" sessions --format json) "[s['state'] for s in d['sessions'] if s['id']=='$AID'][0]")" = stopped ] ||
  fail "stopped session's state"
"$C" rm wl || fail "rm"
expect_fail 1 "$C" tree wl
before=$("$C" sessions --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')
script -qec "env NO_COLOR=1 $C tree --pid $W_PID --duration 1 -o $TMP/pid.txt" /dev/null >"$TMP/tty.out" ||
  fail "tree --pid on a terminal: $(cat "$TMP/tty.out")"
grep -q 'main' "$TMP/pid.txt" || fail "tree --pid output: $(cat "$TMP/pid.txt")"
grep -qE '[0-9.]+s +[0-9]+ samples +[0-9]+ lost' "$TMP/tty.out" ||
  fail "no progress line on the terminal: $(cat -v "$TMP/tty.out")"
after=$("$C" sessions --format json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["sessions"]))')
[ "$before" = "$after" ] || fail "tree --pid left its temporary session behind"
kill "$W_PID"
echo "PASS attach, stop, rm, tree --pid"

# ---- finding the daemon: --socket, then $CANOPY_SOCKET, then /run/canopy/canopy.sock if it
# exists, then $XDG_RUNTIME_DIR/canopy.sock ------------------------------------------------
CANOPY_SOCKET=$TMP/nothing.sock "$C" status --socket "$CANOPY_SOCKET" >/dev/null ||
  fail "--socket does not win over \$CANOPY_SOCKET"
expect_fail 1 env CANOPY_SOCKET="$TMP/nothing.sock" "$C" status
if [ ! -e /run/canopy/canopy.sock ]; then
  mkdir -p "$TMP/xdg"
  ln -s "$CANOPY_SOCKET" "$TMP/xdg/canopy.sock"
  env -u CANOPY_SOCKET XDG_RUNTIME_DIR="$TMP/xdg" "$C" status >/dev/null ||
    fail "\$XDG_RUNTIME_DIR/canopy.sock not found"
fi
# top on an unknown session fails before taking the screen.
script -qec "$C top no-such-session" /dev/null >"$TMP/top.out" && rc=0 || rc=$?
[ "$rc" = 1 ] || fail "top no-such-session exited $rc: $(cat "$TMP/top.out")"
grep -q 'unknown session' "$TMP/top.out" || fail "top no-such-session: $(cat "$TMP/top.out")"
echo "PASS socket discovery"

# ---- no daemon ------------------------------------------------------------------------------
kill -TERM "$D_PID"
wait "$D_PID" 2>/dev/null || true
expect_fail 1 "$C" sessions
expect_fail 1 "$C" status
expect_fail 1 "$C" attach 1
expect_fail 1 "$C" tree s1
echo "PASS no daemon"
