#!/usr/bin/env bash
# Per-user limits (docs/security.md "Per-user limits"), each attack run as nobody (A)
# against a root canopyd, with another user (B) and root beside it:
# - connections over A's quota are refused `busy`, B still connects; idle connections are
#   closed after idle_timeout; an answer A does not read is dropped after send_timeout;
# - running sessions over A's quota are refused `limit`, B still attaches; a target whose
#   threads x CPUs exceed A's perf fd quota is refused, and a target that grows past it
#   is stopped; sessions held over A's quota make room by deleting A's oldest only;
# - the state dir over A's byte quota and over the global bound loses A's sessions, never
#   root's or B's (older) ones;
# - out of fds (RLIMIT_NOFILE), the daemon sheds connections with `busy` instead of
#   spinning on EMFILE, reports it in `status`, and serves again afterwards. Both loops.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to unprivileged users)"
command -v setpriv >/dev/null || skip "setpriv not installed"
A=65534 B=65533
PIDS=()
trap 'rc=$?; stop_daemon KILL || true; kill ${PIDS[@]} 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
HERE=$(dirname "$0")
cp "$HERE/daemon_proto.py" "$HERE/quota_attack.py" "$TMP/"
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
acall() { as $A $PY "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
bcall() { as $B $PY "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
code() { jget 'd["error"]["code"] if not d["ok"] else "ok"'; }
NCPU=$(nproc)
# spawn USER CMD...: a process of USER in the background (its pid in $SP).
spawn() {
  local u=$1
  shift
  setpriv --reuid="$u" --regid="$u" --clear-groups "$@" &
  SP=$!
  PIDS+=($SP)
  wait_for 5 grep -q "^Uid:.$u" /proc/$SP/status || fail "process did not start as $u"
}
# threads.py N: a process with N threads that starts N more on SIGUSR1.
cat >"$TMP/threads.py" <<'PY'
import signal, sys, threading, time
def idle():
    while True:
        time.sleep(1)
def grow(*_):
    for _ in range(int(sys.argv[1])):
        threading.Thread(target=idle, daemon=True).start()
signal.signal(signal.SIGUSR1, grow)
grow()
time.sleep(60)
PY
FDS=$((NCPU * 24))
cat >"$TMP/canopyd.conf" <<CONF
user_max_clients = 4
user_max_sessions = 2
user_max_kept = 3
user_max_fds = $FDS
idle_timeout = 1s
send_timeout = 1s
CONF
mkdir -p "$TMP/seed"
$PY "$HERE/big_canopy.py" "$TMP/seed/s900.canopy" s900 $A 5000 60000 60000

for BACKEND in io_uring epoll; do
  rm -rf "$TMP/state"
  mkdir -p "$TMP/state"
  cp "$TMP/seed/s900.canopy" "$TMP/state/"
  start_daemon $BACKEND "$TMP/state" --config "$TMP/canopyd.conf"

  # Connections: 4 of A's are taken, the others refused; idle ones closed after 1 s.
  r=$(as $A $PY "$TMP/quota_attack.py" conns "$SOCK" 7)
  echo "$BACKEND conns: $r" >&2
  [ "$(jget 'd["ok"]' <<<"$r")" = 4 ] && [ "$(jget 'd["busy"]' <<<"$r")" = 3 ] || fail "$BACKEND: connection quota: $r"
  jget 'd["message"]' <<<"$r" | grep -q "per user" || fail "$BACKEND: busy message: $r"
  [ "$(jget 'd["idle_closed"]' <<<"$r")" = 4 ] || fail "$BACKEND: idle connections not closed: $r"
  # While A holds its 4, B and root still get in.
  as $A $PY "$TMP/quota_attack.py" conns "$SOCK" 4 >/dev/null &
  HP=$!
  sleep 0.3
  [ "$(bcall '{"cmd":"hello"}' | code)" = ok ] || fail "$BACKEND: B locked out by A's connections"
  ok '{"cmd":"hello"}' >/dev/null
  wait $HP
  # An answer A never reads is dropped after send_timeout; the daemon goes on.
  r=$(as $A $PY "$TMP/quota_attack.py" stall "$SOCK" s900)
  echo "$BACKEND stall: $r" >&2
  [ "$(jget 'd["closed"]' <<<"$r")" = True ] || fail "$BACKEND: stalled reader not dropped: $r"
  full=$(acall '{"cmd":"tree","session":"s900","format":"text"}' | wc -c)
  [ "$(jget 'd["bytes"]' <<<"$r")" -lt "$full" ] || fail "$BACKEND: the whole answer fit in the buffers ($full bytes): the test proves nothing"
  st=$(ok '{"cmd":"status"}')
  [ "$(jget 'd["connection_timeouts"]' <<<"$st")" -ge 5 ] || fail "$BACKEND: timeouts not counted: $st"

  # Running sessions: 2 for A, the third refused; B unaffected.
  spawn $A sleep 60; P1=$SP
  spawn $A sleep 60; P2=$SP
  spawn $A sleep 60; P3=$SP
  spawn $B sleep 60; PB=$SP
  S1=$(acall "{\"cmd\":\"attach\",\"pid\":$P1}" | jget 'd["session"]["id"]')
  S2=$(acall "{\"cmd\":\"attach\",\"pid\":$P2}" | jget 'd["session"]["id"]')
  r=$(acall "{\"cmd\":\"attach\",\"pid\":$P3}")
  [ "$(code <<<"$r")" = limit ] || fail "$BACKEND: third running session: $r"
  jget 'd["error"]["message"]' <<<"$r" | grep -q "running sessions" || fail "$BACKEND: message: $r"
  r=$(bcall "{\"cmd\":\"attach\",\"pid\":$PB}")
  [ "$(code <<<"$r")" = ok ] || fail "$BACKEND: B refused by A's quota: $r"
  BS=$(jget 'd["session"]["id"]' <<<"$r")

  # Held sessions: A has s900 (oldest, saved) + 2 running = 3 = its quota. Stopping one
  # and attaching again deletes A's oldest stopped session (s900), nothing of B's.
  [ "$(acall "{\"cmd\":\"stop\",\"session\":\"$S1\"}" | code)" = ok ] || fail "$BACKEND: stop"
  r=$(acall "{\"cmd\":\"attach\",\"pid\":$P3}")
  [ "$(code <<<"$r")" = ok ] || fail "$BACKEND: attach with a held session to spare: $r"
  S3=$(jget 'd["session"]["id"]' <<<"$r")
  ids=$(ok '{"cmd":"sessions"}' | jget 'sorted(s["id"] for s in d["sessions"])')
  [[ $ids != *s900* ]] || fail "$BACKEND: A's oldest session kept over its quota: $ids"
  [[ $ids == *"$BS"* && $ids == *"$S1"* ]] || fail "$BACKEND: the wrong session was deleted: $ids"
  [ ! -e "$TMP/state/s900.canopy" ] && [ ! -e "$TMP/state/s900.meta" ] || fail "$BACKEND: s900's files remain"
  [ "$(ok '{"cmd":"status"}' | jget 'd["quota_evicted"]')" -ge 1 ] || fail "$BACKEND: eviction not counted"
  acall "{\"cmd\":\"rm\",\"session\":\"$S1\"}" >/dev/null
  acall "{\"cmd\":\"rm\",\"session\":\"$S2\"}" >/dev/null
  acall "{\"cmd\":\"rm\",\"session\":\"$S3\"}" >/dev/null

  # Perf fds: 24 threads x CPUs fits, 48 does not; a target growing past it is stopped.
  spawn $A $PY "$TMP/threads.py" 30; PT=$SP
  sleep 0.5
  r=$(acall "{\"cmd\":\"attach\",\"pid\":$PT}")
  [ "$(code <<<"$r")" = limit ] || fail "$BACKEND: $((31 * NCPU)) perf fds over a quota of $FDS: $r"
  jget 'd["error"]["message"]' <<<"$r" | grep -q "perf fds" || fail "$BACKEND: fd message: $r"
  spawn $A $PY "$TMP/threads.py" 12; PG=$SP
  sleep 0.5
  r=$(acall "{\"cmd\":\"attach\",\"pid\":$PG}")
  [ "$(code <<<"$r")" = ok ] || fail "$BACKEND: 13 threads refused: $r"
  SG=$(jget 'd["session"]["id"]' <<<"$r")
  kill -USR1 $PG
  stopped() { [ "$(acall "{\"cmd\":\"sessions\"}" | jget "[s['state'] for s in d['sessions'] if s['id']=='$SG'][0]")" != running ]; }
  wait_for 10 stopped || fail "$BACKEND: a target grown past the fd quota still samples"
  [ "$(bcall '{"cmd":"sessions"}' | jget "[s['state'] for s in d['sessions'] if s['id']=='$BS'][0]")" = running ] ||
    fail "$BACKEND: B's session disturbed"
  kill ${PIDS[@]} 2>/dev/null || true
  wait ${PIDS[@]} 2>/dev/null || true
  PIDS=()
  stop_daemon
done

# The state dir: root's s1 and B's s2 are older than A's s3..s6 (1 file each, same size).
# A's quota (2.5 files) keeps its 2 newest; the global bound (3.5 files) then takes
# from A again (the biggest holder), never root's or B's.
mkdir -p "$TMP/seed2"
$PY "$HERE/big_canopy.py" "$TMP/seed2/f" sX 0 2000 30000 30000
SZ=$(stat -c %s "$TMP/seed2/f")
rm -rf "$TMP/state" && mkdir -p "$TMP/state"
owner() { case $1 in 1) echo 0 ;; 2) echo $B ;; *) echo $A ;; esac; }
for i in 1 2 3 4 5 6; do
  sed -e "s/^sX\$/s$i/" -e "s/^0\$/$(owner $i)/" "$TMP/seed2/f" >"$TMP/state/s$i.canopy"
done
grep -qx s3 "$TMP/state/s3.canopy" || fail "seed rewrite"
cat >"$TMP/canopyd2.conf" <<CONF
user_max_kept_bytes = $((SZ * 5 / 2))
state_dir_max = $((SZ * 7 / 2))
CONF
start_daemon io_uring "$TMP/state" --config "$TMP/canopyd2.conf"
ids=$(ok '{"cmd":"sessions"}' | jget 'sorted(s["id"] for s in d["sessions"])')
[ "$ids" = "['s1', 's2', 's6']" ] || fail "state dir quotas kept $ids (want s1 s2 s6): $(tail -5 "$TMP/canopyd.log")"
ls "$TMP/state" | grep -q 's[345]\.' && fail "deleted sessions' files remain: $(ls "$TMP/state")"
stop_daemon

# Out of fds: 48 fds for the daemon. A holds as many connections as it can; the rest are
# shed with `busy` (no EMFILE spin: the daemon's CPU time stays low), `status` counts
# them, and once A lets go, B is served.
printf 'user_max_clients = 1000\nmax_clients = 1000\n' >"$TMP/canopyd3.conf"
for BACKEND in io_uring epoll; do
  rm -rf "$TMP/state"
  SOCK=$TMP/canopyd.sock
  prlimit --nofile=48:48 "$CANOPYD_BIN" --socket "$SOCK" --state-dir "$TMP/state" \
    --event-loop $BACKEND --config "$TMP/canopyd3.conf" >>"$TMP/canopyd.log" 2>&1 &
  D_PID=$!
  wait_for 10 eval 'call "{\"cmd\":\"hello\"}" >/dev/null 2>&1' || fail "$BACKEND: canopyd did not start"
  cpu() { awk '{print $14 + $15}' /proc/$D_PID/stat; }
  as $A $PY "$TMP/quota_attack.py" flood "$SOCK" 80 4 >"$TMP/flood.json" &
  FP=$!
  sleep 1.5
  c0=$(cpu)
  sleep 2
  c1=$(cpu)
  wait $FP
  echo "$BACKEND EMFILE flood: $(cat "$TMP/flood.json"), daemon CPU $((c1 - c0)) ticks in 2 s" >&2
  [ $((c1 - c0)) -lt 60 ] || fail "$BACKEND: canopyd spins out of fds: $((c1 - c0)) ticks in 2 s"
  jget 'd["refused"] > 0 and "file descriptors" in (d["message"] or "")' <"$TMP/flood.json" | grep -q True ||
    fail "$BACKEND: no shedding seen: $(cat "$TMP/flood.json")"
  r=$(bcall '{"cmd":"status"}')
  [ "$(code <<<"$r")" = ok ] || fail "$BACKEND: B not served after the flood: $r"
  [ "$(jget 'd["emfile_refused"]' <<<"$r")" -gt 0 ] || fail "$BACKEND: status does not report it: $r"
  [ "$(jget 'd["fd_limit"]' <<<"$r")" = 48 ] || fail "$BACKEND: fd_limit: $r"
  stop_daemon
done
echo "ok"
