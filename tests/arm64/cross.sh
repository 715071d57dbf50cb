#!/bin/sh
# The sampler on aarch64 (ctest sampler.aarch64_build and sampler.aarch64_unwind, registered
# by tests/cmake/sampler.cmake):
#   cross.sh build SRCDIR OUTDIR CC LIBS CFLAGS...
#       compiles every SRCDIR/sampler/*.c, objfile/*.c and interp/*.c (the layers below it;
#       CFLAGS name the directory of interp's BPF skeleton, built on the host),
#       and common/err.c, text.c, containers.c, cgroup.c, util.c (cn_err, its UTF-8 cut,
#       cn_grow, the cgroup paths, the monotonic clock), with CC
#       (aarch64-linux-gnu-gcc) and CFLAGS into OUTDIR/libcn_smp.a, checks each object is AArch64, and links the unwind selftest
#       (tests/arm64/unwind_selftest.c) against it and LIBS in three builds: fp, nofp, pac.
#   cross.sh run OUTDIR QEMU
#       runs each selftest build under QEMU (qemu-aarch64).
set -u

die() {
    echo "cross.sh: $*" >&2
    exit 1
}

# Runs "$@" in the background; wait_all collects every status (one failure fails all).
pids=""
spawn() {
    "$@" &
    pids="$pids $!"
}
wait_all() {
    status=0
    for p in $pids; do
        wait "$p" || status=1
    done
    pids=""
    return $status
}

build() {
    src=$1 out=$2 cc=$3 libs=$4
    shift 4
    ar=${cc%gcc}ar
    [ -x "$ar" ] || ar=$(command -v "$(basename "$ar")") || die "no archiver next to $cc"
    rm -rf "$out/obj" "$out/libcn_smp.a" "$out"/unwind_selftest_*
    mkdir -p "$out/obj" || die "cannot create $out/obj"
    n=0
    inc="-I$src/sampler/include -I$src/objfile/include -I$src/interp/include -I$src/common"
    for f in "$src"/sampler/*.c "$src"/objfile/*.c "$src"/interp/*.c "$src"/common/err.c "$src"/common/text.c \
        "$src"/common/containers.c "$src"/common/cgroup.c "$src"/common/util.c; do
        # shellcheck disable=SC2086 # inc is a word list
        spawn "$cc" "$@" $inc -O2 -g -c "$f" -o "$out/obj/$(basename "$(dirname "$f")")_$(basename "$f" .c).o"
        n=$((n + 1))
    done
    wait_all || die "the sampler does not cross-compile (above)"
    for o in "$out"/obj/*.o; do
        readelf -h "$o" | grep -q 'Machine:.*AArch64' || die "$o is not an AArch64 object"
    done
    "$ar" rcs "$out/libcn_smp.a" "$out"/obj/*.o || die "$ar failed"
    echo "aarch64: $n sources compiled into $out/libcn_smp.a"

    sel="$src/tests/arm64/unwind_selftest.c"
    for v in fp nofp pac; do
        case $v in
        fp) vf="-fno-omit-frame-pointer -DSELFTEST_FP=1" ;;
        nofp) vf="-fomit-frame-pointer -DSELFTEST_FP=0" ;;
        pac) vf="-fno-omit-frame-pointer -mbranch-protection=pac-ret -DSELFTEST_FP=1 -DSELFTEST_PAC=1" ;;
        esac
        # shellcheck disable=SC2086 # vf and libs are word lists
        spawn "$cc" "$@" -O2 -g $vf $inc -I"$src/sampler" "$sel" "$out/libcn_smp.a" $libs -lm \
            -o "$out/unwind_selftest_$v"
    done
    wait_all || die "the unwind selftest does not link against the aarch64 sampler (above)"
    echo "aarch64: unwind selftest linked (fp, nofp, pac)"
}

run() {
    out=$1 qemu=$2
    status=0
    for v in fp nofp pac; do
        [ -x "$out/unwind_selftest_$v" ] || die "$out/unwind_selftest_$v missing: run the build test"
        echo "== unwind_selftest_$v"
        "$qemu" "$out/unwind_selftest_$v" || status=1
    done
    return $status
}

[ $# -ge 1 ] || die "usage: cross.sh build|run ..."
cmd=$1
shift
case $cmd in
build) [ $# -ge 4 ] || die "usage: cross.sh build SRCDIR OUTDIR CC LIBS CFLAGS..."; build "$@" ;;
run) [ $# -eq 2 ] || die "usage: cross.sh run OUTDIR QEMU"; run "$@" ;;
*) die "unknown command $cmd" ;;
esac
