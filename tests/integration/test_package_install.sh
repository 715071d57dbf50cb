#!/usr/bin/env bash
# The package integration.test_package_build made, installed on this machine (apt, so its
# maintainer scripts run) and purged (runs alone: /usr/bin/canopy and /run/canopy exist
# meanwhile):
#  1. installed: its version, /var/lib/canopy made by systemd-tmpfiles (0750), the socket
#     enabled (sockets.target.wants), the units accepted by systemd-analyze verify;
#  2. `canopy --version` and `canopyd --version` from /usr: V and each binary's build-id;
#  3. `canopy run -- /bin/true` (no daemon: in-process);
#  4. the unit's effective ExecStart line (the unit, then its drop-ins) run by hand: canopyd
#     with the conffile on /run/canopy/canopy.sock; `canopy status` and `canopy run --
#     /bin/true` through it; SIGTERM exits 0;
#  5. purged: no file of the package, no /etc/canopy, /var/lib/canopy (with the session
#     step 4 saved), /run/canopy, nor the socket's enablement symlink is left.
# Refuses to run where canopy is installed or its paths exist (it would purge them).
source "$(dirname "$0")/lib.sh"
: "${CANOPY_SOURCE_DIR:?}" "${CANOPY_BUILD_DIR:?}"
command -v dpkg-buildpackage >/dev/null || skip "dpkg-buildpackage is absent (scripts/setup --for package installs dpkg-dev)"
[ "$(id -u)" = 0 ] || skip "installing a package needs root"
command -v readelf >/dev/null || fail "readelf is missing (binutils)"
V=$(sed -n 's/^project(canopy VERSION \([0-9][0-9.]*\) .*/\1/p' "$CANOPY_SOURCE_DIR/CMakeLists.txt")
deb=$CANOPY_BUILD_DIR/package-test/canopy_${V}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || fail "no $deb (integration.test_package_build makes it)"

# One package test at a time on this machine, whichever build dir it runs from.
exec 9>/run/lock/canopy-test-package.lock
flock -w 600 9 || fail "another package test holds /run/lock/canopy-test-package.lock"
if dpkg-query -W -f='${Status}' canopy 2>/dev/null | grep -q installed; then
  skip "canopy is installed on this machine: the test installs and purges its own"
fi
for p in /etc/canopy /var/lib/canopy /run/canopy; do
  [ ! -e "$p" ] || skip "$p exists: the test would purge it"
done

APT=(apt-get -y -qq -o DPkg::Lock::Timeout=300)
D_PID=
installed=0
cleanup() {
  [ -z "$D_PID" ] || kill -KILL "$D_PID" 2>/dev/null || true
  [ "$installed" = 0 ] || DEBIAN_FRONTEND=noninteractive "${APT[@]}" purge canopy >/dev/null 2>&1 || true
}
trap 'rc=$?; cleanup; finish_tmp $rc' EXIT
export DEBIAN_FRONTEND=noninteractive

# ---- 1. install ---------------------------------------------------------------------------
installed=1
"${APT[@]}" install --no-install-recommends "$deb" >"$TMP/install.log" 2>&1 ||
  fail "apt-get install $deb failed: $(tail -20 "$TMP/install.log")"
[ "$(dpkg-query -W -f='${Version}' canopy)" = "$V" ] || fail "installed version $(dpkg-query -W -f='${Version}' canopy)"
dpkg -L canopy >"$TMP/files"
[ "$(stat -c %a:%U /var/lib/canopy)" = 750:root ] || fail "/var/lib/canopy: $(stat -c %a:%U /var/lib/canopy 2>&1)"
[ "$(readlink /etc/systemd/system/sockets.target.wants/canopyd.socket)" = /lib/systemd/system/canopyd.socket ] ||
  fail "canopyd.socket is not enabled: $(ls -l /etc/systemd/system/sockets.target.wants/ 2>&1)"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify canopyd.socket canopyd.service >"$TMP/verify.log" 2>&1 ||
    fail "systemd-analyze verify: $(cat "$TMP/verify.log")"
fi

# ---- 2. --version -------------------------------------------------------------------------
build_id() { readelf -n "$1" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p'; }
[ "$(/usr/bin/canopy --version)" = "canopy $V (build $(build_id /usr/bin/canopy))" ] ||
  fail "canopy --version: $(/usr/bin/canopy --version)"
[ "$(/usr/sbin/canopyd --version)" = "canopyd $V (build $(build_id /usr/sbin/canopyd))" ] ||
  fail "canopyd --version: $(/usr/sbin/canopyd --version)"

# ---- 3. canopy run, in-process ------------------------------------------------------------
# The default socket (no --socket, $CANOPY_SOCKET nor $XDG_RUNTIME_DIR): nothing listens yet.
C=(env -u CANOPY_SOCKET -u XDG_RUNTIME_DIR /usr/bin/canopy)
(cd "$TMP" && "${C[@]}" run -- /bin/true) >"$TMP/run1.out" 2>"$TMP/run1.err" || fail "canopy run -- /bin/true: $(cat "$TMP/run1.err")"
grep -q 'sampling in-process' "$TMP/run1.err" || fail "canopy run did not sample in-process: $(cat "$TMP/run1.err")"
grep -q 'call tree, total' "$TMP/run1.out" || fail "canopy run printed no tree: $(cat "$TMP/run1.out")"

# ---- 4. the unit's ExecStart, by hand -----------------------------------------------------
exec_start=
for f in /lib/systemd/system/canopyd.service /lib/systemd/system/canopyd.service.d/*.conf; do
  while IFS= read -r l; do
    case "$l" in ExecStart=*) exec_start=${l#ExecStart=} ;; esac
  done <"$f"
done
[ "$exec_start" = "/usr/sbin/canopyd --foreground --config /etc/canopy/canopyd.conf" ] ||
  fail "the effective ExecStart is '$exec_start'"
read -r -a cmd <<<"$exec_start"
setsid "${cmd[@]}" >"$TMP/canopyd.log" 2>&1 &
D_PID=$!
for ((i = 0; i < 100; i++)); do
  "${C[@]}" status >"$TMP/status.out" 2>&1 && break
  kill -0 "$D_PID" 2>/dev/null || fail "'$exec_start' exited"
  sleep 0.1
done
grep -q "^canopyd $V: up" "$TMP/status.out" || fail "canopy status: $(cat "$TMP/status.out")"
(cd "$TMP" && "${C[@]}" run -- /bin/true) >"$TMP/run2.out" 2>"$TMP/run2.err" || fail "canopy run through canopyd: $(cat "$TMP/run2.err")"
grep -q 'stays in canopyd' "$TMP/run2.err" || fail "canopy run did not go through canopyd: $(cat "$TMP/run2.err")"
kill -TERM "$D_PID"
rc=0
wait "$D_PID" || rc=$?
D_PID=
[ "$rc" = 0 ] || fail "canopyd exited $rc on SIGTERM"
ls /var/lib/canopy/*.canopy >/dev/null 2>&1 || fail "canopyd saved no session in /var/lib/canopy"

# ---- 5. purge -----------------------------------------------------------------------------
"${APT[@]}" purge canopy >"$TMP/purge.log" 2>&1 || fail "apt-get purge canopy: $(tail -20 "$TMP/purge.log")"
installed=0
! dpkg-query -W -f='${Status}' canopy 2>/dev/null | grep -q installed || fail "canopy is still installed"
left=()
while read -r f; do
  [ -e "$f" ] && [ ! -d "$f" ] && left+=("$f")
done <"$TMP/files"
for p in /etc/canopy /var/lib/canopy /run/canopy /lib/systemd/system/canopyd.service.d \
  /etc/systemd/system/sockets.target.wants/canopyd.socket \
  /var/lib/systemd/deb-systemd-helper-enabled/canopyd.socket.dsh-also; do
  [ ! -e "$p" ] && [ ! -L "$p" ] || left+=("$p")
done
[ ${#left[@]} = 0 ] || fail "left after purge: ${left[*]}"
echo "test_package_install: installed, ran, purged $(wc -l <"$TMP/files") paths; nothing left"
