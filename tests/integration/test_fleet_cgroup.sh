#!/usr/bin/env bash
# Container labels in the fleet (docs/fleet.md "Container labels"): a cgroup session on a
# cgroup the test makes, with two children — one named as podman names a container
# (libpod-<64 hex>) and one as a systemd service (web.service) — pushes to a ClickHouse
# server started here and to a stand-in Pyroscope receiver. Its rows carry container_id,
# cgroup and systemd_unit labels; `canopy fleet tree --where container_id=ID` (and its
# alias container=ID) totals exactly the session's own `--where container=ID`, each
# `--group-by container` root equals the session's, the two add up to the session's
# total; `fleet labels` lists them; the Pyroscope series carry the same labels.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "cgroup sessions and making cgroups need root"
V2=$(awk '$9 == "cgroup2" && $4 == "/" {print $5; exit}' /proc/self/mountinfo)
[ -n "$V2" ] || skip "no cgroup v2 hierarchy mounted"
C=$CANOPY_BIN
WA=$CANOPY_WORKLOADS/wl_shares_fp
WB=$CANOPY_WORKLOADS/wl_threads_fp
CG=$V2/canopy-fleet-$$
ID=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
PIDS=()
on_exit() {
  local rc=$?
  kill "${PIDS[@]}" 2>/dev/null || true
  ch_stop A
  wait 2>/dev/null || true
  for d in "$CG"/*/ "$CG"; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
  finish_tmp $rc
}
trap on_exit EXIT

ch_start A
URL=$(ch_url A)
"$C" fleet init --url "$URL" >/dev/null || fail "fleet init"
mkdir -p "$TMP/recv"
/usr/bin/python3 "$(dirname "$0")/pyroscope_receiver.py" "$TMP/port" "$TMP/recv" "$TMP/none" t &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || fail "receiver did not start"
cat >"$TMP/d.conf" <<CONF
fleet_url = $URL
fleet_pyroscope_url = http://127.0.0.1:$(cat "$TMP/port")/
fleet_pyroscope_org = t
fleet_host = h1
fleet_interval = 1s
CONF
fleet_canopyd d
mkdir "$CG" "$CG/libpod-$ID" "$CG/web.service"
S=$("$C" system --cgroup "$CG" -F 499 --name cg --socket "$TMP/d.sock") || fail "system --cgroup: $S"
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$1" --rounds 40' "$CG/libpod-$ID" "$WA" >/dev/null &
PA=$!
PIDS+=($PA)
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$1" 2 0' "$CG/web.service" "$WB" >/dev/null &
PB=$!
PIDS+=($PB)
wait $PA $PB
sleep 0.5
"$C" stop cg --socket "$TMP/d.sock" >/dev/null || fail "stop"
for ((i = 0; i < 300; i++)); do
  "$C" status --socket "$TMP/d.sock" --format json >"$TMP/st.json" 2>/dev/null &&
    [ "$(json "$TMP/st.json" 'd["fleet"]["sessions"] == 0 and d["fleet"]["rows_queued"] == 0 and d["fleet"]["rows_sent"] > 0 and d["fleet"]["pyroscope"]["profiles_queued"] == 0')" = True ] &&
    break
  sleep 0.1
done
[ $i -lt 300 ] || fail "the fleet push did not finish: $(cat "$TMP/st.json")"

q() { "$C" "$@" --socket "$TMP/d.sock" --format json; }
q tree cg --group-by container >"$TMP/s_ctr.json" || fail "session --group-by container"
q tree cg >"$TMP/s_all.json" || fail "session tree"
"$C" fleet tree --url "$URL" --where "container_id=$ID" --format json >"$TMP/f_id.json" || fail "fleet --where container_id"
"$C" fleet tree --url "$URL" --where "container=$ID" --format json >"$TMP/f_alias.json" || fail "fleet --where container"
"$C" fleet tree --url "$URL" --where systemd_unit=web.service --format json >"$TMP/f_unit.json" || fail "fleet --where systemd_unit"
"$C" fleet tree --url "$URL" --group-by container --format json >"$TMP/f_ctr.json" || fail "fleet --group-by container"
"$C" fleet tree --url "$URL" --format json >"$TMP/f_all.json" || fail "fleet tree"
"$C" fleet labels --url "$URL" >"$TMP/labels.txt" || fail "fleet labels"
/usr/bin/python3 - "$TMP" "$ID" "${CG#$V2}" <<'PY' || fail "fleet container labels"
import json, sys
tmp, cid, cg = sys.argv[1:]
load = lambda n: json.load(open(f"{tmp}/{n}.json"))
sctr = {r["name"]: r["total"] for r in load("s_ctr")["roots"]}
fctr = {r["name"]: r["total"] for r in load("f_ctr")["roots"]}
total = load("s_all")["total"]
print("session:", sctr, "fleet:", fctr, file=sys.stderr)
mine = sctr[f"container={cid}"]
assert mine > 200, sctr
assert load("f_id")["total"] == mine, (load("f_id")["total"], mine)
assert load("f_alias")["total"] == mine
assert fctr == {f"container={cid}": mine}, fctr  # rows without the label are in no group
rest = total - mine
assert rest > 100 and load("f_unit")["total"] == rest, (load("f_unit")["total"], rest)
assert load("f_all")["total"] == total, (load("f_all")["total"], total)
labels = open(f"{tmp}/labels.txt").read()
for want in ("container_id", "cgroup", "systemd_unit"):
    assert want in labels, labels
series = [json.loads(l) for l in open(f"{tmp}/recv/series.jsonl")]
got = set()
for s in series:
    l = dict(s["labels"])
    got.add((l.get("container_id"), l.get("cgroup"), l.get("systemd_unit")))
print("pyroscope series labels:", got, file=sys.stderr)
assert (cid, f"{cg}/libpod-{cid}", None) in got, got
assert (None, f"{cg}/web.service", "web.service") in got, got
print(f"fleet: container {mine:.0f} of {total:.0f} samples, the rest {rest:.0f}", file=sys.stderr)
PY
echo "PASS fleet container labels"
