#!/usr/bin/env bash
# The unit's SystemCallFilter= lets through every system call canopyd makes: canopyd runs
# under strace while it serves `run` (fp and dwarf), `attach`, a system session, queries in
# several formats, `save`, `lines`, `status` and a clean shutdown; each traced call must be
# in the sets the unit names (expanded with `systemd-analyze syscall-filter`). A filter
# that missed one would make canopyd fail under systemd with EPERM where no test runs it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
: "${CANOPYD_BIN:?}" "${CANOPY_BIN:?}" "${CANOPY_SOURCE_DIR:?}" "${CANOPY_WORKLOADS:?}"
command -v systemd-analyze >/dev/null || skip "systemd-analyze is not installed"
command -v strace >/dev/null || skip "strace is not installed"
UNIT=$CANOPY_SOURCE_DIR/systemd/canopyd.service
filter=$(sed -n 's/^SystemCallFilter=//p' "$UNIT")
[ -n "$filter" ] || fail "canopyd.service has no SystemCallFilter="
grep -qx 'SystemCallErrorNumber=EPERM' "$UNIT" || fail "no SystemCallErrorNumber=EPERM"

# Expand the filter's groups recursively into system call names.
expand() {
  local todo=("$@") seen=" " g w
  while [ ${#todo[@]} -gt 0 ]; do
    g=${todo[0]}
    todo=("${todo[@]:1}")
    case "$g" in
      @*) ;;
      *) echo "$g"; continue ;;
    esac
    case "$seen" in *" $g "*) continue ;; esac
    seen="$seen$g "
    while read -r w _; do
      case "$w" in
        @*) todo+=("$w") ;;
        [a-z_]*) echo "$w" ;;
      esac
    done < <(systemd-analyze syscall-filter "$g" 2>/dev/null | tail -n +2)
  done
}
# shellcheck disable=SC2086
expand $filter | sort -u >"$TMP/allowed"
[ "$(wc -l <"$TMP/allowed")" -gt 100 ] || fail "the filter expanded to too little: $(wc -l <"$TMP/allowed")"
grep -qx perf_event_open "$TMP/allowed" || fail "perf_event_open is not allowed"

SOCK=$TMP/canopyd.sock
# LeakSanitizer cannot run under ptrace (ASan builds): leaks are checked by the other tests.
ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -f -qq -o "$TMP/trace" "$CANOPYD_BIN" --socket "$SOCK" --state-dir "$TMP/state" \
  >"$TMP/canopyd.log" 2>&1 &
D_PID=$!
trap 'rc=$?; kill $D_PID $W 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
for ((i = 0; i < 100; i++)); do $PROTO call "$SOCK" '{"cmd":"hello"}' >/dev/null 2>&1 && break; sleep 0.1; done
C() { "$CANOPY_BIN" "$1" --socket "$SOCK" "${@:2}"; }
C run --unwind dwarf -- "$CANOPY_WORKLOADS/wl_clockread" 1 clock >/dev/null || fail "run dwarf"
C run --unwind fp -- "$CANOPY_WORKLOADS/wl_shares_fp" 1 >/dev/null 2>&1 || fail "run fp"
"$CANOPY_WORKLOADS/wl_clockread" 3 kernel >/dev/null &
W=$!
C attach $W --name att >/dev/null || fail "attach"
C system --duration 1s --name sys >/dev/null || fail "system"
sleep 1.2
for f in text json pprof svg speedscope; do C tree att --format $f -o "$TMP/out.$f" || fail "tree $f"; done
C lines s1 main >/dev/null 2>&1 || true
C save att -o "$TMP/att.canopy" || fail "save"
C status >/dev/null || fail "status"
wait $W || true
# SIGTERM to canopyd itself (strace, signalled, would only detach): it must exit 0.
DAEMON=$(pgrep -P $D_PID -x canopyd) || fail "no canopyd under strace"
kill -TERM "$DAEMON"
wait $D_PID || fail "canopyd did not exit cleanly under strace: $(tail -3 "$TMP/canopyd.log")"

# The names of the system calls made: "PID name(" lines and "<... name resumed>" lines.
grep -oE '^[0-9]+ +[a-z_0-9]+\(|<\.\.\. [a-z_0-9]+ resumed>' "$TMP/trace" |
  sed -E 's/^[0-9]+ +//; s/\($//; s/^<\.\.\. //; s/ resumed>$//' | sort -u >"$TMP/used"
grep -qx perf_event_open "$TMP/used" || fail "the trace shows no perf_event_open: $(head -3 "$TMP/trace")"
# execve is the child's exec for `run` (in the forked child, before it becomes the target).
missing=$(comm -23 "$TMP/used" "$TMP/allowed" | grep -vx execve || true)
[ -z "$missing" ] || fail "system calls canopyd makes that the unit's filter refuses: $missing"
echo "PASS: $(wc -l <"$TMP/used") distinct system calls, all allowed by SystemCallFilter=$filter"
