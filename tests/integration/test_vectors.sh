#!/usr/bin/env bash
# Call-tree test vectors (docs/calltree.md §7 and our own edge cases, tests/data/vectors*/):
# `canopy open INPUT ARGS --format json` must give the expected trees.
source "$(dirname "$0")/lib.sh"
python3 "$(dirname "$0")/vectors.py" "$CANOPY_BIN" \
  "$CANOPY_TEST_DATA/vectors/cases.json" \
  "$CANOPY_TEST_DATA/vectors-extra/cases.json"
