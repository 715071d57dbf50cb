#!/usr/bin/env bash
# How long scripts/demo takes on a fresh Debian 12 machine (issue 23: <= 60 s to the first
# tree, installs and build included). A clean bookworm root made by debootstrap (default
# variant: what a minimal Debian 12 install has, no compiler), the committed tree of REV
# copied into it, then in a chroot (the host's kernel; /proc, /sys, /dev bound):
#   1. `time scripts/demo` as a new user runs it (total wall, user and sys CPU), and
#   2. in a second fresh root, each phase of it timed alone: apt-get update, download,
#      install, configure, build, the two `canopy run`s.
# Wall times follow the machine's load (printed before and after); the CPU times do not.
#   bench/demo_fresh.sh [REV]      (root; needs debootstrap and a reachable Debian mirror)
# PHASES=0 skips part 2 (for a REV before scripts/setup --for demo, e.g. the old demo).
# Roots under $CANOPY_FRESH_DIR (default /var/tmp/canopy-fresh); the debootstrapped root is
# kept as a tarball and reused. Figures: docs/performance.md, "scripts/demo on a fresh
# machine".
set -euo pipefail
rev=${1:-HEAD}
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${CANOPY_FRESH_DIR:-/var/tmp/canopy-fresh}
mirror=${CANOPY_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "demo_fresh: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "demo_fresh: apt-get install debootstrap" >&2; exit 2; }
mkdir -p "$dir"

if [ ! -f "$dir/bookworm.tar" ]; then
  rm -rf "$dir/base"
  debootstrap bookworm "$dir/base" "$mirror" >"$dir/debootstrap.log"
  # A fresh install's sources: the release, its updates and security.
  cat >"$dir/base/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -f "$dir/base/var/cache/apt/archives/"*.deb
  tar -C "$dir/base" -cf "$dir/bookworm.tar" .
  rm -rf "$dir/base"
fi

root="$dir/run"
cleanup() {
  for m in proc sys dev; do umount -R "$root/$m" 2>/dev/null || true; done
}
trap cleanup EXIT

# fresh_root: a new root from the tarball with canopy's REV in /root/canopy.
fresh_root() {
  cleanup
  rm -rf "$root"
  mkdir -p "$root/root/canopy"
  tar -C "$root" -xf "$dir/bookworm.tar"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  git -C "$src" archive "$rev" | tar -x -C "$root/root/canopy"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
}

in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb \
    bash -c "cd /root/canopy && $1"
}

echo "== $(git -C "$src" log --oneline -1 "$rev"), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
fresh_root
echo "== time scripts/demo (first tree at the first '== canopy run' line's output)"
in_root 'TIMEFORMAT="total: %R s wall, %U s user, %S s sys"; start=$EPOCHREALTIME
time (scripts/demo | while IFS= read -r l; do
  case "$l" in *"call tree, total"*) [ -n "${first:-}" ] || { first=1; e=$EPOCHREALTIME;
    echo "first tree after $(( (${e/./} - ${start/./}) / 1000 )) ms" >&2; }; esac; done)'
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"

[ "${PHASES:-1}" = 1 ] || exit 0
fresh_root
echo "== the phases, each alone (wall, user, sys)"
in_root 'set -e
pk=$(sed -n "/^BUILD_PACKAGES=(/,/^)/p" scripts/setup | grep -v "^ *#" | sed "1d;\$d" | tr "\n" " ")
export DEBIAN_FRONTEND=noninteractive
TIMEFORMAT="%R s wall, %U s user, %S s sys"
phase() { printf "%-12s " "$1"; shift; { time "$@" >/dev/null 2>&1; } 2>&1; }
phase update apt-get update -qq
phase download apt-get install -y -qq --no-install-recommends --download-only $pk
phase install apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-unsafe-io $pk
phase configure cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=Release -DCANOPY_TESTS=OFF \
  -DCANOPY_BENCH=OFF -DCANOPY_WORKLOADS=ON
phase build cmake --build build-demo -j "$(nproc)" --target canopy wl_shares_fp
wl=build-demo/tests/workloads/wl_shares_fp
phase run1 build-demo/client/canopy run --no-daemon --min-percent 1 -- $wl --rounds 80
phase run2 build-demo/client/canopy run --no-daemon --invert --min-percent 1 -- $wl --rounds 40
echo "packages: $(ls /var/cache/apt/archives/*.deb | wc -l), $(du -sm /var/cache/apt/archives | cut -f1) MB"'
echo "== load $(cut -d' ' -f1-3 /proc/loadavg)"
cleanup
rm -rf "$root"
