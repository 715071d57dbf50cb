#!/usr/bin/env bash
# cgroup sessions and container labels (docs/cli-live.md "Containers and cgroups"), with
# cgroups the test makes under the cgroup v2 mount: `canopy system --cgroup DIR` samples
# exactly the tasks of DIR and of its descendants — one moved in before the session, one
# started in a child cgroup made after it, Debian's python3 and xz among them — and never
# a busy process outside; `--group-by process|cgroup|container` and `--where container=`
# agree with each other and with the session's total; a cgroup named as podman names its
# containers (libpod-<64 hex>) gives the container label, and `canopy attach --container
# PREFIX` finds it from /proc/*/cgroup; `canopy save` + `canopy open` keep the labels;
# as an unprivileged user a cgroup session is refused (not delegated to it, then holding
# a root process) and allowed on a cgroup delegated to it holding only its own processes.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "cgroup sessions and making cgroups need root"
V2=$(awk '$9 == "cgroup2" && $4 == "/" {print $5; exit}' /proc/self/mountinfo)
[ -n "$V2" ] || skip "no cgroup v2 hierarchy mounted"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
PY=/usr/bin/python3
XZ=$(command -v xz) || skip "xz not installed"
[ -x $PY ] || skip "python3 not installed"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
NOBODY=65534
CG=$V2/canopy-test-$$
ID=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CTR=$CG/libpod-$ID
D_PID= PIDS=
on_exit() {
  local rc=$?
  kill $PIDS 2>/dev/null || true
  kill $D_PID 2>/dev/null || true
  wait 2>/dev/null || true
  # the cgroups, children first, once their processes are gone
  for d in "$CG"/*/ "$CG"; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
  [ "$rc" = 0 ] || cp "$TMP/d.log" "$TMP/canopyd.log" 2>/dev/null || true
  finish_tmp $rc
}
trap on_exit EXIT
chmod 0755 "$TMP" # the unprivileged user reaches the socket
start_canopyd
mkdir "$CG" || fail "mkdir $CG"

# in_cgroup VAR DIR CMD...: runs CMD (exec'd) inside DIR in the background; its pid in VAR.
in_cgroup() {
  local var=$1 dir=$2
  shift 2
  sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$dir" "$@" >/dev/null 2>&1 &
  printf -v "$var" %s $!
  PIDS="$PIDS $!"
}

# Before the session: one workload in the cgroup, one busy process outside it.
in_cgroup A "$CG" "$WL" --rounds 60
$PY -c 'import time
t = time.time() + 15
while time.time() < t: pass' &
O=$!
PIDS="$PIDS $O"
sleep 0.2
S=$("$C" system --cgroup "$CG" -F 499 --name cg) || fail "canopy system --cgroup: $S"

# After it: a child cgroup, python3 in it; xz in a cgroup named as podman names one.
mkdir "$CG/sub" "$CTR"
in_cgroup B "$CG/sub" $PY -c 'import time
n = 0
while time.process_time() < 1.0: n += sum(i * i for i in range(500))'
in_cgroup X "$CTR" sh -c "head -c 3000000 /dev/urandom | $XZ -2 -T1 > /dev/null"
wait $A $B $X
sleep 0.6 # the loop's next pump takes the last records
"$C" tree cg --group-by process --format json >"$TMP/proc.json" || fail "tree --group-by process"
"$C" tree cg --group-by cgroup --format json >"$TMP/cg.json" || fail "tree --group-by cgroup"
"$C" tree cg --group-by container --format json >"$TMP/ctr.json" || fail "tree --group-by container"
"$C" tree cg --where "container=${ID:0:12}" --format json >"$TMP/where.json" || fail "--where"
"$C" tree cg --format json >"$TMP/all.json" || fail "tree"
"$C" sessions --format json >"$TMP/s.json"
"$C" sessions >"$TMP/s.txt"
python3 - "$TMP" "$A" "$B" "$X" "$O" "${CG#$V2}" "$ID" <<'PY' || fail "cgroup session"
import json, re, sys
tmp, a, b, x, o, cg, cid = sys.argv[1:]
load = lambda n: json.load(open(f"{tmp}/{n}.json"))
proc, cgs, ctr, where, allj = (load(n) for n in ("proc", "cg", "ctr", "where", "all"))
total = allj["total"]
assert allj.get("cgroup", "").endswith(cg), ("the JSON tree's header", allj.get("cgroup"))
roots = {r["name"]: r["total"] for r in proc["roots"]}
print("process roots:", roots, file=sys.stderr)
pids = {re.search(r"\[(\d+)\]$", n).group(1): t for n, t in roots.items()}
assert o not in pids, ("the process outside the cgroup was sampled", roots)
for p, what in ((a, "moved in before"), (b, "started later in a child cgroup")):
    assert pids.get(p, 0) > 100, (what, p, roots)
# xz runs in a child of the shell that was moved: a process of its own
assert any(n.startswith("xz [") for n in roots), ("xz in the container cgroup", roots)
assert abs(sum(roots.values()) - total) < 1e-6, (sum(roots.values()), total)
c = {r["name"]: r["total"] for r in cgs["roots"]}
print("cgroup roots:", c, file=sys.stderr)
# A process that exits before canopyd reads its /proc/PID/cgroup (the shell that moves
# itself into a cgroup and starts the workload) has no label: "(none)", a sample or two.
none = c.pop("cgroup=(none)", 0)
assert none <= 0.01 * total, ("unlabelled samples", none, total)
assert set(c) == {f"cgroup={cg}", f"cgroup={cg}/sub", f"cgroup={cg}/libpod-{cid}"}, c
assert c[f"cgroup={cg}"] == pids[a], (c, pids[a])
assert c[f"cgroup={cg}/sub"] == pids[b], (c, pids[b])
k = {r["name"]: r["total"] for r in ctr["roots"]}
print("container roots:", k, file=sys.stderr)
assert set(k) == {"container=(none)", f"container={cid}"}, k
assert k[f"container={cid}"] == c[f"cgroup={cg}/libpod-{cid}"] > 50, (k, c)
assert where["total"] == k[f"container={cid}"], (where["total"], k)
assert abs(sum(k.values()) - total) < 1e-6
s = [s for s in json.load(open(f"{tmp}/s.json"))["sessions"] if s["name"] == "cg"][0]
assert s["cgroup"].endswith(cg) and s["target"] == "system", s
text = open(f"{tmp}/s.txt").read()
assert cg in text, text
print(f"cgroup session: {total:.0f} samples, {len(roots)} processes; container {k[f'container={cid}']:.0f}",
      file=sys.stderr)
PY

# Saved and opened again: the labels stay (.canopy version 3).
"$C" save cg -o "$TMP/cg.canopy" >/dev/null || fail "canopy save"
"$C" open "$TMP/cg.canopy" --group-by container --format json >"$TMP/ctr2.json" || fail "open"
python3 - "$TMP/ctr.json" "$TMP/ctr2.json" <<'PY' || fail "saved session's container roots"
import json, sys
a, b = (sorted((r["name"], r["total"]) for r in json.load(open(f))["roots"]) for f in sys.argv[1:])
assert a == b, (a, b)
PY
"$C" stop cg >/dev/null

# A cgroup's many short processes (a build's shape): each sample carries its task's cgroup
# id (PERF_SAMPLE_CGROUP), looked up once by file handle, so no process's /proc/PID/cgroup
# is read (it used to be at each exec). 60 processes of ~40 ms each, forked and exec'd by a
# shell in the cgroup, labelled with it.
S=$("$C" system --cgroup "$CG/sub" -F 499 --name churn) || fail "canopy system --cgroup sub: $S"
in_cgroup Z "$CG/sub" sh -c 'for n in $(seq 60); do sh -c "i=0; while [ \$i -lt 20000 ]; do i=\$((i+1)); done"; done'
wait $Z
sleep 0.6
"$C" sessions --format json >"$TMP/s3.json"
python3 - "$TMP/s3.json" <<'PY' || fail "cgroup reads of a churning cgroup"
import json, sys
s = [s for s in json.load(open(sys.argv[1]))["sessions"] if s["name"] == "churn"][0]
print(f"churn: {s['threads']} threads, {s['samples']} samples, cgroups {s['cgroups']}",
      file=sys.stderr)
assert s["threads"] >= 40, s["threads"]  # the processes were sampled
assert s["cgroups"]["reads"] == 0 and 1 <= s["cgroups"]["lookups"] <= 3, s["cgroups"]
PY
"$C" tree churn --group-by cgroup --format json >"$TMP/churn.json" || fail "tree churn"
json "$TMP/churn.json" '[r["name"] for r in d["roots"]]' | grep -qx "\['cgroup=${CG#$V2}/sub'\]" ||
  fail "the churning processes' cgroup: $(head -c 600 "$TMP/churn.json")"
"$C" stop churn >/dev/null

# attach --container: the id's prefix found in /proc/*/cgroup, the session on its cgroup.
in_cgroup Y "$CTR" $PY -c 'import time
t = time.time() + 20
while time.time() < t: pass'
sleep 0.2
K=$("$C" attach --container "${ID:0:10}" -F 199 --name ctr 2>"$TMP/attach.err") ||
  fail "attach --container: $(cat "$TMP/attach.err")"
grep -q "cgroup $CTR" "$TMP/attach.err" || fail "attach --container did not say its cgroup: $(cat "$TMP/attach.err")"
sleep 1
kill $Y
"$C" sessions --format json >"$TMP/s2.json"
json "$TMP/s2.json" '[s for s in d["sessions"] if s["name"] == "ctr"][0]["container"]' | grep -qx "$ID" ||
  fail "the container session's JSON: $(cat "$TMP/s2.json")"
"$C" sessions | grep -q "container ${ID:0:12}" || fail "canopy sessions does not show the container"
"$C" tree ctr --group-by container --format json >"$TMP/k.json"
json "$TMP/k.json" '[r["name"] for r in d["roots"]]' | grep -qx "\['container=$ID'\]" ||
  fail "attach --container sampled other containers: $(cat "$TMP/k.json" | head -c 300)"
expect_fail 1 "$C" attach --container "ffff${ID:0:4}0000"
expect_fail 2 "$C" attach --container not-hex
"$C" stop ctr >/dev/null

# Access as nobody: a root-owned cgroup is refused; a delegated one is allowed while it
# holds only nobody's processes, refused once a root process joins it.
as_user() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
r=$(as_user "$C" system --cgroup "$CG" 2>&1) && fail "nobody started a session on root's cgroup: $r"
grep -q "not delegated to uid $NOBODY" <<<"$r" || fail "refusal without its reason: $r"
DG=$CG/delegated
mkdir "$DG"
chown $NOBODY:$NOBODY "$DG" "$DG/cgroup.procs"
in_cgroup U "$DG" setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups sleep 30
sleep 0.2
US=$(as_user "$C" system --cgroup "$DG" --name mine 2>&1) || fail "nobody on its delegated cgroup: $US"
"$C" rm "$US" >/dev/null 2>&1 || as_user "$C" rm "$US" >/dev/null
in_cgroup R "$DG" sleep 30
sleep 0.2
r=$(as_user "$C" system --cgroup "$DG" 2>&1) && fail "nobody on a cgroup holding a root process: $r"
grep -q "holds process $R" <<<"$r" || fail "refusal does not name the root process: $r"
r=$(as_user "$C" system --cgroup /tmp 2>&1) && fail "nobody on /tmp: $r"
echo "PASS cgroup sessions"
