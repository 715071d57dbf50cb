#!/usr/bin/env bash
# canopy web on a live session whose symbols arrive late (issue 21: the view refreshes
# "without losing the selection, the expanded nodes or the transform stack (call node paths
# remapped as symbols arrive)"). canopyd-test's hook CANOPYD_TEST_SYMBOL_DELAY_MS makes the
# symbolizer pause 8 s before each batch, so the page first shows wl_shares_fp's frames as
# LIB+0xOFFSET. While they are addresses the page merges burn's heaviest address (a
# transform), expands every node (`*` on each root) and selects a work_* address; once the
# symbols arrive, main, work_a and work_b must be open rows, the selection a named work_*
# row, and the merge crumb still there, now merging all of burn (the renderer remaps held
# transforms; `canopy tree -t merge:ADDRESS` does the same on the command line). canopyd's
# sessions are unchanged by all the page did. Once the session is stopped the page's
# refreshes are answered 304 (ETag: the same bytes) and it keeps its table; /api/tree's
# ETag gives 304 for the same answer and 200 otherwise. Last, --port and --bind
# (127.0.0.2): the URL, the listening socket, the stderr notice, 403 without the token.
# Also: everything the page loaded came from its own origin and its CSP allows nothing
# else; the listening socket is the canopy web process's, of the invoking user.
source "$(dirname "$0")/lib.sh"
# The hook is canopyd-test's only (the installed canopyd reads no test variable).
CANOPYD_BIN=${CANOPYD_TEST_BIN:?run through ctest}
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
need_browser
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
W_PID=
WEB_PID=
NODE_PID=
trap 'rc=$?; kill $NODE_PID $WEB_PID $W_PID $D_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
export CANOPYD_TEST_SYMBOL_DELAY_MS=8000
start_canopyd
unset CANOPYD_TEST_SYMBOL_DELAY_MS

"$WL" 60 >/dev/null &
W_PID=$!
"$C" attach "$W_PID" --name late -F 499 >/dev/null 2>"$TMP/err" ||
  { grep -qi 'not permitted' "$TMP/err" && skip "perf events not permitted"; fail "attach: $(cat "$TMP/err")"; }
"$C" web late >"$TMP/web.out" 2>"$TMP/web.log" &
WEB_PID=$!
for ((i = 0; i < 100; i++)); do [ -s "$TMP/web.out" ] && break; sleep 0.1; done
URL=$(head -n 1 "$TMP/web.out")
[ -n "$URL" ] || fail "canopy web printed no URL: $(cat "$TMP/web.log")"
TOKEN=${URL##*token=}
BASE=${URL%%/\?*}

# The renderer remaps held transforms: before the symbols, pick a placeholder name of the
# workload; once it is renamed, `canopy tree -t merge:PLACEHOLDER` must still answer (it
# was "no function" before this change) and equal the merge of the new name.
PH=$(curl -s "$BASE/api/tree?token=$TOKEN&arg=--functions" | python3 -c '
import json, sys
d = json.load(sys.stdin)
names = [f["name"] for f in d.get("functions", []) if f["name"].startswith("wl_shares_fp+0x")]
print(names[0] if names else "")')
[ -n "$PH" ] || fail "no placeholder frame before the symbols (the hook did not delay them?)"

sessions() { "$C" sessions --format json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sorted((s["id"], s["name"], s["state"]) for s in (d["sessions"] if isinstance(d, dict) else d)))'; }
S0=$(sessions)
PH=$PH TMPDIR=$TMP node "$DRIVER" symbols "$URL" "$SHOTS" &
NODE_PID=$!
for ((i = 0; i < 600; i++)); do [ -e "$SHOTS/stop-now" ] || ! kill -0 $NODE_PID 2>/dev/null && break; sleep 0.1; done
if [ -e "$SHOTS/stop-now" ]; then
  # The page expanded, selected, merged and refreshed for seconds: canopyd's sessions are
  # what they were (the page's requests are queries; only CLI commands change state).
  S1=$(sessions)
  [ "$S1" = "$S0" ] || fail "the page changed canopyd's sessions: $S0 -> $S1"
  echo "PASS canopyd's sessions unchanged by the page: $S1"
  "$C" stop late >/dev/null || fail "stop"
fi

wait $NODE_PID || fail "held paths across symbolization, 304s after the stop (screenshots in $SHOTS)"

# Self-contained, by policy too: the page's response allows only its own script and style.
curl -s -D "$TMP/h" -o /dev/null "$URL"
grep -qi "^content-security-policy: default-src 'none'; script-src 'self'; style-src 'self'" "$TMP/h" ||
  fail "the page's CSP: $(grep -i '^content-security' "$TMP/h")"
# Run by the client: the listening socket is the canopy web process's (not canopyd's), of the
# invoking user's uid.
python3 - "$WEB_PID" "${BASE##*:}" "$D_PID" <<'PY' || fail "the listening socket is not canopy web's own"
import os, sys
pid, port, dpid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
inode = uid = None
for l in open("/proc/net/tcp").read().splitlines()[1:]:
    f = l.split()
    if int(f[1].split(":")[1], 16) == port and f[3] == "0A":
        uid, inode = int(f[7]), f[9]
def socks(p):
    out = set()
    for fd in os.listdir(f"/proc/{p}/fd"):
        try:
            out.add(os.readlink(f"/proc/{p}/fd/{fd}"))
        except OSError:
            pass
    return out
mine, daemon = f"socket:[{inode}]" in socks(pid), f"socket:[{inode}]" in socks(dpid)
print(f"listening socket inode {inode}, uid {uid}: canopy web's {mine}, canopyd's {daemon}")
sys.exit(not (inode and mine and not daemon and uid == os.getuid()))
PY
echo "PASS the server is canopy web's (pid $WEB_PID, uid $(id -u)), the page's CSP"

# The ETag: the same query on the stopped session is 304 with it, 200 with another. The
# symbolizer's held-back batches (8 s each) can still rename frames of the stopped session
# between two requests, and a changed answer is rightly 200: a few tries.
Q="$BASE/api/tree?token=$TOKEN&arg=--invert"
got=
for try in 1 2 3 4 5; do
  ETAG=$(curl -s -D - -o /dev/null "$Q" | tr -d '\r' | sed -n 's/^[Ee][Tt][Aa][Gg]: //p')
  [ -n "$ETAG" ] || fail "/api/tree has no ETag"
  got=$(curl -s -o "$TMP/304" -w '%{http_code}' -H "If-None-Match: $ETAG" "$Q")
  [ "$got" = 304 ] && break
  [ "$got" = 200 ] || fail "If-None-Match $ETAG answered $got"
  sleep 1
done
[ "$got" = 304 ] && [ ! -s "$TMP/304" ] ||
  fail "the same answer with If-None-Match $ETAG is not an empty 304 (5 tries)"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'If-None-Match: "0000000000000000"' "$Q")" = 200 ] ||
  fail "another ETag is not 200"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $ETAG" "$BASE/api/tree?token=$TOKEN")" = 200 ] ||
  fail "another query with that ETag is not 200"
echo "PASS ETag: 304 for the same answer, 200 otherwise"

"$C" tree late -t "merge:$PH" --format json >"$TMP/old.json" 2>"$TMP/err" ||
  fail "canopy tree -t merge:$PH after the symbols arrived: $(cat "$TMP/err")"
NEW=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["transforms"]; print(t[0][len("merge:"):])' "$TMP/old.json")
[ "$NEW" != "$PH" ] || fail "merge:$PH was not remapped: $(head -c 300 "$TMP/old.json")"
echo "PASS canopy tree -t merge:$PH after the symbols: merge:$NEW"
# canopyd gone: each query is a 502 naming why (a connection that broke, then none to
# open), answered at once, and canopy web goes on serving (and stops cleanly below).
kill -KILL $D_PID
wait $D_PID 2>/dev/null || true
D_PID=
for k in 1 2 3; do
  got=$(curl -m 20 -s -o "$TMP/gone.json" -w '%{http_code} %{time_total}' "$BASE/api/tree?token=$TOKEN")
  [ "${got% *}" = 502 ] && grep -q 'daemon\|canopyd' "$TMP/gone.json" ||
    fail "a query with canopyd gone: $got $(cat "$TMP/gone.json")"
  echo "canopyd gone: $got $(cat "$TMP/gone.json")"
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/info?token=$TOKEN")" = 200 ] ||
  fail "canopy web stopped serving when canopyd went away"
echo "PASS canopyd gone: 502s with the reason, the page still served"
stop_web() {
  kill -TERM "$WEB_PID"
  wait "$WEB_PID" || fail "canopy web exited $? after SIGTERM: $(cat "$TMP/web.log")"
  WEB_PID=
}
stop_web

# --port and --bind: the URL and the listening socket follow them; an address other than
# 127.0.0.1 is announced on stderr.
printf 'main;a 3\nmain;b 1\n' >"$TMP/small.folded"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])')
rm -f "$TMP/web.out" # (the redirection happens in the child, later than this shell looks)
"$C" web "$TMP/small.folded" --port "$PORT" --bind 127.0.0.2 >"$TMP/web.out" 2>"$TMP/web.log" &
WEB_PID=$!
for ((i = 0; i < 100; i++)); do [ -s "$TMP/web.out" ] && break; sleep 0.1; done
URL=$(head -n 1 "$TMP/web.out")
[[ "$URL" == "http://127.0.0.2:$PORT/?token="* ]] || fail "--port $PORT --bind 127.0.0.2: URL '$URL' $(cat "$TMP/web.log")"
grep -q '127.0.0.2' "$TMP/web.log" || fail "--bind says nothing on stderr: $(cat "$TMP/web.log")"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL")" = 200 ] || fail "the page at $URL"
[ "$(curl -s -o /dev/null -w '%{http_code}' "${URL%%\?*}")" = 403 ] || fail "no 403 without the token at 127.0.0.2"
python3 - "$PORT" <<'PY' || fail "not listening on 127.0.0.2:$PORT only"
import sys
port = int(sys.argv[1])
found = [l.split()[1].split(":")[0] for f in ("/proc/net/tcp", "/proc/net/tcp6")
         for l in open(f).read().splitlines()[1:]
         if int(l.split()[1].split(":")[1], 16) == port and l.split()[3] == "0A"]
print("listening on", found)
sys.exit(found != ["0200007F"])
PY
stop_web
echo "PASS --port $PORT --bind 127.0.0.2"
echo "PASS canopy web keeps held paths across symbolization"
