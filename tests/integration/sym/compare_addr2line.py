#!/usr/bin/env python3
"""Compares sym_query with binutils addr2line on random addresses inside sized function
symbols of one binary. Exit 1 when the outermost function agrees on fewer than 99.5% of
addresses (aliases at the same address count as equal) or the inline chain on fewer
than 99%. Prints the agreement and every disagreement (up to --show).

usage: compare_addr2line.py --query SYM_QUERY --binary FILE [--symfile FILE] [-n N]
                            [--seed S] [--demangle] [--show K] [--label NAME]
"""
import argparse
import random
import re
import subprocess
import sys


def run(cmd, data):
    r = subprocess.run(cmd, input=data, capture_output=True, text=True, check=True)
    return r.stdout


CLONE = re.compile(r"(\s*\[clone [^\]]*\]|\.(cold|constprop\.\d+|isra\.\d+|part\.\d+|lto_priv\.\d+|localalias|\d+))+$")


def strip_groups(s, open_c, close_c):
    """Removes every top-level open_c...close_c group."""
    out, depth = [], 0
    for ch in s:
        if ch == open_c:
            depth += 1
        elif ch == close_c and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def base_name(n):
    """The function's identity without the spellings that differ between DWARF names,
    symbol names and demanglers: clone suffixes (.cold, .constprop.N, [clone …]),
    template arguments, parameters, return type and qualifiers: the last component of
    the qualified name. """
    n = CLONE.sub("", n)
    if n.startswith("operator") or "::operator" in n:
        return n.split("::")[-1].split("(")[0].strip()
    n = strip_groups(strip_groups(n, "(", ")"), "<", ">")
    n = n.split(" ")[-1] if " " in n.strip() else n
    return n.split("::")[-1].strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--query", required=True)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--symfile")
    ap.add_argument("-n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--demangle", action="store_true")
    ap.add_argument("--show", type=int, default=15)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    symfile = a.symfile or a.binary

    # Sized function symbols (binutils nm: T/t/W/w/i), and name -> addresses for aliases.
    funcs = []
    addr_of = {}
    for line in run(["nm", "-S", "--defined-only", symfile], "").splitlines():
        f = line.split()
        if len(f) != 4 or f[2] not in "TtWwi":
            continue
        start, size, name = int(f[0], 16), int(f[1], 16), f[3].split("@")[0]
        addr_of.setdefault(name, set()).add(start)
        if size > 0:
            funcs.append((start, size))
    if not funcs:
        print("no sized function symbols in", symfile)
        return 1
    rng = random.Random(a.seed)
    addrs = []
    for _ in range(a.n):
        start, size = rng.choice(funcs)
        addrs.append(start + rng.randrange(size))
    text = "".join("%x\n" % x for x in addrs)

    # addr2line: -a prints each address, then (function, file:line) pairs innermost first.
    out = run(["addr2line", "-f", "-i", "-a", "-e", a.binary], text).splitlines()
    ref = []
    i = 0
    while i < len(out):
        if out[i].startswith("0x"):
            ref.append([])
            i += 1
            continue
        ref[-1].append(out[i])
        i += 2
    ref = [list(reversed(c)) for c in ref]  # outer first
    if len(ref) != len(addrs):
        print("addr2line output not understood")
        return 1

    if a.demangle:
        names = sorted({n for c in ref for n in c} | set(addr_of))
        dm = run(["c++filt"], "\n".join(names) + "\n").splitlines()
        table = dict(zip(names, dm))
        ref = [[table.get(n, n) for n in c] for c in ref]
        demangled = {}
        for n, s in addr_of.items():
            demangled.setdefault(table.get(n, n), set()).update(s)
        addr_of = demangled

    got = []
    for line in run([a.query, a.binary], text).splitlines():
        got.append([] if line == "??" else [e.rsplit("@", 1)[0] for e in line.split("|")])
    if len(got) != len(addrs):
        print("sym_query output not understood")
        return 1

    def same_func(x, y):
        if x == y:
            return True
        sx, sy = addr_of.get(x), addr_of.get(y)
        if sx and sy and sx & sy:
            return True  # aliases at one address
        return base_name(x) == base_name(y)

    outer_ok = chain_ok = outer_exact = 0
    bad = []
    for addr, r, g in zip(addrs, ref, got):
        r_outer = r[0] if r else "??"
        g_outer = g[0] if g else "??"
        o = same_func(r_outer, g_outer)
        c = o and len(r) == len(g) and all(same_func(x, y) for x, y in zip(r[1:], g[1:]))
        outer_exact += r_outer == g_outer
        outer_ok += o
        chain_ok += c
        if not c:
            bad.append((addr, r, g, o))
    n = len(addrs)
    po, pc = 100.0 * outer_ok / n, 100.0 * chain_ok / n
    print("%s: %d addresses: outermost function %.2f%% (%.2f%% byte-identical), "
          "inline chain %.2f%%" % (a.label or a.binary, n, po, 100.0 * outer_exact / n, pc))
    for addr, r, g, o in bad[: a.show]:
        print("  0x%x %s: addr2line %s | canopy %s" %
              (addr, "chain" if o else "OUTER", " > ".join(r), " > ".join(g)))
    if len(bad) > a.show:
        print("  … %d more" % (len(bad) - a.show))
    return 0 if po >= 99.5 and pc >= 99.0 else 1


if __name__ == "__main__":
    sys.exit(main())
