#!/usr/bin/env bash
# Binaries are matched by (device, inode), not by inode alone. In a private mount
# namespace a process runs a binary from one tmpfs; then another tmpfs, holding a
# different binary with the same inode number, is bind-mounted over the file's path. Matching by
# inode alone would read the impostor (its names: deep_*, or garbage); canopy must notice
# the other device, read the mapped file through /proc/PID/map_files, and name the
# process's own functions (work_a, work_b, burn).
source "$(dirname "$0")/lib.sh"
: "${CANOPY_BIN:?}" "${CANOPY_WORKLOADS:?}"
[ "$(id -u)" = 0 ] || skip "needs root (mounts)"
command -v unshare >/dev/null || skip "unshare not installed"
REAL=$CANOPY_WORKLOADS/wl_shares_nofp
FAKE=$CANOPY_WORKLOADS/wl_deep_fp
[ -x "$REAL" ] && [ -x "$FAKE" ] || fail "workloads missing"

unshare -m --propagation private bash -s "$TMP" "$REAL" "$FAKE" "$CANOPY_BIN" >"$TMP/out" 2>"$TMP/err" <<'SH' || fail "$(cat "$TMP/err")"
set -euo pipefail
T=$1 REAL=$2 FAKE=$3 CANOPY=$4
mkdir -p "$T/a" "$T/b"
mount -t tmpfs tmpfs "$T/a"
mount -t tmpfs tmpfs "$T/b"
cp "$REAL" "$T/a/wl"
cp "$FAKE" "$T/b/wl"
ia=$(stat -c %i "$T/a/wl") ib=$(stat -c %i "$T/b/wl")
[ "$ia" = "$ib" ] || { echo "setup: inodes differ ($ia, $ib)" >&2; exit 1; }
[ "$(stat -c %d "$T/a/wl")" != "$(stat -c %d "$T/b/wl")" ] || { echo "setup: same device" >&2; exit 1; }
"$T/a/wl" 4 >/dev/null &
P=$!
sleep 0.3
mount --bind "$T/b/wl" "$T/a/wl"
# The path now names the impostor (same inode number, another device), while the process's
# maps still show that path for its real binary.
grep -q " $T/a/wl\$" /proc/$P/maps || { echo "setup: maps do not show $T/a/wl" >&2; exit 1; }
[ "$(stat -c %i "$T/a/wl")" = "$ia" ] || { echo "setup: swap failed" >&2; exit 1; }
cmp -s "$T/a/wl" "$REAL" && { echo "setup: the path still shows the real binary" >&2; exit 1; }
"$CANOPY" tree --pid $P --no-daemon --unwind dwarf --duration 2s --format folded
wait $P || true
SH
grep -q 'work_a' "$TMP/out" && grep -q 'burn' "$TMP/out" ||
  fail "the process's own functions are not named: $(head -5 "$TMP/out")"
if grep -q 'deep' "$TMP/out"; then
  fail "names came from the impostor binary: $(grep -m3 deep "$TMP/out")"
fi
echo "PASS: mapped binary matched by device and inode"
