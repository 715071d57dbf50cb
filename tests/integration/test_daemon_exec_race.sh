#!/usr/bin/env bash
# The access check vs. perf_event_open race: canopyd checks the target by pid, then opens
# the events by pid. An unprivileged target that execs a setuid-root program in between
# must not be profiled by root on the user's behalf. canopyd (started with a test-only
# pause between the check and the opening, CANOPYD_TEST_ATTACH_DELAY_MS, so the race is hit
# every time) opens the events disabled and, before enabling them, re-checks through a
# pidfd that the process is still the image it checked and still allowed. Cases:
# 1. the target passes the check, then execs a setuid helper during the pause: the attach
#    is refused by the re-check, no session is created (without it: a session sampling
#    the setuid program, setuid_secret_spin in the tree);
# 2. a child the target forks after sampling started execs the setuid helper: the kernel
#    detaches the inherited events at that exec, so the session never shows it, while the
#    target's own frames (user_before_exec) keep coming.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
# The pause is canopyd-test's only (the installed canopyd reads no test variable).
CANOPYD_BIN=${CANOPYD_TEST_BIN:?run through ctest}
[ "$(id -u)" = 0 ] || skip "needs root (to install a setuid helper and switch users)"
command -v setpriv >/dev/null || skip "setpriv not installed"
command -v cc >/dev/null || skip "no C compiler"
NOBODY=65534
T1= T2= C2=
trap 'rc=$?; stop_daemon KILL || true; kill $T1 $T2 $C2 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
chmod 755 "$TMP"
cp "$(dirname "$0")/daemon_proto.py" "$TMP/"
cat >"$TMP/suidspin.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void setuid_secret_spin(void) { for (int i = 0; i < 100000; i++) sink += i; }
int main(int argc, char **argv) {
  if (geteuid() != 0) { fprintf(stderr, "suidspin: not setuid root\n"); return 3; }
  time_t end = time(NULL) + atoi(argv[1]);
  while (time(NULL) < end) setuid_secret_spin();
  return 0;
}
C
cat >"$TMP/racer.c" <<'C'
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
__attribute__((noinline)) void user_before_exec(void) { for (int i = 0; i < 100000; i++) sink += i; }
/* racer TRIGGER HELPER SECONDS exec|fork: spins until TRIGGER exists, then execs HELPER
 * (exec) or has a child exec it while spinning on (fork). */
int main(int argc, char **argv) {
  while (access(argv[1], F_OK) != 0) user_before_exec();
  if (!strcmp(argv[4], "exec")) { execl(argv[2], argv[2], argv[3], (char *)NULL); return 127; }
  pid_t c = fork();
  if (c == 0) { execl(argv[2], argv[2], argv[3], (char *)NULL); _exit(127); }
  time_t end = time(NULL) + atoi(argv[3]);
  while (time(NULL) < end) user_before_exec();
  waitpid(c, NULL, 0);
  return 0;
}
C
mkdir "$TMP/bin"
cc -O1 -fno-omit-frame-pointer -o "$TMP/bin/suidspin" "$TMP/suidspin.c"
cc -O1 -fno-omit-frame-pointer -o "$TMP/bin/racer" "$TMP/racer.c"
chmod 755 "$TMP/bin" "$TMP/bin/racer"
chmod 4755 "$TMP/bin/suidspin"
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
as_nobody "$TMP/bin/suidspin" 0 || fail "the setuid helper does not run as root (nosuid mount?)"
ucall() { as_nobody /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
n_sessions() { ok '{"cmd":"sessions"}' | jget 'len(d["sessions"])'; }

DELAY_MS=2500
export CANOPYD_TEST_ATTACH_DELAY_MS=$DELAY_MS
start_daemon epoll "$TMP/state"
unset CANOPYD_TEST_ATTACH_DELAY_MS

# 1. Exec of the setuid helper between the check and the opening of the events.
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$TMP/bin/racer" "$TMP/go1" "$TMP/bin/suidspin" 20 exec &
T1=$!
sleep 0.2
before=$(n_sessions)
t0=$(date +%s%N)
ucall "{\"cmd\":\"attach\",\"pid\":$T1,\"freq\":999}" >"$TMP/r1" &
RQ=$!
# The check runs as soon as the request is read; the pause follows it. Exec inside it.
sleep 1
touch "$TMP/go1"
wait $RQ || true
r=$(cat "$TMP/r1")
elapsed=$((($(date +%s%N) - t0) / 1000000))
[ $elapsed -ge $DELAY_MS ] || fail "the reply came before the pause ($elapsed ms): the check did not pass first: $r"
grep -q '^Uid:.*0' /proc/$T1/status || fail "the target did not exec the setuid helper"
if [ "$(jget 'd["ok"]' <<<"$r")" = True ]; then
  sid=$(jget 'd["session"]["id"]' <<<"$r")
  sleep 1
  out=$(ok "{\"cmd\":\"tree\",\"session\":\"$sid\",\"format\":\"folded\"}" | jget 'd["output"]')
  fail "attach granted across a setuid exec (tree: $(grep -c setuid_secret_spin <<<"$out") setuid_secret_spin stacks): $r"
fi
[ "$(jget 'd["error"]["code"]' <<<"$r")" = permission_denied ] || fail "code: $r"
jget 'd["error"]["message"]' <<<"$r" | grep -q "exec'ed" || fail "not refused by the re-check: $r"
[ "$(n_sessions)" = "$before" ] || fail "the refused attach left a session"
kill $T1 2>/dev/null || true

# 2. A child forked after sampling started execs the setuid helper.
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$TMP/bin/racer" "$TMP/go2" "$TMP/bin/suidspin" 30 fork &
T2=$!
sleep 0.2
r=$(ucall "{\"cmd\":\"attach\",\"pid\":$T2,\"freq\":999}")
sid=$(jget 'd["session"]["id"]' <<<"$r") || fail "attach to the forking target: $r"
touch "$TMP/go2"
# Polled: on a loaded machine the fork and exec may take a while (both run 30 s at most,
# killed below).
C2=
for ((i = 0; i < 100; i++)); do
  C2=$(pgrep -P $T2) && grep -q '^Uid:.*0' /proc/$C2/status 2>/dev/null && break
  sleep 0.1
done
[ -n "$C2" ] || fail "the target has no child"
grep -q '^Uid:.*0' /proc/$C2/status || fail "the child did not exec the setuid helper"
sleep 2 # the child spins as root meanwhile: were it sampled, its frames would be in the tree
for ((i = 0; i < 50; i++)); do
  out=$(ucall "{\"cmd\":\"tree\",\"session\":\"$sid\",\"format\":\"folded\"}" | jget 'd["output"]')
  grep -q user_before_exec <<<"$out" && break
  sleep 0.2
done
grep -q user_before_exec <<<"$out" || fail "the target's own frames are missing: $(head -3 <<<"$out")"
if grep -q 'setuid_secret_spin\|suidspin' <<<"$out"; then
  fail "the setuid child was profiled: $(grep 'setuid_secret_spin\|suidspin' <<<"$out" | head -3)"
fi
kill $C2 $T2 2>/dev/null || true
wait $T2 2>/dev/null || true
stop_daemon
echo "PASS: a setuid exec between check and enable is refused (after ${elapsed} ms); a setuid child after enable is not sampled"
