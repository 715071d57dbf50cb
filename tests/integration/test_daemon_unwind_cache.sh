#!/usr/bin/env bash
# canopyd's unwind tables (docs/perf-daemon.md, "A busy machine"; issue 22 item 1): what
# unwinding needs of a file is read once and shared by every process and every session
# that maps it, held while a live process maps it, then kept in a least-recently-used list
# whose bytes are bounded; `status` shows it. Two runs of one program and two sessions on
# one process read each file once; once the processes are gone nothing is held, and the
# unused tables stay within the configured bound (small here, so some are evicted) and go
# once unused for idle_s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_nofp
[ -x "$WL" ] || fail "workloads not built"
W1= W2=
trap 'rc=$?; stop_daemon KILL || true; kill $W1 $W2 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

# Room for one small file's tables, not for libc's (about 190 KiB: .eh_frame and its index).
cat >"$TMP/canopyd.conf" <<CONF
unwind_cache = 64K
CONF
start_daemon io_uring "$TMP/state" --config "$TMP/canopyd.conf"

uc() { call '{"cmd":"status"}' | jget "d['unwind_cache']['$1']"; }
attach() { # PID NAME
  ok "{\"cmd\":\"attach\",\"pid\":$1,\"freq\":999,\"unwind\":\"dwarf\",\"name\":\"$2\"}" >/dev/null
}
show() { call '{"cmd":"status"}' | jget 'd["unwind_cache"]' >&2; }
held_at_least() { [ "$(uc in_use)" -ge "$1" ]; }
none_held() { [ "$(uc in_use)" = 0 ]; }

"$WL" 30 >/dev/null &
W1=$!
sleep 0.2
attach $W1 first
wait_for 10 held_at_least 3 ||
  fail "the workload's files (itself, libc, ld.so) are not held: $(show)"
files=$(uc files)
loads=$(uc loads)
hits=$(uc hits)
echo "one process, one session: files $files loads $loads hits $hits" >&2
[ "$loads" = "$files" ] || fail "each file read once: loads $loads for $files files"

# The same program again (another process, another session), and a second session on the
# first process: the same files, read by nobody again.
"$WL" 30 >/dev/null &
W2=$!
sleep 0.2
attach $W2 second
attach $W1 third
sleep 1.5
show
[ "$(uc files)" = "$files" ] || fail "a second process of the same files added tables: $(show)"
[ "$(uc loads)" = "$loads" ] || fail "the same files were read again: $(show)"
[ "$(uc hits)" -ge $((hits + 2 * files)) ] || fail "the other sessions did not find the tables: $(show)"

# Unwound with the shared tables: the workload's functions, stacks to main.
tree=$(call '{"cmd":"tree","session":"second","format":"folded"}')
grep -q 'main;work_a' <<<"$tree" || fail "session 'second' lacks main;work_a: $(head -c 600 <<<"$tree")"

# Gone: nothing is held, the unused tables fit the bound (so some were dropped).
kill $W1 $W2
wait $W1 $W2 2>/dev/null || true
W1= W2=
wait_for 10 none_held ||
  fail "tables still held after the processes exited: $(show)"
show
unused=$(uc unused_bytes)
max=$(uc max_unused_bytes)
[ "$max" = 65536 ] || fail "the configured bound is not the one in force: $max"
[ "$unused" -le "$max" ] || fail "unused tables $unused bytes exceed the bound $max"
[ "$(uc evictions)" -ge 1 ] || fail "libc's tables exceed the bound, yet none was evicted: $(show)"

# Unused for idle_s (30 s; the daemon's tick checks every 5 s): the kept tables go too.
[ "$(uc files)" -ge 1 ] || fail "no unused table was kept to expire: $(show)"
[ "$(uc idle_s)" = 30.0 ] || fail "idle_s: $(show)"
all_expired() { [ "$(uc files)" = 0 ] && [ "$(uc expired)" -ge 1 ]; }
wait_for 45 all_expired || fail "unused tables still held 45 s after their processes exited: $(show)"
show
echo "PASS: shared, released, bounded, expired" >&2
