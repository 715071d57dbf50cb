#!/usr/bin/env bash
# The push to Pyroscope (docs/fleet.md "Pushing to Pyroscope"): canopyd with
# fleet_pyroscope_url sends each interval's profile to a stand-in receiver
# (pyroscope_receiver.py: decodes the PushRequest with python3-protobuf, checks the
# headers, writes each profile); `go tool pprof -raw` reads every profile back and
# together they must be the session's tree: total = session samples × period, the
# workload's known shares (±5 points), labels as configured, in order across a refused
# stretch (503s) of the receiver. fleet_url points at a closed port at the same time: the
# ClickHouse sink's failures must not hold the Pyroscope sink back. Then an off-cpu and a
# wall session (tests/workloads/waits.c): their series are named off_cpu and wall, their
# profiles have the sample types samples/count and off_cpu|wall/nanoseconds, and their
# nanoseconds sum to each session's own total.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
WL=$CANOPY_WORKLOADS/wl_shares_fp
PIDS=()
trap 'rc=$?; kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || finish_tmp $rc' EXIT
command -v go >/dev/null || fail "go (golang-go) is needed for go tool pprof"
export GOCACHE=$TMP/gocache GOFLAGS= HOME=${HOME:-$TMP}

mkdir -p "$TMP/recv"
touch "$TMP/failing"
/usr/bin/python3 "$(dirname "$0")/pyroscope_receiver.py" "$TMP/port" "$TMP/recv" "$TMP/failing" \
  tenant-7 &
PIDS+=($!)
for ((i = 0; i < 100; i++)); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || fail "receiver did not start"

# A closed port for ClickHouse: bind one, note it, close it.
DEAD=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$TMP/d.conf" <<CONF
fleet_url = http://127.0.0.1:$DEAD/
fleet_pyroscope_url = http://127.0.0.1:$(cat "$TMP/port")/
fleet_pyroscope_org = tenant-7
fleet_host = host-a
fleet_labels = env=test,dc.zone=z1
fleet_interval = 500ms
CONF
fleet_canopyd d

# Waits (≤ 60 s) until every session's last interval went out and Pyroscope's queue is empty.
wait_drained() {
  local end=$((SECONDS + 60))
  while :; do
    "$C" status --socket "$TMP/d.sock" --format json >"$TMP/st.json"
    [ "$(json "$TMP/st.json" 'd["fleet"]["sessions"] == 0 and d["fleet"]["pyroscope"]["profiles_queued"] == 0')" = True ] && return 0
    [ $SECONDS -lt $end ] || fail "Pyroscope push never drained: $(cat "$TMP/st.json")"
    sleep 0.2
  done
}

"$WL" 4 >/dev/null &
W=$!
PIDS+=($W)
S=$("$C" attach "$W" -F 999 --label version=2 --socket "$TMP/d.sock") || fail "attach"
# Until the refused stretch shows in the status (a few intervals; longer under load).
end=$((SECONDS + 30))
while :; do
  "$C" status --socket "$TMP/d.sock" --format json >"$TMP/st1.json"
  [ "$(json "$TMP/st1.json" 'd["fleet"]["pyroscope"]["failures"] > 0 and d["fleet"]["pyroscope"]["profiles_queued"] > 0')" = True ] && break
  [ $SECONDS -lt $end ] || break # the check below says what is missing
  sleep 0.2
done
rm "$TMP/failing" # the receiver answers from now on
wait "$W"
wait_drained
"$C" tree "$S" --socket "$TMP/d.sock" --format json >"$TMP/tree.json" || fail "tree"
[ ! -e "$TMP/recv/errors" ] || fail "receiver refused requests: $(cat "$TMP/recv/errors")"
"$C" status --socket "$TMP/d.sock" | grep_all "^pyroscope: .* profiles sent" ||
  fail "status text has no pyroscope line"

# Every profile through go tool pprof -raw, one file per profile.
for p in "$TMP"/recv/*.pprof; do
  go tool pprof -symbolize=none -raw "$p" >"$p.raw" 2>"$p.err" || fail "go tool pprof $p: $(cat "$p.err")"
done

/usr/bin/python3 - "$TMP" <<'PY' || fail "profiles do not match the session"
import glob, json, re, sys
tmp = sys.argv[1]
st1, st = json.load(open(tmp + "/st1.json")), json.load(open(tmp + "/st.json"))
tree = json.load(open(tmp + "/tree.json"))
series = [json.loads(l) for l in open(tmp + "/recv/series.jsonl")]
errs = []
py1, py = st1["fleet"]["pyroscope"], st["fleet"]["pyroscope"]
# The refused stretch: failures counted and profiles queued while it lasted.
if not (py1["failures"] > 0 and py1["profiles_queued"] > 0 and py1["profiles_sent"] == 0):
    errs.append("status during the 503s: %s" % py1)
if not (py["profiles_sent"] == len(series) and py["profiles_dropped"] == 0 and py["last_error"] is None):
    errs.append("final status: %s (received %d)" % (py, len(series)))
# The ClickHouse sink was down the whole time and did not hold Pyroscope back.
if not (st["fleet"]["failures"] > 0 and st["fleet"]["rows_sent"] == 0):
    errs.append("ClickHouse sink status: %s" % st["fleet"])
want = [["__name__", "process_cpu"], ["dc_zone", "z1"], ["env", "test"], ["host", "host-a"],
        ["service_name", "wl_shares_fp"], ["version", "2"]]
froms = []
for s in series:
    if s["labels"] != want:
        errs.append("labels %s" % s["labels"])
    froms.append(int(s["id"].rsplit("-", 1)[1]))
if froms != sorted(froms) or len(set(froms)) != len(froms):
    errs.append("profiles out of order: %s" % froms)
period, total_n, total_ns, funcs = 1000000000 // 999, 0, 0, {"work_a": 0, "work_b": 0, "work_c": 0}
for s in series:
    raw = open(s["file"] + ".raw").read()
    if "PeriodType: cpu nanoseconds" not in raw or "Period: %d" % period not in raw:
        errs.append("%s: period: %s" % (s["file"], raw[:200]))
    head, _, rest = raw.partition("\nSamples:\n")
    samples, _, rest = rest.partition("\nLocations\n")
    locs, _, _ = rest.partition("\nMappings\n")
    names, cur = {}, None
    for l in locs.splitlines():
        m = re.match(r"\s*(\d+): (0x[0-9a-f]+) M=\d+ (\S+)", l)
        if m:
            cur = m.group(1)
            names[cur] = {m.group(3)}
        elif cur and l.strip() and not re.match(r"\s*\d+:", l):
            names[cur].add(l.split()[0])  # an inline frame of the same location
    lines = samples.splitlines()
    if not lines or lines[0].split() != ["samples/count", "cpu/nanoseconds[dflt]"]:
        errs.append("%s: sample types %s" % (s["file"], lines[:1]))
        continue
    for l in lines[1:]:
        m = re.match(r"\s*(\d+)\s+(\d+):((?:\s+\d+)*)\s*$", l)
        if not m:
            continue  # a label line
        n, ns = int(m.group(1)), int(m.group(2))
        if ns != n * period:
            errs.append("%s: %d samples weigh %d ns" % (s["file"], n, ns))
        total_n += n
        total_ns += ns
        onstack = set().union(*(names.get(i, set()) for i in m.group(3).split()))
        for f in funcs:
            if f in onstack:
                funcs[f] += ns
T = int(tree["total"])
if T < 200 or total_n != T or total_ns != T * period:
    errs.append("totals: %d samples / %d ns in Pyroscope, session %d samples (× %d = %d)"
                % (total_n, total_ns, T, period, T * period))
shares = {f: 100.0 * v / max(total_ns, 1) for f, v in funcs.items()}
for f, w in {"work_a": 50, "work_b": 30, "work_c": 20}.items():
    if abs(shares[f] - w) > 5:
        errs.append("share of %s: %.1f%%, want %d" % (f, shares[f], w))
print("profiles %d, samples %d (session %d), cpu %.3f s, shares %s" % (
    len(series), total_n, T, total_ns / 1e9, {f: round(v, 1) for f, v in shares.items()}))
for e in errs:
    print("FAIL:", e)
sys.exit(1 if errs else 0)
PY

# ---- off-cpu and wall sessions -----------------------------------------------------------
N1=$(wc -l <"$TMP/recv/series.jsonl")
WW=$CANOPY_WORKLOADS/wl_waits_fp
"$WW" 2 >/dev/null & W1=$!; PIDS+=($W1)
"$WW" 2 >/dev/null & W2=$!; PIDS+=($W2)
SO=$("$C" attach "$W1" --mode off-cpu --socket "$TMP/d.sock") || fail "attach --mode off-cpu"
SW=$("$C" attach "$W2" --mode wall --socket "$TMP/d.sock") || fail "attach --mode wall"
wait "$W1" "$W2"
wait_drained
"$C" tree "$SO" --socket "$TMP/d.sock" --format json >"$TMP/off.json" || fail "tree off-cpu"
"$C" tree "$SW" --socket "$TMP/d.sock" --format json >"$TMP/wall.json" || fail "tree wall"
[ ! -e "$TMP/recv/errors" ] || fail "receiver refused requests: $(cat "$TMP/recv/errors")"
tail -n +$((N1 + 1)) "$TMP/recv/series.jsonl" >"$TMP/modes.jsonl"
while read -r f; do
  go tool pprof -symbolize=none -raw "$f" >"$f.raw" 2>"$f.err" || fail "go tool pprof $f: $(cat "$f.err")"
done < <(python3 -c '
import json, sys
for l in open(sys.argv[1]): print(json.loads(l)["file"])' "$TMP/modes.jsonl")
/usr/bin/python3 - "$TMP" <<'PY' || fail "off-cpu and wall profiles"
import json, re, sys
tmp = sys.argv[1]
series = [json.loads(l) for l in open(tmp + "/modes.jsonl")]
want = {"off_cpu": json.load(open(tmp + "/off.json")), "wall": json.load(open(tmp + "/wall.json"))}
errs, got = [], {"off_cpu": 0, "wall": 0}
for s in series:
    labels = dict(s["labels"])
    name = labels.get("__name__")
    if name not in got:
        errs.append("__name__ %s (labels %s)" % (name, s["labels"]))
        continue
    if labels.get("service_name") != "wl_waits_fp" or labels.get("host") != "host-a":
        errs.append("labels %s" % s["labels"])
    raw = open(s["file"] + ".raw").read()
    if "PeriodType: %s nanoseconds" % name not in raw:
        errs.append("%s: %s period type: %s" % (s["file"], name, raw[:200]))
    lines = raw.partition("\nSamples:\n")[2].partition("\nLocations\n")[0].splitlines()
    if not lines or lines[0].split() != ["samples/count", "%s/nanoseconds[dflt]" % name]:
        errs.append("%s: sample types %s" % (s["file"], lines[:1]))
        continue
    for l in lines[1:]:
        m = re.match(r"\s*(\d+)\s+(\d+):", l)
        if m:
            got[name] += int(m.group(2))
for name, tree in want.items():
    T = float(tree["total"])
    # The pprof writer rounds each sample's weight to whole ns.
    if T < 1e8 or abs(got[name] - T) > max(1e-6 * T, 1000):
        errs.append("%s: %d ns in Pyroscope, session %.0f ns" % (name, got[name], T))
print("off-cpu/wall: %d profiles; off_cpu %.3f s (session %.3f s), wall %.3f s (session %.3f s)"
      % (len(series), got["off_cpu"] / 1e9, want["off_cpu"]["total"] / 1e9,
         got["wall"] / 1e9, want["wall"]["total"] / 1e9))
for e in errs:
    print("FAIL:", e)
sys.exit(1 if errs else 0)
PY
echo ok
