#!/usr/bin/env bash
# One query path: the same spec gives the same bytes from canopyd serving a session and
# from `canopy open` on that session saved to a file, because both go through formats/'
# one renderer (cn_fmt_render). Against a real canopyd on a private socket and state dir:
# - every format (text, json, folded, pprof, speedscope, svg, firefox; canopy before any
#   grouped query, see below) and every view
#   (tree, --invert, --callers F, --callees F, --functions), a transform stack, --group-by,
#   --tid/--from/--to, --depth/--min-percent, --format activity, -t search:TEXT:
#   `canopy tree S SPEC` == `canopy open FILE SPEC`;
# - the timeline in text, json, chrome-trace and speedscope: `canopy timeline S` ==
#   `canopy timeline FILE` (canopyd renders speedscope itself now);
# - `lines`: the same JSON from the session and the file;
# - notes (a transform PATH that is no call node path): the same stderr from both.
# The file is saved under the session's id, so the header's title is the same on both
# sides. Normalization, and only this: a live session's header adds its own fields (text:
# ", session ID, event E, N samples, N lost" and, when stacks were cut short,
# ", P% of stacks truncated (…)" at the end of the first line; JSON: the top-level
# "session", "event", "samples", "lost", "unwind"), which a file does not have; they are
# removed before comparing. --last is left out on purpose: a session counts it back from
# its clock (its end once stopped), a file from its last sample (docs/cli.md "QUERY
# options"). The in-process path (`canopy tree --pid P --no-daemon`) samples a different
# run, so it is compared by structure only: same JSON keys as canopyd's answer.
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
WL=$CANOPY_WORKLOADS/wl_shares_fp
[ -x "$WL" ] || fail "workload $WL not built"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock

D_PID=
WL_PID=
trap 'rc=$?; kill $D_PID $WL_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
start_canopyd

"$C" run --format json -o "$TMP/r.json" -- "$WL" --rounds 40 >/dev/null 2>"$TMP/r.err" ||
  fail "run: $(cat "$TMP/r.err")"
S=$(json "$TMP/r.json" 'd["session"]')
[[ "$S" == s* ]] || fail "session '$S'"
mkdir -p "$TMP/files"
"$C" save "$S" -o "$TMP/files/$S" --format canopy || fail "save"
[ -s "$TMP/files/$S" ] || fail "saved file is empty"

# The lossless .canopy first: a --group-by query interns its group names as funcs into
# the profile it runs on (aggregate), so once the session has been grouped its snapshot
# holds funcs a file saved before does not.
(cd "$TMP" && "$C" tree "$S" --format canopy >"$TMP/a.canopy") || fail "tree --format canopy"
(cd "$TMP/files" && "$C" open "$S" --format canopy >"$TMP/b.canopy") || fail "open --format canopy"
cmp -s "$TMP/a.canopy" "$TMP/b.canopy" || fail "canopy: session and file snapshots differ"
cmp -s "$TMP/a.canopy" "$TMP/files/$S" || fail "canopy: tree --format canopy differs from save"

# A thread id of the session, for --tid.
"$C" tree "$S" --group-by thread --format json >"$TMP/threads.json" || fail "tree --group-by"
TID=$(json "$TMP/threads.json" 'd["roots"][0]["name"].rsplit("[",1)[1].rstrip("]")')
[[ "$TID" =~ ^[0-9]+$ ]] || fail "no thread id in $(head -c 300 "$TMP/threads.json")"

# normalize FILE: drops the live header fields (see above) in place.
normalize() {
  python3 - "$1" <<'PY'
import json, re, sys
path = sys.argv[1]
data = open(path, "rb").read()
try:
    d = json.loads(data)
except Exception:
    d = None
if isinstance(d, dict) and "unit" in d and ("roots" in d or "functions" in d):
    for k in ("session", "event", "samples", "lost", "unwind", "python"):
        d.pop(k, None)
    data = json.dumps(d, sort_keys=True).encode()
elif data[:1] not in (b"{", b"<", b"\x1f") and b"\n" in data:
    first, rest = data.split(b"\n", 1)
    first = re.sub(rb", session [^,]*, event [^,]*, -?\d+ samples, -?\d+ lost"
                   rb"(, (<0\.1|\d+\.\d)% of stacks truncated \([^()]*\))?", b"", first)
    first = re.sub(rb", python frames: (on|off \([^()]*\))", b"", first)
    data = first + b"\n" + rest
open(path, "wb").write(data)
PY
}

n=0
# same LABEL ARGS...: canopy tree S ARGS vs canopy open FILE ARGS, byte for byte after
# normalize.
same() {
  local label=$1
  shift
  (cd "$TMP" && "$C" tree "$S" "$@" >"$TMP/a.out" 2>"$TMP/a.err") || fail "$label: tree: $(cat "$TMP/a.err")"
  (cd "$TMP/files" && "$C" open "$S" "$@" >"$TMP/b.out" 2>"$TMP/b.err") ||
    fail "$label: open: $(cat "$TMP/b.err")"
  [ -s "$TMP/b.out" ] || fail "$label: empty output"
  normalize "$TMP/a.out"
  normalize "$TMP/b.out"
  cmp -s "$TMP/a.out" "$TMP/b.out" ||
    fail "$label: outputs differ: $(diff <(head -c 2000 "$TMP/a.out") <(head -c 2000 "$TMP/b.out") | head -20)"
  n=$((n + 1))
}

TF=(-t merge:burn -t focus-func:work_b -t 'prune:work_b;work_b_inner')
for fmt in text json folded pprof speedscope svg firefox; do
  same "$fmt" --format "$fmt"
  same "$fmt transforms" --format "$fmt" "${TF[@]}"
  same "$fmt group-by" --format "$fmt" --group-by thread
done
for fmt in text json svg; do
  same "$fmt invert" --format "$fmt" --invert
  same "$fmt callers" --format "$fmt" --callers burn
  same "$fmt callers self" --format "$fmt" --callers burn --callers-mode self
  same "$fmt callees" --format "$fmt" --callees work_b
  same "$fmt functions" --format "$fmt" --functions
  same "$fmt transforms group-by invert" --format "$fmt" -t merge:work_b_inner --group-by process --invert
done
same "range and thread" --format json --tid "$TID" --from 0.2 --to 0.8
same "depth and min-percent" --format text --depth 2 --min-percent 5
same "json min-percent" --format json --min-percent 5
same "collapse-all-rec" --format json -t collapse-all-rec -t drop:work_c
same "chrome-trace via tree" --format chrome-trace
same "activity" --format activity --tid "$TID"
same "activity transforms" --format activity -t drop:work_a -t search:BURN
same "search" --format json -t merge:burn -t search:WORK_B
# --no-inline travels in the request: pprof then writes call nodes, not raw frames, so a
# daemon that dropped the flag would answer differently from the file.
same "no-inline json" --format json --no-inline
same "no-inline pprof" --format pprof --no-inline
echo "PASS tree SESSION == open FILE: $n cases"

# Timelines: canopyd renders all four formats.
for fmt in text json chrome-trace speedscope; do
  (cd "$TMP" && "$C" timeline "$S" --format "$fmt" -t merge:burn >"$TMP/a.out" 2>"$TMP/a.err") ||
    fail "timeline $fmt: session: $(cat "$TMP/a.err")"
  (cd "$TMP/files" && "$C" timeline "$S" --format "$fmt" -t merge:burn >"$TMP/b.out") ||
    fail "timeline $fmt: file"
  [ -s "$TMP/a.out" ] && cmp -s "$TMP/a.out" "$TMP/b.out" || fail "timeline $fmt: outputs differ"
done
echo "PASS timeline SESSION == timeline FILE (text, json, chrome-trace, speedscope)"

# Notes: a transform PATH that names no call node path is applied as written, with a note
# on stderr (docs/cli.md "Transforms"); canopyd sends it in the reply's "notes" and the
# client prints it as `canopy open` does: the same stderr, line for line.
NT=(-t 'focus:nonexistent;path' -t 'merge:burn' -t 'prune:work_b_inner;main')
for cmd in tree timeline; do
  (cd "$TMP" && "$C" $cmd "$S" --format json "${NT[@]}" >"$TMP/a.out" 2>"$TMP/a.err") ||
    fail "notes: $cmd session: $(cat "$TMP/a.err")"
  if [ $cmd = tree ]; then
    (cd "$TMP/files" && "$C" open "$S" --format json "${NT[@]}" >"$TMP/b.out" 2>"$TMP/b.err")
  else
    (cd "$TMP/files" && "$C" timeline "$S" --format json "${NT[@]}" >"$TMP/b.out" 2>"$TMP/b.err")
  fi || fail "notes: $cmd file: $(cat "$TMP/b.err")"
  [ "$(grep -c '^canopy: note: ' "$TMP/b.err")" = 2 ] ||
    fail "notes: $cmd: expected 2 notes from the file, got: $(cat "$TMP/b.err")"
  cmp -s "$TMP/a.err" "$TMP/b.err" ||
    fail "notes: $cmd: stderr differs: $(diff "$TMP/a.err" "$TMP/b.err")"
done
# The reply itself carries them (docs/protocol.md `tree`), without the "note: " prefix.
python3 - "$CANOPY_SOCKET" "$S" <<'PY' || fail "notes: the reply's notes array"
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
req = {"cmd": "tree", "session": sys.argv[2], "format": "text",
       "transforms": ["focus:nonexistent;path", "merge:burn"]}
s.sendall((json.dumps(req) + "\n").encode())
buf = b""
while b"\n" not in buf:
    d = s.recv(1 << 20)
    assert d, "no reply"
    buf += d
r = json.loads(buf.split(b"\n", 1)[0])
assert r["ok"], r
assert r["notes"] == ["'focus:nonexistent;path': 'nonexistent;path' is not a call node "
                      "path; applied as written"], r.get("notes")
PY
echo "PASS notes: tree/timeline SESSION print the notes open FILE prints"

# lines: the same JSON object.
(cd "$TMP" && "$C" lines "$S" work_a --format json >"$TMP/a.out") || fail "lines session"
(cd "$TMP/files" && "$C" lines "$S" work_a --format json >"$TMP/b.out") || fail "lines file"
cmp -s "$TMP/a.out" "$TMP/b.out" || fail "lines differ: $(cat "$TMP/a.out") vs $(cat "$TMP/b.out")"
echo "PASS lines SESSION == lines FILE"

# The in-process path: another run, so only the structure can match canopyd's answer.
"$WL" --rounds 400 >/dev/null &
WL_PID=$!
"$C" tree --pid "$WL_PID" --no-daemon --duration 1 --format json -t merge:burn \
  >"$TMP/inproc.json" 2>"$TMP/inproc.err" || fail "tree --no-daemon: $(cat "$TMP/inproc.err")"
kill $WL_PID 2>/dev/null || true
wait $WL_PID 2>/dev/null || true
WL_PID=
(cd "$TMP" && "$C" tree "$S" --format json -t merge:burn >"$TMP/daemon.json") || fail "tree json"
python3 - "$TMP/inproc.json" "$TMP/daemon.json" <<'PY' || fail "in-process JSON shape differs"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert set(a) == set(b), (sorted(a), sorted(b))
assert a["transforms"] == b["transforms"] == ["merge:burn"], (a["transforms"], b["transforms"])
assert a["view"] == b["view"] == "tree"
def names(d):
    out = set()
    def walk(n):
        out.add(n["name"])
        for c in n.get("children", []):
            walk(c)
    for r in d["roots"]:
        walk(r)
    return out
assert "burn" not in names(a) and "burn" not in names(b)
assert {"main", "work_a"} <= names(a), sorted(names(a))
PY
echo "PASS tree --pid --no-daemon: same JSON structure as canopyd's"
