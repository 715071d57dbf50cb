#!/usr/bin/env bash
# A full state dir: canopyd keeps serving, says so once, and backs off instead of
# re-serializing the session every 2 s. canopyd runs in a private mount namespace whose
# state dir is a small tmpfs, filled up once canopyd runs; a session is recorded and stopped;
# over 9 s it may try to save it at most 4 times (2, 4, 8 s apart after the first), where
# the old behaviour tried every 2 s; queries keep working meanwhile.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}" "${CANOPY_BIN:?}" "${CANOPY_WORKLOADS:?}"
[ "$(id -u)" = 0 ] || skip "needs root (mounts)"
command -v unshare >/dev/null || skip "unshare not installed"
command -v strace >/dev/null || skip "strace not installed"
chmod 755 "$TMP"
unshare -m --propagation private bash -s "$TMP" "$CANOPYD_BIN" "$CANOPY_BIN" \
  "$CANOPY_WORKLOADS/wl_deep_nofp" >"$TMP/out" 2>&1 <<'SH' || fail "$(tail -20 "$TMP/out")"
set -euo pipefail
T=$1 D=$2 C=$3 WL=$4
mkdir -p "$T/state"
mount -t tmpfs -o size=16k tmpfs "$T/state"
# Count the daemon's attempts to write a session file (open of the .tmp it renames).
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -qq -e trace=openat -o "$T/trace" \
  "$D" --socket "$T/s.sock" --state-dir "$T/state" 2>"$T/d.log" &
SP=$!
for i in $(seq 100); do [ -S "$T/s.sock" ] && break; sleep 0.1; done
cat /dev/zero >"$T/state/fill" 2>/dev/null || true # the disk is now full
"$C" run --socket "$T/s.sock" --unwind dwarf -o /dev/null -- "$WL" 2 0 >/dev/null 2>&1
t0=$(date +%s.%N)
sleep 9
"$C" sessions --socket "$T/s.sock" >/dev/null || { echo "sessions failed while the disk is full"; exit 1; }
"$C" tree s1 --socket "$T/s.sock" -o /dev/null || { echo "tree failed while the disk is full"; exit 1; }
kill -TERM $(pgrep -P $SP -x canopyd)
wait $SP || true
tries=$(grep -c 's1\.canopy\.[[:alnum:]]\{6\}\.tmp' "$T/trace" || true)
msgs=$(grep -c 'saving session s1' "$T/d.log" || true)
echo "tries=$tries messages=$msgs"
grep -q 'No space left\|ENOSPC\|space' "$T/d.log" || { echo "no ENOSPC message: $(cat "$T/d.log")"; exit 1; }
# One attempt when the session ends, then back-off (2, 4 s …) within 9 s, one at shutdown.
[ "$tries" -ge 2 ] && [ "$tries" -le 5 ] || { echo "save attempts: $tries"; exit 1; }
[ "$msgs" -le 2 ] || { echo "the failure was logged $msgs times"; exit 1; }
SH
cat "$TMP/out" | tail -1
echo "PASS: a full state dir is retried with back-off, queries keep working"
