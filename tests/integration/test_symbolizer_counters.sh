#!/usr/bin/env bash
# Session counters (docs/cli-live.md, "Session counters"): `canopy sessions --format json`
# and `canopy status` report per-session unwind outcomes and unnamed frames, and they are
# consistent — the outcomes sum to the samples with user stacks — and they move: a
# stack copy too small for a 30-frame stack shows as truncated, a frame-pointer workload
# unwinds completely, a vDSO-heavy one leaves no frame unsymbolized, and Debian's stripped
# xz has frames named from the function ranges of earlier answers.
# Where users read trees (docs/cli-live.md, "Truncated stacks"): the small copy's tree
# header says how many stacks were cut short and its JSON tree has the "unwind" counts,
# from canopyd and in-process alike; the frame-pointer tree says nothing. `canopy status`
# splits resident memory into anonymous and file-backed (docs/cli-live.md, "Daemon
# memory").
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
W=$CANOPY_WORKLOADS
export CANOPY_SOCKET=$TMP/d.sock
D_PID=
trap finish_daemon EXIT
start_canopyd

"$C" run --name small --unwind dwarf --stack-size 512 -F 499 -o /dev/null -- "$W/wl_deep_nofp" 1 \
  >/dev/null 2>"$TMP/e" || fail "run small: $(cat "$TMP/e")"
"$C" run --name fp --unwind fp -F 499 -o /dev/null -- "$W/wl_shares_fp" --rounds 40 \
  >/dev/null 2>"$TMP/e" || fail "run fp: $(cat "$TMP/e")"
"$C" run --name clock -F 499 -o /dev/null -- "$W/wl_clockread" 1 clock \
  >/dev/null 2>"$TMP/e" || fail "run clock: $(cat "$TMP/e")"
# Debian's stripped xz and liblzma: no DWARF, so most new frames fall in a function an
# earlier answer named whole, and are named from its range without a lookup.
XZ=$(command -v xz) || fail "xz is missing (scripts/setup installs xz-utils)"
head -c 3000000 /dev/urandom | base64 >"$TMP/xz.in"
"$C" run --name xz -F 999 -o /dev/null -- "$XZ" -6 -T1 -c "$TMP/xz.in" \
  >/dev/null 2>"$TMP/e" || fail "run xz: $(cat "$TMP/e")"
"$C" sessions --format json >"$TMP/s.json" || fail "sessions --format json"
"$C" status --format json >"$TMP/status.json" || fail "status --format json"
"$C" sessions >"$TMP/s.txt" || fail "sessions"
"$C" status >"$TMP/status.txt" || fail "status"
python3 - "$TMP/s.json" "$TMP/status.json" <<'PY' || fail "session counters"
import json, sys
sessions = {s["name"]: s for s in json.load(open(sys.argv[1]))["sessions"]}
status = json.load(open(sys.argv[2]))
keys = ("complete", "truncated_stack", "no_cfi", "read_fault", "other")
total = {k: 0 for k in keys}
for name, s in sessions.items():
    u = s["unwind_outcomes"]
    print(name, "samples", s["samples"], "user_stacks", s["user_stacks"], u, s["unwinder"],
          s["symbols"], "unsymbolized", s["unsymbolized"], file=sys.stderr)
    assert sum(u[k] for k in keys) == s["user_stacks"], (name, u)
    assert 0 < s["user_stacks"] <= s["samples"] + s["dropped"], name
    sym = s["symbols"]
    assert s["unsymbolized"] == sym["pending"] + sym["unresolved"] + sym["unresolvable"], name
    for k in keys:
        total[k] += u[k]
small, fp, clock = sessions["small"], sessions["fp"], sessions["clock"]
# 512 bytes of stack cannot hold 30 frames: most unwinds stop at the copy's end.
assert small["unwind_outcomes"]["truncated_stack"] >= 0.5 * small["user_stacks"], small
assert small["unwinder"]["dwarf"] > 0, small["unwinder"]
# Frame pointers all the way down (main's callers in libc included, or not): no
# truncation, and the frame-pointer walk never reports a failure.
assert fp["unwind_outcomes"]["truncated_stack"] == 0, fp
assert fp["unwind_outcomes"]["complete"] >= 0.95 * fp["user_stacks"], fp
# The program's own work runs in user space nearly always.
assert clock["user_stacks"] >= 0.8 * clock["samples"], clock
assert clock["symbols"]["unresolvable"] == 0 and clock["symbols"]["unresolved"] == 0, clock
assert sessions["xz"]["symbols"]["by_range"] > 0, sessions["xz"]["symbols"]
assert status["user_stacks"] == sum(s["user_stacks"] for s in sessions.values()), status
assert status["unwind_outcomes"] == total, (status["unwind_outcomes"], total)
assert status["unsymbolized"] == sum(s["unsymbolized"] for s in sessions.values())
PY
head -1 "$TMP/s.txt" | grep -q 'UNWOUND *UNSYM' || fail "sessions: no UNWOUND/UNSYM columns: $(cat "$TMP/s.txt")"
grep -Eq '^[a-z0-9]+ +fp .* 100% +0 ' "$TMP/s.txt" || grep -Eq '^[a-z0-9]+ +fp .* (9[5-9]|100)% ' "$TMP/s.txt" ||
  fail "sessions: fp row: $(cat "$TMP/s.txt")"
grep -q 'unwound completely' "$TMP/status.txt" || fail "status text: $(cat "$TMP/status.txt")"
cat "$TMP/s.txt" "$TMP/status.txt" >&2
echo "PASS session counters"

# Tree headers. The same session through canopyd (text and JSON), and an in-process run
# of the same workload with the same small copy (its own counts: compared by form).
"$C" tree small >"$TMP/small.txt" || fail "tree small"
"$C" tree small --format json >"$TMP/small.json" || fail "tree small json"
"$C" tree fp >"$TMP/fp.txt" || fail "tree fp"
"$C" tree fp --format json >"$TMP/fp.json" || fail "tree fp json"
for fmt in txt json; do
  "$C" run --no-daemon --unwind dwarf --stack-size 512 -F 499 -o "$TMP/inproc.$fmt" \
    -- "$W/wl_deep_nofp" 1 >/dev/null 2>"$TMP/e" || fail "run --no-daemon ($fmt): $(cat "$TMP/e")"
done
python3 - "$TMP" <<'PY' || fail "tree headers"
import json, re, sys
d = sys.argv[1]
sessions = {s["name"]: s for s in json.load(open(d + "/s.json"))["sessions"]}
keys = ("complete", "truncated_stack", "no_cfi", "read_fault", "other")

def share(part, whole):
    pct = 100.0 * part / whole
    return "<0.1%" if pct < 0.05 else "%.1f%%" % pct

def summary(u):
    """The header clause docs/cli-live.md describes, from the six counts."""
    names = (("truncated_stack", "stack copy"), ("no_cfi", "no CFI"),
             ("read_fault", "read fault"), ("other", "other"))
    cut = sum(u[k] for k, _ in names)
    if cut == 0:
        return None
    parts = ", ".join("%s %s" % (n, share(u[k], u["user_stacks"])) for k, n in names if u[k])
    return "%s of stacks truncated (%s)" % (share(cut, u["user_stacks"]), parts)

CLAUSE = re.compile(r", ((?:<0\.1|\d+\.\d)% of stacks truncated \([^()]*\)), "
                    r"(?:python frames: (?:on|off \([^()]*\)), )?transforms:")

def header(path):
    first = open(path).readline()
    assert ", session " in first, (path, first)
    m = CLAUSE.search(first)
    return first, (m.group(1) if m else None)

def unwind(path):
    u = json.load(open(path)).get("unwind")
    assert u is not None, (path, "no unwind object")
    assert sorted(u) == sorted(keys + ("user_stacks",)), u
    assert sum(u[k] for k in keys) == u["user_stacks"], u
    return u

small = sessions["small"]
expect = dict(small["unwind_outcomes"], user_stacks=small["user_stacks"])
# The daemon's JSON tree carries the session's counters as they are.
assert unwind(d + "/small.json") == expect, (unwind(d + "/small.json"), expect)
first, clause = header(d + "/small.txt")
print("daemon:", first.strip(), file=sys.stderr)
assert clause is not None and clause == summary(expect), (first, summary(expect))
# The in-process runs: the same fields, their own counts, the same form.
first, clause = header(d + "/inproc.txt")
print("in-process:", first.strip(), file=sys.stderr)
iu = unwind(d + "/inproc.json")
assert iu["truncated_stack"] >= 0.5 * iu["user_stacks"] > 0, iu
# Two runs (text, JSON): the counts differ, so the text clause is checked by form.
assert clause is not None and "(stack copy " in clause, first
assert set(json.load(open(d + "/inproc.json"))) == set(json.load(open(d + "/small.json"))), \
    "in-process and canopyd JSON trees have different top-level fields"
# Frame pointers: every unwind completes, and the header says nothing about truncation.
fp = unwind(d + "/fp.json")
first, clause = header(d + "/fp.txt")
assert fp["complete"] == fp["user_stacks"] > 0, fp
assert clause is None and "truncated" not in first, first
PY
echo "PASS tree headers: truncation summary and unwind counts"

python3 - "$TMP/status.json" <<'PY' || fail "status memory"
import json, sys
s = json.load(open(sys.argv[1]))
anon, file, rss = s["rss_anon_bytes"], s["rss_file_bytes"], s["rss_bytes"]
print("rss", rss, "anon", anon, "file", file, file=sys.stderr)
assert anon > 0 and file > 0 and rss > 0, s
# RssAnon + RssFile + RssShmem = VmRSS; canopyd has little shared memory.
assert abs(anon + file - rss) <= 0.1 * rss, (anon, file, rss)
# The symbolizer's object cache, apart: the sessions above loaded objects.
sc = s["symbol_cache"]
print("symbol cache", sc, file=sys.stderr)
assert sc["objects"] > 0 and sc["heap_bytes"] > 0 and sc["mapped_bytes"] >= 0, sc
assert sc["evictions"] >= 0 and sc["heap_bytes"] < rss, sc
# The bounds and the idle release of debug data, shown (canopyd's defaults).
assert sc["max_heap_bytes"] == 32 << 20 and sc["max_mapped_bytes"] == 64 << 20, sc
assert sc["debug_idle_s"] == 10 and sc["idle_s"] == 30 and sc["debug_releases"] >= 0, sc
# libdw's openings and the units indexed: a unit is indexed only with libdw open
assert sc["debug_opens"] >= 0 and sc["debug_units"] >= 0, sc
assert sc["debug_units"] == 0 or sc["debug_opens"] > 0, sc
PY
grep -Eq '[0-9.]+ MiB resident \([0-9.]+ MiB anonymous, [0-9.]+ MiB file-backed\)' "$TMP/status.txt" ||
  fail "status text: no memory split: $(cat "$TMP/status.txt")"
grep -Eq '^symbol cache: [1-9][0-9]* objects, [0-9.]+ of [1-9][0-9.]* MiB heap, [0-9.]+ of [1-9][0-9.]* MiB of debug data read \(released after [1-9][0-9]* s idle: [0-9]+; libdw opened [0-9]+, [0-9]+ units indexed\), [0-9]+ evicted$' \
  "$TMP/status.txt" || fail "status text: no symbol cache line: $(cat "$TMP/status.txt")"
echo "PASS status memory: anonymous and file-backed"
