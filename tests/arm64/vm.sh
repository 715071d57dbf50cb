#!/bin/sh
# canopy on a real arm64 kernel, in an emulated arm64 machine (ctest arm64.vm, registered by
# tests/cmake/sampler.cmake; docs/perf-sampler.md "arm64"):
#   vm.sh SRCDIR OUTDIR HOST_CANOPY [bench]
# 1. cross-builds canopy, canopyd and bench_sampler for arm64 (aarch64-linux-gnu.cmake, build
#    dir OUTDIR/build, incremental) and the test workloads (tests/arm64/vm_tests.sh names them);
# 2. assembles an initramfs in OUTDIR/root: the arm64 busybox, those binaries, the arm64
#    shared libraries they need and ld-linux-aarch64 (the libraries are copied once and kept:
#    the cached root), vm_init.sh as /init and vm_tests.sh; Debian's arm64 CPython 3.11 for
#    the Python check (its packages unpacked once: "the arm64 CPython" below);
# 3. boots it with qemu-system-aarch64 -M virt -cpu max (TCG: pointer authentication and
#    BTI on) and Debian's arm64 kernel, console on the emulated PL011 (ttyAMA0), bounded by
#    a timeout;
# 4. reads the results from the console (OUTDIR/console.log): one "VMTEST PASS|FAIL name"
#    line per check and a final "VMTEST RESULT PASS|FAIL"; files the tests send back
#    ("VMFILE BEGIN name" .. "VMFILE END name", base64) land in OUTDIR/files/;
# 5. checks on this host that the .canopy saved in the VM opens here (x86-64) exactly as
#    it opened there: `canopy open` in text, folded and JSON, byte for byte.
# "bench" boots the sampler's cost measurement (bench_sampler in fp/dwarf/auto) instead;
# "debug" runs the script $CANOPY_A64_DEBUG in the machine (vm_tests.sh's helpers at hand).
# Exit 0 when everything passed; 77 (skip) when a tool is missing, except under CI=true,
# where a machine that cannot be built or booted is a failure.
set -u

t_start=$(date +%s)
log() { echo "vm.sh [$(($(date +%s) - t_start))s]: $*"; }
die() {
    echo "vm.sh: FAIL: $*" >&2
    exit 1
}
# missing WHAT: no way to build or boot the machine.
missing() {
    if [ "${CI:-}" = true ]; then
        die "cannot build or boot the arm64 machine: $*"
    fi
    echo "vm.sh: SKIP: $*" >&2
    exit 77
}

[ $# -ge 3 ] || die "usage: vm.sh SRCDIR OUTDIR HOST_CANOPY [bench]"
src=$1 out=$2 host_canopy=$3 mode=${4:-test}
# Debian's arm64 kernel: the one named, else the newest installed (linux-image-arm64
# follows Debian's updates: 6.1.0-56 when this was written, 6.1.0-57 on a later machine).
if [ -n "${CANOPY_A64_KERNEL_VERSION:-}" ]; then
    newest=/boot/vmlinuz-$CANOPY_A64_KERNEL_VERSION
else
    newest=$(ls /boot/vmlinuz-*-arm64 2>/dev/null | sort -V | tail -n 1)
fi
kernel=${CANOPY_A64_KERNEL:-$newest}
libdirs="/lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu"
cc=aarch64-linux-gnu-gcc
timeout_s=${CANOPY_A64_TIMEOUT:-420}

command -v qemu-system-aarch64 >/dev/null || missing "qemu-system-aarch64 (qemu-system-arm)"
command -v $cc >/dev/null || missing "$cc (gcc-aarch64-linux-gnu)"
command -v cpio >/dev/null || missing "cpio"
[ -n "$kernel" ] && [ -r "$kernel" ] ||
    missing "an arm64 kernel, /boot/vmlinuz-*-arm64 (linux-image-arm64:arm64)"
[ -x "$host_canopy" ] || die "host canopy $host_canopy not built"
# busybox-static:arm64 installs its binary as /bin/busybox (in place of the host's).
busybox=${CANOPY_A64_BUSYBOX:-}
if [ -z "$busybox" ]; then
    for b in /bin/busybox /usr/bin/busybox; do
        if [ -f "$b" ] && readelf -h "$b" 2>/dev/null | grep -q 'Machine:.*AArch64'; then
            busybox=$b
            break
        fi
    done
fi
[ -n "$busybox" ] || missing "an arm64 busybox (busybox-static:arm64, or \$CANOPY_A64_BUSYBOX)"
mkdir -p "$out" || die "cannot create $out"

# ---- 1. cross build ------------------------------------------------------------------------
bdir=$out/build
if [ ! -f "$bdir/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$bdir" -DCMAKE_TOOLCHAIN_FILE="$src/tests/arm64/aarch64-linux-gnu.cmake" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCANOPY_TESTS=OFF -DCANOPY_BENCH=ON \
        >"$out/cmake.log" 2>&1 || {
        cat "$out/cmake.log" >&2
        missing "the arm64 cross configuration failed (arm64 -dev packages: scripts/setup)"
    }
fi
cmake --build "$bdir" -j2 --target canopy canopyd bench_sampler >"$out/build.log" 2>&1 || {
    tail -30 "$out/build.log" >&2
    die "canopy does not cross-build for arm64"
}
log "canopy, canopyd, bench_sampler cross-built"

# The workloads: shares with and without frame pointers and with return-address signing
# (-mbranch-protection=pac-ret: PAC in every saved LR, stripped by the unwinders), threads
# (started after attach), clockread (vDSO and kernel), sigprof (a signal handler's frames),
# deep (the bench's 30-frame stack).
wl=$out/root/wl
mkdir -p "$wl" || die "cannot create $wl"
W=$src/tests/workloads
wlbuild() { # NAME SOURCE FLAGS...
    name=$1 s=$2
    shift 2
    if [ ! "$wl/$name" -nt "$W/$s" ] || [ "$W/wl_common.h" -nt "$wl/$name" ] ||
        [ "$0" -nt "$wl/$name" ]; then
        $cc -O2 -g -Wall -D_GNU_SOURCE "$@" "$W/$s" -o "$wl/$name" -lpthread || return 1
    fi
}
FP=-fno-omit-frame-pointer NOFP=-fomit-frame-pointer PAC=-mbranch-protection=pac-ret
pids=""
for j in "wl_shares_fp shares.c $FP" "wl_shares_nofp shares.c $NOFP" \
    "wl_shares_pac shares.c $FP $PAC" "wl_shares_pacnofp shares.c $NOFP $PAC" \
    "wl_threads_fp threads.c $FP" "wl_threads_pac threads.c $NOFP $PAC" \
    "wl_clockread clockread.c $NOFP -Wl,--build-id=none" "wl_sigprof sigprof.c $NOFP" \
    "wl_deep_fp deep.c $FP" "wl_deep_nofp deep.c $NOFP"; do
    # shellcheck disable=SC2086 # j is a word list
    wlbuild $j &
    pids="$pids $!"
done
st=0
for p in $pids; do wait "$p" || st=1; done
[ $st = 0 ] || die "the workloads do not cross-build"
log "workloads cross-built"

# ---- 2. the root ---------------------------------------------------------------------------
root=$out/root
mkdir -p "$root/bin" "$root/lib" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" \
    "$root/run" || die "cannot create $root"
cp "$busybox" "$root/bin/busybox" || die "cannot copy busybox"
for f in client/canopy daemon/canopyd bench/bench_sampler; do
    cp "$bdir/$f" "$root/bin/" || die "cannot copy $f"
done
cp "$src/tests/arm64/vm_init.sh" "$root/init" && chmod +x "$root/init" || die "no vm_init.sh"
cp "$src/tests/arm64/vm_tests.sh" "$root/vm_tests.sh" || die "no vm_tests.sh"
cp "$src/tests/arm64/vm_python.py" "$wl/py_work.py" || die "no vm_python.py"
rm -f "$root/debug.sh"
if [ "$mode" = debug ]; then
    cp "${CANOPY_A64_DEBUG:?debug mode: set CANOPY_A64_DEBUG to a script}" "$root/debug.sh" ||
        die "cannot copy $CANOPY_A64_DEBUG"
fi

# The arm64 CPython: Debian 12's python3.11 (libpython linked in, with the math and zlib
# modules: the check's calls into libm and libz), its minimal standard library (without
# lib-dynload's _ssl and _hashlib) and libexpat. It cannot be installed beside the host's python3.11 (not Multi-Arch:
# same), so its packages are downloaded (scripts/setup puts them in $pydebs; else they are
# fetched here, once) and unpacked into the cached root. Without them the Python check is
# skipped, except under CI=true.
pydebs=${CANOPY_A64_PYTHON_DEBS:-/var/cache/canopy-test/arm64-python}
pypkgs="python3.11-minimal libpython3.11-minimal libexpat1"
pyok() { for p in $pypkgs; do ls "$1/${p}_"*_arm64.deb >/dev/null 2>&1 || return 1; done; }
if [ ! -x "$root/usr/bin/python3.11" ]; then
    if ! pyok "$pydebs"; then
        pydebs=$out/python-debs
        mkdir -p "$pydebs" || die "cannot create $pydebs"
        # shellcheck disable=SC2046,SC2086 # the package list
        pyok "$pydebs" || (cd "$pydebs" && apt-get download -q $(printf '%s:arm64 ' $pypkgs)) \
            >"$out/python-debs.log" 2>&1
    fi
    if pyok "$pydebs"; then
        x=$out/python-x
        rm -rf "$x" && mkdir -p "$x" || die "cannot create $x"
        for p in $pypkgs; do
            d=$(ls "$pydebs/${p}_"*_arm64.deb | LC_ALL=C sort | tail -1)
            dpkg-deb -x "$d" "$x" || die "cannot unpack $d"
        done
        mkdir -p "$root/usr/bin" "$root/usr/lib" || die "cannot create $root/usr"
        rm -rf "$root/usr/lib/python3.11"
        cp -a "$x/usr/lib/python3.11" "$root/usr/lib/" &&
            rm -f "$root/usr/lib/python3.11/lib-dynload/"*.so &&
            cp -L "$x/lib/aarch64-linux-gnu/libexpat.so.1" "$root/lib/" ||
            die "cannot copy the arm64 CPython into $root"
        # the standard library precompiled here when this python3 is a 3.11 too (the same
        # bytecode): the machine would compile what it imports at each boot
        if python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
            python3 -m compileall -q "$root/usr/lib/python3.11" >/dev/null 2>&1
        fi
        cp "$x/usr/bin/python3.11" "$root/usr/bin/python3.11" || die "cannot copy python3.11"
        rm -rf "$x"
        log "arm64 CPython $(ls "$pydebs"/python3.11-minimal_*_arm64.deb | sed 's/.*minimal_//; s/_arm64.deb//') unpacked"
    elif [ "${CI:-}" = true ]; then
        die "no arm64 CPython packages (scripts/setup downloads them to $pydebs): $(tail -3 "$out/python-debs.log")"
    else
        log "no arm64 CPython (apt-get download failed: $out/python-debs.log): the Python check is skipped"
    fi
fi

# needed FILE: the shared libraries FILE asks for (DT_NEEDED).
needed() {
    readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}
# The dependency closure, resolved in the arm64 multiarch directories. Libraries found in
# $root/lib are kept from an earlier run (the cached root).
todo="$root/bin/canopy $root/bin/canopyd $root/bin/bench_sampler $wl/wl_*"
[ -x "$root/usr/bin/python3.11" ] && todo="$todo $root/usr/bin/python3.11"
seen=" "
while [ -n "$todo" ]; do
    next=""
    for f in $todo; do
        for lib in $(needed "$f"); do
            case $seen in *" $lib "*) continue ;; esac
            seen="$seen$lib "
            if [ ! -f "$root/lib/$lib" ]; then
                found=""
                for d in $libdirs; do
                    if [ -f "$d/$lib" ]; then found=$d/$lib && break; fi
                done
                [ -n "$found" ] || die "arm64 library $lib not found in $libdirs"
                cp -L "$found" "$root/lib/$lib" || die "cannot copy $found"
            fi
            next="$next $root/lib/$lib"
        done
    done
    todo=$next
done
ld=$root/lib/ld-linux-aarch64.so.1
[ -f "$ld" ] || cp -L /lib/ld-linux-aarch64.so.1 "$ld" || die "no ld-linux-aarch64.so.1"
initrd=$out/initrd.cpio
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc --quiet >"$initrd") ||
    die "cannot write $initrd"
log "initramfs $(du -k "$initrd" | cut -f1) KiB"

# ---- 3. boot -------------------------------------------------------------------------------
console=$out/console.log
rm -f "$console"
# -cpu max: pointer authentication (the impdef algorithm: QARMA is slow to emulate) and BTI.
# -nic none: no network (the default NIC wants a ROM). panic=-1 and -no-reboot: a crashed
# kernel ends qemu. loglevel=1: kernel messages stay off the console the results go to.
timeout --kill-after=10 "$timeout_s" qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on \
    -smp 2 -m 1536 -nographic -no-reboot -nic none -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyAMA0 loglevel=1 panic=-1 rdinit=/init canopy.mode=$mode" \
    </dev/null >"$console" 2>&1
qrc=$?
t_boot=$(($(date +%s) - t_start))
tr -d '\r' <"$console" >"$console.txt"
grep -E '^VM(TEST|INFO|BENCH)' "$console.txt"
if ! grep -q '^VMINFO booted' "$console.txt"; then
    tail -40 "$console.txt" >&2
    [ $qrc = 124 ] && die "the arm64 machine did not boot within ${timeout_s}s"
    die "the arm64 machine did not boot (qemu exit $qrc)"
fi
grep -q '^VMTEST RESULT ' "$console.txt" || {
    tail -40 "$console.txt" >&2
    die "no result line from the VM (qemu exit $qrc; timeout ${timeout_s}s): see $console"
}

# ---- 4. files sent back --------------------------------------------------------------------
files=$out/files
rm -rf "$files" && mkdir -p "$files" || die "cannot create $files"
awk -v dir="$files" '
    /^VMFILE BEGIN / { name = $3; file = dir "/" name ".b64"; printf "" > file; next }
    /^VMFILE END /   { close(file); name = ""; next }
    name != ""       { print > file }' "$console.txt"
for b in "$files"/*.b64; do
    [ -f "$b" ] || break
    base64 -d <"$b" >"${b%.b64}" || die "cannot decode $b"
done

status=0
grep -q '^VMTEST RESULT PASS' "$console.txt" || status=1
if [ "$mode" = test ]; then
    # ---- 5. the arm64-saved .canopy on x86-64 ----------------------------------------------
    for fmt in text folded json; do
        f=$files/open.$fmt
        [ -f "$files/shares.canopy" ] && [ -f "$f" ] || {
            echo "VMTEST FAIL host-open-$fmt: shares.canopy or open.$fmt not sent back"
            status=1
            continue
        }
        "$host_canopy" open "$files/shares.canopy" --format "$fmt" >"$f.host" 2>"$f.err" ||
            { echo "VMTEST FAIL host-open-$fmt: $(cat "$f.err")"; status=1; continue; }
        # The text header names the file; the VM's path differs from ours.
        if [ "$fmt" = text ]; then
            sed -i '1s/^[^:]*:/FILE:/' "$f" "$f.host"
        fi
        if cmp -s "$f" "$f.host"; then
            echo "VMTEST PASS host-open-$fmt: arm64 .canopy opens identically on $(uname -m)" \
                "($(wc -c <"$f") bytes)"
        else
            echo "VMTEST FAIL host-open-$fmt: differs (diff $f $f.host)"
            status=1
        fi
    done
fi
log "done in $(($(date +%s) - t_start))s (boot and run ended at ${t_boot}s)"
[ $status = 0 ] || die "arm64 VM tests failed (console: $console)"
echo "vm.sh: PASS"
