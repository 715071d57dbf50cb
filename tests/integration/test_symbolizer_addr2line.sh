#!/usr/bin/env bash
# The symbolizer against binutils addr2line -f -i on random addresses inside sized function
# symbols: libc (with libc6-dbg's debug file), the -O2 -g test workload as PIE, non-PIE and
# stripped with a .gnu_debuglink file, and a C++ program (names through c++filt).
# Outermost function >= 99.5% and inline chain >= 99% each (compare_addr2line.py).
source "$(dirname "$0")/lib.sh"
SYM="$CANOPY_BUILD_DIR/tests/sym"
Q="$CANOPY_BUILD_DIR/tests/sym_query"
CMP="$(dirname "$0")/sym/compare_addr2line.py"
[ -x "$Q" ] || fail "sym_query not built ($Q)"
command -v addr2line >/dev/null || fail "addr2line (binutils) missing"

rc=0
python3 "$CMP" --query "$Q" --binary "$SYM/inl_pie" -n 3000 --label pie || rc=1
python3 "$CMP" --query "$Q" --binary "$SYM/inl_nopie" -n 3000 --label non-pie || rc=1
python3 "$CMP" --query "$Q" --binary "$SYM/inl_stripped" --symfile "$SYM/inl_pie" -n 3000 \
  --label stripped+debuglink || rc=1
python3 "$CMP" --query "$Q" --binary "$SYM/cxx_prog" --demangle -n 3000 --label c++ || rc=1

libc=$(ldd "$SYM/inl_pie" | awk '/libc.so/ {print $3}')
id=$(readelf -n "$libc" | awk '/Build ID/ {print $3}')
dbg="/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
[ -f "$dbg" ] || fail "libc debug file $dbg missing (libc6-dbg)"
python3 "$CMP" --query "$Q" --binary "$libc" --symfile "$dbg" -n 5000 --label libc || rc=1

# The same through the worker thread must give the same answers.
nm -S --defined-only "$SYM/inl_pie" | awk '$3 ~ /^[Tt]$/ {print $1}' >"$TMP/a"
"$Q" "$SYM/inl_pie" <"$TMP/a" >"$TMP/sync"
"$Q" --worker "$SYM/inl_pie" <"$TMP/a" >"$TMP/async"
cmp -s "$TMP/sync" "$TMP/async" || fail "worker answers differ from synchronous lookups"
[ "$rc" -eq 0 ] || fail "agreement with addr2line below the bound"
echo "ok"
