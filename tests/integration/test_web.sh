#!/usr/bin/env bash
# canopy web (docs/web.md) in a real browser: Debian's chromium, headless, driven through
# the DevTools protocol by web_browser.js (node, no npm package). A real canopyd, a live
# session of wl_shares_fp, `canopy web SESSION`: the page shows work_a at 50 ± 5 %, the
# total grows across refreshes, expanded nodes and the selection survive them, keyboard,
# flame graph hover and zoom, focus on function / subtree, merge, invert by clicking, pause.
# Outside the browser: 403 without the token (or with a wrong one), the socket bound to
# 127.0.0.1 only, /api/tree's bytes equal to `canopy tree --format json` for the same
# QUERY (file and stopped session), bad queries answered 400 with the parser's message.
# Then `canopy web FILE` on a folded file with a function named `<img src=x onerror=alert(1)>`:
# shown as text, no dialog; and a change the server refuses is undone with its message.
# Then (issue 21's views) on the session saved to a file: the function list, callers and
# callees, per-line costs, every transform of the menu, search, the thread picker, a range
# dragged on the activity graph, the view kept in the URL over a reload, downloads in every
# format (/api/export = canopy tree --format F) and the Firefox Profiler link; a JSON tree
# in ns shows times; `canopy web BASE NEW` is canopy diff's tree in red and blue.
# Screenshots of every step are checked not to be blank.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_shares_fp
WAITS=$CANOPY_WORKLOADS/wl_waits_fp
[ -x "$WL" ] && [ -x "$WAITS" ] || fail "workloads $WL, $WAITS not built"
C=$CANOPY_BIN
need_browser
export CANOPY_SOCKET=$TMP/d.sock

D_PID=
W_PID= W2_PID= W3_PID=
WEB_PID=
trap 'rc=$?; kill $WEB_PID $W_PID $W2_PID $W3_PID $D_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd

# start_web ARGS...: canopy web in the background; sets WEB_PID, URL, BASE, TOKEN, PORT.
start_web() {
  rm -f "$TMP/web.out" # the redirection below happens in the child, later than this shell looks
  "$C" web "$@" >"$TMP/web.out" 2>"$TMP/web.log" &
  WEB_PID=$!
  for ((i = 0; i < 100; i++)); do [ -s "$TMP/web.out" ] && break; sleep 0.1; done
  URL=$(head -n 1 "$TMP/web.out")
  [[ "$URL" =~ ^http://127\.0\.0\.1:([0-9]+)/\?token=([0-9a-f]{32})$ ]] ||
    fail "canopy web's first line is not the URL: '$URL' $(cat "$TMP/web.log")"
  PORT=${BASH_REMATCH[1]}
  TOKEN=${BASH_REMATCH[2]}
  BASE=http://127.0.0.1:$PORT
}

stop_web() {
  kill -TERM "$WEB_PID" # (a background job of a script ignores SIGINT)
  local rc=0
  wait "$WEB_PID" || rc=$?
  [ "$rc" = 0 ] || fail "canopy web exited $rc after SIGTERM: $(cat "$TMP/web.log")"
  WEB_PID=
}

code() { curl -s -o /dev/null -w '%{http_code}' "$1"; }

# ---- a live session of the known workload ------------------------------------------------
"$WL" 60 >/dev/null &
W_PID=$!
SID=$("$C" attach "$W_PID" --name shares -F 499) || fail "attach"
sleep 1
start_web shares

# ---- the token and the binding -----------------------------------------------------------
[ "$(code "$BASE/")" = 403 ] || fail "/ without the token is not 403"
[ "$(code "$BASE/api/tree")" = 403 ] || fail "/api/tree without the token is not 403"
BAD=$(tr '0-9a-f' '1-9a-f0' <<<"$TOKEN") # every digit changed
[ "$(code "$BASE/app.js?token=$BAD")" = 403 ] || fail "a wrong token is not 403"
[ "$(code "$BASE/api/tree?token=${TOKEN:0:31}")" = 403 ] || fail "a short token is not 403"
[ "$(code "$BASE/?token=$TOKEN")" = 200 ] || fail "the page with its token is not 200"
[ "$(code "$BASE/nothing?token=$TOKEN")" = 404 ] || fail "an unknown path is not 404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/api/tree?token=$TOKEN")" = 405 ] ||
  fail "a POST is not 405"
python3 - "$PORT" <<'PY' || fail "the listening socket is not bound to 127.0.0.1 only"
import sys
port = int(sys.argv[1])
found = []
for f in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(f).read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, p = local.split(":")
        if int(p, 16) == port and state == "0A":
            found.append(addr)
print("listening on", found)
sys.exit(found != ["0100007F"])
PY
echo "PASS 403 without the token, bound to 127.0.0.1:$PORT only"

# ---- bad queries: the one parser's messages, as 400 ---------------------------------------
curl -s "$BASE/api/tree?token=$TOKEN&arg=-t&arg=bogus:x" >"$TMP/bad.json"
[ "$(code "$BASE/api/tree?token=$TOKEN&arg=-t&arg=bogus:x")" = 400 ] || fail "a bad transform is not 400"
grep -q '"error":' "$TMP/bad.json" || fail "no error message: $(cat "$TMP/bad.json")"
[ "$(code "$BASE/api/tree?token=$TOKEN&arg=-o&arg=$TMP/written")" = 400 ] || fail "-o is not refused"
[ ! -e "$TMP/written" ] || fail "-o wrote a file"
[ "$(code "$BASE/api/tree?token=$TOKEN&arg=--format&arg=text")" = 400 ] || fail "--format text is not refused"
[ "$(code "$BASE/api/tree?token=$TOKEN&arg=--invert&arg=--functions")" = 400 ] || fail "two views are not refused"
echo "PASS bad queries answered 400"

# ---- the page in the browser ---------------------------------------------------------------
TMPDIR=$TMP node "$DRIVER" live "$URL" "$SHOTS" || fail "the live page (screenshots in $SHOTS)"

# ---- the same bytes as canopy tree, on a stopped session ------------------------------------
"$C" stop shares >/dev/null || fail "stop"
sleep 0.5
Q=(-t merge:burn --invert)
"$C" tree shares "${Q[@]}" --format json >"$TMP/cli.json" || fail "canopy tree"
curl -s "$BASE/api/tree?token=$TOKEN&arg=-t&arg=merge:burn&arg=--invert" >"$TMP/web.json"
cmp -s <(tr -d '\n' <"$TMP/cli.json") <(tr -d '\n' <"$TMP/web.json") ||
  fail "/api/tree differs from canopy tree --format json: $(head -c 300 "$TMP/cli.json") vs $(head -c 300 "$TMP/web.json")"
echo "PASS /api/tree = canopy tree --format json (session)"
"$C" save shares -o "$TMP/shares.canopy" >/dev/null || fail "save"
for f in json folded pprof svg firefox; do # downloads: canopy tree's bytes, as an attachment
  "$C" tree shares -t merge:burn --format $f >"$TMP/cli.$f" || fail "canopy tree --format $f"
  curl -s -D "$TMP/h.$f" "$BASE/api/export?token=$TOKEN&format=$f&arg=-t&arg=merge:burn" >"$TMP/web.$f"
  cmp -s "$TMP/cli.$f" "$TMP/web.$f" || fail "/api/export format $f differs from canopy tree --format $f"
  grep -qi '^content-disposition: attachment' "$TMP/h.$f" || fail "/api/export $f is not an attachment"
done
grep -qi '^access-control-allow-origin: https://profiler.firefox.com' "$TMP/h.firefox" || fail "no CORS for the profiler"
! grep -qi '^access-control-allow-origin' "$TMP/h.json" || fail "CORS on a non-firefox export"
[ "$(code "$BASE/api/export?token=$TOKEN&format=png")" = 400 ] || fail "an unknown export format is not 400"
[ "$(code "$BASE/api/export?token=$TOKEN")" = 400 ] || fail "an export without a format is not 400"
[ "$(code "$BASE/api/export?format=json")" = 403 ] || fail "an export without the token is not 403"
"$C" lines shares burn --format json >"$TMP/cli.lines" || fail "canopy lines"
curl -s "$BASE/api/lines?token=$TOKEN&func=burn" >"$TMP/web.lines"
python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a!=b)' "$TMP/cli.lines" "$TMP/web.lines" ||
  fail "/api/lines differs from canopy lines: $(cat "$TMP/cli.lines") vs $(cat "$TMP/web.lines")"
[ "$(code "$BASE/api/lines?token=$TOKEN&func=no_such_function")" = 400 ] || fail "lines of an unknown function is not 400"
[ "$(code "$BASE/api/tree?token=$TOKEN&arg=-t&arg=merge:no_such_function")" = 400 ] ||
  fail "a transform of an unknown function (refused by canopyd) is not 400"
echo "PASS /api/export = canopy tree --format F (json folded pprof svg firefox), /api/lines = canopy lines"
# Six queries at once (a session's go to canopyd together over up to three connections, the
# rest wait for one): each answer is its own query's.
"$C" tree shares --format activity >"$TMP/cli.act" || fail "canopy tree --format activity"
A="$BASE/api/tree?token=$TOKEN"
PAR=()
curl -m 60 -s "$A&arg=-t&arg=merge:burn" >"$TMP/par.json" & PAR+=($!)
curl -m 60 -s "$A&arg=--format&arg=activity" >"$TMP/par.act" & PAR+=($!)
curl -m 60 -s "$BASE/api/lines?token=$TOKEN&func=burn" >"$TMP/par.lines" & PAR+=($!)
curl -m 60 -s "$BASE/api/export?token=$TOKEN&format=folded&arg=-t&arg=merge:burn" >"$TMP/par.folded" & PAR+=($!)
curl -m 60 -s -o /dev/null -w '%{http_code}' "$A&arg=-t&arg=merge:no_such_function" >"$TMP/par.bad" & PAR+=($!)
curl -m 60 -s "$A&arg=-t&arg=merge:burn" >"$TMP/par2.json" & PAR+=($!)
wait "${PAR[@]}"
for f in par.json par2.json; do
  cmp -s <(tr -d "\n" <"$TMP/cli.json") <(tr -d "\n" <"$TMP/$f") || fail "concurrent: $f differs from canopy tree -t merge:burn"
done
cmp -s <(tr -d '\n' <"$TMP/cli.act") <(tr -d '\n' <"$TMP/par.act") || fail "concurrent: the activity data differs"
cmp -s "$TMP/cli.folded" "$TMP/par.folded" || fail "concurrent: the folded export differs"
python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(a!=b)' "$TMP/cli.lines" "$TMP/par.lines" ||
  fail "concurrent: /api/lines differs"
[ "$(cat "$TMP/par.bad")" = 400 ] || fail "concurrent: the refused query is $(cat "$TMP/par.bad"), not 400"
echo "PASS six queries at once, each answered with its own bytes"
stop_web

# ---- views, transforms, search, thread, range, URL, downloads on the saved session -----------
start_web "$TMP/shares.canopy"
"$C" tree "$TMP/shares.canopy" -t search:WORK_B --format json >"$TMP/cli.json" || fail "canopy tree -t search"
curl -s "$BASE/api/tree?token=$TOKEN&arg=-t&arg=search:WORK_B" >"$TMP/web.json"
cmp -s <(tr -d '\n' <"$TMP/cli.json") <(tr -d '\n' <"$TMP/web.json") || fail "search: /api/tree differs from canopy tree"
TMPDIR=$TMP node "$DRIVER" views "$URL" "$SHOTS" || fail "views (screenshots in $SHOTS)"
stop_web

# ---- a profile in time units: a JSON tree in ns ------------------------------------------------
cat >"$TMP/wall.json" <<'JSON'
{"unit": "ns", "total": 3500000000, "view": "tree", "transforms": [], "roots": [
 {"name": "main", "total": 3500000000, "self": 0, "children": [
  {"name": "read", "total": 2500000000, "self": 2500000000, "children": []},
  {"name": "compute", "total": 1000000000, "self": 1000000000, "children": []}]}]}
JSON
start_web "$TMP/wall.json"
TMPDIR=$TMP node "$DRIVER" units "$URL" "$SHOTS" || fail "time units (screenshots in $SHOTS)"
stop_web

# ---- real wall-mode and off-cpu sessions of the waits workload: times, the workload's shares ----
# The rounds start (SIGUSR1) once canopyd samples, and it samples until the workload exits,
# so the page's times and the workload's own measurement cover the same rounds. Off-cpu:
# main's time off the CPU is its reads and naps (preemption, [preempted], dropped).
for MODE in wall off-cpu; do
  "$WAITS" 1.5 --wait-signal >"$TMP/waits.out" &
  W2_PID=$!
  "$C" attach $W2_PID --mode $MODE --unwind fp --name $MODE >/dev/null 2>"$TMP/err" || fail "attach --mode $MODE: $(cat "$TMP/err")"
  kill -USR1 $W2_PID
  wait $W2_PID
  for ((i = 0; i < 300; i++)); do # the exit seen and every frame symbolized
    "$C" sessions --format json >"$TMP/s.json" || fail "sessions"
    [ "$(json "$TMP/s.json" '[(s["state"], s["symbols"]["pending"]) for s in d["sessions"] if s["name"] == "'$MODE'"][0]')" = "('exited', 0)" ] && break
    sleep 0.1
  done
  if [ $MODE = wall ]; then
    start_web wall --functions --tid $W2_PID # the main thread: compute, read, nap
    TMPDIR=$TMP node "$DRIVER" wall "$URL" "$SHOTS" >"$TMP/wall.log" || fail "a wall session (screenshots in $SHOTS): $(cat "$TMP/wall.log")"
  else
    start_web off-cpu --functions --tid $W2_PID -t 'drop:[preempted]' # main: read, nap
    TMPDIR=$TMP node "$DRIVER" offcpu "$URL" "$SHOTS" >"$TMP/wall.log" || fail "an off-cpu session (screenshots in $SHOTS): $(cat "$TMP/wall.log")"
  fi
  grep PASS "$TMP/wall.log"
  stop_web
  python3 - "$TMP/wall.log" $(python3 "$(dirname "$0")/offcpu_shares.py" --expect "$TMP/waits.out" $MODE main) <<'PY' ||
import json, sys
cells = json.loads(open(sys.argv[1]).read().split("CELLS ", 1)[1])
scale = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9}
ns = [float(cells[f].split()[0]) * scale[cells[f].split()[1]] if f in cells else 0 for f in ("compute", "read", "nap")]
got = [100 * v / sum(ns) for v in ns]
want = [float(x) for x in sys.argv[2:5]]
print("page's compute/read/sleep shares", [round(g, 1) for g in got], "the workload's", want, "cells", cells)
sys.exit(any(abs(g - w) > 5 for g, w in zip(got, want)))
PY
    fail "the page's $MODE times differ from the workload's own"
  echo "PASS the $MODE session in the browser: times, the workload's shares"
done

# ---- a long table: windowed ------------------------------------------------------------------
for i in $(seq 0 1999); do echo "main;f$i 1"; done >"$TMP/long.folded"
start_web "$TMP/long.folded"
TMPDIR=$TMP node "$DRIVER" long "$URL" "$SHOTS" || fail "a long table (screenshots in $SHOTS)"
stop_web

# ---- canopy web BASE NEW: canopy diff's tree ------------------------------------------------------
printf 'main;grew 4\nmain;shrank 6\nmain;same 5\n' >"$TMP/base.folded"
printf 'main;grew 9\nmain;shrank 1\nmain;same 5\n' >"$TMP/new.folded"
start_web "$TMP/base.folded" "$TMP/new.folded"
"$C" diff "$TMP/base.folded" "$TMP/new.folded" --format json >"$TMP/cli.json" || fail "canopy diff"
curl -s "$BASE/api/tree?token=$TOKEN" >"$TMP/web.json"
cmp -s <(tr -d '\n' <"$TMP/cli.json") <(tr -d '\n' <"$TMP/web.json") || fail "diff: /api/tree differs from canopy diff --format json"
"$C" diff "$TMP/base.folded" "$TMP/new.folded" --format folded >"$TMP/cli.folded" || fail "canopy diff folded"
curl -s "$BASE/api/export?token=$TOKEN&format=folded" | cmp -s - "$TMP/cli.folded" || fail "diff: the folded download differs"
echo "PASS /api/tree of BASE NEW = canopy diff --format json"
TMPDIR=$TMP node "$DRIVER" diff "$URL" "$SHOTS" || fail "diff (screenshots in $SHOTS)"
stop_web

# ---- canopy web BASE NEW with a running session: a live differential view ------------------
# The page refreshes it like a live session; each refresh (at most one a second) builds the
# differential profile again from the session's current profile: NEW's total grows.
"$WL" 20 >/dev/null &
W3_PID=$!
"$C" attach "$W3_PID" --name diffnew -F 499 >/dev/null || fail "attach diffnew"
sleep 0.5
start_web "$TMP/base.folded" diffnew
curl -s "$BASE/api/info?token=$TOKEN" >"$TMP/info.json"
[ "$(json "$TMP/info.json" 'd["live"] and d["diff"]')" = True ] ||
  fail "a diff against a running session is not live: $(cat "$TMP/info.json")"
curl -s "$BASE/api/tree?token=$TOKEN" >"$TMP/d1.json"
sleep 1.5
curl -s "$BASE/api/tree?token=$TOKEN" >"$TMP/d2.json"
n1=$(json "$TMP/d1.json" 'd["new_total"]')
n2=$(json "$TMP/d2.json" 'd["new_total"]')
[ "$(json "$TMP/d1.json" 'd["base_total"]')" = 15 ] || fail "live diff: BASE's total is not the file's 15"
[ "$n2" -gt "$n1" ] || fail "live diff: NEW's total does not grow ($n1 -> $n2)"
echo "PASS a live diff (BASE a file, NEW a running session): NEW $n1 -> $n2 samples in 1.5 s"
stop_web
# Both sides stopped: not live.
"$C" stop diffnew >/dev/null || fail "stop diffnew"
start_web "$TMP/base.folded" diffnew
curl -s "$BASE/api/info?token=$TOKEN" >"$TMP/info.json"
[ "$(json "$TMP/info.json" 'd["live"]')" = False ] || fail "a diff of stopped sides is live"
stop_web
kill $W3_PID 2>/dev/null || true
wait $W3_PID 2>/dev/null || true
W3_PID=

# ---- --pid: sampled in-process, live ---------------------------------------------------------
"$WL" 30 >/dev/null & # its own workload: the first one's 60 s may be over by now
W2_PID=$!
start_web --pid "$W2_PID"
total() { curl -s "$BASE/api/tree?token=$TOKEN&arg=--functions" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["total"] if d.get("session") == "local" else -1)'; }
sleep 1
T1=$(total)
sleep 1.5
T2=$(total)
[ "$T1" -gt 0 ] && [ "$T2" -gt "$T1" ] || fail "--pid: the in-process total did not grow ($T1 -> $T2)"
curl -s "$BASE/api/lines?token=$TOKEN&func=burn" | grep -q '"function":"burn"' || fail "--pid: /api/lines of burn"
curl -s "$BASE/api/tree?token=$TOKEN&arg=--format&arg=activity" | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(not (d["end"] > 0 and sum(d["buckets"]) > 0 and d["threads"]))' ||
  fail "--pid: the activity data"
[ "$(curl -s "$BASE/api/info?token=$TOKEN" | python3 -c 'import json,sys; print(json.load(sys.stdin)["live"])')" = True ] ||
  fail "--pid: not live"
echo "PASS --pid in-process: total $T1 -> $T2"
TMPDIR=$TMP node "$DRIVER" pid "$URL" "$SHOTS" || fail "--pid in the browser (screenshots in $SHOTS)"
stop_web # SIGTERM with the symbolizer's thread running: a clean exit 0

# ---- a file with a hostile function name ------------------------------------------------------
printf 'main;<img src=x onerror=alert(1)>;leaf 6\nmain;work_a 4\n' >"$TMP/hostile.folded"
start_web "$TMP/hostile.folded" -t merge:leaf
"$C" tree "$TMP/hostile.folded" -t merge:leaf -t focus-func:main --format json >"$TMP/cli.json" || fail "canopy tree FILE"
curl -s "$BASE/api/tree?token=$TOKEN&arg=-t&arg=merge:leaf&arg=-t&arg=focus-func:main" >"$TMP/web.json"
cmp -s <(tr -d '\n' <"$TMP/cli.json") <(tr -d '\n' <"$TMP/web.json") ||
  fail "/api/tree differs from canopy tree for the file: $(cat "$TMP/cli.json") vs $(cat "$TMP/web.json")"
[ "$(curl -s "$BASE/api/info?token=$TOKEN" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["live"], d["args"])')" = "False ['-t', 'merge:leaf']" ] ||
  fail "/api/info of a file"
echo "PASS /api/tree = canopy tree --format json (file)"
TMPDIR=$TMP node "$DRIVER" hostile "$URL" "$SHOTS" || fail "the hostile name (screenshots in $SHOTS)"
stop_web
start_web "$TMP/hostile.folded" --callers leaf
TMPDIR=$TMP node "$DRIVER" refused "$URL" "$SHOTS" || fail "a refused change (screenshots in $SHOTS)"
stop_web

# ---- command-line errors ------------------------------------------------------------------------
expect_fail 2 "$C" web "$TMP/hostile.folded" -o "$TMP/x.json"
expect_fail 2 "$C" web "$TMP/hostile.folded" --bind not-an-address
expect_fail 1 "$C" web no-such-session
expect_fail 2 "$C" web "$TMP/base.folded" "$TMP/no-such-file.folded" # BASE NEW: canopy diff's rules
expect_fail 2 "$C" web "$TMP/base.folded" "$TMP/new.folded" "$TMP/hostile.folded"
echo "PASS canopy web"
