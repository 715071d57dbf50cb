#!/usr/bin/env python3
"""Runs call-tree test vectors through `canopy open INPUT ARGS --format json`.

usage: vectors.py CANOPY CASES.json [CASES.json ...]

Each case is {"input": FILE (relative to the cases file), "args": [...], "expect": {...}}.
The output must match the expected JSON in unit, total, view (and call_sites, mode,
transforms when the case gives them) and in every node's name, total, self and children
order; for the functions view, the function list in order. Extra fields are allowed;
`lib` must be absent for folded input (folded stacks carry no library). Prints one
PASS/FAIL line per case and a final "N passed, N failed" line; exits 1 on any failure.
"""
import json
import math
import os
import subprocess
import sys


def close(a, b):
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) \
            or not isinstance(b, (int, float)):
        return False
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def cmp_nodes(got, exp, where, folded, errors):
    if not isinstance(got, list):
        errors.append(f"{where}: expected a list of nodes, got {type(got).__name__}")
        return
    names_got = [g.get("name") if isinstance(g, dict) else g for g in got]
    names_exp = [e["name"] for e in exp]
    if names_got != names_exp:
        errors.append(f"{where}: children {names_got} != expected {names_exp}")
        return
    for g, e in zip(got, exp):
        here = f"{where}/{e['name']}"
        for key in ("total", "self"):
            if not close(g.get(key), e[key]):
                errors.append(f"{here}: {key} {g.get(key)!r} != expected {e[key]!r}")
        if "lib" in e and g.get("lib") != e["lib"]:
            errors.append(f"{here}: lib {g.get('lib')!r} != expected {e['lib']!r}")
        if folded and "lib" in g:
            errors.append(f"{here}: has lib {g['lib']!r} but folded input has no libraries")
        cmp_nodes(g.get("children"), e.get("children", []), here, folded, errors)


def cmp_functions(got, exp, folded, errors):
    if not isinstance(got, list):
        errors.append("functions: missing or not a list")
        return
    names_got = [g.get("name") for g in got]
    names_exp = [e["name"] for e in exp]
    if names_got != names_exp:
        errors.append(f"functions: {names_got} != expected {names_exp}")
        return
    for g, e in zip(got, exp):
        for key in ("self", "total"):
            if not close(g.get(key), e[key]):
                errors.append(f"functions/{e['name']}: {key} {g.get(key)!r} != {e[key]!r}")
        if folded and "lib" in g:
            errors.append(f"functions/{e['name']}: has lib but folded input has none")


def check(got, exp, folded):
    errors = []
    for key in ("unit", "view"):
        if got.get(key) != exp[key]:
            errors.append(f"{key} {got.get(key)!r} != expected {exp[key]!r}")
    if not close(got.get("total"), exp["total"]):
        errors.append(f"total {got.get('total')!r} != expected {exp['total']!r}")
    for key in ("call_sites", "mode", "transforms"):
        if key in exp and got.get(key) != exp[key]:
            errors.append(f"{key} {got.get(key)!r} != expected {exp[key]!r}")
    if exp["view"] == "functions":
        cmp_functions(got.get("functions"), exp["functions"], folded, errors)
    else:
        cmp_nodes(got.get("roots"), exp["roots"], "roots", folded, errors)
    return errors


def run_case(canopy, base, case):
    inp = os.path.join(base, case["input"])
    cmd = [canopy, "open", inp] + case["args"] + ["--format", "json"]
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    if p.returncode != 0:
        return [f"exit {p.returncode}: {p.stderr.decode(errors='replace').strip()}"]
    try:
        got = json.loads(p.stdout)
    except ValueError as e:
        return [f"output is not JSON ({e}): {p.stdout[:200]!r}"]
    return check(got, case["expect"], inp.endswith(".folded"))


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    canopy = argv[1]
    passed = failed = 0
    for path in argv[2:]:
        base = os.path.dirname(os.path.abspath(path))
        with open(path) as f:
            cases = json.load(f)
        for i, case in enumerate(cases):
            label = f"{os.path.basename(base)}#{i} {case['input']} {' '.join(case['args'])}"
            try:
                errors = run_case(canopy, base, case)
            except subprocess.TimeoutExpired:
                errors = ["timed out"]
            if errors:
                failed += 1
                print(f"FAIL {label}")
                for e in errors[:5]:
                    print(f"     {e}")
            else:
                passed += 1
                print(f"PASS {label}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
