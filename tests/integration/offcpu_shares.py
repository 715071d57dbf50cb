#!/usr/bin/env python3
"""offcpu_shares.py TREE.json THREAD C R S [TOL]: checks the waits workload's shares.
   offcpu_shares.py --expect OUT MODE THREAD: the shares C R S that the workload's own
   measurement (its last output line OUT) gives for MODE (wall, off-cpu) and THREAD.

TREE.json is a `--group-by thread --format json` tree of tests/workloads/waits.c; THREAD
is "main" (the root not named writer) or "writer". Each path is charged to the outermost
frame that names an activity: compute (C), a read of the pipe (R: wait_answer,
wait_request, read), a sleep (S: nap, delay, nanosleep); the wait for --wait-signal's
signal (sigwait) is left out. Prints the shares of the
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
    if "sigwait" in name or "sigtimedwait" in name:
        return "W"  # --wait-signal's wait for the rounds to start: not a round's
    return None


def expect(out, mode, who):
    f = open(out).read().split()
    v = {f[i]: float(f[i + 1]) for i in range(1, len(f) - 1, 2)}
    if who == "writer":
        parts = (0, v["writer_read"], v["writer_sleep"])
    elif mode == "wall":
        parts = (v["main_compute"], v["main_read"], v["main_sleep"])
    else:  # off-cpu without [preempted]: main blocks only in read and sleep
        parts = (0, v["main_read"], v["main_sleep"])
    print(" ".join(f"{100.0 * p / sum(parts):.1f}" for p in parts))
    return 0


def main():
    if sys.argv[1] == "--expect":
        return expect(*sys.argv[2:5])
    d = json.load(open(sys.argv[1]))
    who = sys.argv[2]
    want = dict(zip("CRS", map(float, sys.argv[3:6])))
    tol = float(sys.argv[6]) if len(sys.argv) > 6 else 5.0
    roots = [r for r in d["roots"] if r["name"].startswith("writer") == (who == "writer")]
    if len(roots) != 1:
        print("threads:", [r["name"] for r in d["roots"]])
        return 1
    root = roots[0]
    sums = {"C": 0.0, "R": 0.0, "S": 0.0, "W": 0.0}

    def walk(n):
        k = kind(n["name"])
        if k:
            sums[k] += n["total"]
            return
        for c in n.get("children", []):
            walk(c)

    walk(root)
    # An attach sees the wait for the start signal too (a thread waiting since before the
    # session: sampler/waiting.c); the shares are of the rounds.
    total = root["total"] - sums.pop("W")
    got = {k: 100.0 * v / total if total else 0.0 for k, v in sums.items()}
    print(f"{sys.argv[1]} {who}: unit {d['unit']} total {total:.0f}",
          {k: round(v, 1) for k, v in got.items()}, "want", want,
          f"(start-signal wait left out: {root['total'] - total:.0f})")
    return 1 if any(abs(got[k] - want[k]) > tol for k in "CRS") else 0


sys.exit(main())
