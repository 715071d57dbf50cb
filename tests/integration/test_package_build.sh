#!/usr/bin/env bash
# The Debian package (scripts/package: debhelper, dpkg-buildpackage -b, from the CMake
# install), built into $CANOPY_BUILD_DIR/package-test/ for integration.test_package_install:
#  1. its name is canopy_V_ARCH.deb with CMakeLists.txt's version V;
#  2. lintian reports no error, and each warning it reports is listed with its reason in
#     docs/packaging.md ("lintian");
#  3. Depends comes from dpkg-shlibdeps (the libraries the binaries link, e.g. libjansson4,
#     libunwind8), and the contents: canopy, canopyd, the units of systemd/ unchanged plus the
#     conffile drop-in, the tmpfiles.d entry, /etc/canopy/canopyd.conf as a conffile, the
#     docs; and every manual page and bash completion the CMake install installs.
# Skips only where dpkg-buildpackage is absent (never under CI=true).
source "$(dirname "$0")/lib.sh"
: "${CANOPY_SOURCE_DIR:?}" "${CANOPY_BUILD_DIR:?}"
command -v dpkg-buildpackage >/dev/null || skip "dpkg-buildpackage is absent (scripts/setup --for package installs dpkg-dev)"
src=$CANOPY_SOURCE_DIR
out=$CANOPY_BUILD_DIR/package-test
V=$(sed -n 's/^project(canopy VERSION \([0-9][0-9.]*\) .*/\1/p' "$src/CMakeLists.txt")
arch=$(dpkg --print-architecture)

# ---- 1. build -----------------------------------------------------------------------------
rm -rf "$out"
start=$(date +%s)
"$src/scripts/package" --out "$out" >"$TMP/package.log" 2>&1 || fail "scripts/package failed: $(tail -30 "$TMP/package.log")"
echo "scripts/package: $(($(date +%s) - start)) s"
deb=$out/canopy_${V}_${arch}.deb
[ "$(tail -1 "$TMP/package.log")" = "$deb" ] || fail "scripts/package did not make $deb: $(tail -3 "$TMP/package.log")"
[ "$(dpkg-deb -f "$deb" Version)" = "$V" ] || fail "the package's version is $(dpkg-deb -f "$deb" Version), not $V"

# ---- 2. lintian ---------------------------------------------------------------------------
[ -f "$out/lintian.txt" ] || fail "no lintian report"
! grep '^E: ' "$out/lintian.txt" || fail "lintian errors (above)"
while read -r tag; do
  grep -q "^| \`$tag\` |" "$src/docs/packaging.md" || fail "lintian warns $tag, which docs/packaging.md does not list"
done < <(sed -n 's/^W: canopy[^:]*: \([a-z0-9-]*\).*/\1/p' "$out/lintian.txt" | sort -u)
cat "$out/lintian.txt"

# ---- 3. dependencies and contents --------------------------------------------------------
deps=$(dpkg-deb -f "$deb" Depends)
for lib in libc6 libjansson4 libunwind8 libdw1 libbpf1 libsystemd0 libmicrohttpd12; do
  [[ ", $deps" == *", $lib "* || ", $deps," == *", $lib,"* ]] || fail "Depends lacks $lib: $deps"
done
[[ "$deps" != *'${'* ]] || fail "an unexpanded substitution in Depends: $deps"
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$TMP/files"
for f in /usr/bin/canopy /usr/sbin/canopyd /lib/systemd/system/canopyd.service \
  /lib/systemd/system/canopyd.socket /lib/systemd/system/canopyd.service.d/debian.conf \
  /usr/lib/tmpfiles.d/canopy.conf /etc/canopy/canopyd.conf /usr/share/doc/canopy/copyright \
  /usr/share/doc/canopy/NEWS.md.gz /usr/share/doc/canopy/cli.md.gz; do
  grep -qx "$f" "$TMP/files" || fail "the package lacks $f"
done
mkdir -p "$TMP/x" "$TMP/ctl"
dpkg-deb -x "$deb" "$TMP/x"
dpkg-deb -e "$deb" "$TMP/ctl"
[ "$(cat "$TMP/ctl/conffiles")" = /etc/canopy/canopyd.conf ] || fail "conffiles: $(cat "$TMP/ctl/conffiles")"
for u in canopyd.service canopyd.socket; do
  cmp -s "$src/systemd/$u" "$TMP/x/lib/systemd/system/$u" || fail "the package's $u differs from systemd/$u"
done
cmp -s "$src/systemd/canopyd.conf.example" "$TMP/x/etc/canopy/canopyd.conf" || fail "canopyd.conf is not systemd/canopyd.conf.example"
grep -qx 'd /var/lib/canopy 0750 root root -' "$TMP/x/usr/lib/tmpfiles.d/canopy.conf" || fail "tmpfiles.d: $(cat "$TMP/x/usr/lib/tmpfiles.d/canopy.conf")"
# Whatever the CMake install puts under share/man and share/bash-completion (the manual
# pages and the completion, when the tree has them) is in the package.
DESTDIR=$TMP/inst cmake --install "$CANOPY_BUILD_DIR" --prefix /usr >"$TMP/install.log" 2>&1 ||
  fail "cmake --install failed: $(cat "$TMP/install.log")"
n=0
while read -r f; do
  n=$((n + 1))
  rel=${f#"$TMP/inst"}
  grep -qx "$rel" "$TMP/files" || grep -qx "$rel.gz" "$TMP/files" || fail "the CMake install has $rel, the package not"
done < <(find "$TMP/inst/usr/share/man" "$TMP/inst/usr/share/bash-completion" -type f 2>/dev/null)
echo "test_package_build: $deb ($(du -k "$deb" | cut -f1) KiB), $n manual pages and completions"
