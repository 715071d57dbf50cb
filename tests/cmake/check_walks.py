#!/usr/bin/env python3
"""check_walks.py DOC TOP: the walks of docs/architecture.md name functions that exist.

In the sections whose heading starts with "Walk" (`### Walk: a sample, ...`), every function
written as `name()` must be defined in the tree (a definition at column 0 in a .c or .h file
under TOP, outside tests/ and build directories), and where the walk says where it lives,
`name()` (dir/file.c), it must be defined in that file. So a renamed, moved or deleted
function makes this test fail until the walk is rewritten. Exit 0, or 1 with each stale name."""
import os
import re
import sys

SKIP = {"tests", ".git", "node_modules"}


def sources(top):
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if x not in SKIP and not x.startswith("build")]
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(d, f), top)


def definitions(top):
    """function name -> set of files defining it (a column-0 line naming it, whose
    declaration reaches '{' before ';')."""
    defs = {}
    head = re.compile(r"^[A-Za-z_][\w \*]*?\b([A-Za-z_]\w*)\s*\(")
    for rel in sources(top):
        lines = open(os.path.join(top, rel), encoding="utf-8", errors="replace").read().split("\n")
        for i, line in enumerate(lines):
            m = head.match(line)
            if not m or line.startswith(("typedef", "#", "return")):
                continue
            for nxt in lines[i:i + 12]:
                code = nxt.split("/*")[0].rstrip()
                if code.endswith(";"):
                    break
                if "{" in code:
                    defs.setdefault(m.group(1), set()).add(rel)
                    break
    return defs


def walk_sections(doc):
    text, out, on = open(doc, encoding="utf-8").read().split("\n"), [], False
    for line in text:
        if line.startswith("#"):
            on = re.match(r"#+\s*Walk\b", line) is not None
        elif on:
            out.append(line)
    return "\n".join(out)


def main(argv):
    doc, top = argv[1], argv[2]
    defs, body, problems = definitions(top), walk_sections(doc), []
    if not body.strip():
        problems.append(f"{doc} has no 'Walk' section")
    named = re.findall(r"`([A-Za-z_]\w*)\(\)`(?:\s*\(([\w./-]+\.[ch])\))?", body)
    for name, path in named:
        where = defs.get(name)
        if not where:
            problems.append(f"{name}() is named by a walk but defined nowhere")
        elif path and not any(w == path or w.endswith("/" + path) for w in where):
            problems.append(f"{name}() is said to be in {path} but is in {', '.join(sorted(where))}")
    for p in problems:
        print("check_walks:", p, file=sys.stderr)
    if not problems:
        print(f"check_walks: {len(named)} functions named by the walks exist where said")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
