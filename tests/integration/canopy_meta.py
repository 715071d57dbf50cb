#!/usr/bin/env python3
"""canopy_meta.py FILE: prints a .canopy file's metadata (its meta section) as one JSON
object, read by the grammar of docs/canopy-format.md: the magic line, unit, scale, then the
counted sections up to meta. Independent of canopy's own reader (aggregate/canopy_file.c)."""
import gzip
import json
import sys

SECTIONS = ["strings", "resources", "funcs", "frames", "stacks", "threads", "processes", "cgroups",
            "meta"]
OPTIONAL = {"cgroups"}  # version 3, written only when some process has a cgroup path


def unescape(s):
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append({"\\": "\\", "n": "\n", "r": "\r", "0": "\0"}[s[i + 1]])
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def main(path):
    raw = open(path, "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    lines = raw.decode("utf-8", "surrogateescape").split("\n")
    if not lines[0].startswith("canopy-profile "):
        sys.exit(f"{path}: not a .canopy file")
    i = 3  # magic, unit, scale
    strings, meta = [], {}
    for name in SECTIONS:
        head, count = lines[i].split(" ")
        if head != name and name in OPTIONAL:
            continue
        if head != name:
            sys.exit(f"{path}:{i + 1}: expected section {name}, found {head}")
        body = lines[i + 1:i + 1 + int(count)]
        if name == "strings":
            strings = [unescape(s) for s in body]
        elif name == "meta":
            for row in body:
                k, v = (int(x) for x in row.split(" "))
                meta[strings[k]] = strings[v]
        i += 1 + int(count)
    print(json.dumps(meta))


main(sys.argv[1])
