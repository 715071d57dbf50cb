#!/usr/bin/env bash
# One version number everywhere (NEWS.md's header): CMake's project(canopy VERSION V) is the
# source, and these must say V:
#  1. debian/changelog's newest entry (the package's version) and NEWS.md's newest heading;
#  2. `canopy --version` and `canopyd --version`: "PROG V (build H)", where H is the
#     binary's own GNU build-id as readelf reads it from the file;
#  3. the protocol's hello: version V and canopyd's build_id;
#  4. the .canopy files canopy writes: their canopy.version metadata (canopy_meta.py reads the
#     file by its documented grammar), from `canopy run -o` in-process and from a session
#     canopyd saved.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
: "${CANOPY_SOURCE_DIR:?}" "${CANOPY_WORKLOADS:?}"
command -v readelf >/dev/null || fail "readelf is missing (binutils; scripts/setup installs it)"
src=$CANOPY_SOURCE_DIR
V=$(sed -n 's/^project(canopy VERSION \([0-9][0-9.]*\) .*/\1/p' "$src/CMakeLists.txt")
[[ "$V" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "no version in CMakeLists.txt's project(): '$V'"

# ---- 1. the package and NEWS.md -----------------------------------------------------------
deb=$(sed -n '1s/^canopy (\([^)]*\)).*/\1/p' "$src/debian/changelog")
[ "$deb" = "$V" ] || fail "debian/changelog's newest version is '$deb', CMakeLists.txt's $V"
if command -v dpkg-parsechangelog >/dev/null; then
  deb=$(cd "$src" && dpkg-parsechangelog -S Version)
  [ "$deb" = "$V" ] || fail "dpkg-parsechangelog says '$deb', CMakeLists.txt $V"
fi
news=$(grep -m1 '^## ' "$src/NEWS.md" | sed 's/^## \([^ ]*\).*/\1/')
[ "$news" = "$V" ] || fail "NEWS.md's newest heading is '$news', CMakeLists.txt's $V"

# ---- 2. --version and the build-id --------------------------------------------------------
build_id() { readelf -n "$1" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p'; }
for pair in "canopy:$CANOPY_BIN" "canopyd:$CANOPYD_BIN"; do
  prog=${pair%%:*} bin=${pair#*:}
  id=$(build_id "$bin")
  [ ${#id} -ge 16 ] || fail "$bin has no GNU build-id note (readelf -n): '$id'"
  got=$("$bin" --version)
  [ "$got" = "$prog $V (build $id)" ] || fail "$prog --version says '$got', expected '$prog $V (build $id)'"
done
# The build-ids differ between the two programs: each reports its own, not a constant.
[ "$(build_id "$CANOPY_BIN")" != "$(build_id "$CANOPYD_BIN")" ] || fail "canopy and canopyd share a build-id"

# ---- 3. hello -----------------------------------------------------------------------------
start_daemon epoll "$TMP/state"
hello=$(ok '{"cmd":"hello"}')
[ "$(jget 'd["version"]' <<<"$hello")" = "$V" ] || fail "hello's version: $hello"
[ "$(jget 'd["build_id"]' <<<"$hello")" = "$(build_id "$CANOPYD_BIN")" ] || fail "hello's build_id: $hello"

# ---- 4. .canopy files ---------------------------------------------------------------------
meta() { python3 "$(dirname "$0")/canopy_meta.py" "$1" | jget "d.get('canopy.version')"; }
wl=$CANOPY_WORKLOADS/wl_shares_fp
"$CANOPY_BIN" run --no-daemon -o "$TMP/run.canopy" -- "$wl" --rounds 2 >"$TMP/run.log" 2>&1 ||
  fail "canopy run -o failed: $(cat "$TMP/run.log")"
[ "$(meta "$TMP/run.canopy")" = "$V" ] || fail "run -o's .canopy says canopy.version '$(meta "$TMP/run.canopy")'"
"$CANOPY_BIN" run --socket "$SOCK" --name vers -- "$wl" --rounds 2 >"$TMP/drun.log" 2>&1 ||
  fail "canopy run through canopyd failed: $(cat "$TMP/drun.log")"
stop_daemon
saved=$(ls "$TMP/state"/*.canopy 2>/dev/null | head -1)
[ -n "$saved" ] || fail "canopyd saved no session in $TMP/state"
[ "$(meta "$saved")" = "$V" ] || fail "canopyd's saved $saved says canopy.version '$(meta "$saved")'"
echo "test_version: $V in CMakeLists.txt, debian/changelog, NEWS.md, --version, hello, .canopy"
