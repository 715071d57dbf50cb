#!/usr/bin/env python3
"""check_deps.py DOC MODULE=LIBRARY...: enforces docs/architecture.md's dependency table
over the built static libraries.

The table's rows (`| \`module/\` | links | job |`) say which modules each module may use.
A library may refer (nm -u) only to symbols defined by its own module or by a module
reachable from it through those links (arrows point one way, nothing points up); never to
another module's internals (`cn_X__` names); every module built must have a row, and the
table itself must have no cycle.
Exit 0 when the tree keeps the table, 1 with each breach listed."""
import re
import subprocess
import sys


def table(doc):
    """module -> set of modules named in its links cell."""
    rows = {}
    for line in open(doc, encoding="utf-8"):
        m = re.match(r"\|\s*`([a-z]+)/`\s*\|([^|]*)\|", line)
        if m:
            rows[m.group(1)] = set(re.findall(r"[a-z]+", m.group(2)))
    return rows


def reachable(rows, start):
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for n in rows.get(m, ()):
            if n in rows and n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def symbols(lib, undefined):
    flag = "-u" if undefined else "--defined-only"
    out = subprocess.run(["nm", flag, lib], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if not parts or line.endswith(":"):
            continue
        if not undefined and (len(parts) < 3 or parts[1] not in "TDBRC"):
            continue  # global text, data, bss, rodata, common only
        names.add(parts[-1])
    return names


def main(argv):
    doc, libs = argv[1], dict(a.split("=", 1) for a in argv[2:])
    rows = table(doc)
    owner, problems = {}, []
    for mod, lib in libs.items():
        if mod not in rows:
            problems.append(f"{mod}/ is built but has no row in {doc}")
        for s in symbols(lib, False):
            owner.setdefault(s, mod)
    for mod in rows:
        if mod in reachable(rows, mod):
            problems.append(f"{mod}/ reaches itself through the table's links (a cycle)")
    for mod, lib in libs.items():
        allowed = reachable(rows, mod) | {mod}
        for s in sorted(symbols(lib, True)):
            o = owner.get(s)
            if o is None or o == mod:
                continue
            if o not in allowed:
                problems.append(f"{mod}/ uses {s} of {o}/, which its row does not reach")
            elif re.match(r"cn_[a-z]+__", s):
                problems.append(f"{mod}/ uses {s}, an internal name of {o}/")
    for p in problems:
        print("check_deps:", p, file=sys.stderr)
    if not problems:
        print(f"check_deps: {len(libs)} libraries keep the table of {doc}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
