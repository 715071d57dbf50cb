#!/usr/bin/env bash
# canopyd's OTLP push (docs/fleet.md "Pushing OTLP profiles"): with fleet_otlp_url, every
# window of a pushed session goes to an OTLP/HTTP endpoint as one export request, through
# the fleet pusher's spool and backoff. The receiver (otlp_receiver.py) is not running
# when the session starts — canopyd finds nobody listening, spools and retries — then
# starts, refuses a stretch with 503s, and then accepts. Every request must be decodable
# by the upstream schema's field numbers (formats/otlp_helper.py), carry the resource
# attributes (host.name = fleet_host, service.name, the labels, the process), and all of
# them together must be the session's own tree: each function's self and total equal
# `canopy tree --functions --format json` of the session.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
H=$(dirname "$0")/formats/otlp_helper.py
WL=$CANOPY_WORKLOADS/wl_shares_fp
PIDS=()
trap 'rc=$?; kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null || skip "python3-protobuf is not installed"

mkdir -p "$TMP/recv"
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$TMP/d.conf" <<CONF
fleet_otlp_url = http://127.0.0.1:$PORT/
fleet_host = host-o
fleet_labels = env=test,dc.zone=z1
fleet_interval = 500ms
CONF
fleet_canopyd d
SOCK=$TMP/d.sock

"$WL" 4 >/dev/null &
W=$!
PIDS+=($W)
S=$("$C" attach "$W" -F 499 --label version=3 --socket "$SOCK") || fail "attach"

# Nobody listens: wait until requests failed and some wait in the spool.
end=$((SECONDS + 30))
while :; do
  "$C" status --socket "$SOCK" --format json >"$TMP/st1.json"
  [ "$(json "$TMP/st1.json" 'd["fleet"]["otlp"]["failures"] > 0 and d["fleet"]["otlp"]["profiles_queued"] > 0')" = True ] && break
  [ $SECONDS -lt $end ] || fail "no failed request while the receiver was down: $(cat "$TMP/st1.json")"
  sleep 0.2
done
ls "$TMP/state-d/fleet-otlp-spool/"*.batch >/dev/null 2>&1 || fail "nothing in the OTLP spool while the receiver was down"
echo "receiver down: $(json "$TMP/st1.json" 'd["fleet"]["otlp"]["failures"]') failed requests, $(json "$TMP/st1.json" 'd["fleet"]["otlp"]["profiles_queued"]') queued"

# The receiver comes up refusing (503) for a while, then answers.
touch "$TMP/failing"
/usr/bin/python3 "$(dirname "$0")/otlp_receiver.py" "$PORT" "$TMP/recv" "$TMP/failing" &
PIDS+=($!)
sleep 1.5
rm "$TMP/failing"
wait "$W"

end=$((SECONDS + 60))
while :; do
  "$C" status --socket "$SOCK" --format json >"$TMP/st.json"
  [ "$(json "$TMP/st.json" 'd["fleet"]["sessions"] == 0 and d["fleet"]["otlp"]["profiles_queued"] == 0')" = True ] && break
  [ $SECONDS -lt $end ] || fail "OTLP push never drained: $(cat "$TMP/st.json")"
  sleep 0.2
done
[ ! -e "$TMP/recv/errors" ] || fail "receiver refused requests: $(cat "$TMP/recv/errors")"
"$C" status --socket "$SOCK" | grep_all "^otlp: .* profiles sent" || fail "status text has no otlp line"
echo "drained: $(json "$TMP/st.json" 'd["fleet"]["otlp"]') "
[ "$(json "$TMP/st.json" 'd["fleet"]["otlp"]["profiles_dropped"]')" = 0 ] || fail "requests dropped"

"$C" tree "$S" --socket "$SOCK" --functions --format json -o "$TMP/tree.json" || fail "tree"
/usr/bin/python3 "$H" check-many "$TMP/recv" "$TMP/tree.json" threads sample_type=samples/count \
  period_type=cpu/nanoseconds resource.host.name=host-o resource.service.name=wl_shares_fp \
  resource.env=test resource.dc.zone=z1 resource.version=3 "resource.process.pid=$W" \
  resources=1 >"$TMP/check.out" || fail "the pushed requests are not the session's tree"
echo "PASS $(ls "$TMP"/recv/*.otlp.pb | wc -l) requests after the outage: $(cat "$TMP/check.out")"
