#!/usr/bin/env python3
"""speedscope_check.py SCHEMA SPEEDSCOPE_JSON CANOPY_FUNCTIONS_JSON [SCALE]

Validates a speedscope file against speedscope's JSON schema (draft 7, with python3-
jsonschema), checks what the schema cannot (stack indexes in range, one weight per
sample, endValue = sum of weights), then recomputes self and total per function name from
the weighted stacks (a name counted once per stack for totals) and compares them with
`canopy open --functions --format json` for the same query."""
import json
import sys

import jsonschema


def main(schema_path, ss_path, canopy_path):
    schema = json.load(open(schema_path))
    doc = json.load(open(ss_path))
    jsonschema.Draft7Validator(schema).validate(doc)
    frames = doc["shared"]["frames"]
    self_w, total_w = {}, {}
    grand = 0.0
    for prof in doc["profiles"]:
        assert prof["type"] == "sampled", prof["type"]
        assert len(prof["samples"]) == len(prof["weights"]), "samples/weights length"
        assert abs(sum(prof["weights"]) - prof["endValue"]) < 1e-6 * max(1, prof["endValue"])
        for stack, w in zip(prof["samples"], prof["weights"]):
            assert stack, "empty stack"
            for i in stack:
                assert 0 <= i < len(frames) and i == int(i), f"frame index {i}"
            names = [frames[int(i)]["name"] for i in stack]
            self_w[names[-1]] = self_w.get(names[-1], 0) + w
            for n in set(names):
                total_w[n] = total_w.get(n, 0) + w
            grand += w
    want = json.load(open(canopy_path))
    assert abs(grand - want["total"]) <= 1e-9 * max(1, abs(want["total"])), (grand, want["total"])
    # Several funcs may share a name (e.g. "(anonymous)" in JavaScript): self weights then
    # add up by name; totals are compared for unambiguous names only.
    rows = {}
    for row in want["functions"]:
        r = rows.setdefault(row["name"], [0.0, row["total"], 0])
        r[0] += row["self"]
        r[2] += 1
    for n, (self_want, total_want, count) in rows.items():
        got = (self_w.get(n, 0), total_w.get(n, 0))
        tol = 1e-6 * max(1, abs(total_want))
        if abs(got[0] - self_want) > tol or (count == 1 and abs(got[1] - total_want) > tol):
            raise AssertionError(f"{n}: speedscope {got}, canopy {(self_want, total_want)}")
    extra = set(total_w) - {r["name"] for r in want["functions"]}
    assert not extra, f"functions only in speedscope: {extra}"
    print(f"{len(doc['profiles'])} profiles, {len(frames)} frames, total {grand:g}")


if __name__ == "__main__":
    try:
        main(*sys.argv[1:4])
    except (AssertionError, jsonschema.ValidationError) as e:
        print(f"speedscope check failed: {e}")
        sys.exit(1)
