"""offcpu_states.py FLAT GROUPED: checks a `--group-by state` JSON tree (GROUPED) against
the same profile's ungrouped tree (FLAT), both `--format json`: the roots are states
([running], [blocked], [preempted]), together the whole total; [blocked] and [preempted]
weigh what their leaf pseudo-frames weigh in FLAT, [running] the rest; below the roots no
pseudo-frame is left (the root names the state). Exit 0 when all hold."""
import json
import sys

STATES = ("[blocked]", "[preempted]")


def leaf_pseudo(node, acc):
    kids = node.get("children", [])
    if node["name"] in STATES and not kids:
        acc[node["name"]] += node["total"]
    for c in kids:
        leaf_pseudo(c, acc)


def pseudo_below(node):
    return any(c["name"] in STATES or pseudo_below(c) for c in node.get("children", []))


flat = json.load(open(sys.argv[1]))
grouped = json.load(open(sys.argv[2]))
want = dict.fromkeys(STATES, 0.0)
for r in flat["roots"]:
    leaf_pseudo(r, want)
want["[running]"] = flat["total"] - sum(want.values())
got = {r["name"]: r["total"] for r in grouped["roots"]}
print("state roots:", {k: round(v / 1e6, 1) for k, v in got.items()}, "ms; want",
      {k: round(v / 1e6, 1) for k, v in want.items() if v}, "ms")
ok = set(got) <= set(want) and abs(grouped["total"] - flat["total"]) <= 1e-6 * flat["total"]
ok = ok and all(abs(got.get(k, 0) - v) <= 1e-6 * flat["total"] for k, v in want.items())
ok = ok and want["[blocked]"] > 0 and not any(pseudo_below(r) for r in grouped["roots"])
sys.exit(0 if ok else 1)
