#!/usr/bin/env bash
# Churn without loss (issue 22, item 4): a whole-system session at 999 Hz while wl_churn
# starts ~11 000 processes a minute (fork+exec of /bin/true, exec chains sh -> env -> true,
# processes that exit right after dlopening a fresh copy of a library) and thread storms,
# for CANOPY_CHURN_SECONDS (60) s, with a tree query every 2 s; then a canopyd at its
# pid limit.
# - canopyd stays up and answers (a tree under churn may be answered query_too_expensive
#   on a starved machine: its bound, docs/security.md; one after the churn must succeed);
#   no sanitizer report in its log; exit 0 on SIGTERM.
# - Lost records are never silent: canopyd is stopped (SIGSTOP) for 1 s in the middle, so
#   the kernel must drop records; at the end the session's and status' `lost` equal what
#   the kernel counted for canopyd's perf events (read_format PERF_FORMAT_LOST, read by
#   perf_lost.py through copies of canopyd's fds), and are > 0.
# - No leak: daemon_watch.py samples VmRSS and the fds every 2 s. After a 20 s warm-up,
#   "own" memory (RSS less what canopyd reports and bounds itself: the profile's memory,
#   within session_memory, and the symbol cache's heap; less the sampler's object images,
#   estimated from smaps, which grow with what the machine runs, not with churn) grows at
#   a steady rate (Theil-Sen: the median slope between any two samples, times the span)
#   of at most K x the profile's growth + C MiB.
#   K is 1 (the profile's tables grow by doubling and the blocks they leave stay with the
#   allocator: up to their size again; measured 0.08 MiB per 2 s beyond the profile in
#   the Release build), 4 under ASan (redzones and shadow on many small allocations:
#   measured 3.2-3.5 x); C is 16 MiB, 64 under ASan (per-size-class caches: x4 again).
#   The median leaves out one-off jumps, which a leak per churned process is not: ~14 000
#   processes and threads go by after the warm-up, so C is ~1 KiB each (4 KiB under
#   ASan). ASan's quarantine is 32 MiB here and freed memory goes back to the system
#   (at its default 256 MiB the quarantine fills during the run and hides everything).
#   fds: those that are not object files (sockets, pipes, memfds, /proc files) that stay
#   open (the fewest over the last 10 s against the fewest over the first 10 s after the
#   warm-up) grow by at most 4; the report prints them by kind. Judged on the most in any
#   sample, one fresh-clone CI run failed on 5 (30..35; a query in flight holds its
#   connection, memfd and pidfd, the watcher's last connection may not be closed yet, a
#   /proc file may be open for a new process); and object file fds never exceed the symbol cache's objects (its bound)
#   and the unwind tables kept open to be read as needed (status' unwind_cache.open_files)
#   by more than 4 (the log, memfds and the cgroup root are not counted as object files;
#   before, they and the unwind tables were, and the check failed once under -j3 by 7).
# - At the pid limit (a pids cgroup holding canopyd at pids.max = pids.current: every
#   fork fails): `system` and `attach` sessions start and sample, queries and saves fail
#   with an answer that says why (never a hang or a crash), `status` answers; with the
#   limit lifted the same queries succeed.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "a system session needs root"
HERE=$(cd "$(dirname "$0")" && pwd)
WL=$CANOPY_WORKLOADS/wl_churn
[ -x "$WL" ] && [ -r "$CANOPY_WORKLOADS/libwl_dlwork.so" ] || fail "wl_churn or libwl_dlwork.so not built"
SECS=${CANOPY_CHURN_SECONDS:-60}
WATCH=
CH=
CG=
cleanup() {
  local rc=$?
  [ -z "$D_PID" ] || kill -CONT $D_PID 2>/dev/null || true
  kill $WATCH $CH 2>/dev/null || true
  stop_daemon KILL || true
  wait 2>/dev/null || true
  if [ -n "$CG" ] && [ -d "$CG" ]; then
    cat "$CG/cgroup.procs" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    sleep 0.2
    rmdir "$CG" 2>/dev/null || true
  fi
  finish_tmp $rc
}
trap cleanup EXIT
# A small quarantine: ASan keeps freed memory up to this before reusing it (RSS above).
# Freed memory goes back to the system every 500 ms, so that RSS follows what is in use.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=32:allocator_release_to_os_interval_ms=500"
sanitizer_clean() {
  ! grep -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|canopyd: fatal' "$TMP/canopyd.log" ||
    fail "sanitizer report in canopyd's log"
}
sfield() { ok '{"cmd":"sessions"}' | jget "[s['$2'] for s in d['sessions'] if s['id']=='$1'][0]"; }
klost() { python3 "$HERE/perf_lost.py" $D_PID | jget 'd["lost"]'; }

# ---- 1. Churn under a 999 Hz system session --------------------------------------------
start_daemon io_uring "$TMP/state"
echo $D_PID >"$TMP/d.pid"
S=$(ok '{"cmd":"system","freq":999,"name":"churn"}' | jget 'd["session"]["id"]')
python3 "$HERE/daemon_watch.py" watch "$SOCK" "$TMP/d.pid" "$TMP/watch.jsonl" 2 &
WATCH=$!
"$WL" --procs 167 --chains 17 --dso 5 --storm 32 --seconds "$SECS" >"$TMP/churn.json" &
CH=$!
t0=$SECONDS
stopped=0
queries=0
expensive=0
while kill -0 $CH 2>/dev/null; do
  sleep 2
  r=$(call "{\"cmd\":\"tree\",\"session\":\"$S\",\"format\":\"json\"}") || fail "tree: no answer under churn"
  # A worker starved past its bound (4 x query_cpu of wall time: the query child runs at
  # nice 10 on a loaded machine) is answered query_too_expensive: an answer, as designed.
  case $(jget 'd["error"]["code"] if not d["ok"] else "ok"' <<<"$r") in
    ok) queries=$((queries + 1)) ;;
    query_too_expensive)
      # but a worker found waiting on a lock is stuck, not starved: a lock some other
      # thread of canopyd held at fork (the child has no other thread to release it).
      jget 'd["error"]["message"]' <<<"$r" | grep -q "(futex" && fail "a query worker was stuck: $r"
      expensive=$((expensive + 1)) ;;
    *) fail "tree under churn: $r" ;;
  esac
  if [ $stopped = 0 ] && [ $((SECONDS - t0)) -ge $((SECS / 2)) ]; then
    # The reader stops until the kernel has dropped records (at least 1 s, at most 15 s:
    # on a quiet machine 1 s of 999 Hz samples of the churn's short processes, many with
    # no user stack, can fit in the rings; busy loops, each sample with its stack copy, fill
    # them).
    before=$(sfield "$S" lost)
    k0=$(klost)
    kill -STOP $D_PID
    sleep 1
    for ((w = 0; w < 28 && $(klost) == k0; w++)); do
      for c in $(seq 0 $(($(nproc) - 1))); do
        taskset -c "$c" timeout 0.5 sh -c 'while :; do :; done' &
      done
      sleep 0.5
    done
    kill -CONT $D_PID
    stopped=1
  fi
done
wait $CH || fail "wl_churn failed: $(cat "$TMP/churn.json")"
CH=
echo "churn: $(cat "$TMP/churn.json"), tree queries: $queries answered, $expensive over their bound" >&2
[ "$(jget 'd["exit_bad"]' <"$TMP/churn.json")" = 0 ] || fail "churned processes failed"
# ~11 000 per minute asked; a loaded machine delays forks, but a third of it is no churn.
per_min=$(jget 'int(d["per_minute"])' <"$TMP/churn.json")
[ "$per_min" -ge 4000 ] || fail "only $per_min processes per minute"

# Every ring gets a record after its last loss, so the kernel writes its LOST record:
# a busy loop on each CPU; then the counts must agree.
for c in $(seq 0 $(($(nproc) - 1))); do
  taskset -c "$c" timeout 0.3 sh -c 'while :; do :; done' || true
done
agree() {
  k=$(klost)
  l=$(sfield "$S" lost)
  st=$(ok '{"cmd":"status"}' | jget 'd["lost"]')
  [ "$k" = "$l" ] && [ "$l" = "$st" ]
}
wait_for 10 agree || fail "lost records: kernel $k, session $l, status $st (before the stop: $before)"
echo "lost: kernel $k, session $l, status $st ($before before the 1 s stop)" >&2
[ "$k" -gt 0 ] || fail "the 1 s stop lost nothing: the check proves nothing"
# By cause: the session's records counters say the same, with the LOST records behind them.
# One answer for both (the session still samples a loaded machine: a second read may count
# losses the first did not).
rec=$(ok '{"cmd":"sessions"}' | jget "json.dumps([dict(x['records'], session_lost=x['lost']) for x in d['sessions'] if x['id'] == '$S'][0])")
[ "$(jget 'd["lost"] == d["session_lost"] and d["lost"] >= '"$l" <<<"$rec")" = True ] &&
  [ "$(jget 'd["lost_events"] > 0' <<<"$rec")" = True ] ||
  fail "records by cause do not account for the lost: $rec (the session said $l before)"
[ "$(sfield "$S" samples)" -gt $((SECS * 200)) ] || fail "too few samples: $(sfield "$S" samples)"
ok "{\"cmd\":\"tree\",\"session\":\"$S\",\"format\":\"json\"}" >/dev/null
kill $WATCH
wait $WATCH 2>/dev/null || true
WATCH=
K=1 C=16
[ "$SLOW" = 1 ] || K=4 C=64 # ASan
python3 "$HERE/daemon_watch.py" report "$TMP/watch.jsonl" 20 --own-mb $C --own-k $K --fds 4 >&2 ||
  fail "resources grew after warm-up"
echo "stopping: $SECONDS s" >&2
stop_daemon TERM
echo "stopped: $SECONDS s" >&2
sanitizer_clean

# ---- 2. At the pid limit -------------------------------------------------------------
if [ -w /sys/fs/cgroup/pids ]; then
  CGROOT=/sys/fs/cgroup/pids # cgroup v1
elif grep -qw pids /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  CGROOT=/sys/fs/cgroup # cgroup v2 with the pids controller for children
else
  skip "no pids cgroup controller to put canopyd at its pid limit"
fi
CG=$CGROOT/canopy-churn-$$
mkdir "$CG" || skip "cannot create a pids cgroup under $CGROOT"
printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" && exec "$@"\n' "$CG" >"$TMP/incg.sh"
chmod +x "$TMP/incg.sh"
rm -rf "$TMP/state"
D_WRAP=$TMP/incg.sh start_daemon epoll "$TMP/state"
grep -qx "$D_PID" "$CG/cgroup.procs" || fail "canopyd is not in $CG"
"$CANOPY_WORKLOADS/wl_threads_fp" 300 0 >/dev/null &
T=$!
cat "$CG/pids.current" >"$CG/pids.max"
echo "pid limit: canopyd's cgroup at $(cat "$CG/pids.max") tasks" >&2
echo "pid limit: $SECONDS s" >&2
S1=$(ok '{"cmd":"system","freq":999}' | jget 'd["session"]["id"]')
S2=$(ok "{\"cmd\":\"attach\",\"pid\":$T,\"freq\":999}" | jget 'd["session"]["id"]')
sleep 1
refused=0
for s in $S1 $S2 $S1 $S2; do
  r=$(call "{\"cmd\":\"tree\",\"session\":\"$s\",\"format\":\"json\"}") || fail "tree at the pid limit: no answer"
  if [ "$(jget 'd["ok"]' <<<"$r")" = True ]; then continue; fi
  jget 'd["error"]["message"]' <<<"$r" | grep -q "query worker" || fail "tree at the pid limit: $r"
  refused=$((refused + 1))
done
[ $refused = 4 ] || fail "only $refused of 4 queries met the pid limit: the check proves nothing"
r=$(call "{\"cmd\":\"save\",\"session\":\"$S2\"}") || fail "save at the pid limit: no answer"
echo "pid limit: tree refused 4/4 ($(jget 'd["error"]["message"]' <<<"$(call "{\"cmd\":\"tree\",\"session\":\"$S1\"}")")), save: $r" >&2
echo "pid limit: $SECONDS s" >&2
st=$(ok '{"cmd":"status"}')
[ "$(jget 'd["running"]' <<<"$st")" = 2 ] || fail "sessions at the pid limit: $st"
[ "$(sfield "$S1" samples)" -gt 0 ] && [ "$(sfield "$S2" samples)" -gt 0 ] || fail "no samples at the pid limit"
echo max >"$CG/pids.max"
for s in $S1 $S2; do
  ok "{\"cmd\":\"tree\",\"session\":\"$s\",\"format\":\"json\"}" >/dev/null
done
ok "{\"cmd\":\"save\",\"session\":\"$S2\"}" >/dev/null
kill $T
wait $T 2>/dev/null || true
stop_daemon TERM
sanitizer_clean
echo PASS
