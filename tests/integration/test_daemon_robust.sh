#!/usr/bin/env bash
# A hostile or broken client affects nobody else: while a session samples, flood canopyd
# with malformed, oversized and half-sent requests and abrupt disconnects (both event
# loops); the daemon stays up, well-formed requests keep being answered, and the session's
# sample count keeps rising. Also: the client limit answers `busy`, a stalled half request
# is dropped after the client timeout, a config file is honoured and a bad one refused.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload not built"
W=
trap 'rc=$?; stop_daemon KILL || true; kill $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

cat >"$TMP/canopyd.conf" <<'CONF'
# robustness test settings
max_clients = 64
client_timeout = 2s
max_request = 64K
CONF
samples() { ok "{\"cmd\":\"sessions\"}" | jget "[s['samples'] for s in d['sessions'] if s['id']=='$1'][0]"; }

for BACKEND in io_uring epoll; do
  rm -rf "$TMP/state"
  start_daemon $BACKEND "$TMP/state" --config "$TMP/canopyd.conf"
  "$WL" 30 >/dev/null &
  W=$!
  S=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":499}" | jget 'd["session"]["id"]')
  sleep 0.5
  n0=$(samples "$S")
  $PROTO flood "$SOCK" 4 >"$TMP/flood.json" || fail "$BACKEND flood: $(cat "$TMP/flood.json")"
  echo "$BACKEND flood: $(cat "$TMP/flood.json")" >&2
  kill -0 $D_PID || fail "canopyd died under the flood: $(tail "$TMP/canopyd.log")"
  # The flood's last connections may still be counted until canopyd reads their EOF (under
  # load that is after the flooder exits): a request then gets `busy`, as it should. They
  # must be gone within a few seconds.
  answers() { [ "$(call '{"cmd":"hello"}' | jget 'd["ok"]')" = True ]; }
  wait_for 5 answers || fail "$BACKEND: still busy 5 s after the flood"
  n1=$(samples "$S")
  sleep 0.5
  n2=$(samples "$S")
  [ "$n1" -gt "$n0" ] && [ "$n2" -gt "$n1" ] || fail "$BACKEND: samples stalled: $n0 $n1 $n2"
  [ "$(ok "{\"cmd\":\"sessions\"}" | jget "[s['state'] for s in d['sessions'] if s['id']=='$S'][0]")" = running ] ||
    fail "session not running after the flood"

  # A stalled half request is closed after client_timeout (2 s); others are unaffected.
  python3 - "$SOCK" <<'PY' || fail "$BACKEND: stalled client not dropped"
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(6)
s.sendall(b'{"cmd":"stat')
t0 = time.time()
try:
    d = s.recv(100)
except socket.timeout:
    sys.exit(1)
sys.exit(0 if d == b"" and time.time() - t0 < 5 else 1)
PY
  # Pipelined requests on one connection come back in order; a blank line is ignored.
  python3 - "$SOCK" <<'PY' || fail "$BACKEND: pipelining"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
s.sendall(b'{"id":1,"cmd":"hello"}\n\n{"id":2,"cmd":"bogus"}\r\n{"id":3,"cmd":"status"}\n')
buf = b""
while buf.count(b"\n") < 3:
    d = s.recv(65536)
    if not d: sys.exit(1)
    buf += d
r = [json.loads(l) for l in buf.split(b"\n")[:3]]
sys.exit(not ([x["id"] for x in r] == [1, 2, 3] and r[0]["ok"] and not r[1]["ok"] and r[2]["ok"]
              and r[1]["error"]["code"] == "unknown_command"))
PY
  # The client limit: the connection over it gets `busy`, then the others work again.
  python3 - "$SOCK" <<'PY' || fail "$BACKEND: client limit"
import json, socket, sys, time
held = []
for i in range(64):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); held.append(s)
time.sleep(0.3)
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
d = s.recv(4096)
ok = b'"busy"' in d
for h in held: h.close()
time.sleep(0.3)
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5)
s.sendall(b'{"cmd":"hello"}\n')
ok = ok and b'"ok":true' in s.recv(4096)
sys.exit(0 if ok else 1)
PY
  kill $W
  wait $W 2>/dev/null || true
  W=
  stop_daemon TERM
done

# A bad config file or flag is refused with exit 2 and one line naming it.
printf 'max_clients = lots\n' >"$TMP/bad.conf"
rc=0
"$CANOPYD_BIN" --socket "$TMP/x.sock" --state-dir "$TMP/x" --config "$TMP/bad.conf" 2>"$TMP/err" || rc=$?
[ $rc = 2 ] && grep -q 'bad.conf:1' "$TMP/err" || fail "bad config: rc $rc, $(cat "$TMP/err")"
rc=0
"$CANOPYD_BIN" --event-loop kqueue 2>"$TMP/err" || rc=$?
[ $rc = 2 ] || fail "bad --event-loop: rc $rc"
echo PASS
