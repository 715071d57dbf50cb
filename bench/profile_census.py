#!/usr/bin/env python3
"""What a profile's rows are (issue 22): reads .canopy files (docs/canopy-format.md) and
follows every id. For each file: the tables' sizes; the stack rows reached from samples,
timeline stacks and accumulator rows (through their prefixes), leaves and interior-only
rows; the rows reached only from accumulator rows of threads with no raw sample left
(exited, or idle for the retention); the accumulator's rows of weight 1; the funcs a
frame uses (the rest are symbolized frames' placeholders); and how many rows would stay
if every interior frame of every stack were replaced by one frame per (resource, func
chain, symbol func) — what trees, timelines and `lines` cannot tell apart.

    bench/profile_census.py SESSION.canopy...   (e.g. `canopy save busy -o x.canopy`)
"""
import collections
import gzip
import sys


def load(path):
    raw = open(path, "rb").read()
    data = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).split(b"\n")
    tables, i = {}, 1
    while i < len(data):
        head = data[i].split(b" ")
        i += 1
        if head[0] in (b"end", b""):
            break
        if head[0] in (b"unit", b"scale"):
            continue
        n = int(head[1])
        rows = data[i : i + n]
        i += n
        key = head[0].decode()
        tables[key] = rows if key == "strings" else [r.split(b" ") for r in rows]
    return tables


def census(path):
    t = load(path)
    stacks = [(int(r[0]), int(r[1])) for r in t["stacks"]]
    frames, funcs, names = t["frames"], t["funcs"], t["strings"]
    samples, acc = t["samples"], t["accumulator"]

    def reach(leaves):
        seen = bytearray(len(stacks))
        for s in leaves:
            while s >= 0 and not seen[s]:
                seen[s] = 1
                s = stacks[s][0]
        return seen

    raw_leaves, raw_threads = set(), set()
    for r in samples:
        raw_threads.add(int(r[3]))
        for v in ([int(r[0])] + ([int(r[4])] if len(r) > 4 else [])):
            if v >= 0:
                raw_leaves.add(v)
    acc_leaves = {int(r[0]) for r in acc}
    leaves = raw_leaves | acc_leaves
    reached = reach(leaves)
    n_reached = sum(reached)
    live_threads = reach(raw_leaves | {int(r[0]) for r in acc if int(r[1]) in raw_threads})
    gone = {int(r[1]) for r in acc} - raw_threads
    print(f"{path}: strings {len(names)}, funcs {len(funcs)}, frames {len(frames)}, "
          f"stacks {len(stacks)}, threads {len(t['threads'])}, samples {len(samples)}, "
          f"accumulator {len(acc)}, renames {len(t['renames'])}")
    print(f"  stacks reached {n_reached} ({100 * n_reached / max(len(stacks), 1):.1f} %), "
          f"leaves {len(leaves)}, interior-only {n_reached - len(leaves)}")
    print(f"  reached only through accumulator rows of the {len(gone)} threads with no raw "
          f"sample: {n_reached - sum(live_threads)}")
    weights = collections.Counter(float(r[2]) == 1.0 for r in acc)
    print(f"  accumulator rows of weight 1: {weights[True]} of {len(acc)}; "
          f"distinct stacks {len(acc_leaves)}")

    used = bytearray(len(funcs))
    keys = []
    for r in frames:
        depth = int(r[4])
        chain = tuple(int(x) for x in r[5 : 5 + depth])
        sym = int(r[5 + depth]) if len(r) > 5 + depth else -1
        for f in chain + ((int(r[0]),) if int(r[0]) >= 0 else ()) + ((sym,) if sym >= 0 else ()):
            used[f] = 1
        placeholder = int(r[0]) < 0 and depth == 1 and b"+0x" in names[int(funcs[chain[0]][0])]
        keys.append(("frame", len(keys)) if placeholder else (int(r[1]), chain, sym))
    print(f"  funcs used by a frame {sum(used)} of {len(funcs)}; frames still placeholders "
          f"{sum(1 for k in keys if k[0] == 'frame')}")

    first = {}
    canon = [first.setdefault(k, i) for i, k in enumerate(keys)]
    rows, memo = {}, {}

    def interior(s):
        path = []
        while s >= 0 and s not in memo:
            path.append(s)
            s = stacks[s][0]
        cur = memo.get(s, -1) if s >= 0 else -1
        for x in reversed(path):
            cur = rows.setdefault((cur, canon[stacks[x][1]]), len(rows))
            memo[x] = cur
        return cur

    for leaf in leaves:
        pre = stacks[leaf][0]
        rows.setdefault((interior(pre) if pre >= 0 else -1, stacks[leaf][1]), len(rows))
    print(f"  rows with interior frames by function (leaf frames exact): {len(rows)}")


for p in sys.argv[1:]:
    census(p)
