#!/usr/bin/env python3
"""Writes a large saved canopyd session (uncompressed .canopy text, docs/canopy-format.md):
big_canopy.py OUT ID OWNER FUNCS STACKS SAMPLES [SEED]. Deep random stacks over FUNCS
functions, so queries over it cost real CPU time (the daemon's query bounds are tested
with it). The meta keys are those canopyd writes for a stopped session."""
import random
import sys


def main(argv):
    out, sid, owner = argv[1], argv[2], int(argv[3])
    nf, ns, nsamp = int(argv[4]), int(argv[5]), int(argv[6])
    rnd = random.Random(int(argv[7]) if len(argv) > 7 else 1)
    meta = [("canopy.session.id", sid), ("canopy.session.name", ""),
            ("canopy.session.kind", "attach"), ("canopy.session.state", "stopped"),
            ("canopy.session.owner", str(owner)), ("canopy.session.samples", str(nsamp)),
            ("canopy.session.started", "1700000000"), ("event", "cpu-clock"), ("freq", "999")]
    strings = ["f%d" % i for i in range(nf)] + ["big"]
    index = {s: i for i, s in enumerate(strings)}

    def sid_of(s):
        if s not in index:
            index[s] = len(strings)
            strings.append(s)
        return index[s]

    mrows = [(sid_of(k), sid_of(v)) for k, v in meta]
    w = []
    w.append("canopy-profile 1\nunit 0\nscale 1\nstrings %d\n" % len(strings))
    w.extend(s + "\n" for s in strings)
    w.append("resources 0\nfuncs %d\n" % nf)
    w.extend("%d -1 -1 0\n" % i for i in range(nf))
    w.append("frames %d\n" % nf)
    w.extend("%d -1 -1 0 1 %d\n" % (i, i) for i in range(nf))
    w.append("stacks %d\n" % ns)
    seen = set()
    rows = []
    for j in range(ns):
        while True:
            if j == 0 or rnd.random() < 0.02:
                prefix = -1
            elif rnd.random() < 0.9:
                prefix = j - 1
            else:
                prefix = rnd.randrange(j)
            frame = rnd.randrange(nf)
            if (prefix, frame) not in seen:
                break
        seen.add((prefix, frame))
        rows.append("%d %d\n" % (prefix, frame))
    w.extend(rows)
    w.append("threads 1\n1 1 %d\nprocesses 0\n" % index["big"])
    w.append("meta %d\n" % len(mrows))
    w.extend("%d %d\n" % r for r in mrows)
    w.append("renames 0\nsamples %d\n" % nsamp)
    w.extend("%d 1000000 1 0\n" % rnd.randrange(ns // 2, ns) for _ in range(nsamp))
    w.append("accumulator 0\nend\n")
    with open(out, "w") as f:
        f.writelines(w)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
