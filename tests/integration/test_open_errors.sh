#!/usr/bin/env bash
# `canopy open` on bad input: exit 2, exactly one line on stderr naming the file and the
# line or offset (or the offending SPEC), nothing on stdout. And the non-errors next to
# them: a PATH that names no call node (a note, exit 0), a valid empty profile (exit 0).
source "$(dirname "$0")/lib.sh"

failures=0
# expect_error LABEL REGEX ARGS... : exit 2, one stderr line matching REGEX (ignoring
# case), empty stdout.
expect_error() {
  local label=$1 regex=$2
  shift 2
  local rc=0
  "$CANOPY_BIN" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  local lines
  lines=$(wc -l <"$TMP/err")
  if [ "$rc" -ne 2 ]; then
    echo "FAIL $label: exit $rc, expected 2 ($(head -c 300 "$TMP/err"))"
  elif [ "$lines" -ne 1 ]; then
    echo "FAIL $label: $lines stderr lines, expected 1:"; sed 's/^/     /' "$TMP/err"
  elif [ -s "$TMP/out" ]; then
    echo "FAIL $label: stdout not empty: $(head -c 200 "$TMP/out")"
  elif ! grep -Eiq -- "$regex" "$TMP/err"; then
    echo "FAIL $label: stderr does not match /$regex/: $(cat "$TMP/err")"
  else
    echo "PASS $label: $(cat "$TMP/err")"
    return 0
  fi
  failures=$((failures + 1))
}

D=$TMP
: >"$D/empty.folded"
printf '\x00\x01\x02garbage\xff\xfe not a profile\n' >"$D/junk.bin"
printf '{"nodes": [{"id": 1, "callFrame": {"functionName": "(root)", "url": ""' >"$D/trunc.cpuprofile"
printf '{"nodes": "many", "startTime": 0, "endTime": 10, "samples": [], "timeDeltas": []}\n' \
  >"$D/types.cpuprofile"
printf 'A;B 1\nA;C\n' >"$D/nocount.folded"
printf 'A;B 1\nA;C -3\n' >"$D/negative.folded"
printf 'A;B 1\nA;C abc\n' >"$D/nonnum.folded"

node() { # id name children-json
  printf '{"id": %s, "callFrame": {"functionName": "%s", "scriptId": "1", "url": "app.js", "lineNumber": 0, "columnNumber": 0}, "children": %s}' "$1" "$2" "$3"
}
root='{"id": 1, "callFrame": {"functionName": "(root)", "scriptId": "0", "url": "", "lineNumber": -1, "columnNumber": -1}, "children": [2]}'
printf '{"nodes": [%s, %s], "startTime": 0, "endTime": 2000, "samples": [2, 7], "timeDeltas": [1000, 1000]}\n' \
  "$root" "$(node 2 a '[]')" >"$D/unknown-id.cpuprofile"
printf '{"nodes": [%s, %s, %s], "startTime": 0, "endTime": 2000, "samples": [2, 2], "timeDeltas": [1000, 1000]}\n' \
  "$root" "$(node 2 a '[]')" "$(node 2 b '[]')" >"$D/repeated-id.cpuprofile"
printf '{"nodes": [%s, %s, %s], "startTime": 0, "endTime": 2000, "samples": [2, 3], "timeDeltas": [1000, 1000]}\n' \
  "$root" "$(node 2 a '[3]')" "$(node 3 b '[2]')" >"$D/cycle.cpuprofile"
printf '{"nodes": [%s], "startTime": 1000, "endTime": 1000, "samples": [], "timeDeltas": []}\n' \
  '{"id": 1, "callFrame": {"functionName": "(root)", "scriptId": "0", "url": "", "lineNumber": -1, "columnNumber": -1}, "children": []}' \
  >"$D/nosamples.cpuprofile"
printf 'main;A;B 2\nmain;C 1\n' >"$D/good.folded"

expect_error "empty file" "empty\.folded" open "$D/empty.folded"
expect_error "unrecognized content" "junk\.bin" open "$D/junk.bin"
expect_error "truncated JSON" "trunc\.cpuprofile.*[0-9]" open "$D/trunc.cpuprofile"
expect_error "wrong JSON types" "types\.cpuprofile.*nodes" open "$D/types.cpuprofile"
expect_error "folded line without count" "nocount\.folded:2" open "$D/nocount.folded"
expect_error "negative count" "negative\.folded:2" open "$D/negative.folded"
expect_error "non-numeric count" "nonnum\.folded:2" open "$D/nonnum.folded"
expect_error "unknown node id in samples" "unknown-id\.cpuprofile.*(node|id)" open "$D/unknown-id.cpuprofile"
expect_error "repeated node id" "repeated-id\.cpuprofile.*(node|id)" open "$D/repeated-id.cpuprofile"
expect_error "cyclic children" "cycle\.cpuprofile.*(cycl|node|parent|child)" open "$D/cycle.cpuprofile"
expect_error "missing file" "no-such-file\.folded" open "$D/no-such-file.folded"
expect_error "unknown transform" "nosuch:A" open "$D/good.folded" -t nosuch:A
expect_error "transform without argument" "merge" open "$D/good.folded" -t merge
expect_error "unknown function" "merge:nosuchfunc" open "$D/good.folded" -t merge:nosuchfunc
expect_error "unknown function after a valid one" "drop:Z" open "$D/good.folded" -t merge:A -t drop:Z
expect_error "unknown library" "focus-lib:libnope\.so" open "$D/good.folded" -t focus-lib:libnope.so
expect_error "unknown option" "--bogus" open "$D/good.folded" --bogus
expect_error "bad --format" "--format" open "$D/good.folded" --format xml
expect_error "bad --depth" "--depth" open "$D/good.folded" --depth -1
expect_error "bad --last" "--last" open "$D/good.folded" --last soon
expect_error "missing FILE" "FILE" open
expect_error "timeline bad input" "nonnum\.folded:2" timeline "$D/nonnum.folded"
expect_error "timeline bad format" "--format" timeline "$D/good.folded" --format folded

# A PATH that is no call node path: a note on stderr, the rule applies (focus: empty tree).
rc=0
"$CANOPY_BIN" open "$D/good.folded" -t 'focus:A;B' --format json >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ "$rc" -eq 0 ] && grep -q 'focus:A;B' "$TMP/err" &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["roots"]==[] and d["total"]==0 else 1)' "$TMP/out"; then
  echo "PASS unmatched PATH: exit 0, note: $(cat "$TMP/err")"
else
  echo "FAIL unmatched PATH: exit $rc, stderr: $(cat "$TMP/err"), stdout: $(head -c 200 "$TMP/out")"
  failures=$((failures + 1))
fi
# A matching PATH gives no note.
rc=0
"$CANOPY_BIN" open "$D/good.folded" -t 'focus:main;A' >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ "$rc" -eq 0 ] && [ ! -s "$TMP/err" ] && grep -q 'B' "$TMP/out"; then
  echo "PASS matching PATH: no note"
else
  echo "FAIL matching PATH: exit $rc, stderr: $(cat "$TMP/err")"
  failures=$((failures + 1))
fi

# A valid profile without samples: an empty tree, exit 0, in text and JSON.
rc=0
"$CANOPY_BIN" open "$D/nosamples.cpuprofile" --format json >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ "$rc" -eq 0 ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["roots"]==[] and d["total"]==0 else 1)' "$TMP/out"; then
  echo "PASS empty profile: empty JSON tree"
else
  echo "FAIL empty profile: exit $rc, stderr: $(cat "$TMP/err"), stdout: $(head -c 200 "$TMP/out")"
  failures=$((failures + 1))
fi
rc=0
"$CANOPY_BIN" open "$D/nosamples.cpuprofile" >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ "$rc" -eq 0 ] && [ "$(wc -l <"$TMP/out")" -eq 1 ]; then
  echo "PASS empty profile: text is the header line only"
else
  echo "FAIL empty profile (text): exit $rc, stderr: $(cat "$TMP/err"), stdout: $(cat "$TMP/out")"
  failures=$((failures + 1))
fi

# -o writes nothing on error, and the file on success (format from the extension).
rc=0
"$CANOPY_BIN" open "$D/good.folded" -t merge:nope -o "$TMP/x.json" 2>/dev/null || rc=$?
if [ "$rc" -eq 2 ] && [ ! -e "$TMP/x.json" ]; then
  echo "PASS -o untouched on error"
else
  echo "FAIL -o on error: exit $rc, file exists: $([ -e "$TMP/x.json" ] && echo yes || echo no)"
  failures=$((failures + 1))
fi
rc=0
"$CANOPY_BIN" open "$D/good.folded" -o "$TMP/x.json" >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ "$rc" -eq 0 ] && [ ! -s "$TMP/out" ] &&
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["total"]==3 else 1)' "$TMP/x.json"; then
  echo "PASS -o FILE.json writes JSON"
else
  echo "FAIL -o FILE.json: exit $rc, $(cat "$TMP/err")"
  failures=$((failures + 1))
fi

# An error quoting the file's bytes shows them under the terminal rule (docs/cli.md "Names
# in text output"): a file can neither clear the screen nor retitle the window.
printf 'main;f 3\nmain;g \033[2J\n' >"$TMP/esc.folded"
rc=0
"$CANOPY_BIN" open "$TMP/esc.folded" >"$TMP/out" 2>"$TMP/err" || rc=$?
if [ "$rc" -eq 2 ] && grep -qF "count '\x1b[2J'" "$TMP/err" && ! grep -q $'\e' "$TMP/err"; then
  echo "PASS an error quoting ESC shows it escaped"
else
  echo "FAIL an error quoting ESC: exit $rc, $(cat -v "$TMP/err")"
  failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || fail "$failures case(s) failed"
echo "all passed"
