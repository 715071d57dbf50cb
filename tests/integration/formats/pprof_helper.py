#!/usr/bin/env python3
"""Helpers for test_pprof.sh.

  compare-top CANOPY_FUNCTIONS_JSON PPROF_TOP_TXT
      `go tool pprof -top -unit=<u>` output against `canopy open --functions --format json`:
      the same function names with the same flat (self) and cum (total) values.
  raw-total PPROF_RAW_TXT
      prints the sum of the default sample type's values in `go tool pprof -raw` output.
  make-bad KIND OUT
      writes an uncompressed pprof with one defect: location (a sample names a location id
      that does not exist), string (a function name index out of range), function (a line
      names a function id that does not exist), strtab0 (string_table[0] is not "").
"""
import json
import re
import sys


def compare_top(canopy_json, top_txt):
    want = {}
    with open(canopy_json) as f:
        for row in json.load(f)["functions"]:
            want[row["name"]] = (row["self"], row["total"])
    got = {}
    started = False
    with open(top_txt) as f:
        for line in f:
            if re.match(r"\s*flat\s+flat%", line):
                started = True
                continue
            if not started or not line.strip():
                continue
            parts = line.split()
            # flat flat% sum% cum cum% NAME...
            num = lambda s: float(re.sub(r"[a-z]+$", "", s))
            got[" ".join(parts[5:])] = (num(parts[0]), num(parts[3]))
    ok = True
    for name in sorted(set(want) | set(got)):
        if want.get(name) != got.get(name):
            print(f"function {name!r}: canopy {want.get(name)} pprof {got.get(name)}")
            ok = False
    if not want:
        print("canopy listed no functions")
        ok = False
    return 0 if ok else 1


def raw_total(raw_txt):
    total = 0
    in_samples = False
    header = None
    with open(raw_txt) as f:
        for line in f:
            if line.startswith("Samples:"):
                in_samples = True
                continue
            if in_samples and header is None:
                header = line.split()
                idx = [i for i, h in enumerate(header) if h.endswith("[dflt]")][0]
                continue
            if in_samples:
                m = re.match(r"\s*([-\d\s]+):", line)
                if m:
                    total += int(m.group(1).split()[idx])
                elif not line.startswith(" "):
                    break
    print(total)
    return 0


def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(no, val):
    if isinstance(val, int):
        return varint(no << 3) + varint(val)
    return varint(no << 3 | 2) + varint(len(val)) + val


def make_bad(kind, out):
    strings = ["", "samples", "count", "main", "work"]
    if kind == "strtab0":
        strings[0] = "x"
    fn_name = 99 if kind == "string" else 3
    line_fn = 7 if kind == "function" else 1
    sample_loc = 42 if kind == "location" else 2
    msg = field(1, field(1, 1) + field(2, 2))  # sample_type samples/count
    msg += field(2, field(1, varint(sample_loc) + varint(1)) + field(2, varint(5)))
    msg += field(4, field(1, 1) + field(4, field(1, line_fn)))
    msg += field(4, field(1, 2) + field(4, field(1, 2)))
    msg += field(5, field(1, 1) + field(2, fn_name))
    msg += field(5, field(1, 2) + field(2, 4))
    for s in strings:
        msg += field(6, s.encode())
    with open(out, "wb") as f:
        f.write(msg)
    return 0


def main(argv):
    if argv[1] == "compare-top":
        return compare_top(argv[2], argv[3])
    if argv[1] == "raw-total":
        return raw_total(argv[2])
    if argv[1] == "make-bad":
        return make_bad(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
