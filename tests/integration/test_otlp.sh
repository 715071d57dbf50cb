#!/usr/bin/env bash
# --format otlp (docs/cli.md "OTLP profiles"): every export is read twice.
# 1. protoc --decode with canopy's own formats/otlp_profiles.proto: it parses, and the sum
#    of its `values` is canopy's total.
# 2. formats/otlp_helper.py, with message classes built from opentelemetry-proto v1.11.0's
#    field numbers written in the helper (not from canopy's .proto): no field unknown to
#    the upstream schema, the dictionary's rules hold, and each function's self and total
#    derived from the samples equal canopy's own `--functions --format json` for the same
#    query — on files (folded, perf script) with and without transforms and --group-by,
#    on a live canopyd session (resources: host.name, process.pid,
#    process.executable.name; thread.id/thread.name per sample; samples/count with the
#    period in cpu/nanoseconds), a system session (a resource per process, kernel frames),
#    and an in-process wall-clock run (wall/nanoseconds).
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
H=$(dirname "$0")/formats/otlp_helper.py
PROTO_DIR=$(cd "$(dirname "$0")/../../formats" && pwd)
V=$CANOPY_TEST_DATA/vectors
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz
command -v protoc >/dev/null || skip "protoc (protobuf-compiler) is not installed"
/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null || skip "python3-protobuf is not installed"
export CANOPY_SOCKET=$TMP/d.sock
trap 'rc=$?; [ -n "${D_PID:-}" ] && kill "$D_PID" 2>/dev/null; [ -n "${W:-}" ] && kill "$W" 2>/dev/null; wait 2>/dev/null; finish_tmp $rc' EXIT

# check NAME SOURCE [QUERY...] -- [EXPECT...]: exports SOURCE (a file or session) both ways.
check() {
  local name=$1 src=$2 q=() e=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do q+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  e=("$@")
  local cmd=open
  [ -f "$src" ] || cmd=tree # a file; else a session (a directory named like it is not one)
  # a stopped session's names may still arrive: wait for every one (a later `save` must
  # give the same message), then the export between two JSON queries that agree
  [ $cmd = open ] || wait_symbols "$src" || fail "$name: symbols still pending after 60 s"
  for ((i = 0; i < 60; i++)); do
    "$C" $cmd "$src" "${q[@]}" --functions --format json -o "$TMP/$name.0.json" || fail "$name: json exit $?"
    "$C" $cmd "$src" "${q[@]}" --format otlp -o "$TMP/$name.otlp.pb" || fail "$name: export exit $?"
    "$C" $cmd "$src" "${q[@]}" --functions --format json -o "$TMP/$name.json" || fail "$name: json exit $?"
    cmp -s "$TMP/$name.0.json" "$TMP/$name.json" && break
    sleep 0.5
  done
  protoc --proto_path="$PROTO_DIR" --decode=canopy.otlp.ProfilesData otlp_profiles.proto \
    <"$TMP/$name.otlp.pb" >"$TMP/$name.txt" 2>"$TMP/$name.err" ||
    fail "$name: protoc --decode: $(cat "$TMP/$name.err")"
  local sum want
  sum=$(awk '$1 == "values:" {s += $2} END {printf "%d", s}' "$TMP/$name.txt")
  want=$(json "$TMP/$name.json" 'round(d["total"])')
  [ "$sum" = "$want" ] || fail "$name: protoc's values sum to $sum, canopy's total is $want"
  /usr/bin/python3 "$H" check "$TMP/$name.otlp.pb" "$TMP/$name.json" "${e[@]}" >"$TMP/$name.out" ||
    fail "$name: the upstream schema's view differs from canopy's"
  echo "PASS $name: $(cat "$TMP/$name.out")"
}

check abc "$V/abc.folded" -- resources=1 sample_type=samples/count
check abc-collapse "$V/abc.folded" -t collapse:C --
for f in "$V"/*recursion*.folded; do check "$(basename "$f" .folded)" "$f" --; done
check perf "$PERF" -- threads sample_type=cpu/nanoseconds resource.process.pid=10878 \
  resource.process.executable.name=workload no-resource=host.name
check perf-merge "$PERF" -t merge:run_round --
check perf-focus "$PERF" -t focus-func:run_round -t drop:work_c --
check perf-threads "$PERF" --group-by thread --

# -o FILE.otlp.pb picks the format by itself
"$C" open "$V/abc.folded" -o "$TMP/ext.otlp.pb" || fail "-o .otlp.pb"
cmp -s "$TMP/ext.otlp.pb" "$TMP/abc.otlp.pb" || fail "-o x.otlp.pb differs from --format otlp"

# A live session through canopyd, stopped so that both queries see the same samples.
start_canopyd
"$CANOPY_WORKLOADS/wl_threads_fp" 3 >/dev/null &
W=$!
LIVE_PID=$W
S=$("$C" attach "$W" -F 499 --name live) || fail "attach"
sleep 2
"$C" stop "$S" >/dev/null || fail "stop"
kill "$W" 2>/dev/null || true
wait "$W" 2>/dev/null || true
W=
check live live -- threads resources=1 sample_type=samples/count period_type=cpu/nanoseconds \
  "resource.host.name=$(hostname)" "resource.process.pid=$LIVE_PID" build_ids
check live-merge live -t merge:burn --
# A program whose file was deleted after its start: canopyd reads it through
# /proc/PID/map_files, but the mapping names the file as the process did (pprof too).
cp "$CANOPY_WORKLOADS/wl_threads_fp" "$TMP/wl_gone"
"$TMP/wl_gone" 3 >/dev/null &
W=$!
rm "$TMP/wl_gone"
"$C" attach "$W" -F 499 --name gone >/dev/null || fail "attach gone"
sleep 1.5
"$C" stop gone >/dev/null || fail "stop gone"
kill "$W" 2>/dev/null || true
wait "$W" 2>/dev/null || true
W=
check gone gone -- threads resources=1
grep -q "map_files" "$TMP/gone.txt" && fail "gone: a mapping is named by canopyd's /proc/PID/map_files path"
grep -qF "\"$TMP/wl_gone\"" "$TMP/gone.txt" || fail "gone: no mapping names $TMP/wl_gone"
"$C" tree gone --format pprof -o "$TMP/gone.pb.gz" || fail "gone: pprof"
gzip -dc "$TMP/gone.pb.gz" | grep -aqF "$TMP/wl_gone" || fail "gone: pprof names no $TMP/wl_gone"
gzip -dc "$TMP/gone.pb.gz" | grep -aq "map_files" && fail "gone: pprof names a map_files path"
echo "PASS gone: the deleted file's mapping is $TMP/wl_gone"
# A system session: a resource per process, kernel frames (addresses above 2^63)
"$C" system -F 199 --name sys >/dev/null || fail "system session"
sleep 2
"$C" stop sys >/dev/null || fail "stop sys"
check system sys -- threads min_resources=3 "resource.host.name=$(hostname)"

# save -o FILE.otlp.pb (canopyd renders it) is the same message as tree --format otlp
"$C" save live -o "$TMP/saved.otlp.pb" || fail "save -o .otlp.pb"
cmp -s "$TMP/saved.otlp.pb" "$TMP/live.otlp.pb" || fail "save -o x.otlp.pb differs from tree --format otlp"
echo "PASS save -o x.otlp.pb"

# run -o FILE.otlp.pb, in-process: its own process's resource
"$C" run --no-daemon -F 499 -o "$TMP/run.otlp.pb" -- "$CANOPY_WORKLOADS/wl_shares_fp" 1 >/dev/null 2>"$TMP/run.err" ||
  fail "run -o .otlp.pb: $(cat "$TMP/run.err")"
/usr/bin/python3 - "$H" "$TMP/run.otlp.pb" <<'PY' || fail "run -o .otlp.pb"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("h", sys.argv[1])
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
m = h.decode(sys.argv[2])
h.check_dictionary(m)
names = {h.anyval(kv.value) for rp in m.resource_profiles for kv in rp.resource.attributes
         if kv.key == "process.executable.name"}
total = h.per_function(m)[2]
print("run: %d samples, processes %s" % (total, sorted(names)))
assert total >= 10 and "wl_shares_fp" in names, (total, names)
PY
echo "PASS run -o x.otlp.pb"

# In-process, wall clock: nanoseconds
"$C" run --no-daemon --mode wall -F 499 --format otlp -o "$TMP/wall.otlp.pb" -- \
  "$CANOPY_WORKLOADS/wl_waits_fp" 1 >/dev/null 2>"$TMP/wall.err" || fail "run --mode wall: $(cat "$TMP/wall.err")"
/usr/bin/python3 - "$H" "$TMP/wall.otlp.pb" <<'PY' || fail "wall-clock OTLP"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("h", sys.argv[1])
h = importlib.util.module_from_spec(spec)
spec.loader.exec_module(h)
m = h.decode(sys.argv[2])
h.check_dictionary(m)
S = m.dictionary.string_table
p = m.resource_profiles[0].scope_profiles[0].profiles[0]
st = "%s/%s" % (S[p.sample_type.type_strindex], S[p.sample_type.unit_strindex])
total = h.per_function(m)[2]
print("wall: sample type", st, "total %.2f s" % (total / 1e9))
assert st == "wall/nanoseconds", st
assert 0.8e9 <= total <= 30e9, total  # the threads' wall time of a ~1 s run (longer under load)
PY
echo "PASS wall-clock run: wall/nanoseconds"
