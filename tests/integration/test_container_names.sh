#!/usr/bin/env bash
# Names inside containers (issue 25, point 4), with a real container runtime: Debian's
# podman runs two containers at once from two images built here offline (a root
# filesystem imported with `podman import`, no registry), each with a DIFFERENT build of
# the same library path, /usr/lib/libwork.so (tests/integration/container/libwork.c:
# alpha_burn in one, beta_burn in the other; static functions, named only by a symbol
# table). Image A's library keeps its symbol table; image B's is stripped and names its
# functions only through a .gnu_debuglink debug file beside it, inside the container. A
# third container (image A) runs wl_jitmap, whose perf map is written in the container's
# /tmp under its pid in the container's pid namespace. No such path exists on the host:
# canopy must read every file through /proc/PID/root.
# canopyd profiles each container's process by its host pid (attach) and all of them at
# once (a system session); each must show its own library's names, and the JIT code its
# perf map's. The system session's OTLP export carries each process's container.id,
# podman's id of that container (issue 25, point 5), also once saved and read back.
# podman here: --runtime runc (crun refuses the hybrid cgroup layout), ulimits inside the
# machine's hard limits, a private storage root in $TMP (vfs driver).
source "$(dirname "$0")/lib.sh"
: "${CANOPYD_BIN:?}"
C=$CANOPY_BIN
SRC=$(dirname "$0")/container
H=$(dirname "$0")/formats/otlp_helper.py
command -v podman >/dev/null || skip "podman is not installed (scripts/setup installs it)"
command -v runc >/dev/null || skip "runc is not installed (scripts/setup installs it)"
command -v cc >/dev/null || fail "no C compiler"
[ ! -e /usr/lib/libwork.so ] || fail "/usr/lib/libwork.so exists on the host: the test would prove nothing"
export CANOPY_SOCKET=$TMP/d.sock
P=(podman --root "$TMP/storage" --runroot "$TMP/run" --storage-driver vfs --tmpdir "$TMP/ptmp"
  --cgroup-manager cgroupfs --events-backend none)
RUN=(run -d --runtime runc --ulimit nofile=1024:20000 --ulimit nproc=4096:4096 --network none)
TAG=canopy-test-$$
cleanup() {
  "${P[@]}" rm -f -t 0 "$TAG-a" "$TAG-b" "$TAG-j" >/dev/null 2>&1 || true
  "${P[@]}" rmi -f "localhost/$TAG-a" "localhost/$TAG-b" >/dev/null 2>&1 || true
  [ -n "${D_PID:-}" ] && kill "$D_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  chmod -R u+w "$TMP" 2>/dev/null || true
}
trap 'rc=$?; cleanup; finish_tmp $rc' EXIT

# ---- two images, offline ---------------------------------------------------------------
CF=(-O2 -fno-omit-frame-pointer -fno-inline -fno-optimize-sibling-calls -Wl,--build-id)
cc "${CF[@]}" -fPIC -shared -Wl,-soname,libwork.so -DVARIANT=alpha -o "$TMP/libwork-a.so" "$SRC/libwork.c"
cc "${CF[@]}" -g -fPIC -shared -Wl,-soname,libwork.so -DVARIANT=beta -o "$TMP/libwork-b.full" "$SRC/libwork.c"
objcopy --only-keep-debug "$TMP/libwork-b.full" "$TMP/libwork.so.debug"
strip --strip-all -o "$TMP/libwork-b.so" "$TMP/libwork-b.full"
(cd "$TMP" && objcopy --add-gnu-debuglink=libwork.so.debug libwork-b.so)
nm "$TMP/libwork-b.so" 2>/dev/null | grep_all beta_burn && fail "image B's library still names beta_burn"
cc "${CF[@]}" -Wl,-rpath,/usr/lib -o "$TMP/app" "$SRC/app.c" "$TMP/libwork-a.so"

# root filesystems: the program, the dynamic loader and C library copied from the host
mkroot() {
  local r=$1 lib
  mkdir -p "$r/usr/bin" "$r/usr/lib" "$r/tmp"
  chmod 1777 "$r/tmp"
  cp "$TMP/app" "$CANOPY_WORKLOADS/wl_jitmap" "$r/usr/bin/"
  for lib in $({ ldd "$TMP/app"; ldd "$CANOPY_WORKLOADS/wl_jitmap"; } |
    awk '$1 !~ /libwork/ && /\// {print ($3 ~ /^\//) ? $3 : $1}' | sort -u); do
    mkdir -p "$r$(dirname "$lib")"
    cp -L "$lib" "$r$lib"
  done
}
mkroot "$TMP/root-a"
mkroot "$TMP/root-b"
cp "$TMP/libwork-a.so" "$TMP/root-a/usr/lib/libwork.so"
cp "$TMP/libwork-b.so" "$TMP/root-b/usr/lib/libwork.so"
cp "$TMP/libwork.so.debug" "$TMP/root-b/usr/lib/libwork.so.debug"
for v in a b; do
  tar -C "$TMP/root-$v" -c . | "${P[@]}" import - "localhost/$TAG-$v" >"$TMP/import-$v.log" 2>&1 ||
    skip "podman import failed: $(tail -3 "$TMP/import-$v.log")"
done

# ---- containers ------------------------------------------------------------------------
for v in a b; do
  "${P[@]}" "${RUN[@]}" --name "$TAG-$v" "localhost/$TAG-$v" /usr/bin/app >"$TMP/run-$v.log" 2>&1 ||
    skip "podman cannot run a container here: $(tail -3 "$TMP/run-$v.log")"
done
"${P[@]}" "${RUN[@]}" --name "$TAG-j" "localhost/$TAG-a" /usr/bin/wl_jitmap 30 1 >"$TMP/run-j.log" 2>&1 ||
  fail "podman run wl_jitmap: $(tail -3 "$TMP/run-j.log")"
declare -A PID CID
for v in a b j; do
  PID[$v]=$("${P[@]}" inspect -f '{{.State.Pid}}' "$TAG-$v")
  CID[$v]=$("${P[@]}" inspect -f '{{.Id}}' "$TAG-$v")
  [ "${PID[$v]}" -gt 0 ] || fail "container $v has no pid: $("${P[@]}" logs "$TAG-$v" 2>&1 | tail -3)"
  grep_all "${CID[$v]}" "/proc/${PID[$v]}/cgroup" || fail "container $v: its id is not in its cgroup"
done
echo "containers: a pid ${PID[a]}, b pid ${PID[b]}, jit pid ${PID[j]} ($SECONDS s)"
[ "$(readlink "/proc/${PID[a]}/exe")" = /usr/bin/app ] || fail "a runs $(readlink "/proc/${PID[a]}/exe")"

# ---- profiles ----------------------------------------------------------------------------
start_canopyd
SA=$("$C" attach "${PID[a]}" -F 499 --name ca) || fail "attach a"
SB=$("$C" attach "${PID[b]}" -F 499 --name cb) || fail "attach b"
SJ=$("$C" attach "${PID[j]}" -F 499 --name cj) || fail "attach jit"
SS=$("$C" system -F 499 --name all) || fail "system session"
sleep 3
for s in "$SA" "$SB" "$SJ" "$SS"; do "$C" stop "$s" >/dev/null || fail "stop $s"; done

# Symbols may still be on their way: wait (≤ 20 s) until the libraries' frames are named.
named() { ! grep_all -E 'libwork\.so\+0x|app\+0x' "$1"; }
# Each query only until its names are there (queries of an ASan canopyd on a loaded machine
# take a while); the system session's two processes from one query, by process.
declare -A OK
for ((i = 0; i < 60; i++)); do
  for v in a b; do
    [ -n "${OK[$v]:-}" ] && continue
    "$C" tree "c$v" --format folded -o "$TMP/$v.folded"
    named "$TMP/$v.folded" && OK[$v]=1
  done
  if [ -z "${OK[j]:-}" ]; then
    "$C" tree cj --format folded -o "$TMP/j.folded"
    grep_all jitted_spin "$TMP/j.folded" && OK[j]=1
  fi
  if [ -z "${OK[s]:-}" ]; then
    "$C" tree all --group-by process --format folded -o "$TMP/s.folded"
    for v in a b; do # "app [PID];" roots, without the root
      awk -v r="app [${PID[$v]}]" 'index($0, r ";") == 1 {print substr($0, length(r) + 2)}' \
        "$TMP/s.folded" >"$TMP/s$v.folded"
    done
    named "$TMP/sa.folded" && named "$TMP/sb.folded" && OK[s]=1
  fi
  [ ${#OK[@]} = 4 ] && break
  sleep 0.5
done
echo "names arrived ($SECONDS s)"

# check FILE WANT NOT [MIN]: at least MIN samples (50), WANT's share ≥ 80%, NOT nowhere,
# work_entry above it. (On a loaded 2-core machine each container gets a small share.)
check() {
  python3 - "$@" <<'PY'
import sys
path, want, bad = sys.argv[1:4]
least = int(sys.argv[4]) if len(sys.argv) > 4 else 50
total = hit = wrong = 0
for line in open(path):
    stack, n = line.rsplit(" ", 1)
    n = int(n)
    frames = stack.split(";")
    total += n
    if want in frames:
        hit += n
        assert "work_entry" in frames[:frames.index(want)], "no work_entry above %s: %s" % (want, stack)
    if bad in frames or any(f.startswith("libwork.so+0x") for f in frames):
        wrong += n
print("%s: %d samples, %s %.1f%%, wrong %d" % (path.rsplit("/", 1)[1], total, want, 100.0 * hit / max(total, 1), wrong))
assert total >= least, "too few samples"
assert hit >= 0.8 * total, "%s in %d of %d samples" % (want, hit, total)
assert wrong == 0, "%d samples name the other image's function or an unnamed libwork frame" % wrong
PY
}
check "$TMP/a.folded" alpha_burn beta_burn || fail "container a (symbol table) by attach"
check "$TMP/b.folded" beta_burn alpha_burn || fail "container b (debug link) by attach"
# (a system session shares the machine's CPUs with every other process: fewer samples each)
check "$TMP/sa.folded" alpha_burn beta_burn 20 || fail "container a in the system session"
check "$TMP/sb.folded" beta_burn alpha_burn 20 || fail "container b in the system session"
python3 - "$TMP/j.folded" <<'PY' || fail "the JIT container's perf map"
import sys
total = jit = 0
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    if "jit_driver" in stack:
        total += int(n)
        jit += int(n) if "jitted_spin" in stack.split(";") else 0
print("jit: %d samples in jit_driver, %d named jitted_spin (perf map in the container's /tmp)" % (total, jit))
assert total >= 50 and jit >= 0.8 * total, (jit, total)
PY
echo "PASS each container's library named from its own image (symbol table, debug link, perf map; $SECONDS s)"

# ---- OTLP: container.id per process ----------------------------------------------------------
# Each container's process out of the system session, with --only-pid: exported between two
# JSON queries that must agree (the symbolizer may still be naming the rest of the machine).
for v in a b; do
  for ((i = 0; i < 40; i++)); do
    "$C" tree all --only-pid "${PID[$v]}" --functions --format json -o "$TMP/o$v.0.json"
    "$C" tree all --only-pid "${PID[$v]}" --format otlp -o "$TMP/o$v.otlp.pb"
    "$C" tree all --only-pid "${PID[$v]}" --functions --format json -o "$TMP/o$v.json"
    cmp -s "$TMP/o$v.0.json" "$TMP/o$v.json" && break
    sleep 0.5
  done
  /usr/bin/python3 "$H" check "$TMP/o$v.otlp.pb" "$TMP/o$v.json" threads resources=1 \
    "resource.host.name=$(hostname)" "resource.container.id=${CID[$v]}" \
    "resource.process.pid=${PID[$v]}" "resource.process.executable.name=app" >"$TMP/o$v.out" ||
    fail "OTLP export of container $v's process in the system session"
  echo "container $v: $(cat "$TMP/o$v.out")"
done
# and from the saved session, read back as a file (the cgroup paths travel in .canopy)
"$C" save all -o "$TMP/all.canopy" || fail "save the system session"
"$C" open "$TMP/all.canopy" --only-pid "${PID[b]}" --format otlp -o "$TMP/file-b.otlp.pb" ||
  fail "open the saved session as OTLP"
"$C" open "$TMP/all.canopy" --only-pid "${PID[b]}" --functions --format json -o "$TMP/file-b.json"
/usr/bin/python3 "$H" check "$TMP/file-b.otlp.pb" "$TMP/file-b.json" resources=1 \
  "resource.container.id=${CID[b]}" no-resource=host.name >"$TMP/file-b.out" ||
  fail "OTLP export of the saved session"
echo "saved file: $(cat "$TMP/file-b.out")"
echo "PASS OTLP resources carry each process's container.id ($SECONDS s)"
# Mappings name files as the container's processes do (/usr/lib/libwork.so), not by the
# /proc/PID/root path canopyd read them through.
"$C" tree ca --format pprof -o "$TMP/ca.pb.gz" || fail "pprof of container a"
gzip -dc "$TMP/ca.pb.gz" | grep -aq "/usr/lib/libwork.so" || fail "pprof: no mapping /usr/lib/libwork.so"
gzip -dc "$TMP/ca.pb.gz" | grep -aqE "/proc/[0-9]+/root" && fail "pprof: a mapping named through /proc/PID/root"
echo "PASS mappings carry the container's own paths"
