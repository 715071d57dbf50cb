#!/bin/sh
# check_listed.sh TESTS_DIR FILE...: tests/CMakeLists.txt lists its tests by name (no
# globbing); FILE... are the files it registered, relative to TESTS_DIR. Fails, naming them,
# when a unit test, integration script or fuzz target on disk is not among them.
set -u
dir=${1:?usage: check_listed.sh TESTS_DIR FILE...}
shift
status=0
cd "$dir" || exit 1
for f in unit/test_*.c integration/test_*.sh fuzz/fuzz_*.c; do
    [ -e "$f" ] || continue
    found=0
    for listed in "$@"; do
        [ "$listed" = "$f" ] && { found=1; break; }
    done
    if [ $found -eq 0 ]; then
        echo "check_listed: tests/$f is not registered in tests/CMakeLists.txt" >&2
        status=1
    fi
done
[ $status -eq 0 ] && echo "check_listed: all $# test files are registered"
exit $status
