#!/bin/sh
# check_layering.sh CANOPY: the CLI hosts live/ sessions but never daemon/ (docs/
# architecture.md): its binary must not link liburing or libsystemd, nor contain canopyd's
# symbols (cn_d_*, cn_d__*) or io_uring's. Exit 0 when clean, 1 with what was found.
set -u
bin=${1:?usage: check_layering.sh CANOPY}
[ -x "$bin" ] || { echo "check_layering: $bin: not an executable" >&2; exit 1; }
status=0
libs=$(ldd "$bin" | grep -Ei 'liburing|libsystemd')
if [ -n "$libs" ]; then
    echo "check_layering: $bin links daemon-only libraries:" >&2
    echo "$libs" >&2
    status=1
fi
# Symbol names only (nm's last column), matched at the start of a name.
syms=$(nm -C "$bin" | awk '{print $NF}' |
       grep -E '^(_*io_uring|sd_notify|sd_listen|sd_booted|cn_d_)' | sort -u | head -20)
if [ -n "$syms" ]; then
    echo "check_layering: $bin contains daemon symbols:" >&2
    echo "$syms" >&2
    status=1
fi
[ $status -eq 0 ] && echo "check_layering: $bin is clean (no daemon code)"
exit $status
