#!/usr/bin/env bash
# Session counters (docs/cli-live.md, "Session counters"): `canopy sessions --format json`
# and `canopy status` report per-session unwind outcomes and unnamed frames, and they are
# consistent — the outcomes sum to the samples with user stacks — and they move: a
# stack copy too small for a 30-frame stack shows as truncated, a frame-pointer workload
# unwinds completely, and a vDSO-heavy one leaves no frame unsymbolized.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
W=$CANOPY_WORKLOADS
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
on_exit() {
  local rc=$?
  [ "$rc" = 0 ] || { echo "canopyd's log:" >&2; tail -20 "$TMP/d.log" >&2 || true; }
  kill $D_PID 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$TMP"
}
trap on_exit EXIT
start_canopyd

"$C" run --name small --unwind dwarf --stack-size 512 -F 499 -o /dev/null -- "$W/wl_deep_nofp" 1 \
  >/dev/null 2>"$TMP/e" || fail "run small: $(cat "$TMP/e")"
"$C" run --name fp --unwind fp -F 499 -o /dev/null -- "$W/wl_shares_fp" --rounds 40 \
  >/dev/null 2>"$TMP/e" || fail "run fp: $(cat "$TMP/e")"
"$C" run --name clock -F 499 -o /dev/null -- "$W/wl_clockread" 1 clock \
  >/dev/null 2>"$TMP/e" || fail "run clock: $(cat "$TMP/e")"
"$C" sessions --format json >"$TMP/s.json" || fail "sessions --format json"
"$C" status --format json >"$TMP/status.json" || fail "status --format json"
"$C" sessions >"$TMP/s.txt" || fail "sessions"
"$C" status >"$TMP/status.txt" || fail "status"
python3 - "$TMP/s.json" "$TMP/status.json" <<'PY' || fail "session counters"
import json, sys
sessions = {s["name"]: s for s in json.load(open(sys.argv[1]))["sessions"]}
status = json.load(open(sys.argv[2]))
keys = ("complete", "truncated_stack", "no_cfi", "read_fault", "other")
total = {k: 0 for k in keys}
for name, s in sessions.items():
    u = s["unwind_outcomes"]
    print(name, "samples", s["samples"], "user_stacks", s["user_stacks"], u, s["unwinder"],
          s["symbols"], "unsymbolized", s["unsymbolized"], file=sys.stderr)
    assert sum(u[k] for k in keys) == s["user_stacks"], (name, u)
    assert 0 < s["user_stacks"] <= s["samples"] + s["dropped"], name
    sym = s["symbols"]
    assert s["unsymbolized"] == sym["pending"] + sym["unresolved"] + sym["unresolvable"], name
    for k in keys:
        total[k] += u[k]
small, fp, clock = sessions["small"], sessions["fp"], sessions["clock"]
# 512 bytes of stack cannot hold 30 frames: most unwinds stop at the copy's end.
assert small["unwind_outcomes"]["truncated_stack"] >= 0.5 * small["user_stacks"], small
assert small["unwinder"]["dwarf"] > 0, small["unwinder"]
# Frame pointers all the way down (main's callers in libc included, or not): no
# truncation, and the frame-pointer walk never reports a failure.
assert fp["unwind_outcomes"]["truncated_stack"] == 0, fp
assert fp["unwind_outcomes"]["complete"] >= 0.95 * fp["user_stacks"], fp
# The program's own work runs in user space nearly always.
assert clock["user_stacks"] >= 0.8 * clock["samples"], clock
assert clock["symbols"]["unresolvable"] == 0 and clock["symbols"]["unresolved"] == 0, clock
assert status["user_stacks"] == sum(s["user_stacks"] for s in sessions.values()), status
assert status["unwind_outcomes"] == total, (status["unwind_outcomes"], total)
assert status["unsymbolized"] == sum(s["unsymbolized"] for s in sessions.values())
PY
head -1 "$TMP/s.txt" | grep -q 'UNWOUND *UNSYM' || fail "sessions: no UNWOUND/UNSYM columns: $(cat "$TMP/s.txt")"
grep -Eq '^[a-z0-9]+ +fp .* 100% +0 ' "$TMP/s.txt" || grep -Eq '^[a-z0-9]+ +fp .* (9[5-9]|100)% ' "$TMP/s.txt" ||
  fail "sessions: fp row: $(cat "$TMP/s.txt")"
grep -q 'unwound completely' "$TMP/status.txt" || fail "status text: $(cat "$TMP/status.txt")"
cat "$TMP/s.txt" "$TMP/status.txt" >&2
echo "PASS session counters"
