#!/usr/bin/env bash
# A running session's checkpoints are spaced by what writing it costs: the configured
# interval (1 s here), or 200 times the CPU time of its last writer when that is longer, so
# that checkpoints take at most 0.5% of a core (daemon/store.c, CHECKPOINT_CPU_SHARE). A
# whole-system session at 999 Hz beside two busy threads grows fast enough that a write
# passes 5 ms within seconds: the delay must then stretch, and the writes must follow it.
# `sessions` reports each running session's checkpoint: writes, last_cpu_s, delay_s.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
[ "$(id -u)" = 0 ] || skip "a whole-system session needs root"
WL=$CANOPY_WORKLOADS/wl_threads_fp
[ -x "$WL" ] || fail "workload not built"
W=
trap 'rc=$?; stop_daemon KILL || true; kill $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT

printf 'checkpoint = 1s\n' >"$TMP/c.conf"
start_daemon io_uring "$TMP/state" --config "$TMP/c.conf"
"$WL" 40 0 >/dev/null &
W=$!
SS=$(ok '{"cmd":"system","freq":999,"name":"ckpt"}' | jget 'd["session"]["id"]')

python3 - "$SOCK" "$SS" "$(dirname "$0")" 2>&1 <<'PY' | tee "$TMP/checkpoints.log" || fail "checkpoint delays: see above"
import sys, time
sys.path.insert(0, sys.argv[3])
import daemon_proto as dp
sock, sid = sys.argv[1], sys.argv[2]
seen = []  # (time, writes, last_cpu_s, delay_s) at each change of writes
start = time.time()
end = start + 25
while time.time() < end:
    r = dp.call(sock, {"cmd": "sessions"})
    assert r["ok"], r
    s = [x for x in r["sessions"] if x["id"] == sid][0]
    c = s["checkpoint"]
    want = max(1.0, 200 * c["last_cpu_s"])
    assert abs(c["delay_s"] - want) < 1e-3, f"delay {c['delay_s']} s, expected max(1, 200 x {c['last_cpu_s']})"
    if not seen or c["writes"] != seen[-1][1]:
        seen.append((time.time(), c["writes"], c["last_cpu_s"], c["delay_s"]))
        # a slow machine's writes cost more: wait out a stretched delay (up to 90 s in all)
        end = max(end, min(start + 90, seen[-1][0] + c["delay_s"] + 10))
        print(f"t={seen[-1][0] - seen[0][0]:6.2f} s writes={c['writes']} last_cpu={c['last_cpu_s'] * 1e3:.1f} ms "
              f"delay={c['delay_s']:.2f} s samples={s['samples']}")
    if len(seen) >= 2 and seen[-2][3] > 1.5:
        break  # a write after a stretched delay: its spacing is checked below
    time.sleep(0.1)
assert len(seen) >= 3, f"only {len(seen)} checkpoint counts seen: {seen}"
assert seen[-1][2] > 0, "the writer's CPU time was not reported"
assert any(d > 1.5 for _, _, _, d in seen), "the delay never stretched past the configured 1 s"
# A write starts at least `delay` after the previous one started; each is seen done within
# its own duration (at most a fifth of a stretched delay: 200 x CPU time, nice 5) plus the
# 0.1 s polling.
for (t0, w0, _, d0), (t1, w1, _, _) in zip(seen, seen[1:]):
    if w1 == w0 + 1 and d0 > 1.5:
        assert t1 - t0 >= 0.8 * d0 - 0.3, f"a write {t1 - t0:.2f} s after the previous one, delay {d0:.2f} s"
print("checkpoint delays follow the writer's cost")
PY
stop_daemon TERM
