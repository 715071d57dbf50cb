#!/usr/bin/env bash
# Symbol cache poisoning: the symbolizer's cache is shared by every user's sessions. An
# unprivileged user builds a program whose build-id is copied from a victim's binary
# (`-Wl,--build-id=0x…`), gets it symbolized in canopyd, and then root profiles the victim:
# the victim's tree must show the victim's own names (victim_loop), never the attacker's
# (attacker_*), because cache entries are keyed by the file read, not by the build-id alone.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to an unprivileged user)"
command -v setpriv >/dev/null || skip "setpriv not installed"
command -v cc >/dev/null || skip "no C compiler"
NOBODY=65534
A= V=
trap 'rc=$?; stop_daemon KILL || true; kill $A $V 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
chmod 755 "$TMP"
cp "$(dirname "$0")/daemon_proto.py" "$TMP/"
BID=0x5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed
cat >"$TMP/victim.c" <<'C'
#include <stdlib.h>
#include <time.h>
volatile unsigned long sink;
__attribute__((noinline)) void victim_loop(void) { for (int i = 0; i < 1000; i++) sink += i; }
int main(int argc, char **argv) {
  time_t end = time(NULL) + atoi(argv[1]);
  while (time(NULL) < end) victim_loop();
  return 0;
}
C
# The attacker's functions sit where the victim's are, under other names.
sed 's/victim_loop/attacker_owns_this/g' "$TMP/victim.c" >"$TMP/attacker.c"
cc -O1 -fno-omit-frame-pointer -Wl,--build-id=$BID -o "$TMP/victim" "$TMP/victim.c"
cc -O1 -fno-omit-frame-pointer -Wl,--build-id=$BID -o "$TMP/attacker" "$TMP/attacker.c"
chmod 755 "$TMP/victim" "$TMP/attacker"
for b in victim attacker; do
  readelf -n "$TMP/$b" | grep -q "${BID#0x}" || fail "$b does not carry the forged build-id"
done

start_daemon epoll "$TMP/state"
ucall() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
tree_of() { # caller session → folded text, polled until a name from want shows up
  local who=$1 sid=$2 want=$3 out i
  for ((i = 0; i < 150; i++)); do
    if [ "$who" = nobody ]; then
      out=$(ucall "{\"cmd\":\"tree\",\"session\":\"$sid\",\"format\":\"folded\"}" | jget 'd["output"]')
    else
      out=$(ok "{\"cmd\":\"tree\",\"session\":\"$sid\",\"format\":\"folded\"}" | jget 'd["output"]')
    fi
    grep -q "$want" <<<"$out" && break
    sleep 0.2
  done
  printf '%s\n' "$out"
}

# 1. The attacker's binary is symbolized first, filling the cache under the build-id.
setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$TMP/attacker" 30 &
A=$!
sleep 0.2
AS=$(ucall "{\"cmd\":\"attach\",\"pid\":$A,\"freq\":499}" | jget 'd["session"]["id"]')
aout=$(tree_of nobody "$AS" attacker_owns_this)
grep -q attacker_owns_this <<<"$aout" || fail "the attacker's own session is not symbolized: $aout"

# 2. Root profiles the victim, which carries the same build-id.
"$TMP/victim" 30 &
V=$!
sleep 0.2
VS=$(ok "{\"cmd\":\"attach\",\"pid\":$V,\"freq\":499}" | jget 'd["session"]["id"]')
vout=$(tree_of root "$VS" victim_loop)
if grep -q attacker <<<"$vout"; then
  fail "the victim's tree shows the attacker's names: $(grep -m2 attacker <<<"$vout")"
fi
grep -q victim_loop <<<"$vout" || fail "the victim's functions are not named: $(head -3 <<<"$vout")"
kill $A $V 2>/dev/null || true
wait $A $V 2>/dev/null || true
stop_daemon
echo "PASS: a forged build-id does not name another user's binary"
