#!/usr/bin/env bash
# Separate debug info from a debuginfod server: a stripped binary whose debug file is
# neither beside it nor under /usr/lib/debug resolves once DEBUGINFOD_URLS points at a
# server (python3's http.server with the buildid/HEX/debuginfo layout), and the download
# lands in DEBUGINFOD_CACHE_PATH.
source "$(dirname "$0")/lib.sh"
SYM="$CANOPY_BUILD_DIR/tests/sym"
Q="$CANOPY_BUILD_DIR/tests/sym_query"
mkdir -p "$TMP/srv" "$TMP/bin" "$TMP/cache"
cp "$SYM/inl_stripped" "$TMP/bin/"
id=$(readelf -n "$SYM/inl_stripped" | awk '/Build ID/ {print $3}')
mkdir -p "$TMP/srv/buildid/$id"
cp "$SYM/inl_stripped.debug" "$TMP/srv/buildid/$id/debuginfo"
port=$((20000 + RANDOM % 20000))
(cd "$TMP/srv" && exec python3 -m http.server "$port" --bind 127.0.0.1 >/dev/null 2>&1) &
srv=$!
trap 'rc=$?; kill $srv 2>/dev/null || true; finish_tmp $rc' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
  sleep 0.1
done
va=$(nm "$SYM/inl_pie" | awk '$3 == "work_b" {print $1}')
before=$(echo "$va" | "$Q" "$TMP/bin/inl_stripped")
# Without debug info work_b is unnamed: unresolved, or named by its FDE range's start
# (docs/cli.md "Names").
case "$before" in "??" | inl_stripped+0x*) ;; *) fail "expected no name without debug info, got $before" ;; esac
after=$(echo "$va" | DEBUGINFOD_URLS="http://127.0.0.1:$port" DEBUGINFOD_CACHE_PATH="$TMP/cache" \
  "$Q" "$TMP/bin/inl_stripped")
echo "with debuginfod: $after"
case "$after" in work_b@*inlines.c:*) ;; *) fail "expected work_b with a line, got $after" ;; esac
[ -s "$TMP/cache/$id/debuginfo" ] || fail "download not cached"
echo "ok"
