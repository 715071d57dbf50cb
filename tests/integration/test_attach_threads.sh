#!/usr/bin/env bash
# Threads started after an attach are named: a thread has no COMM record until it renames
# itself, and took no name at all before (`? [tid]` under --group-by thread); now it
# carries its process's name, as the kernel gave it its creator's, until a COMM renames
# it. Debian's python3 (3.11's threading does not name its threads) is attached while it
# sleeps; then it starts two threads that burn for 2 s, one of which renames itself
# through prctl(PR_SET_NAME), and 60 threads of 4 ms one after the other, which exit
# before their first record is handled (the sampler reads a new thread's name from /proc
# then: too late). Asserted under --group-by thread: no thread root without a name, the
# unrenamed long thread as "python3 [TID]", the renamed one under its own name, and at
# least 10 of the short threads as "python3 [TID]".
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
P=
trap 'rc=$?; kill $D_PID $P 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd

cat >"$TMP/late.py" <<'PY'
import ctypes, os, sys, threading, time
def burn(kind, secs):
    if kind == 1:
        ctypes.CDLL(None).prctl(15, b"renamed-burner", 0, 0, 0)  # PR_SET_NAME
    os.write(1, b"%d %d\n" % (kind, threading.get_native_id()))  # one write: no interleaving
    end = time.monotonic() + secs
    while time.monotonic() < end:
        sum(i * i for i in range(100))
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[1]))  # the attach happens here
ts = [threading.Thread(target=burn, args=(k, 2.0)) for k in (0, 1)]
for t in ts:
    t.start()
for _ in range(60):  # short threads, gone before their first record is handled
    t = threading.Thread(target=burn, args=(2, 0.004))
    t.start()
    t.join()
for t in ts:
    t.join()
PY
/usr/bin/python3 "$TMP/late.py" 1.5 "$TMP/ready" >"$TMP/tids.txt" &
P=$!
# Attached once the script runs (not the shell's child before or during its exec).
for ((i = 0; i < 300; i++)); do [ -e "$TMP/ready" ] && break; sleep 0.01; done
COMM=$(cat /proc/$P/comm) # the process's name, which its new threads take
S=$("$C" attach $P -F 499 2>"$TMP/attach.err") || fail "attach: $(cat "$TMP/attach.err")"
wait $P
P=
PLAIN=$(awk '$1 == 0 {print $2}' "$TMP/tids.txt")
RENAMED=$(awk '$1 == 1 {print $2}' "$TMP/tids.txt")
[[ "$PLAIN" =~ ^[0-9]+$ && "$RENAMED" =~ ^[0-9]+$ ]] || fail "tids: $(cat "$TMP/tids.txt")"
"$C" tree "$S" --group-by thread --format json >"$TMP/t.json" || fail "tree --group-by thread"
python3 - "$TMP/t.json" "$TMP/tids.txt" "$COMM" <<'PY' || fail "thread names"
import json, sys
d = json.load(open(sys.argv[1]))
tids = {}
for line in open(sys.argv[2]):
    kind, tid = line.split()
    tids.setdefault(kind, []).append(tid)
roots = {r["name"]: r["total"] for r in d["roots"]}
print("thread roots:", len(roots), sorted(roots.items(), key=lambda kv: -kv[1])[:6], file=sys.stderr)
bad = [n for n in roots if n.startswith("? [")]
assert not bad, f"threads without a name: {bad}"
comm = sys.argv[3]
plain, renamed = tids["0"][0], tids["1"][0]
assert f"{comm} [{plain}]" in roots, f"the new thread {plain} is not '{comm} [{plain}]'"
assert f"renamed-burner [{renamed}]" in roots, f"the renamed thread {renamed} is missing"
short = [t for t in tids["2"] if f"{comm} [{t}]" in roots]
print(f"short threads named: {len(short)} of {len(tids['2'])}", file=sys.stderr)
assert len(short) >= 10, "too few short threads sampled to tell"
PY
echo PASS
