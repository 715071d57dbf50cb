#!/usr/bin/env bash
# Functions of stripped code (docs/cli.md "Names"): Debian's liblzma has no symbol table
# beyond .dynsym, so its local functions are named by their CFI (FDE) ranges,
# `liblzma.so.5.X+0xSTART`. `xz -6 -T1` on ~4 MB of generated text runs ~3 s under
# `canopy run --no-daemon --unwind dwarf`; then, with readelf's FDE list as the oracle:
# every liblzma `+0x` name is an FDE start, there are few of them (< 60, and at most a
# third of the distinct liblzma addresses the samples hit, which is what the names were
# before: one per address), every address `canopy lines` reports inside such a function
# lies in that function's FDE range, and exported names (lzma_code) are kept. The same
# with a copy of the library deleted while xz maps it (read through /proc/PID/map_files,
# named by the name xz mapped it by).
source "$(dirname "$0")/lib.sh"
XZ=$(command -v xz || true)
[ -n "$XZ" ] || fail "xz is missing (scripts/setup installs xz-utils)"
LIB=$(ldd "$XZ" | awk '/liblzma/ {print $3}')
[ -n "$LIB" ] && [ -r "$LIB" ] || fail "xz is not linked with a readable liblzma"
LIB=$(readlink -f "$LIB")
readelf -S "$LIB" | grep -q '\.symtab' && fail "$LIB has a .symtab: not the stripped case"
export CANOPY_SOCKET=$TMP/no-daemon.sock

python3 - "$TMP/data.txt" <<'PY'
import random, sys
random.seed(1)
words = ["".join(random.choice("abcdefghij") for _ in range(random.randint(3, 9)))
         for _ in range(2000)]
with open(sys.argv[1], "w") as out:
    n = 0
    while n < 4_000_000:
        line = " ".join(random.choice(words) for _ in range(12)) + "\n"
        out.write(line)
        n += len(line)
PY

if ! "$CANOPY_BIN" run --no-daemon --no-kernel --unwind dwarf -o "$TMP/xz.canopy" -- \
  "$XZ" -6 -T1 -c "$TMP/data.txt" >/dev/null 2>"$TMP/run.err"; then
  grep -qi "perf_event\|permission\|not permitted" "$TMP/run.err" &&
    skip "perf events not permitted: $(cat "$TMP/run.err")"
  fail "canopy run: $(cat "$TMP/run.err")"
fi
"$CANOPY_BIN" open "$TMP/xz.canopy" --format folded -o "$TMP/xz.folded" ||
  fail "canopy open --format folded"
readelf -lW "$LIB" >"$TMP/segments.txt"
readelf --debug-dump=frames "$LIB" >"$TMP/frames.txt" 2>/dev/null
BASE=$(basename "$LIB")
grep -o "$BASE+0x[0-9a-f]*" "$TMP/xz.folded" | sort -u >"$TMP/names.txt" || true
[ -s "$TMP/names.txt" ] || fail "no $BASE+0x frames in the profile"
while read -r name; do
  "$CANOPY_BIN" lines "$TMP/xz.canopy" "$name" --format json >"$TMP/lines-$name.json" ||
    fail "canopy lines $name"
done <"$TMP/names.txt"

# check.py TMP BASE FOLDED [lines]: BASE's `+0x` names in FOLDED are FDE starts, few, and
# lzma_code keeps its name; with "lines", every address `canopy lines` gave for a name
# (TMP/lines-NAME.json) lies in its FDE, and the names are at most a third of them.
cat >"$TMP/check.py" <<'PY'
import json, re, sys
tmp, base, folded_path = sys.argv[1:4]
with_lines = len(sys.argv) > 4
# PT_LOAD segments: file offset <-> virtual address.
segs = []
for l in open(f"{tmp}/segments.txt"):
    f = l.split()
    if f and f[0] == "LOAD":
        segs.append((int(f[1], 16), int(f[2], 16), int(f[4], 16)))
def vaddr(off):
    for o, v, sz in segs:
        if o <= off < o + sz:
            return off - o + v
    return None
fdes = {}
for m in re.finditer(r"FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", open(f"{tmp}/frames.txt").read()):
    fdes[int(m.group(1), 16)] = int(m.group(2), 16)
assert len(fdes) > 50, f"readelf listed {len(fdes)} FDEs"
folded = open(folded_path).read()
names = sorted(set(re.findall(re.escape(base) + r"\+0x[0-9a-f]+", folded)))
assert names, f"no {base}+0x frames in {folded_path}"
bad = [n for n in names if vaddr(int(n.split("+0x")[1], 16)) not in fdes]
assert not bad, f"not FDE starts (named per address?): {bad[:5]}"
addrs = set()
for name in names if with_lines else []:
    start = vaddr(int(name.split("+0x")[1], 16))
    doc = json.load(open(f"{tmp}/lines-{name}.json"))
    for a in doc["addresses"]:
        va = vaddr(a["offset"])
        assert va is not None and start <= va < fdes[start], \
            f"{name}: address {a['offset']:#x} outside its FDE [{start:#x}, {fdes[start]:#x})"
        addrs.add(a["offset"])
assert "lzma_code" in folded, "the exported lzma_code lost its name"
print(f"{base}: {len(names)} function names (FDE starts)" +
      (f" for {len(addrs)} distinct sampled addresses (innermost)" if with_lines else "") +
      f" of {len(fdes)} FDEs")
assert len(names) < 60, f"{len(names)} names: not grouped by function"
assert not with_lines or len(addrs) >= 3 * len(names), \
    f"{len(names)} names for {len(addrs)} addresses: not grouped by function"
PY
python3 "$TMP/check.py" "$TMP" "$BASE" "$TMP/xz.folded" lines || fail "liblzma's names"

# ---- the same library deleted while mapped ------------------------------------------------
# canopy reads it through /proc/PID/map_files (its name there is an address range), and
# names its functions by the name the process mapped it by: liblzma.so.5+0xSTART, each an
# FDE start (per-address names would mostly not be), few of them. In-process `tree --pid`
# attaches after the deletion, so the sampler first meets the file deleted.
SONAME=$(readelf -dW "$XZ" | sed -n 's/.*(NEEDED).*\[\(liblzma[^]]*\)\].*/\1/p')
[ -n "$SONAME" ] || fail "xz names no liblzma in its NEEDED entries"
mkdir "$TMP/lib"
cp "$LIB" "$TMP/lib/$SONAME"
LD_LIBRARY_PATH=$TMP/lib "$XZ" -6 -T1 -c "$TMP/data.txt" >/dev/null &
XZ_PID=$!
trap 'rc=$?; kill "$XZ_PID" 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
for ((i = 0; i < 100; i++)); do
  grep -q "$TMP/lib/$SONAME" "/proc/$XZ_PID/maps" 2>/dev/null && break
  sleep 0.05
done
grep -q "$TMP/lib/$SONAME" "/proc/$XZ_PID/maps" || fail "xz did not map $TMP/lib/$SONAME"
rm "$TMP/lib/$SONAME"
"$CANOPY_BIN" tree --pid "$XZ_PID" --no-daemon --no-kernel --unwind dwarf --duration 2s \
  --format folded -o "$TMP/gone.folded" 2>"$TMP/gone.err" || fail "tree --pid: $(cat "$TMP/gone.err")"
wait "$XZ_PID" || true
grep -q "$SONAME (deleted)" "$TMP/gone.err" "$TMP/gone.folded" && fail "a name kept the (deleted) mark"
python3 "$TMP/check.py" "$TMP" "$SONAME" "$TMP/gone.folded" || fail "the deleted liblzma's names"
