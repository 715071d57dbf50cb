#!/usr/bin/env bash
# A binary deleted after its process started is still symbolized, through
# /proc/PID/map_files (what the daemon hands the symbolizer for deleted mappings).
source "$(dirname "$0")/lib.sh"
SYM="$CANOPY_BUILD_DIR/tests/sym"
Q="$CANOPY_BUILD_DIR/tests/sym_query"
cp "$SYM/inl_pie" "$TMP/victim"
"$TMP/victim" 30 >/dev/null &
pid=$!
trap 'rc=$?; kill $pid 2>/dev/null || true; finish_tmp $rc' EXIT
sleep 0.3
want_va=$(nm "$TMP/victim" | awk '$3 == "work_b" {print $1}')
[ -n "$want_va" ] || fail "work_b not in the test binary"
rm "$TMP/victim"
# The executable's first mapping (file offset 0), as seen in /proc/PID/maps.
line=$(grep -m1 "victim (deleted)" "/proc/$pid/maps") || fail "no deleted mapping in maps"
range=${line%% *}
mf="/proc/$pid/map_files/$range"
[ -e "$mf" ] || fail "$mf not readable"
# work_b's file offset: vaddr -> offset through the program headers of the deleted file.
off=""
va=$((16#$want_va))
while read -r typ o v _ fs _; do
  [ "$typ" = LOAD ] || continue
  if [ "$va" -ge $((v)) ] && [ "$va" -lt $((v + fs)) ]; then
    off=$(printf '%x' $((va - v + o)))
    break
  fi
done < <(readelf -lW "$mf")
[ -n "$off" ] || fail "no segment for work_b"
got=$(echo "$off" | "$Q" --offsets "$mf")
echo "map_files: $got"
case "$got" in work_b@*) ;; *) fail "expected work_b, got $got" ;; esac
echo "ok"
