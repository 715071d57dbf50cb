#!/usr/bin/env bash
# Queries off the sampling path (docs/security.md "Queries and saves off the sampling
# path"): while user B's 999 Hz session samples, user A (nobody) floods canopyd from 16
# connections with pathological queries on a big saved session of its own (1024
# transforms, full text trees with 60 transforms, timelines, callers, lines). The attack
# fails: oversized queries are refused as query_too_expensive before anything runs,
# expensive ones are stopped by the CPU-time and output bounds of the forked workers, B's
# session loses no sample, B's queries are answered within 100 ms (median), and the
# daemon stays responsive. Both event loops.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (to switch to unprivileged users)"
command -v setpriv >/dev/null || skip "setpriv not installed"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload not built"
A=65534 B=65533
W=
trap 'rc=$?; stop_daemon KILL || true; kill $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
HERE=$(dirname "$0")
cp "$HERE/daemon_proto.py" "$HERE/query_flood.py" "$TMP/"
cp "$WL" "$TMP/wl"
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
cat >"$TMP/canopyd.conf" <<'CONF'
query_cpu = 150ms
query_max_output = 2M
checkpoint = 0
CONF
# A's big saved session (20000 functions, 300000 deep stacks and samples).
mkdir -p "$TMP/seed"
$PY "$HERE/big_canopy.py" "$TMP/seed/s900.canopy" s900 $A 20000 300000 300000

for BACKEND in io_uring epoll; do
  rm -rf "$TMP/state"
  mkdir -p "$TMP/state"
  cp "$TMP/seed/s900.canopy" "$TMP/state/"
  start_daemon $BACKEND "$TMP/state" --config "$TMP/canopyd.conf"
  setpriv --reuid=$B --regid=$B --clear-groups "$TMP/wl" 60 >/dev/null &
  W=$!
  wait_for 5 grep -q "^Uid:.$B" /proc/$W/status || fail "workload did not start as $B"
  r=$(as $B $PY "$TMP/daemon_proto.py" call "$SOCK" "{\"cmd\":\"attach\",\"pid\":$W,\"freq\":999}")
  [ "$(jget 'd["ok"]' <<<"$r")" = True ] || fail "$BACKEND: B's attach: $r"
  BS=$(jget 'd["session"]["id"]' <<<"$r")
  sleep 0.5
  n0=$(ok '{"cmd":"sessions"}' | jget "[s['samples'] for s in d['sessions'] if s['id']=='$BS'][0]")

  as $A $PY "$TMP/query_flood.py" attack "$SOCK" s900 6 16 >"$TMP/attack.json" &
  AP=$!
  sleep 1
  as $B $PY "$TMP/query_flood.py" probe "$SOCK" "$BS" 4 >"$TMP/probe.json" ||
    fail "$BACKEND: B's probe failed: $(cat "$TMP/probe.json")"
  wait $AP || fail "$BACKEND: attack script failed"
  echo "$BACKEND attack: $(cat "$TMP/attack.json")" >&2
  echo "$BACKEND B's queries: $(cat "$TMP/probe.json")" >&2
  kill -0 $D_PID || fail "canopyd died under the flood"

  # The attack met the bounds: the static one and the workers' CPU or output bound.
  jget 'd["errors"] == []' <"$TMP/attack.json" | grep -q True || fail "$BACKEND: attack errors: $(cat "$TMP/attack.json")"
  jget 'd["codes"].get("query_too_expensive", 0)' <"$TMP/attack.json" | grep -qv '^0$' ||
    fail "$BACKEND: no query_too_expensive: $(cat "$TMP/attack.json")"
  jget 'any("transforms (limit" in m for m in d["messages"])' <"$TMP/attack.json" | grep -q True ||
    fail "$BACKEND: 1024 transforms not refused: $(cat "$TMP/attack.json")"
  # (On a loaded machine a starved worker meets its wall-clock bound before its CPU time's.)
  jget 'any(b in m for b in ("CPU time", "output over", "in all (limit)") for m in d["messages"])' <"$TMP/attack.json" | grep -q True ||
    fail "$BACKEND: no worker bound hit: $(cat "$TMP/attack.json")"
  # A worker stopped for its CPU or wall time is in canopyd's log, with whose query it was.
  if jget 'any("CPU time" in m or "in all (limit)" in m for m in d["messages"])' <"$TMP/attack.json" | grep -q True; then
    grep -q "of uid $A on session .*: query too expensive: stopped after" "$TMP/canopyd.log" ||
      fail "$BACKEND: a query stopped for its CPU or wall time is not in the log"
  fi
  # Workers stopped at the wall bound were starved (state R), never stuck on a lock: the
  # child has one thread, a futex wait in it never ends (a lock held at fork).
  echo "$BACKEND wall-bound workers: $(grep -o "in state [A-Z]\( ([a-z_]*)\)\?" "$TMP/canopyd.log" | sort | uniq -c | tr -s ' \n' ' ')" >&2
  ! grep -q "in state S (futex" "$TMP/canopyd.log" || fail "$BACKEND: a query worker was stuck on a lock"
  # B: answered, fast, nothing lost.
  jget "d['errors'] == [] and d['n'] >= 30 // $SLOW" <"$TMP/probe.json" | grep -q True || fail "$BACKEND: B's queries: $(cat "$TMP/probe.json")"
  med=$(jget 'd["median_ms"]' <"$TMP/probe.json")
  # The latency bound is the release build's: under a sanitizer every fork of the daemon
  # costs the loop tens of ms, so only answers and losses are checked there.
  if [ "$SLOW" = 1 ]; then
    $PY -c "import sys; sys.exit(0 if float('$med') < 100 else 1)" ||
      fail "$BACKEND: B's median latency $med ms >= 100 ms"
  fi
  s=$(ok '{"cmd":"sessions"}')
  lost=$(jget "[x['lost'] for x in d['sessions'] if x['id']=='$BS'][0]" <<<"$s")
  n1=$(jget "[x['samples'] for x in d['sessions'] if x['id']=='$BS'][0]" <<<"$s")
  [ "$lost" = 0 ] || fail "$BACKEND: B's session lost $lost samples under the flood"
  [ "$n1" -gt "$n0" ] || fail "$BACKEND: B's samples did not grow ($n0 -> $n1)"
  # A worker that makes no progress (stopped here, as one stuck on a lock would be) ends at
  # the wall-clock bound (4 x query_cpu), and the answer says it was not for its CPU time.
  as $A $PY "$TMP/daemon_proto.py" call "$SOCK" '{"cmd":"tree","session":"s900"}' >"$TMP/stuck.json" &
  Q=$!
  for ((i = 0; i < 400; i++)); do
    c=$(pgrep -P $D_PID || true)
    c=${c%%$'\n'*}
    [ -n "$c" ] && kill -STOP "$c" && break
    sleep 0.005
  done
  wait $Q || true
  echo "$BACKEND stopped worker: $(jget 'd["error"]["message"]' <"$TMP/stuck.json")" >&2
  [ -n "$c" ] || fail "$BACKEND: no query worker seen"
  jget 'd["error"]["message"]' <"$TMP/stuck.json" |
    grep -Eq "stopped after 0.6 s in all \(limit\), with 0\.[0-9]+ s of CPU time, in state T" ||
    fail "$BACKEND: a stopped worker's answer: $(cat "$TMP/stuck.json")"
  st=$(ok '{"cmd":"status"}')
  echo "$BACKEND status: $(jget '{k: d[k] for k in ("workers_running","workers_queued","worker_jobs","query_too_expensive","worker_failures")}' <<<"$st")" >&2
  [ "$(jget 'd["worker_failures"]' <<<"$st")" = 0 ] || fail "$BACKEND: workers died: $st"
  kill $W
  wait $W 2>/dev/null || true
  W=
  stop_daemon
done
echo "ok"
