#!/usr/bin/env bash
# Queries never starve sampling: 999 Hz on a 2-thread workload while 4 clients each ask
# for a tree every 100 ms, on both event loops: 0 lost records, and the queries are served.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
WL=$CANOPY_WORKLOADS/wl_threads_fp
[ -x "$WL" ] || fail "workload not built"
W=
trap 'rc=$?; stop_daemon KILL || true; kill $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
field() { ok '{"cmd":"sessions"}' | jget "[s['$2'] for s in d['sessions'] if s['id']=='$1'][0]"; }

for BACKEND in io_uring epoll; do
  rm -rf "$TMP/state"
  start_daemon $BACKEND "$TMP/state"
  "$WL" 5 0.3 >/dev/null &
  W=$!
  S=$(ok "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":999}" | jget 'd["session"]["id"]')
  sleep 0.5
  $PROTO load "$SOCK" "$S" 4 100 4 >"$TMP/load.json" || fail "$BACKEND: queries failed: $(cat "$TMP/load.json")"
  wait $W
  W=
  n=$(field "$S" samples)
  lost=$(field "$S" lost)
  echo "$BACKEND: $(cat "$TMP/load.json"), samples $n, lost $lost" >&2
  [ "$lost" = 0 ] || fail "$BACKEND: $lost records lost while queries ran"
  # ~9000 on an idle machine; a loaded one (a sanitized daemon forking a worker per query)
  # leaves the workload far less CPU: the floor only says that sampling went on.
  [ "$n" -gt 300 ] || fail "$BACKEND: only $n samples"
  [ "$(jget 'd["queries"]' <"$TMP/load.json")" -ge 40 ] || fail "$BACKEND: too few queries served"
  stop_daemon TERM
done
echo PASS
