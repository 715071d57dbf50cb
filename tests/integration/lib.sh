# Shared helpers for integration tests (sourced). Binaries and data come from ctest's
# environment (tests/CMakeLists.txt).
set -euo pipefail
: "${CANOPY_BIN:?run through ctest}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# A test may skip where the kernel forbids what it needs, but never under CI=true.
skip() {
  if [ "${CI:-}" = "true" ]; then
    echo "FAIL (skip not allowed under CI=true): $*" >&2
    exit 1
  fi
  echo "SKIP: $*" >&2
  exit 77
}
