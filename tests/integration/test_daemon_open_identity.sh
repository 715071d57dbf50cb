#!/usr/bin/env bash
# A target's library is read as the file that was checked, never as whatever its path
# names later (docs/security.md, issue 26). canopyd runs as its own session leader (setsid,
# as systemd runs it). nobody's process dlopens a library from a directory nobody owns,
# nobody attaches, then renames the library and puts something else at its path before
# any sample lands in it; only then does the process run the library's code, so the
# symbolizer opens the path after the swap:
#   symlink: a link to a root-only ELF (0600 in a 0700 directory) with the same layout:
#            nobody's tree must not show its function names, nor `lines` its source paths;
#   pty:     a link to a pty whose master nobody holds, then closes: a session leader that
#            opens it without O_NOCTTY gets it as controlling terminal and then SIGHUP;
#            canopyd must stay alive;
#   fifo:    a FIFO nobody never opens: an open() without O_NONBLOCK blocks the symbolizer
#            thread; root's new session must still be symbolized, and SIGTERM must stop
#            canopyd within 2 s.
# Throughout, root's own session of another process must keep sampling; a SIGHUP (case
# hup) must not end canopyd, and SIGTERM (always, last) must end it within 2 s. CASES
# (default "symlink pty fifo hup") selects cases, to show each one failing on older code.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_nobody
NOBODY=65534
PIDS=()
trap 'rc=$?; stop_daemon KILL || true; kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
chmod 755 "$TMP"
cp "$(dirname "$0")/daemon_proto.py" "$TMP/"
die() { fail "$*; canopyd's log: $(tail -20 "$TMP/canopyd.log")"; }
# bad MSG: a failure that does not stop the test, so every check of a case is reported.
FAILS=()
bad() { echo "FAIL: $*" >&2; FAILS+=("$*"); }

# A library of 34 functions, called in turn; the secret one has the same code under
# other names (and other source file names in its DWARF), so the same file offsets name
# secret functions if the secret file is read.
gen() { # PREFIX: C source
  for i in $(seq 0 32); do
    echo "__attribute__((noinline)) unsigned long ${1}_$i(unsigned long x)"
    echo "{ for (int i = 0; i < 3000; i++) x = x * 6364136223846793005UL + $i; return x; }"
  done
  echo "unsigned long ${1}_all(unsigned long x) {"
  for i in $(seq 0 32); do echo "  x = ${1}_$i(x);"; done
  echo '  return x; }'
}
gen spin >"$TMP/spin.c"
gen spin >"$TMP/secret_src.c"
cat >"$TMP/host.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* host LIB SECONDS GO: dlopens LIB, waits until the file GO exists, then runs it. */
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  unsigned long (*all)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, "spin_all");
  for (int i = 0; i < 6000 && access(argv[3], F_OK) != 0; i++) usleep(10000); /* <= 60 s */
  time_t end = time(NULL) + atoi(argv[2]);
  unsigned long x = 1;
  while (time(NULL) < end) x = all(x);
  return (int)(x & 1) - 1 == 5;
}
C
mkdir -p "$TMP/u" "$TMP/r" "$TMP/secret"
cc -O1 -g -fPIC -shared -o "$TMP/u/libspin.so" "$TMP/spin.c"
cc -O1 -o "$TMP/u/host" "$TMP/host.c" -ldl
# Root's secret: the same code named secret_*, from secret_src.c, readable by root only.
(cd "$TMP/secret" && sed 's/spin_/secret_/g' ../secret_src.c >secret_src.c &&
  cc -O1 -g -fPIC -shared -o libsecret.so secret_src.c && rm secret_src.c)
chmod 0700 "$TMP/secret"
chmod 0600 "$TMP/secret/libsecret.so"
SECRET=$TMP/secret/libsecret.so
# The secret's functions must sit at nobody's library's offsets (else the test proves
# nothing): compare the two symbol tables' offsets.
offs() { nm "$1" | awk '/ T (spin|secret)_[0-9]/ {print $1}' | sort; }
[ "$(offs "$TMP/u/libspin.so")" = "$(offs "$SECRET")" ] || fail "the two libraries' layouts differ"
chown -R $NOBODY:$NOBODY "$TMP/u"
chmod 755 "$TMP/u" "$TMP/u/host" "$TMP/u/libspin.so"
cp "$TMP/u/libspin.so" "$TMP/r/libroot.so"

NOBODY_RUN="setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups"
as_nobody() { $NOBODY_RUN "$@"; } # (not in the background: $! would be a subshell's)
ucall() { as_nobody /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
samples() { ok "{\"cmd\":\"sessions\"}" | jget "[s['samples'] for s in d['sessions'] if s['id'] == '$1'][0]"; }
folded() { # CALLER SESSION: the session's folded tree
  local r
  if [ "$1" = nobody ]; then r=$(ucall "{\"cmd\":\"tree\",\"session\":\"$2\",\"format\":\"folded\"}")
  else r=$(call "{\"cmd\":\"tree\",\"session\":\"$2\",\"format\":\"folded\"}"); fi
  jget 'd.get("output", "")' <<<"$r"
}
# root_symbolized: root attaches to a new process running a fresh copy of the library
# (a new object, so the symbolizer must load it now) and waits up to 10 s for its names.
N=0
root_symbolized() {
  N=$((N + 1))
  cp "$TMP/r/libroot.so" "$TMP/r/libroot$N.so"
  touch "$TMP/r/go$N"
  "$TMP/u/host" "$TMP/r/libroot$N.so" 30 "$TMP/r/go$N" &
  PIDS+=($!)
  local pid=$! s out
  sleep 0.2
  s=$(ok "{\"cmd\":\"attach\",\"pid\":$pid,\"freq\":499}" | jget 'd["session"]["id"]')
  for ((i = 0; i < 50; i++)); do
    out=$(folded root "$s")
    grep -q 'spin_all;spin_' <<<"$out" && break
    sleep 0.2
  done
  ok "{\"cmd\":\"stop\",\"session\":\"$s\"}" >/dev/null
  kill $pid 2>/dev/null || true
  grep -q 'spin_all;spin_' <<<"$out" || bad "root's new session is not symbolized: $(head -1 <<<"$out")"
}

# canopyd as a session leader without a controlling terminal (how systemd runs it).
start_leader epoll "$TMP/state"

# Root's own long session: it must keep sampling whatever nobody does.
touch "$TMP/r/go0"
"$TMP/u/host" "$TMP/r/libroot.so" 120 "$TMP/r/go0" &
PIDS+=($!)
RS=$(ok "{\"cmd\":\"attach\",\"pid\":$!,\"freq\":499}" | jget 'd["session"]["id"]')

# attack NAME: nobody's process dlopens $TMP/u/NAME/libspin.so, nobody attaches, then
# swap NAME (a function) replaces the library's path, and the process starts running it.
# Sets US (nobody's session) and before (root's sample count).
attack() {
  local dir=$TMP/u/$1 r
  as_nobody mkdir "$dir"
  as_nobody cp "$TMP/u/libspin.so" "$dir/libspin.so"
  $NOBODY_RUN "$TMP/u/host" "$dir/libspin.so" 60 "$dir/go" &
  PIDS+=($!)
  local pid=$!
  sleep 0.3
  r=$(ucall "{\"cmd\":\"attach\",\"pid\":$pid,\"freq\":999}")
  US=$(jget 'd["session"]["id"]' <<<"$r") || die "attach as nobody: $r"
  sleep 0.3 # the sampler has met the library (and checked it) at attach
  as_nobody mv "$dir/libspin.so" "$dir/libspin.old"
  "swap_$1" "$dir/libspin.so"
  before=$(samples "$RS")
  as_nobody touch "$dir/go"
}
swap_symlink() { as_nobody ln -s "$SECRET" "$1"; }
swap_fifo() { as_nobody mkfifo "$1"; }
swap_pty() {
  # nobody holds a pty's master, links its slave at the path, and closes the master once
  # the library's frames have been symbolized (or not).
  $NOBODY_RUN /usr/bin/python3 -c '
import os, sys, time
m, s = os.openpty()
os.symlink(os.ttyname(s), sys.argv[1])
os.close(s)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
os.close(m)
time.sleep(1)' "$1" "$(dirname "$1")/hangup" &
  PIDS+=($!)
  for ((i = 0; i < 50; i++)); do [ -L "$1" ] && return 0; sleep 0.1; done
  fail "no pty link"
}

# The library's frames have been sampled and (after root_symbolized) handed to the
# symbolizer behind them: nobody's tree shows them, named or not.
lib_sampled() { folded nobody "$US" | grep -Eq 'libspin|spin_|secret_'; }
alive() { kill -0 $D_PID 2>/dev/null || die "canopyd died ($1)"; }
root_sampling() {
  local after
  after=$(samples "$RS")
  [ "$after" -gt $((before + 200)) ] || die "root's session stopped sampling ($1): $before -> $after"
}

for case in ${CASES:-symlink pty fifo hup}; do
  case $case in
  symlink)
    attack symlink
    wait_for 10 lib_sampled || die "symlink: nobody's session shows no library frames"
    root_symbolized
    out=$(folded nobody "$US")
    ! grep -q 'secret_' <<<"$out" || bad "symlink: nobody's tree shows the root-only file's names: $(grep -o 'secret_[0-9]*' <<<"$out" | sort -u | wc -l) of them"
    r=$(ucall "{\"cmd\":\"lines\",\"session\":\"$US\",\"function\":\"secret_7\"}")
    ! grep -q 'secret_src' <<<"$r" || bad "symlink: nobody's lines show the root-only file's source: $(grep -o '[^"]*secret_src[^"]*' <<<"$r" | head -1)"
    root_sampling symlink
    echo "symlink: done ($(grep -c 'libspin' <<<"$out") unsymbolized stacks, no secret name)"
    ;;
  pty)
    attack pty
    wait_for 10 lib_sampled || die "pty: nobody's session shows no library frames"
    root_symbolized
    touch "$TMP/u/pty/hangup" # nobody closes the master: a controlling tty hangs up
    sleep 1.5
    alive "pty: SIGHUP from a controlling terminal it acquired"
    [ "$(ps -o tty= -p $D_PID | tr -d ' ')" = "?" ] || die "canopyd has a controlling terminal: $(ps -o tty= -p $D_PID)"
    root_sampling pty
    echo "pty: done"
    ;;
  fifo)
    attack fifo
    wait_for 10 lib_sampled || die "fifo: nobody's session shows no library frames"
    sleep 0.5 # the symbolizer meets the FIFO
    root_symbolized
    root_sampling fifo
    echo "fifo: done"
    ;;
  hup)
    # SIGHUP (an administrator's, or a hangup) is not the end of canopyd.
    kill -HUP $D_PID
    sleep 0.3
    alive "SIGHUP"
    ok '{"cmd":"hello"}' >/dev/null
    grep -q 'SIGHUP ignored' "$TMP/canopyd.log" || bad "no log line for SIGHUP"
    echo "hup: logged and ignored"
    ;;
  *) fail "unknown case $case" ;;
  esac
done

# SIGTERM ends canopyd within 2 s, whatever its threads are doing.
t0=$(date +%s%N)
kill -TERM $D_PID
for ((i = 0; i < 40; i++)); do kill -0 $D_PID 2>/dev/null || break; sleep 0.05; done
kill -0 $D_PID 2>/dev/null && die "canopyd still runs 2 s after SIGTERM${FAILS:+ (and: ${FAILS[*]})}"
rc=0
wait $D_PID || rc=$?
D_PID=
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc = 0 ] || fail "canopyd exited $rc on SIGTERM: $(tail -5 "$TMP/canopyd.log")"
[ ${#FAILS[@]} = 0 ] || die "${FAILS[*]}"
echo "PASS: symlink, pty and FIFO at a checked library's path refused; SIGHUP ignored; SIGTERM exit in $ms ms"
