#!/usr/bin/env python3
"""firefox_check.py FIREFOX_JSON TREE_JSON FUNCTIONS_JSON GROUPED_JSON|- [TID TREE FUNCTIONS]...

Checks a `--format firefox` file in two ways.

1. Its structure against the Firefox Profiler's processed profile format at the version
   canopy writes (61; src/types/profile.ts of firefox-devtools/profiler at that version):
   the tables and their columns, each column as long as its table, every index in range
   (string, stack, frame, func, resource, native symbol, source, lib, category,
   subcategory), each stack's prefix before it, inline frames (depth k > 0) directly on
   a frame of depth k - 1 with the same address and native symbol, a native symbol in the
   lib its frame's resource names, the weight types, time-ordered samples per thread.

2. Its call trees, rebuilt from the samples as the profiler builds them (a sample's stack,
   prefix by prefix, gives its functions root first; a function is (name, resource name)),
   against canopy's own JSON for the same query: the whole tree (TREE_JSON, `--format
   json`: every path's total and self, the total), the function list (FUNCTIONS_JSON,
   `--functions`: self, and total counting a function once per sample), each thread's tree
   and name (GROUPED_JSON, `--group-by thread`: the subtree under the root "NAME [TID]", or
   "[unknown]" for samples of no thread; "-" to skip, as for transforms that move or drop
   the group roots) and the given threads' trees and function lists (`--tid TID`, then
   with `--functions`). Weights of type tracing-ms are compared in ms (canopy's ns, us or
   ms converted); sample and event counts as they are.
"""
import json
import sys

VERSION = 61
COLORS = {"transparent", "purple", "green", "orange", "yellow", "lightblue", "blue", "brown",
          "magenta", "red", "lightred", "darkgrey", "grey"}
TABLES = {
    "stackTable": ["frame", "prefix"],
    "frameTable": ["address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
                   "innerWindowID", "line", "column"],
    "funcTable": ["name", "isJS", "relevantForJS", "resource", "source", "lineNumber",
                  "columnNumber"],
    "resourceTable": ["lib", "name", "host", "type"],
    "nativeSymbols": ["libIndex", "address", "name", "functionSize"],
    "sources": ["id", "filename", "startLine", "startColumn", "sourceMapURL"],
}
THREAD_KEYS = {"processType", "processStartupTime", "processShutdownTime", "registerTime",
               "unregisterTime", "pausedRanges", "name", "isMainThread", "pid", "tid",
               "samples", "markers"}
MARKER_COLUMNS = ["data", "name", "startTime", "endTime", "phase", "category"]
LIB_KEYS = {"arch", "name", "path", "debugName", "debugPath", "breakpadId", "codeId"}
UNIT_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0}


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def index(v, n, what, nullable=False, minus_one=False):
    if v is None and nullable:
        return
    if minus_one and v == -1:
        return
    assert is_int(v) and 0 <= v < n, f"{what}: {v!r} not an index below {n}"


def check_table(shared, name):
    t = shared[name]
    assert set(t) == set(TABLES[name]) | {"length"}, f"{name} columns: {sorted(t)}"
    n = t["length"]
    assert is_int(n) and n >= 0, f"{name}.length {n!r}"
    for col in TABLES[name]:
        assert isinstance(t[col], list) and len(t[col]) == n, f"{name}.{col}: length != {n}"
    return t, n


def check_meta(meta):
    assert meta["preprocessedProfileVersion"] == VERSION, meta["preprocessedProfileVersion"]
    assert is_int(meta["version"]), meta["version"]
    assert meta["interval"] > 0 and meta["startTime"] >= 0, (meta["interval"], meta["startTime"])
    assert isinstance(meta["product"], str) and meta["stackwalk"] in (0, 1)
    assert is_int(meta["processType"]) and meta["markerSchema"] == []
    cats = meta["categories"]
    assert cats and any(c["color"] == "grey" for c in cats), "no grey (default) category"
    for c in cats:
        assert set(c) == {"name", "color", "subcategories"}, c
        assert c["color"] in COLORS, c
        assert c["subcategories"] and c["subcategories"][0] == "Other", c
    return cats


def breakpad_of(code_id):
    b = bytes.fromhex(code_id)[:16].ljust(16, b"\0")
    guid = b[3::-1] + b[5:3:-1] + b[7:5:-1] + b[8:]
    return guid.hex().upper() + "0"


def check_libs(libs):
    for lib in libs:
        assert set(lib) == LIB_KEYS, sorted(lib)
        assert all(isinstance(lib[k], str) for k in LIB_KEYS - {"codeId"}), lib
        if lib["codeId"] is not None:
            assert lib["breakpadId"] == breakpad_of(lib["codeId"]), lib
        else:
            assert lib["breakpadId"] == "", lib


def check_shared(doc, cats):
    shared = doc["shared"]
    assert set(shared) == set(TABLES) | {"stringArray"}, sorted(shared)
    strs = shared["stringArray"]
    assert all(isinstance(s, str) for s in strs), "stringArray holds a non-string"
    n_str, n_lib = len(strs), len(doc["libs"])
    st, n_st = check_table(shared, "stackTable")
    fr, n_fr = check_table(shared, "frameTable")
    fn, n_fn = check_table(shared, "funcTable")
    rs, n_rs = check_table(shared, "resourceTable")
    ns, n_ns = check_table(shared, "nativeSymbols")
    so, n_so = check_table(shared, "sources")
    for i in range(n_so):
        index(so["filename"][i], n_str, "sources.filename")
        assert so["startLine"][i] == 1 and so["startColumn"][i] == 1
    for i in range(n_rs):
        index(rs["lib"][i], n_lib, "resourceTable.lib", nullable=True)
        index(rs["name"][i], n_str, "resourceTable.name")
        assert rs["type"][i] in range(6), rs["type"][i]
    for i in range(n_ns):
        index(ns["libIndex"][i], n_lib, "nativeSymbols.libIndex")
        index(ns["name"][i], n_str, "nativeSymbols.name")
        assert is_int(ns["address"][i]) and ns["address"][i] >= 0
    for i in range(n_fn):
        index(fn["name"][i], n_str, "funcTable.name")
        index(fn["resource"][i], n_rs, "funcTable.resource", minus_one=True)
        index(fn["source"][i], n_so, "funcTable.source", nullable=True)
        assert fn["lineNumber"][i] is None or fn["lineNumber"][i] > 0
        assert isinstance(fn["isJS"][i], bool) and isinstance(fn["relevantForJS"][i], bool)
    for i in range(n_fr):
        index(fr["func"][i], n_fn, "frameTable.func")
        index(fr["nativeSymbol"][i], n_ns, "frameTable.nativeSymbol", nullable=True)
        index(fr["category"][i], len(cats), "frameTable.category")
        index(fr["subcategory"][i], len(cats[fr["category"][i]]["subcategories"]),
              "frameTable.subcategory")
        assert is_int(fr["address"][i]) and fr["address"][i] >= -1, fr["address"][i]
        assert is_int(fr["inlineDepth"][i]) and fr["inlineDepth"][i] >= 0
        assert fr["line"][i] is None or fr["line"][i] > 0
        sym = fr["nativeSymbol"][i]
        if sym is not None:  # the lib of frame -> func -> resource (what the profiler upgrades to)
            res = fn["resource"][fr["func"][i]]
            assert res >= 0 and rs["lib"][res] == ns["libIndex"][sym], f"frame {i}: lib"
            assert fr["address"][i] >= ns["address"][sym], f"frame {i} below its symbol"
    for i in range(n_st):
        index(st["frame"][i], n_fr, "stackTable.frame")
        p = st["prefix"][i]
        assert p is None or (is_int(p) and 0 <= p < i), f"stack {i}: prefix {p} not before it"
        f = st["frame"][i]
        d = fr["inlineDepth"][f]
        if d > 0:  # an inlined frame sits on the frame it was inlined into
            assert p is not None, f"stack {i}: inlined frame at a root"
            g = st["frame"][p]
            assert fr["inlineDepth"][g] == d - 1, f"stack {i}: inline depth {d} on {fr['inlineDepth'][g]}"
            assert fr["address"][g] == fr["address"][f], f"stack {i}: inline address"
            assert fr["nativeSymbol"][g] == fr["nativeSymbol"][f], f"stack {i}: inline symbol"
    return shared


def check_threads(doc, n_stacks):
    for t in doc["threads"]:
        assert THREAD_KEYS <= set(t), sorted(THREAD_KEYS - set(t))
        assert isinstance(t["name"], str) and isinstance(t["pid"], str)
        assert is_int(t["tid"]) or isinstance(t["tid"], str)
        assert isinstance(t["isMainThread"], bool) and t["pausedRanges"] == []
        m = t["markers"]
        assert m["length"] == 0 and all(m[c] == [] for c in MARKER_COLUMNS), "markers"
        s = t["samples"]
        n = s["length"]
        assert set(s) == {"stack", "time", "weight", "weightType", "length"}, sorted(s)
        assert s["weightType"] in ("samples", "tracing-ms", "bytes"), s["weightType"]
        assert len(s["stack"]) == len(s["time"]) == n, "samples: column lengths"
        assert s["weight"] is None or len(s["weight"]) == n, "samples.weight length"
        for i in range(n):
            index(s["stack"][i], n_stacks, "samples.stack", nullable=True)
            assert i == 0 or s["time"][i - 1] <= s["time"][i], f"time goes back at sample {i}"


# ---- call trees ---------------------------------------------------------------------------


def stack_paths(shared):
    """Per stack, its functions root first, as (name, resource name or None)."""
    strs = shared["stringArray"]
    st, fr, fn, rs = (shared[k] for k in ("stackTable", "frameTable", "funcTable",
                                          "resourceTable"))
    paths = []
    for i in range(st["length"]):
        f = fr["func"][st["frame"][i]]
        res = fn["resource"][f]
        key = (strs[fn["name"][f]], strs[rs["name"][res]] if res >= 0 else None)
        p = st["prefix"][i]
        paths.append((paths[p] if p is not None else ()) + (key,))
    return paths


class Tree:
    """Paths -> [total, self] and functions -> [self, total once per sample]."""

    def __init__(self):
        self.nodes, self.funcs, self.total = {}, {}, 0.0

    def add(self, path, w):
        self.total += w
        for k in range(1, len(path) + 1):
            self.nodes.setdefault(path[:k], [0.0, 0.0])[0] += w
        self.nodes[path][1] += w
        self.funcs.setdefault(path[-1], [0.0, 0.0])[0] += w
        for f in set(path):
            self.funcs.setdefault(f, [0.0, 0.0])[1] += w


def thread_label(t):
    if t["pid"] == "0" and t["tid"] == 0 and t["name"] in ("unknown thread", "all threads"):
        return "[unknown]"  # canopy's group for samples of no thread
    return f"{t['name']} [{t['tid']}]"


def rebuild(doc, shared):
    paths = stack_paths(shared)
    whole, per_label, per_tid, wtypes = Tree(), {}, {}, set()
    for t in doc["threads"]:
        s = t["samples"]
        wtypes.add(s["weightType"])
        trees = (whole, per_label.setdefault(thread_label(t), Tree()),
                 per_tid.setdefault(str(t["tid"]), Tree()))
        for i in range(s["length"]):
            w = s["weight"][i] if s["weight"] is not None else 1
            if s["stack"][i] is None or w == 0:
                continue
            for tree in trees:
                tree.add(paths[s["stack"][i]], w)
    assert len(wtypes) <= 1, f"threads disagree on the weight type: {wtypes}"
    return whole, per_label, per_tid, wtypes.pop() if wtypes else None


def close(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b)) + 1e-9


def canopy_nodes(roots, factor, prefix=()):
    """Paths -> [total, self] of a canopy JSON tree (iterative: trees are deep)."""
    out, todo = {}, [(prefix, n) for n in roots]
    while todo:
        pre, n = todo.pop()
        path = pre + ((n["name"], n.get("lib")),)
        v = out.setdefault(path, [0.0, 0.0])
        v[0] += n["total"] * factor
        v[1] += n["self"] * factor
        todo.extend((path, c) for c in n.get("children", []))
    return out


def compare_tree(what, got, want_nodes, want_total):
    assert close(got.total, want_total), f"{what}: total {got.total} != canopy {want_total}"
    shown = {p: v for p, v in got.nodes.items() if v[0] != 0}
    missing = set(want_nodes) - set(shown)
    extra = set(shown) - set(want_nodes)
    assert not missing and not extra, f"{what}: paths only in canopy {sorted(missing)[:3]}, " \
                                      f"only in the file {sorted(extra)[:3]}"
    for p, (tot, slf) in want_nodes.items():
        g = shown[p]
        assert close(g[0], tot) and close(g[1], slf), f"{what}: {p}: file {g}, canopy {(tot, slf)}"


def compare_functions(what, got, want, factor):
    count = {}
    for r in want["functions"]:
        k = (r["name"], r.get("lib"))
        count[k] = count.get(k, 0) + 1
    for r in want["functions"]:
        k = (r["name"], r.get("lib"))
        if count[k] > 1:
            continue  # funcs told apart by source file only: the file keys them together
        g = got.funcs.get(k, [0.0, 0.0])
        assert close(g[0], r["self"] * factor) and close(g[1], r["total"] * factor), \
            f"{what}: {k}: file self/total {g}, canopy {(r['self'] * factor, r['total'] * factor)}"
    extra = {k for k, v in got.funcs.items() if v[1] != 0} - set(count)
    assert not extra, f"{what}: functions only in the file: {sorted(extra)[:5]}"


def main(ff_path, tree_path, funcs_path, grouped_path, *per_tid_files):
    doc = json.load(open(ff_path))
    assert set(doc) == {"meta", "libs", "threads", "shared"}, sorted(doc)
    cats = check_meta(doc["meta"])
    check_libs(doc["libs"])
    shared = check_shared(doc, cats)
    check_threads(doc, shared["stackTable"]["length"])
    whole, per_label, per_tid, wtype = rebuild(doc, shared)

    tree = json.load(open(tree_path))
    unit = tree["unit"]
    factor = UNIT_TO_MS.get(unit, 1.0)
    want_type = "tracing-ms" if unit in UNIT_TO_MS else "samples"
    assert wtype in (None, want_type), f"weightType {wtype} for canopy's unit {unit}"
    compare_tree("whole tree", whole, canopy_nodes(tree["roots"], factor), tree["total"] * factor)
    compare_functions("functions", whole, json.load(open(funcs_path)), factor)
    n_threads = 0
    if grouped_path != "-":
        grouped = json.load(open(grouped_path))
        labels = {r["name"] for r in grouped["roots"]}
        assert labels == set(per_label), f"threads: canopy {sorted(labels)}, file {sorted(per_label)}"
        for r in grouped["roots"]:
            nodes = canopy_nodes(r.get("children", []), factor)
            compare_tree(f"thread {r['name']}", per_label[r["name"]], nodes, r["total"] * factor)
            n_threads += 1
    for k in range(0, len(per_tid_files) - 2, 3):
        tid, tree_t, funcs_t = per_tid_files[k:k + 3]
        want = json.load(open(tree_t))
        compare_tree(f"tid {tid}", per_tid[tid], canopy_nodes(want["roots"], factor),
                     want["total"] * factor)
        compare_functions(f"functions of tid {tid}", per_tid[tid], json.load(open(funcs_t)), factor)
        n_threads += 1
    print(f"{len(doc['threads'])} threads ({n_threads} trees compared), "
          f"{shared['stackTable']['length']} stacks, {shared['frameTable']['length']} frames, "
          f"{len(doc['libs'])} libs, total {whole.total:g} {wtype}")


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except (AssertionError, KeyError, TypeError) as e:
        print(f"firefox check failed: {type(e).__name__}: {e}")
        sys.exit(1)
