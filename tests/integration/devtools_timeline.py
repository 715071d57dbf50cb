#!/usr/bin/env python3
"""Chrome DevTools' estimated calls for a .cpuprofile, as an oracle for `canopy timeline`.

An independent reading of DevTools' CPUProfileDataModel (samples sorted by time, then
fixMissingSamples) and SamplesIntegrator.buildProfileCalls with no trace events
(docs/calltree.md §5.2 and §5.5): the first sample starts a "fake invocation" that no
event ever ends, so every sample is processed; a GC sample uses the stack of the last
non-GC sample; (root), (program), (idle) and GC frames never become calls; frames are
equal when (scriptId, functionName, lineNumber) are; calls still open at the end keep the
duration the last sample gave them.

Usage: devtools_timeline.py FILE.cpuprofile  ->  JSON list of
{"name", "url", "line", "depth", "start", "dur"} (µs from the profile's startTime), in
the order DevTools creates the calls.
"""
import json
import sys


def main(path):
    prof = json.load(open(path))
    nodes = {n["id"]: n for n in prof["nodes"]}
    parent = {}
    for n in prof["nodes"]:
        for c in n.get("children", []):
            parent[c] = n["id"]
        if "parent" in n:
            parent[n["id"]] = n["parent"]
    root = prof["nodes"][0]["id"]

    def name(i):
        return nodes[i]["callFrame"]["functionName"]

    def meta(label):
        for c in nodes[root].get("children", []):
            if name(c) == label:
                return c
        return None

    program, idle, gc = meta("(program)"), meta("(idle)"), meta("(garbage collector)")

    # timestamps: startTime + running sum of timeDeltas; samples sorted stably by time.
    t, ts = prof["startTime"], []
    for d in prof["timeDeltas"]:
        t += d
        ts.append(t)
    order = sorted(range(len(ts)), key=lambda k: ts[k])
    samples = [prof["samples"][k] for k in order]
    ts = [ts[k] for k in order]

    # fixMissingSamples (§5.2 step 6)
    def bottom(i):
        while parent.get(i) is not None and parent[i] != root:
            i = parent[i]
        return i

    def system(i):
        return i in (program, gc, idle)

    if program is not None and len(samples) >= 3:
        prev, cur = samples[0], samples[1]
        for k in range(1, len(samples) - 1):
            nxt = samples[k + 1]
            if cur == program and not system(prev) and not system(nxt) and bottom(prev) == bottom(nxt):
                samples[k] = prev
            prev, cur = cur, nxt

    # callsFromProfileSamples: a GC sample remembers the last non-GC node.
    node_for_gc, prev_node = {}, None
    for k, n in enumerate(samples):
        if n == gc and prev_node is not None:
            node_for_gc[k] = prev_node
            continue
        prev_node = n

    def chain(k):
        n = samples[k]
        top = []
        if n == gc:
            n = node_for_gc.get(k)
            if n is None:
                return []
            top = [gc]
        out = []
        while n is not None and n != root:
            out.append(n)
            n = parent.get(n)
        return out[::-1] + top

    def key(n):
        cf = nodes[n]["callFrame"]
        return (cf.get("scriptId"), cf["functionName"], cf.get("lineNumber"))

    calls, stack = [], []  # stack: indices into calls

    def truncate(depth, time):
        for c in stack:
            calls[c]["dur"] = max(time - calls[c]["start"], 0)
        del stack[depth:]

    for k in range(len(samples)):
        time = ts[k] - prof["startTime"]
        frames = chain(k)
        i = 0
        while i < min(len(frames), len(stack)):
            c = calls[stack[i]]
            if key(frames[i]) != c["key"]:
                break
            c["dur"] = max(c["dur"], time - c["start"])
            i += 1
        truncate(i, time)
        for n in frames[i:]:
            if n in (program, idle, gc):
                continue
            cf = nodes[n]["callFrame"]
            stack.append(len(calls))
            calls.append({"name": cf["functionName"] or "(anonymous)", "url": cf.get("url", ""),
                          "line": cf.get("lineNumber", -1), "depth": len(stack) - 1,
                          "start": time, "dur": 0, "key": key(n)})
    for c in calls:
        del c["key"]
    json.dump(calls, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
