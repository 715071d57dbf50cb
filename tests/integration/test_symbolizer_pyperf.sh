#!/usr/bin/env bash
# Python's perf trampolines (docs/perf-sampler.md, "Interpreters and JITs"). Python >= 3.12
# run with `-X perf` writes /tmp/perf-PID.map naming one trampoline per Python function
# (`py::inner:/path/pyhot.py`). Debian 12's python3 (3.11) has no trampolines: `-X perf`
# is accepted and ignored, no map is written; checked here so that a change shows.
# Where a python >= 3.12 is found (CANOPY_PYTHON312, python3.12/python3.13 on PATH, or
# pyenv's), its trampolines must be named in canopy's tree, and the stacks must end at the
# trampoline (it keeps no frame pointer; perf --call-graph dwarf ends there too) instead
# of continuing with a frame-chain guess into unmapped addresses, and say so: the root
# above the trampoline is the pseudo-frame "[unwind stopped: JIT code without frame
# pointers]" (docs/calltree.md §4.6). The native view (--no-python): with Python frames on,
# the interpreter's own frames replace the eval loop's (docs/python.md, test_python_frames).
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
PIDS=()
on_exit() {
  # the -X perf workload's pid, from its output's first line
  [ -s "$TMP/py.out" ] && PIDS+=($(awk '$1 == "pid" {print $2; exit}' "$TMP/py.out"))
  for p in "${PIDS[@]}"; do rm -f "/tmp/perf-$p.map"; done
  rm -rf "$TMP"
}
trap on_exit EXIT

# A map under the same pid older than the run is another process's, left in /tmp (pids
# wrap: one CI run met a stale one): only a map written during the run counts.
touch "$TMP/stamp"
sleep 0.01
/usr/bin/python3 -X perf -c 'import os, sys; print(os.getpid(), sys.version_info[:2] >= (3, 12),
hasattr(sys, "activate_stack_trampoline"))' >"$TMP/d.out" || fail "python3 -X perf refused"
read -r dpid new has <"$TMP/d.out"
PIDS+=("$dpid")
if [ "$new" = False ]; then
  [ "$has" = False ] && ! [ "/tmp/perf-$dpid.map" -nt "$TMP/stamp" ] ||
    fail "Debian's python3 $(/usr/bin/python3 -V) now has perf trampolines: update docs/perf-sampler.md"
  echo "PASS Debian's $(/usr/bin/python3 -V): -X perf ignored, no perf map (as documented)"
fi

PY=${CANOPY_PYTHON312:-}
for cand in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
  [ -n "$PY" ] && break
  command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.activate_stack_trampoline' 2>/dev/null && PY=$cand
done
if [ -z "$PY" ]; then
  echo "no python >= 3.12 here: trampolines not exercised"
  exit 0
fi
"$C" run --no-daemon --no-kernel --no-python -F 999 --format folded -o "$TMP/py.folded" -- \
  "$PY" -X perf "$CANOPY_TEST_DATA/src/pyhot.py" 2 >"$TMP/py.out" 2>"$TMP/py.err" ||
  fail "canopy run $PY -X perf: $(cat "$TMP/py.err")"
python3 - "$TMP/py.folded" "$("$PY" -V)" <<'PY' || exit 1
import re, sys
total = tramp = hexroot = stopped = 0
for line in open(sys.argv[1]):
    st, n = line.rstrip("\n").rsplit(" ", 1)
    fr, n = st.split(";"), int(n)
    total += n
    tramp += n if any(f.startswith("py::inner:") for f in fr) else 0
    hexroot += n if re.fullmatch(r"0x[0-9a-f]+", fr[0]) else 0
    stopped += n if fr[0] == "[unwind stopped: JIT code without frame pointers]" and \
        len(fr) > 1 and fr[1].startswith("py::") else 0
print(f"{sys.argv[2]} -X perf: {total} samples, {tramp} under py::inner, {hexroot} rooted at a bare address, "
      f"{stopped} rooted at the pseudo-frame above a trampoline")
assert total >= 150, total  # 2 s at 999 Hz; a loaded machine gave 300
assert tramp >= 0.6 * total, (tramp, total)
assert hexroot <= 0.01 * total, (hexroot, total)
assert stopped >= 0.6 * tramp, (stopped, tramp)  # 739 of 789 in one run of 3.12.1
PY
echo "PASS $("$PY" -V) -X perf trampolines named, no guessed frames above them"
