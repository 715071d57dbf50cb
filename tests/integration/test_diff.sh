#!/usr/bin/env bash
# `canopy diff BASE NEW [QUERY]`: NEW − BASE after normalizing BASE to NEW's
# total (raw with --no-normalize), ordered by |total|; JSON nodes carry base and new; the
# three-column folded output reads back to the same tree; time windows FILE@FROM..TO;
# transforms and views apply to both sides; the differential SVG renders in Chromium;
# bad input exits 2.
source "$(dirname "$0")/lib.sh"
C=$CANOPY_BIN
PERF=$CANOPY_TEST_DATA/perf/workload.perf.txt.gz
printf 'main;a 10\nmain;b 10\n' >"$TMP/base.folded"
printf 'main;a 30\nmain;c 10\n' >"$TMP/new.folded"

"$C" diff "$TMP/base.folded" "$TMP/new.folded" --format json >"$TMP/d.json" || fail "json: exit $?"
python3 - "$TMP/d.json" <<'PY' || fail "normalized diff tree"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["diff"] and d["normalized"] and d["factor"] == 2, d
assert (d["base_total"], d["new_total"], d["total"]) == (20, 40, 0), d
[main] = d["roots"]
assert (main["name"], main["total"], main["base"], main["new"]) == ("main", 0, 40, 40), main
kids = [(c["name"], c["total"], c["self"], c["base"], c["new"]) for c in main["children"]]
# |total| descending, ties by name: b -20, then a +10 and c +10
assert kids == [("b", -20, -20, 20, 0), ("a", 10, 10, 20, 30), ("c", 10, 10, 0, 10)], kids
PY
echo "PASS normalized diff: NEW - 2 x BASE, ordered by |total|, base/new on nodes"

"$C" diff "$TMP/base.folded" "$TMP/new.folded" --no-normalize --format json >"$TMP/raw.json" || fail "raw: exit $?"
python3 - "$TMP/raw.json" <<'PY' || fail "raw diff tree"
import json, sys
d = json.load(open(sys.argv[1]))
assert not d["normalized"] and d["total"] == 20, d
kids = {c["name"]: c["total"] for c in d["roots"][0]["children"]}
assert kids == {"a": 20, "b": -10, "c": 10}, kids
PY
echo "PASS --no-normalize: raw NEW - BASE"

# three-column folded, and reading it back gives the same tree
"$C" diff "$TMP/base.folded" "$TMP/new.folded" --format folded >"$TMP/d.folded" || fail "folded: exit $?"
printf 'main;a 10 30\nmain;b 10 0\nmain;c 0 10\n' | diff -u - "$TMP/d.folded" || fail "three-column folded"
"$C" diff "$TMP/d.folded" --format json >"$TMP/back.json" || fail "read back: exit $?"
cmp -s "$TMP/d.json" <(sed 's/"transforms"/"transforms"/' "$TMP/back.json") ||
  python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(a["roots"]!=b["roots"] or a["total"]!=b["total"])' "$TMP/d.json" "$TMP/back.json" ||
  fail "the folded diff reads back differently"
echo "PASS folded STACK BASE NEW, read back to the same tree"

# text output: header, change, base -> new
"$C" diff "$TMP/base.folded" "$TMP/new.folded" >"$TMP/d.txt" || fail "text: exit $?"
grep -q 'base normalized x2' "$TMP/d.txt" || fail "text header: $(head -1 "$TMP/d.txt")"
grep -qE '^ +-50\.0% +-20 +20 -> +0 +b$' "$TMP/d.txt" || fail "text line for b: $(cat "$TMP/d.txt")"
echo "PASS text"

# transforms and views apply to both sides
"$C" diff "$TMP/base.folded" "$TMP/new.folded" -t merge:main --functions --format json >"$TMP/f.json" ||
  fail "functions: exit $?"
python3 - "$TMP/f.json" <<'PY' || fail "functions view"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [(r["name"], r["self"]) for r in d["functions"]]
assert rows == [("b", -20), ("a", 10), ("c", 10)], rows
PY
echo "PASS transforms and --functions on both sides"

# time windows: the first and second half of one recording
"$C" diff "$PERF@0..1" "$PERF@1..2" --no-normalize --format json >"$TMP/w.json" || fail "windows: exit $?"
"$C" open "$PERF" --from 0 --to 1 --format json >"$TMP/w0.json"
"$C" open "$PERF" --from 1 --to 2 --format json >"$TMP/w1.json"
python3 - "$TMP/w.json" "$TMP/w0.json" "$TMP/w1.json" <<'PY' || fail "time windows"
import json, sys
d, a, b = (json.load(open(p)) for p in sys.argv[1:])
assert d["base_total"] == a["total"] and d["new_total"] == b["total"], (d["base_total"], a["total"], b["total"])
assert d["total"] == b["total"] - a["total"]
PY
echo "PASS FILE@FROM..TO windows"

# differential SVG: red for growth, blue for shrinkage; it renders without errors
"$C" diff "$TMP/base.folded" "$TMP/new.folded" --format svg -o "$TMP/d.svg" || fail "svg: exit $?"
grep -q 'data-diff="1"' "$TMP/d.svg" || fail "not a differential SVG"
grep -q 'data-n="c".*' "$TMP/d.svg" && python3 - "$TMP/d.svg" <<'PY' || fail "diff colours"
import re, sys
svg = open(sys.argv[1]).read()
fill = dict(re.findall(r'data-n="(\w+)"[^>]*>.*?fill="(hsl\([^"]+\))"', svg, re.S))
hue = lambda n: int(fill[n][4:].split(",")[0])
assert hue("c") == 0 and hue("a") == 0 and hue("b") == 220, fill
PY
if [ -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  cat >"$TMP/probe.py" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import svg_check
svg = open(sys.argv[2]).read()
m = svg.index(">", svg.index("<svg")) + 1
probe = svg[:m] + svg_check.PROBE_HEAD + svg[m:]
probe = probe[:probe.rindex("</svg>")] + svg_check.PROBE_TAIL + "</svg>\n"
open(sys.argv[3], "w").write(probe)
import re, html
out = svg_check.run_chromium(["--dump-dom", "file://" + sys.argv[3]]).stdout.decode()
res = json.loads(html.unescape(re.search(r'<text id="canopy-probe">(.*?)</text>', out, re.S).group(1)))
assert not res["errors"], res["errors"]
widths = {f["n"]: f["w"] for f in res["frames"]}
assert widths == {"main": 40, "a": 25, "b": 10, "c": 5}, widths   # (base + new) / 2
print("differential SVG renders; widths (base + new) / 2:", widths)
PY
  python3 "$TMP/probe.py" "$(dirname "$0")/formats" "$TMP/d.svg" "$TMP/probe.svg" || fail "diff SVG in Chromium"
fi
echo "PASS differential SVG"

# bad input: exit 2
set +e
"$C" diff "$TMP/base.folded" >/dev/null 2>"$TMP/err"; rc1=$?
"$C" diff "$TMP/base.folded" "$TMP/missing.folded" >/dev/null 2>>"$TMP/err"; rc2=$?
"$C" diff "$TMP/base.folded@5..1" "$TMP/new.folded" >/dev/null 2>>"$TMP/err"; rc3=$?
"$C" diff "$TMP/base.folded" "$PERF" >/dev/null 2>>"$TMP/err"; rc4=$?
"$C" diff "$TMP/base.folded" "$TMP/new.folded" -t merge:nosuch >/dev/null 2>>"$TMP/err"; rc5=$?
set -e
[ "$rc1$rc2$rc3$rc4$rc5" = "22222" ] || fail "bad input exits $rc1 $rc2 $rc3 $rc4 $rc5: $(cat "$TMP/err")"
echo "PASS bad input exits 2"

# `open` on a three-column folded file shows the same differential tree as `diff`
printf 'A;B 3 5\nA;C 2 1\n' > "$TMP/three.folded"
"$C" open "$TMP/three.folded" --format json > "$TMP/open3.json"
"$C" diff "$TMP/three.folded" --format json > "$TMP/diff3.json"
cmp -s "$TMP/open3.json" "$TMP/diff3.json" || fail "open and diff disagree on a three-column file"
python3 - "$TMP/open3.json" <<'PY' || fail "open on a differential file"
import json, sys
d = json.load(open(sys.argv[1]))
a = d["roots"][0]
kids = {c["name"]: c for c in a["children"]}
# BASE normalized to NEW's total (6/5): B 3*1.2=3.6 -> 5, C 2*1.2=2.4 -> 1
assert d["diff"] and abs(d["factor"] - 1.2) < 1e-12, d
assert abs(kids["B"]["total"] - 1.4) < 1e-9 and abs(kids["C"]["total"] + 1.4) < 1e-9, kids
assert kids["B"]["new"] == 5 and abs(kids["B"]["base"] - 3.6) < 1e-9
PY
echo "PASS open on a differential file"
