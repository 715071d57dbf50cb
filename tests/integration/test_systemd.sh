#!/usr/bin/env bash
# systemd integration, as far as a machine without systemd as PID 1 allows:
#  1. `systemd-analyze verify` accepts canopyd.service and canopyd.socket without a single
#     warning (the unit's bare ExecStart=canopyd is pointed at the built binary, since
#     verify checks that the executable exists), and the hardening docs/cli-live.md
#     ("canopyd under systemd") lists is there;
#  2. `cmake --install` installs the units, the example config and the binaries;
#  3. socket activation: systemd-socket-activate listens, canopyd is started on the first
#     connection with the listener as fd 3 (LISTEN_FDS), answers `canopy status` through
#     it, reads the example config, and tells $NOTIFY_SOCKET READY=1 and a STATUS= line.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}" "${CANOPY_SOURCE_DIR:?}" "${CANOPY_BUILD_DIR:?}"
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
command -v systemd-socket-activate >/dev/null || skip "systemd-socket-activate is not installed"
UNITS=$CANOPY_SOURCE_DIR/systemd

# ---- 1. verify ---------------------------------------------------------------------------
mkdir -p "$TMP/units"
cp "$UNITS/canopyd.socket" "$TMP/units/"
grep -q '^ExecStart=canopyd ' "$UNITS/canopyd.service" || fail "ExecStart is not 'canopyd ...'"
sed "s|^ExecStart=canopyd |ExecStart=$CANOPYD_BIN |" "$UNITS/canopyd.service" \
  >"$TMP/units/canopyd.service"
(cd "$TMP/units" && systemd-analyze verify ./canopyd.socket ./canopyd.service) \
  >"$TMP/verify.out" 2>&1 || fail "systemd-analyze verify failed: $(cat "$TMP/verify.out")"
[ ! -s "$TMP/verify.out" ] || fail "systemd-analyze verify warns: $(cat "$TMP/verify.out")"

# The verifier must catch a broken unit, or the check above proves nothing.
sed 's/^Type=notify/Type=bogus/' "$TMP/units/canopyd.service" >"$TMP/units/broken.service"
(cd "$TMP/units" && systemd-analyze verify ./broken.service) >"$TMP/broken.out" 2>&1 || true
[ -s "$TMP/broken.out" ] || fail "systemd-analyze verify accepted Type=bogus"

svc=$UNITS/canopyd.service
for line in 'Type=notify' 'NoNewPrivileges=yes' 'ProtectSystem=strict' 'ProtectHome=read-only' \
  'StateDirectory=canopy' 'RuntimeDirectory=canopy'; do
  grep -qx "$line" "$svc" || fail "canopyd.service lacks $line"
done
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$svc" | tr ' ' '\n' | sort | tr '\n' ' ')
[ "$caps" = "CAP_BPF CAP_CHECKPOINT_RESTORE CAP_DAC_READ_SEARCH CAP_IPC_LOCK CAP_PERFMON CAP_SYSLOG CAP_SYS_NICE CAP_SYS_PTRACE " ] ||
  fail "CapabilityBoundingSet is '$caps'"
grep -qx 'ListenStream=/run/canopy/canopy.sock' "$UNITS/canopyd.socket" ||
  fail "canopyd.socket does not listen on /run/canopy/canopy.sock"
echo "PASS verify"

# ---- 2. cmake --install --------------------------------------------------------------------
cmake --install "$CANOPY_BUILD_DIR" --prefix "$TMP/prefix" >"$TMP/install.out" 2>&1 ||
  fail "cmake --install: $(tail -5 "$TMP/install.out")"
for f in lib/systemd/system/canopyd.service lib/systemd/system/canopyd.socket \
  etc/canopy/canopyd.conf.example sbin/canopyd bin/canopy; do
  [ -e "$TMP/prefix/$f" ] || fail "cmake --install did not install $f"
done
cmp -s "$TMP/prefix/lib/systemd/system/canopyd.service" "$svc" || fail "installed unit differs"
echo "PASS install"

# ---- 3. socket activation ------------------------------------------------------------------
SOCK=$TMP/act.sock
# A notify socket like systemd's: every datagram is one line in notify.log.
python3 - "$TMP/notify.sock" "$TMP/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
with open(sys.argv[2], "a") as log:
    try:
        while True:
            log.write(s.recv(4096).decode(errors="replace").replace("\n", " ") + "\n")
            log.flush()
    except socket.timeout:
        pass
PY
NOTIFY_PID=$!
for ((i = 0; i < 50; i++)); do [ -S "$TMP/notify.sock" ] && break; sleep 0.1; done
mkdir -p "$TMP/state"
systemd-socket-activate -l "$SOCK" -E NOTIFY_SOCKET="$TMP/notify.sock" \
  -E ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
  "$CANOPYD_BIN" --foreground --config "$UNITS/canopyd.conf.example" \
  --socket "$TMP/not-this.sock" --state-dir "$TMP/state" >"$TMP/canopyd.log" 2>&1 &
ACT_PID=$!
trap 'rc=$?; kill $ACT_PID $NOTIFY_PID 2>/dev/null || true; finish_tmp $rc' EXIT
for ((i = 0; i < 50; i++)); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || fail "systemd-socket-activate did not listen: $(cat "$TMP/canopyd.log")"
# Nothing runs until the first connection: this one starts canopyd.
"$CANOPY_BIN" status --socket "$SOCK" --format json >"$TMP/status.json" 2>"$TMP/status.err" ||
  fail "canopy status through the activated socket: $(cat "$TMP/status.err") $(cat "$TMP/canopyd.log")"
python3 - "$TMP/status.json" <<'PY' || fail "status JSON: $(cat "$TMP/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("version", "uptime_s", "sessions", "samples_per_s", "lost", "rss_bytes", "event_loop"):
    assert k in d, k
assert d["event_loop"] in ("io_uring", "epoll"), d["event_loop"]
PY
# The daemon used the inherited listener, not a socket of its own.
[ ! -e "$TMP/not-this.sock" ] || fail "canopyd bound --socket instead of the activated listener"
# A second client on the same listener.
"$CANOPY_BIN" sessions --socket "$SOCK" --format json >"$TMP/sessions.json" ||
  fail "canopy sessions through the activated socket"
grep -q '"sessions"' "$TMP/sessions.json" || fail "sessions JSON: $(cat "$TMP/sessions.json")"
for ((i = 0; i < 50; i++)); do grep -q 'READY=1' "$TMP/notify.log" 2>/dev/null && break; sleep 0.1; done
grep -q 'READY=1' "$TMP/notify.log" || fail "no READY=1 on NOTIFY_SOCKET: $(cat "$TMP/notify.log" 2>&1)"
grep -q 'STATUS=' "$TMP/notify.log" || fail "no STATUS= on NOTIFY_SOCKET: $(cat "$TMP/notify.log")"
# SIGTERM (what systemd sends) ends it cleanly.
kill -TERM "$ACT_PID"
for ((i = 0; i < 100; i++)); do kill -0 "$ACT_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$ACT_PID" 2>/dev/null && fail "canopyd did not exit on SIGTERM"
wait "$ACT_PID" && rc=0 || rc=$?
[ "$rc" = 0 ] || fail "canopyd exited with $rc on SIGTERM: $(cat "$TMP/canopyd.log")"
kill "$NOTIFY_PID" 2>/dev/null || true
echo "PASS socket activation ($(tr '\n' ' ' <"$TMP/notify.log"))"
