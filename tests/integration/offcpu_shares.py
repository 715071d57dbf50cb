#!/usr/bin/env python3
"""offcpu_shares.py TREE.json THREAD C R S [TOL]: checks the waits workload's shares.

TREE.json is a `--group-by thread --format json` tree of tests/workloads/waits.c; THREAD
is "main" (the root not named writer) or "writer". Each path is charged to the outermost
frame that names an activity: compute (C), a read of the pipe (R: wait_answer,
wait_request, read), a sleep (S: nap, delay, nanosleep). Prints the shares of the
thread's total and exits 1 when one is more than TOL (default 5) points off C/R/S."""
import json
import re
import sys


def kind(name):
    if name == "compute":
        return "C"
    if name in ("wait_answer", "wait_request") or re.search(r"(^|_)read$", name):
        return "R"
    if name in ("nap", "delay") or "nanosleep" in name:
        return "S"
    return None


def main():
    d = json.load(open(sys.argv[1]))
    who = sys.argv[2]
    want = dict(zip("CRS", map(float, sys.argv[3:6])))
    tol = float(sys.argv[6]) if len(sys.argv) > 6 else 5.0
    roots = [r for r in d["roots"] if r["name"].startswith("writer") == (who == "writer")]
    if len(roots) != 1:
        print("threads:", [r["name"] for r in d["roots"]])
        return 1
    root = roots[0]
    sums = {"C": 0.0, "R": 0.0, "S": 0.0}

    def walk(n):
        k = kind(n["name"])
        if k:
            sums[k] += n["total"]
            return
        for c in n.get("children", []):
            walk(c)

    walk(root)
    total = root["total"]
    got = {k: 100.0 * v / total if total else 0.0 for k, v in sums.items()}
    print(f"{sys.argv[1]} {who}: unit {d['unit']} total {total:.0f}",
          {k: round(v, 1) for k, v in got.items()}, "want", want)
    return 1 if any(abs(got[k] - want[k]) > tol for k in "CRS") else 0


sys.exit(main())
