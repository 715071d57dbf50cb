#!/usr/bin/env bash
# canopyd dies loudly (daemon/crash.c): a fatal signal leaves a report and a backtrace
# naming canopyd's functions in its log, and canopyd dies of that very signal (the status
# and core dump systemd sees). Then a restart on the same state dir, as systemd's
# Restart=on-failure does, lists the sessions saved before the crash, and one that was
# started a moment before it (written at its start, not at its first checkpoint).
#  - SIGABRT, SIGSYS, SIGBUS from kill(): the handler's line "sent by pid", its backtrace.
#  - A real fault, with no test hook in canopyd: gdb makes the main thread call
#    cn_d_server_backend((void *)0x10), whose first load faults (SEGV_MAPERR). Under
#    AddressSanitizer its own report is kept (crash.c), so the log has ASan's instead.
#  - A stack that cannot take a frame, as after a stack overflow: gdb moves the main
#    thread's stack pointer to an unmapped page and calls cn_d_server_run, whose first push
#    faults. The report can only come from the alternate signal stack.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload not built"
command -v gdb >/dev/null || fail "gdb not installed (scripts/setup installs it)"
W=
trap 'rc=$?; stop_daemon KILL || true; kill $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
field() { ok '{"cmd":"sessions"}' | jget "[s['$2'] for s in d['sessions'] if s['id']=='$1'][0]"; }
ASAN=0
grep -q __asan_init "$CANOPYD_BIN" && ASAN=1

# crashed WANT_STATUS: waits for canopyd (D_PID) and checks how it ended.
crashed() {
  local rc=0
  wait $D_PID || rc=$?
  D_PID=
  [ "$rc" = "$1" ] || fail "canopyd exited $rc, expected $1: $(tail -20 "$TMP/canopyd.log")"
}

# A saved session: one that ran for 1 s and stopped (written to the state dir).
start_daemon epoll "$TMP/state"
"$WL" 60 >/dev/null &
W=$!
S=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"duration\":\"1s\",\"name\":\"before-crash\"}" | jget 'd["session"]["id"]')
wait_for 20 eval '[ "$(field $S state)" = stopped ] && [ -f "$TMP/state/$S.canopy" ]' ||
  fail "session not stopped and saved"
kill $W
wait $W 2>/dev/null || true
W=
stop_daemon TERM

ids() { ok '{"cmd":"sessions"}' | jget '" ".join(s["id"] for s in d["sessions"])'; }
n=0
R=
for sig in ABRT:6 SYS:31 BUS:7; do
  name=${sig%:*} num=${sig#*:}
  [ $ASAN = 1 ] && [ $name = BUS ] && continue # ASan's handler reports SIGBUS (not kill's)
  : >"$TMP/canopyd.log"
  start_daemon io_uring "$TMP/state"
  [ "$(field "$S" state)" = saved ] || fail "after restart $n: $S not listed as saved"
  if [ $n = 1 ]; then
    [[ " $(ids) " == *" $R "* ]] || fail "the session started just before a crash is gone: $(ids)"
    kill $W
    wait $W 2>/dev/null || true
    W=
  fi
  if [ $n = 0 ]; then
    # A session started just before the crash, before its first checkpoint (5 s): it is
    # written at its start, so the restart lists it too.
    "$WL" 60 >/dev/null &
    W=$!
    R=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"name\":\"at-crash\"}" | jget 'd["session"]["id"]')
  fi
  kill -$name $D_PID
  crashed $((128 + num))
  grep -q "^canopyd: fatal signal $num (SIG$name) sent by pid $$, thread [0-9]* (canopyd)\$" "$TMP/canopyd.log" ||
    fail "SIG$name: no report line: $(cat "$TMP/canopyd.log")"
  grep -q '^canopyd: backtrace:$' "$TMP/canopyd.log" || fail "SIG$name: no backtrace"
  # The loop was waiting: the main thread's stack goes through the server's run.
  grep -q 'canopyd(cn_d_server_run+0x' "$TMP/canopyd.log" ||
    fail "SIG$name: the backtrace names no canopyd function: $(cat "$TMP/canopyd.log")"
  n=$((n + 1))
done

# A real fault on the main thread: a call to cn_d_server_backend with a bad pointer, made
# by gdb (rdi: the argument; the old pc: the return address).
[ "$(uname -m)" = x86_64 ] || skip "the gdb call is written for x86_64"
: >"$TMP/canopyd.log"
start_daemon epoll "$TMP/state"
[ "$(field "$S" state)" = saved ] || fail "after restart $n: $S not listed as saved"
gdb -nx -batch -p $D_PID -ex 'thread 1' -ex 'set $sp = $sp - 8' -ex 'set *(long *)$sp = $pc' \
  -ex 'set $rdi = 0x10' -ex 'set $pc = (long)&cn_d_server_backend' -ex detach \
  >"$TMP/gdb.log" 2>&1 || fail "gdb: $(cat "$TMP/gdb.log")"
if [ $ASAN = 1 ]; then
  crashed 1
  grep -q 'ERROR: AddressSanitizer: SEGV on unknown address 0x0*[0-9a-f]\{1,4\} ' "$TMP/canopyd.log" ||
    fail "no ASan SEGV report: $(cat "$TMP/canopyd.log")"
  grep -q ' in cn_d_server_backend ' "$TMP/canopyd.log" || fail "ASan's report names no frame"
else
  crashed 139
  grep -q '^canopyd: fatal signal 11 (SIGSEGV) at 0x[0-9a-f]*, thread [0-9]* (canopyd)$' "$TMP/canopyd.log" ||
    fail "SIGSEGV: no report line: $(cat "$TMP/canopyd.log")"
  grep -q 'canopyd(cn_d_server_backend+0x' "$TMP/canopyd.log" ||
    fail "SIGSEGV: the faulting function is not in the backtrace: $(cat "$TMP/canopyd.log")"
fi

# The unusable stack (the unwinder cannot walk it: only the report line is checked).
: >"$TMP/canopyd.log"
start_daemon io_uring "$TMP/state"
gdb -nx -batch -p $D_PID -ex 'thread 1' -ex 'set $sp = 0x20000' \
  -ex 'set $pc = (long)&cn_d_server_run' -ex detach >"$TMP/gdb.log" 2>&1 || fail "gdb: $(cat "$TMP/gdb.log")"
if [ $ASAN = 1 ]; then
  crashed 1
  grep -q 'ERROR: AddressSanitizer: stack-overflow on address 0x00000001fff' "$TMP/canopyd.log" ||
    fail "no ASan stack-overflow report: $(cat "$TMP/canopyd.log")"
else
  crashed 139
  grep -q '^canopyd: fatal signal 11 (SIGSEGV) at 0x1fff[0-9a-f], thread [0-9]* (canopyd)$' "$TMP/canopyd.log" ||
    fail "stack overflow: no report line (no alternate stack?): $(cat "$TMP/canopyd.log")"
fi

# systemd's restart: the saved session is back, and its tree can be read.
: >"$TMP/canopyd.log"
start_daemon epoll "$TMP/state"
[ "$(field "$S" state)" = saved ] || fail "after the crash: $S not listed as saved"
t=$(ok "{\"cmd\":\"tree\",\"session\":\"$S\"}" | jget 'd["tree"]["total"]')
python3 -c "import sys; sys.exit(not float(sys.argv[1]) > 0)" "$t" || fail "saved session's tree empty"
stop_daemon TERM
echo "PASS: $n signals reported with a backtrace, a real SIGSEGV and a stack overflow$([ $ASAN = 1 ] && echo " (ASan's reports)"), the saved session back after each restart, a session started just before a crash back after it"
