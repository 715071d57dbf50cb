#!/usr/bin/env bash
# Python functions outlive the live session (docs/python.md, "Saved sessions, files, exports
# and the fleet"): a short Python workload (Debian's python3) under `canopy run` through a
# real canopyd that pushes to a ClickHouse on loopback. Its functions work_a, work_b and
# Runner.work_c are checked everywhere the profile goes: the live tree (JSON "kind":
# "python", lib wl.py; `canopy lines`: the .py file and lines inside each function's body,
# from Python's own ast), the session saved and read back by a restarted canopyd, the file
# `canopy run -o` wrote and the one `canopy save` writes, re-opened with `canopy open`; each
# export's marker (pprof: Function.system_name `py::QUALNAME:FILE`, the .py file and the
# def line; speedscope: the .py file and the def line; folded: `NAME (FILE)`); JSON, pprof
# and folded read back with the kind (pprof also with the file and lines); Firefox: the Python
# category and the .py file; and `canopy fleet
# tree` from ClickHouse. Every check compares against the live session's functions.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/clickhouse_lib.sh"
: "${CANOPYD_BIN:?}"
[ "$(id -u)" = 0 ] || skip "Python frames need a BPF program: root (CAP_BPF, CAP_PERFMON)"
PY=/usr/bin/python3
[ -x "$PY" ] || fail "Debian's python3 ($PY) is missing (scripts/setup installs it)"
C=$CANOPY_BIN
export CANOPY_SOCKET=$TMP/d.sock
PIDS=()
trap 'rc=$?; kill "${PIDS[@]}" 2>/dev/null || true; ch_stop A; wait 2>/dev/null || true; finish_tmp $rc' EXIT

ch_start A
URL=$(ch_url A)
"$C" fleet init --url "$URL" >/dev/null || fail "fleet init"
cat >"$TMP/d.conf" <<CONF
fleet_url = $URL
fleet_host = pyhost
fleet_interval = 1s
CONF
fleet_canopyd d

cat >"$TMP/wl.py" <<'EOF'
import sys, time


def work_a(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def work_b(n):
    s = 0
    for i in range(n):
        s += i ^ 3
    return s


class Runner:
    def work_c(self, n):
        s = 0
        for i in range(n):
            s += i + 7
        return s


def main(seconds):
    r = Runner()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        work_a(50000)
        work_b(30000)
        r.work_c(20000)


main(float(sys.argv[1]))
EOF

# 1. The live session.
"$C" run -F 999 --name pysv --format canopy -o "$TMP/run.canopy" -- "$PY" "$TMP/wl.py" 2 \
  >/dev/null 2>"$TMP/run.err" || fail "canopy run: $(cat "$TMP/run.err")"
"$C" sessions --format json >"$TMP/sessions.json" || fail "canopy sessions"
state=$(json "$TMP/sessions.json" '[s for s in d["sessions"] if s.get("name") == "pysv"][0]["python"]["state"]')
case $state in
  on) ;;
  "off (BPF load:"*) skip "no BPF here: $state" ;;
  *) fail "python frames $state" ;;
esac

FUNCS="work_a work_b Runner.work_c"
# sig NAME SOURCE [QUERY...]: the Python functions of SOURCE (a session or a file) into
# $TMP/NAME.tree.json and, per function, $TMP/NAME.F.lines.json.
sig() {
  local name=$1 src=$2 f
  shift 2
  "$C" tree "$src" --format json -o "$TMP/$name.tree.json" "$@" || fail "$name: canopy tree $src"
  for f in $FUNCS; do
    "$C" lines "$src" "$f" --format json -o "$TMP/$name.$f.lines.json" "$@" ||
      fail "$name: canopy lines $src $f"
  done
}

# check NAME [REF [nolines]]: NAME's functions are Python functions of wl.py (every node of
# each: "kind": "python", "lib": "wl.py"; with lines: the file is wl.py's path, every line
# with samples lies in the function's body, per ast). With REF: the same functions with the
# same self weights (and the same per-line weights) as REF's.
check() {
  "$PY" - "$TMP" "$TMP/wl.py" "$@" <<'PYEOF'
import ast, json, os, sys
tmp, src, name = sys.argv[1], sys.argv[2], sys.argv[3]
ref = sys.argv[4] if len(sys.argv) > 4 else None
with_lines = not (len(sys.argv) > 5 and sys.argv[5] == "nolines")
body = {}
for node in ast.walk(ast.parse(open(src).read())):
    if isinstance(node, ast.ClassDef):
        for m in node.body:
            if isinstance(m, ast.FunctionDef):
                body[node.name + "." + m.name] = (m.lineno, m.end_lineno)
    elif isinstance(node, ast.FunctionDef) and node.col_offset == 0:
        body[node.name] = (node.lineno, node.end_lineno)
funcs = ("work_a", "work_b", "Runner.work_c")

def load(n):
    t = json.load(open(os.path.join(tmp, n + ".tree.json")))
    got = {}
    stack = list(t["roots"])
    while stack:
        nd = stack.pop()
        if nd["name"] in funcs:
            g = got.setdefault(nd["name"], {"self": 0, "kinds": set()})
            g["self"] += nd.get("self", 0)
            g["kinds"].add((nd.get("lib"), nd.get("kind")))
        stack.extend(nd.get("children", []))
    lines = {}
    if with_lines:
        for f in funcs:
            d = json.load(open(os.path.join(tmp, "%s.%s.lines.json" % (n, f))))
            lines[f] = (d.get("file"), d.get("lib"), {l["line"]: l["self"] for l in d.get("lines", [])})
    return got, lines

got, lines = load(name)
ok = True
for f in funcs:
    g = got.get(f)
    if not g or g["self"] <= 0:
        print("%s: %s has no samples" % (name, f)); ok = False; continue
    if g["kinds"] != {("wl.py", "python")}:
        print("%s: %s is %s, not a Python function of wl.py" % (name, f, sorted(map(str, g["kinds"])))); ok = False
    if with_lines:
        file, lib, ls = lines[f]
        lo, hi = body[f]
        if file != src or lib != "wl.py":
            print("%s: %s's file %s (lib %s), expected %s" % (name, f, file, lib, src)); ok = False
        if not ls or any(not (lo <= l <= hi) for l in ls):
            print("%s: %s's lines %s, def..end %d..%d" % (name, f, sorted(ls), lo, hi)); ok = False
if ref:
    rgot, rlines = load(ref)
    for f in funcs:
        if f in got and got[f]["self"] != rgot.get(f, {}).get("self"):
            print("%s: %s self %s, %s has %s" % (name, f, got[f]["self"], ref, rgot.get(f, {}).get("self"))); ok = False
        if with_lines and lines[f] != rlines[f]:
            print("%s: %s lines %s, %s has %s" % (name, f, lines[f], ref, rlines[f])); ok = False
print("%s: %s" % (name, ", ".join("%s %s" % (f, got.get(f, {}).get("self")) for f in funcs)))
sys.exit(0 if ok else 1)
PYEOF
}

sig live pysv
check live || fail "the live session's Python functions"

# 2. Saved, and read back by a restarted canopyd (after its fleet push is done).
for ((i = 0; i < 300; i++)); do
  "$C" status --format json >"$TMP/st.json" 2>/dev/null &&
    [ "$(json "$TMP/st.json" 'd["fleet"]["sessions"] == 0 and d["fleet"]["rows_queued"] == 0 and d["fleet"]["rows_sent"] > 0')" = True ] &&
    break
  sleep 0.1
done
[ "$i" -lt 300 ] || fail "the fleet push did not finish: $(cat "$TMP/st.json")"
[ -f "$TMP/state-d/$(json "$TMP/sessions.json" '[s for s in d["sessions"] if s.get("name") == "pysv"][0]["id"]').canopy" ] ||
  fail "the session was not saved"
kill "$D_PID"
wait "$D_PID" || fail "canopyd did not exit cleanly: $(tail -5 "$TMP/d-d.log")"
fleet_canopyd d
"$C" sessions --format json >"$TMP/sessions2.json" || fail "canopy sessions after the restart"
[ "$(json "$TMP/sessions2.json" '[s for s in d["sessions"] if s.get("name") == "pysv"][0]["state"]')" = saved ] ||
  fail "the session is not back: $(cat "$TMP/sessions2.json")"
state=$(json "$TMP/sessions2.json" '[s for s in d["sessions"] if s.get("name") == "pysv"][0].get("python")')
[ "$state" = "$(json "$TMP/sessions.json" '[s for s in d["sessions"] if s.get("name") == "pysv"][0]["python"]')" ] ||
  fail "the saved session's Python state: $state"
sig restart pysv
[ "$(json "$TMP/restart.tree.json" 'd.get("python")')" = on ] ||
  fail "the saved session's tree header: python $(json "$TMP/restart.tree.json" 'd.get("python")')"
check restart live || fail "the saved session's Python functions after a restart"

# 3. Files: the one `canopy run -o` wrote, and `canopy save`'s.
"$C" save pysv -o "$TMP/save.canopy" || fail "canopy save"
for f in run save; do
  "$C" open "$TMP/$f.canopy" --format json -o "$TMP/open-$f.json" || fail "canopy open $f.canopy"
  sig "$f" "$TMP/$f.canopy"
  check "$f" live || fail "$f.canopy's Python functions"
done

# 4. Exports and their markers, then each read back.
"$C" open "$TMP/save.canopy" --format pprof -o "$TMP/x.pb.gz" || fail "pprof export"
"$C" open "$TMP/save.canopy" --format speedscope -o "$TMP/x.speedscope.json" ||
  fail "speedscope export"
"$C" open "$TMP/save.canopy" --format folded -o "$TMP/x.folded" || fail "folded export"
"$C" open "$TMP/save.canopy" --format firefox -o "$TMP/x.firefox.json" || fail "firefox export"
cp "$TMP/open-save.json" "$TMP/x.json"
"$PY" - "$TMP" "$TMP/wl.py" <<'PYEOF' || fail "export markers"
import ast, gzip, json, sys
tmp, src = sys.argv[1], sys.argv[2]
defs = {}
for node in ast.walk(ast.parse(open(src).read())):
    if isinstance(node, ast.ClassDef):
        for m in node.body:
            defs[node.name + "." + m.name] = m.lineno
    elif isinstance(node, ast.FunctionDef) and node.col_offset == 0:
        defs[node.name] = node.lineno
funcs = ("work_a", "work_b", "Runner.work_c")
ok = True

# pprof: the functions (Profile field 5; Function: 1 id, 2 name, 3 system_name, 4 filename,
# 5 start_line) and the string table (field 6).
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80:
            return v, i

def fields(b):
    i = 0
    while i < len(b):
        tag, i = varint(b, i)
        if tag & 7 == 0:
            v, i = varint(b, i)
        elif tag & 7 == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise SystemExit("pprof: unexpected wire type %d" % (tag & 7))
        yield tag >> 3, v

prof = gzip.open(tmp + "/x.pb.gz").read()
strs, fns = [], []
for no, v in fields(prof):
    if no == 6:
        strs.append(v.decode())
    elif no == 5:
        fns.append(dict(fields(v)))
pp = {}
for fn in fns:
    name = strs[fn.get(2, 0)]
    if name in funcs:
        pp[name] = (strs[fn.get(3, 0)], strs[fn.get(4, 0)], fn.get(5, 0))
for f in funcs:
    want = ("py::%s:%s" % (f, src), src, defs[f])
    if pp.get(f) != want:
        print("pprof: %s is (system_name, filename, start_line) %s, expected %s" % (f, pp.get(f), want)); ok = False
# Marked exactly where the JSON tree says "kind": "python".
marked = {strs[fn.get(2, 0)] for fn in fns if strs[fn.get(3, 0)].startswith("py::")}
kinds, stack = set(), list(json.load(open(tmp + "/x.json"))["roots"])
while stack:
    nd = stack.pop()
    if nd.get("kind") == "python":
        kinds.add(nd["name"])
    stack.extend(nd.get("children", []))
if marked != kinds:
    print("pprof: py:: system names on %s, JSON's Python functions %s" % (sorted(marked), sorted(kinds))); ok = False

# speedscope: the frame's file and (def) line.
ss = json.load(open(tmp + "/x.speedscope.json"))
frames = {fr["name"]: (fr.get("file"), fr.get("line")) for fr in ss["shared"]["frames"]}
for f in funcs:
    if frames.get(f) != (src, defs[f]):
        print("speedscope: %s is %s, expected %s" % (f, frames.get(f), (src, defs[f]))); ok = False

# folded: py-spy's `NAME (FILE)` on Python frames only.
text = open(tmp + "/x.folded").read()
names = {fr for line in text.splitlines() for fr in line.rsplit(" ", 1)[0].split(";")}
for f in funcs:
    if "%s (wl.py)" % f not in names or f in names:
        print("folded: %s not marked: %s" % (f, sorted(n for n in names if f in n))); ok = False
if "main (wl.py)" not in names:
    print("folded: main not marked"); ok = False
if [n for n in names if n.startswith("PyEval_EvalCode (")]:
    print("folded: a native function marked"); ok = False
# Firefox: the functions' frames in the Python category, their file in the func table, and
# no native function there.
ff = json.load(open(tmp + "/x.firefox.json"))
cats = [c["name"] for c in ff["meta"]["categories"]]
strs = ff["shared"]["stringArray"]
py_cat = cats.index("Python") if "Python" in cats else -1
ff_py = set()
fr, fn, srcs = ff["shared"]["frameTable"], ff["shared"]["funcTable"], ff["shared"]["sources"]
for i in range(fr["length"]):
    name = strs[fn["name"][fr["func"][i]]]
    if fr["category"][i] == py_cat:
        ff_py.add(name)
        si = fn["source"][fr["func"][i]]
        fi = srcs["filename"][si] if si is not None else None
        if name in funcs and (fi is None or not strs[fi].endswith("wl.py")):
            print("firefox: %s's file is %r" % (name, fi if fi is None else strs[fi])); ok = False
for f in funcs + ("main",):
    if f not in ff_py:
        print("firefox: %s not in the Python category (%s)" % (f, sorted(ff_py)[:10])); ok = False
if "PyEval_EvalCode" in ff_py:
    print("firefox: a native function in the Python category"); ok = False
print("markers: pprof %s; speedscope %s; firefox category %s" % (pp.get("work_a"),
      frames.get("work_a"), cats[py_cat] if py_cat >= 0 else None))
sys.exit(0 if ok else 1)
PYEOF
for x in x.json x.pb.gz x.folded; do
  "$C" tree "$TMP/$x" --format json -o "$TMP/back-$x.tree.json" || fail "canopy open $x"
done
# JSON and folded carry names, libraries and the kind; pprof also files and lines.
check back-x.json live nolines || fail "JSON read back"
check back-x.folded live nolines || fail "folded read back"
sig back-pprof "$TMP/x.pb.gz"
check back-pprof live || fail "pprof read back"

# 5. The fleet: the rows canopyd pushed, read back from ClickHouse.
"$C" fleet tree --url "$URL" --where host=pyhost --format json -o "$TMP/fleet.tree.json" ||
  fail "canopy fleet tree"
check fleet live nolines || fail "the fleet's Python functions"

kill -0 "$D_PID" 2>/dev/null || fail "canopyd died"
echo "ok"
