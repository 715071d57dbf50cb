#!/usr/bin/env bash
# SIGBUS from truncated files: canopyd reads the object files of the processes it samples
# (the sampler's unwind data and code, the symbolizer's symbols and DWARF). An
# unprivileged user copies a library of its own, has a process dlopen it, attaches with
# --unwind dwarf and truncates the file in the middle of the session (to the end of its
# code, so the target keeps running and keeps reaching new addresses whose unwind rules and
# lines lie in the cut-off part). Were any of those files mapped, the next read of a
# vanished page would be SIGBUS for the whole daemon. canopyd must stay alive, and root's
# session of another process must keep sampling.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to an unprivileged user)"
command -v setpriv >/dev/null || skip "setpriv not installed"
command -v cc >/dev/null || skip "no C compiler"
NOBODY=65534
W= R=
trap 'rc=$?; stop_daemon KILL || true; kill $W $R 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
chmod 755 "$TMP"
cp "$(dirname "$0")/daemon_proto.py" "$TMP/"
# 64 static functions (called directly, not through the GOT) that touch nothing but
# registers and the stack, so the target survives losing every page past its code (until
# it exits), called in turn so that samples keep landing on new addresses after the cut.
# Without the defence (files mapped), canopyd dies of SIGBUS here.
{
  echo 'unsigned long spin_all(unsigned long x);'
  for i in $(seq 0 63); do
    echo "static __attribute__((noinline)) unsigned long spin_$i(unsigned long x)"
    echo "{ for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + $i; return x; }"
  done
  echo 'unsigned long spin_all(unsigned long x) {'
  for i in $(seq 0 63); do echo "  x = spin_$i(x);"; done
  echo '  return x; }'
} >"$TMP/spin.c"
cat >"$TMP/host.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
  unsigned long (*spin_all)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, "spin_all");
  time_t end = time(NULL) + atoi(argv[2]);
  unsigned long x = 1;
  while (time(NULL) < end) x = spin_all(x);
  return (int)(x & 1) - 1 == 5;
}
C
mkdir "$TMP/u"
cc -O1 -g -fPIC -shared -fasynchronous-unwind-tables -o "$TMP/u/libspin.so" "$TMP/spin.c"
cc -O1 -o "$TMP/u/host" "$TMP/host.c" -ldl
chown -R $NOBODY:$NOBODY "$TMP/u"
chmod 755 "$TMP/u" "$TMP/u/host" "$TMP/u/libspin.so"
# Where the code ends: the file offset just past the executable PT_LOAD segment.
CUT=$(readelf -lW "$TMP/u/libspin.so" | while read -r type off _ _ filesz _ flags; do
  [ "$type" = LOAD ] && [[ $flags == *E* ]] && echo $((off + filesz))
done || true)
SIZE=$(stat -c %s "$TMP/u/libspin.so")
[ -n "$CUT" ] && [ "$CUT" -lt "$SIZE" ] || fail "no cut point in libspin.so (code ends at '$CUT' of $SIZE)"
readelf -SW "$TMP/u/libspin.so" | grep -q '\.debug_info' || fail "libspin.so has no DWARF"

start_daemon epoll "$TMP/state"
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
ucall() { as_nobody /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
samples() { ok "{\"cmd\":\"sessions\"}" | jget "[s['samples'] for s in d['sessions'] if s['id'] == '$1'][0]"; }

# Root's session of its own workload: the other user whose sampling must go on.
cp "$TMP/u/libspin.so" "$TMP/libroot.so"
"$TMP/u/host" "$TMP/libroot.so" 60 &
R=$!
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$TMP/u/host" "$TMP/u/libspin.so" 60 &
W=$!
sleep 0.3
RS=$(ok "{\"cmd\":\"attach\",\"pid\":$R,\"freq\":499}" | jget 'd["session"]["id"]')
r=$(ucall "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":999,\"unwind\":\"dwarf\"}")
US=$(jget 'd["session"]["id"]' <<<"$r") || fail "attach as nobody: $r"
# Wait until the library's frames are unwound and symbolized (its files are then loaded).
for ((i = 0; i < 150; i++)); do
  out=$(ucall "{\"cmd\":\"tree\",\"session\":\"$US\",\"format\":\"folded\"}" | jget 'd["output"]')
  grep -q 'spin_all;spin_' <<<"$out" && break
  sleep 0.2
done
grep -q 'spin_all;spin_' <<<"$out" || fail "nobody's dwarf session shows no libspin frames: $(head -3 <<<"$out")"
ucall "{\"cmd\":\"lines\",\"session\":\"$US\",\"function\":\"spin_7\"}" >/dev/null || true

# The attack: cut the library after its code, while both sessions run.
as_nobody truncate -s "$CUT" "$TMP/u/libspin.so"
[ "$(stat -c %s "$TMP/u/libspin.so")" = "$CUT" ] || fail "truncate did not happen"
before=$(samples "$RS")
sleep 2
kill -0 $W 2>/dev/null || fail "the target died of the cut itself (test needs it alive)"
for f in 3 11 29 41 57; do # lines reads the (now cut) DWARF again
  ucall "{\"cmd\":\"lines\",\"session\":\"$US\",\"function\":\"spin_$f\"}" >/dev/null || true
done
sleep 1
kill -0 $D_PID 2>/dev/null || fail "canopyd died after the truncation: $(tail -5 "$TMP/canopyd.log")"
ok '{"cmd":"hello"}' >/dev/null
after=$(samples "$RS")
[ "$after" -gt $((before + 100)) ] || fail "root's session stopped sampling: $before -> $after samples"
r=$(ucall "{\"cmd\":\"tree\",\"session\":\"$US\",\"format\":\"folded\"}")
[ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "nobody's session after the cut: $r"
kill $W $R 2>/dev/null || true
wait $W $R 2>/dev/null || true
stop_daemon
echo "PASS: canopyd survived a truncated library during a dwarf session ($before -> $after samples in root's session)"
