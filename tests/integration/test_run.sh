#!/usr/bin/env bash
# `canopy run` in-process (no daemon answers): on the known-profile workload (work_a 50%,
# work_b 30%, work_c 20% of the time) the tree's shares match within ±5 points with the
# default unwinder and with DWARF; canopy exits with the command's status (exit code,
# 127 when exec fails, 128+N for a signal); one stderr line says it sampled in-process;
# usage errors exit 2 before the command starts.
source "$(dirname "$0")/lib.sh"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
export CANOPY_SOCKET=$TMP/no-daemon.sock

# check_shares LABEL FILE: the JSON tree's work_a/work_b/work_c totals vs 50/30/20.
check_shares() {
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
total = doc["total"]
assert doc["unit"] in ("samples", "ns", "events"), doc["unit"]
assert doc.get("session"), "no session field"
assert doc.get("samples", 0) > 300, f"only {doc.get('samples')} samples"
sums = {"work_a": 0, "work_b": 0, "work_c": 0}
def walk(n, inside):
    # Count each work_* subtree once (work_c recurses: only its outermost call).
    name = n["name"]
    if name in sums and name not in inside:
        sums[name] += n["total"]
        inside = inside | {name}
    for c in n.get("children", []):
        walk(c, inside)
for r in doc["roots"]:
    walk(r, frozenset())
want = {"work_a": 50, "work_b": 30, "work_c": 20}
got = {k: 100.0 * v / total for k, v in sums.items()}
bad = [k for k in want if abs(got[k] - want[k]) > 5]
print(f"{label}: " + ", ".join(f"{k} {got[k]:.1f}% (want {want[k]})" for k in want))
sys.exit(1 if bad else 0)
PY
}

# ---- shares, default unwinder and DWARF ------------------------------------------------
for unwind in auto dwarf; do
  "$CANOPY_BIN" run --unwind "$unwind" --format json -o "$TMP/run-$unwind.json" -- "$WL" --rounds 60 \
    >"$TMP/wl.out" 2>"$TMP/run.err" || fail "run ($unwind) exited $?: $(cat "$TMP/run.err")"
  grep -q '^rounds ' "$TMP/wl.out" || fail "the workload's output did not reach stdout"
  [ "$(grep -c 'in-process' "$TMP/run.err")" = 1 ] ||
    fail "expected one in-process line on stderr, got: $(cat "$TMP/run.err")"
  [ "$(wc -l <"$TMP/run.err")" = 1 ] || fail "stderr has more than one line: $(cat "$TMP/run.err")"
  check_shares "run --unwind $unwind" "$TMP/run-$unwind.json" || fail "shares off ($unwind)"
done

# Symbolized text tree on stdout after the command's own output.
"$CANOPY_BIN" run --min-percent 5 -- "$WL" --rounds 10 >"$TMP/run.txt" 2>/dev/null || fail "text run"
head -1 "$TMP/run.txt" | grep -q '^rounds ' || fail "workload output should come first"
grep -qE '[0-9.]+%.* main$' "$TMP/run.txt" || fail "no main in the text tree: $(cat "$TMP/run.txt")"
grep -q 'burn' "$TMP/run.txt" || fail "no burn in the text tree"
echo "PASS shares"

# ---- exit statuses -------------------------------------------------------------------------
st() { "$CANOPY_BIN" run -o "$TMP/ignored.json" -- "$@" >/dev/null 2>"$TMP/st.err"; echo $?; }
[ "$(st sh -c 'exit 7')" = 7 ] || fail "exit 7 not passed through: $(cat "$TMP/st.err")"
[ "$(st true)" = 0 ] || fail "exit 0 not passed through"
[ "$(st "$TMP/no/such/command")" = 127 ] || fail "exec failure is not 127"
[ "$(st sh -c 'kill -TERM $$')" = 143 ] || fail "death by SIGTERM is not 143"
# `canopy run CMD` without -- works too.
"$CANOPY_BIN" run -o "$TMP/x.json" sh -c 'exit 3' 2>/dev/null && rc=0 || rc=$?
[ "$rc" = 3 ] || fail "run without -- gave $rc"
echo "PASS exit statuses"

# ---- usage errors: exit 2, the command never starts, nothing on stdout ---------------------
usage() {
  local rc
  "$CANOPY_BIN" run "$@" >"$TMP/u.out" 2>"$TMP/u.err" && rc=0 || rc=$?
  [ "$rc" = 2 ] || fail "run $* exited $rc, expected 2"
  [ ! -s "$TMP/u.out" ] || fail "run $*: output on stdout"
  [ "$(wc -l <"$TMP/u.err")" = 1 ] || fail "run $*: not one error line: $(cat "$TMP/u.err")"
  [ ! -e "$TMP/ran" ] || fail "run $*: the command ran"
}
usage
usage -F 0 -- touch "$TMP/ran"
usage --unwind lbr -- touch "$TMP/ran"
usage --duration xyz -- touch "$TMP/ran"
usage -t 'nosuchop:x' -- touch "$TMP/ran"
usage --bogus -- touch "$TMP/ran"
echo "PASS usage errors"

# ---- tree --pid in-process: a temporary session for --duration ---------------------------
"$WL" 30 >/dev/null &
W_PID=$!
trap 'rc=$?; kill $W_PID 2>/dev/null || true; finish_tmp $rc' EXIT
"$CANOPY_BIN" tree --pid "$W_PID" --duration 1 --format json >"$TMP/pid.json" 2>"$TMP/pid.err" ||
  fail "tree --pid in-process: $(cat "$TMP/pid.err")"
grep -q 'in-process' "$TMP/pid.err" || fail "tree --pid: no in-process line"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["total"] > 0 and d["roots"], d' \
  "$TMP/pid.json" || fail "tree --pid JSON"
kill "$W_PID"
echo "PASS tree --pid in-process"
