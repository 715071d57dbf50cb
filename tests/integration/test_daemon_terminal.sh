#!/usr/bin/env bash
# Names that attack other users' terminals, and names that are not UTF-8 (docs/security.md).
# As nobody, against a canopyd started as its own session leader (setsid):
#  1. terminal escapes: a process named `ESC]0;PWN BEL ESC[2J` (prctl PR_SET_NAME), a
#     session named `ESC[31mx CR LF fake line`, and a function of nobody's binary whose
#     symbol holds ESC and a C1 control (U+009B, CSI) must reach root's `canopy sessions`,
#     the whole-system `canopy tree` text (--group-by process), `canopy top` and
#     `canopy lines` only escaped (\x1b, \x0d, \u009b): no raw control byte;
#  2. a comm that is not UTF-8 (`bad\xff\xfeutf`), and one the kernel cuts inside a
#     character (14 ASCII bytes + `é`: 15 bytes kept), must not hide their sessions: the
#     attach reply carries the session, `sessions` lists it for root and nobody (comm with
#     U+FFFD), and `status` counts what `sessions` lists.
# Root's own session of another process must keep sampling and symbolizing throughout.
# Every check runs even after one fails, so a run on old code lists all that fail.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
need_nobody
command -v objcopy >/dev/null || skip "objcopy not installed"
command -v tmux >/dev/null || skip "tmux is not installed"
NOBODY=65534
PIDS=()
TMUX_SOCK="canopy-test-term-$$"
FAILED=0
cleanup() {
  local rc=$?
  tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true
  kill "${PIDS[@]}" 2>/dev/null || true
  stop_daemon KILL || true
  wait 2>/dev/null || true
  finish_tmp $rc
}
trap cleanup EXIT
# check DESCRIPTION CMD...: records a failure and goes on.
check() {
  local what=$1
  shift
  if ! "$@"; then
    echo "FAIL: $what" >&2
    FAILED=$((FAILED + 1))
  fi
}
as_nobody() { setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"; }
ucall() { as_nobody /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" "$1"; }
# req KEY=VALUE...: a JSON request; values are JSON (so names can hold any escape).
req() { python3 -c 'import json,sys; print(json.dumps({k: json.loads(v) for k, v in (a.split("=", 1) for a in sys.argv[1:])}))' "$@"; }
# clean_text FILE: valid UTF-8, no control character but newline, no C1 (U+0080..U+009F).
clean_text() {
  python3 - "$1" <<'PY'
import re, sys
b = open(sys.argv[1], "rb").read()
try:
    t = b.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit("invalid UTF-8 in %s: %s" % (sys.argv[1], e))
bad = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", t)
if bad:
    sys.exit("raw control U+%04X in %s near %r" % (ord(bad.group()), sys.argv[1],
             t[max(0, bad.start() - 20):bad.start() + 20]))
PY
}
# has FILE STRING: the file holds STRING (bytes, no pattern).
has() { grep -qF -- "$2" "$1" || { echo "  $1 lacks '$2':" >&2; head -c 2000 "$1" | cat -v >&2; echo >&2; return 1; }; }

cp "$(dirname "$0")/daemon_proto.py" "$TMP/"
# The workload: names itself (argv[1]) and spins in one of two functions for argv[2] s.
# evil_fn's symbol is renamed afterwards to hold ESC [2J and U+009B (no DWARF: the
# symbol table names it).
cat >"$TMP/wl.c" <<'C'
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
__attribute__((noinline)) unsigned long evil_fn(unsigned long x)
{ for (int i = 0; i < 100000; i++) x = x * 6364136223846793005UL + 1; return x; }
__attribute__((noinline)) unsigned long root_spin(unsigned long x)
{ for (int i = 0; i < 100000; i++) x = x * 2862933555777941757UL + 3; return x; }
int main(int argc, char **argv)
{
    if (argc < 4) return 2;
    prctl(PR_SET_NAME, argv[1]);
    unsigned long (*f)(unsigned long) = strcmp(argv[3], "root") ? evil_fn : root_spin;
    time_t end = time(NULL) + atoi(argv[2]);
    unsigned long x = 1;
    while (time(NULL) < end) x = f(x);
    return (int)(x & 1) == 5;
}
C
EVIL_SYM=$'evil\e[2J\xc2\x9bname'
EVIL_SHOWN='evil\x1b[2J\u009bname'
cc -O1 -fno-omit-frame-pointer -c -o "$TMP/wl.o" "$TMP/wl.c"
objcopy --redefine-sym "evil_fn=$EVIL_SYM" "$TMP/wl.o"
mkdir "$TMP/u"
cc -o "$TMP/u/wl" "$TMP/wl.o"
nm "$TMP/u/wl" | grep -qF "$EVIL_SYM" || fail "the renamed symbol is not in the binary"
cp "$TMP/u/wl" "$TMP/wl-root"
chown -R $NOBODY:$NOBODY "$TMP/u"
chmod 755 "$TMP/u" "$TMP/u/wl"

# canopyd as its own session leader, detached from any terminal.
start_leader epoll "$TMP/state"
C=("$CANOPY_BIN")
S=(--socket "$SOCK")

# Root's session of its own process: it must keep sampling and symbolizing.
"$TMP/wl-root" rootspin 120 root &
PIDS+=($!)
RS=$(ok "{\"cmd\":\"attach\",\"pid\":${PIDS[0]},\"freq\":499}" | jget 'd["session"]["id"]')
root_samples() { ok '{"cmd":"sessions"}' | jget "[s['samples'] for s in d['sessions'] if s['id'] == '$RS'][0]"; }

# ---- the attackers' processes and sessions (as nobody) ----------------------------------
COMM_ESC=$'\e]0;PWN\a\e[2J'
COMM_BAD=$'bad\xff\xfeutf'
COMM_CUT=$'abcdefghijklmn\xc3\xa9' # the kernel keeps 15 bytes: "abcdefghijklmn\xc3"
for comm in "$COMM_ESC" "$COMM_BAD" "$COMM_CUT"; do
  setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$TMP/u/wl" "$comm" 120 evil &
  PIDS+=($!)
done
sleep 0.3
[ "$(cat /proc/${PIDS[1]}/comm)" = "$COMM_ESC" ] || fail "prctl did not name the process"
# attach_nobody PID [NAME-JSON]: the reply, whole.
attach_nobody() {
  local a=(cmd='"attach"' pid="$1" freq=999)
  [ -z "${2:-}" ] || a+=("name=$2")
  ucall "$(req "${a[@]}")"
}
# A name with C0 controls is refused at the door (live/opts.c's name rule); one with C1
# controls, which are printable bytes of UTF-8, gets in and must be escaped on the way out.
r=$(attach_nobody ${PIDS[1]} '"\u001b[31mx\r\nfake line"')
check "a session name with C0 controls is refused: $r" \
  [ "$(jget 'd["error"]["code"]' <<<"$r" 2>/dev/null)" = bad_request ]
r=$(attach_nobody ${PIDS[1]} '"x\u0085\u009b[2Jfake line"')
U1=$(jget 'd["session"]["id"]' <<<"$r") || fail "nobody's attach: $r"
r2=$(attach_nobody ${PIDS[2]})
r3=$(attach_nobody ${PIDS[3]})
before=$(root_samples)
U2=$(jget 'd["session"]["id"]' <<<"$r2" 2>/dev/null) || U2=
U3=$(jget 'd["session"]["id"]' <<<"$r3" 2>/dev/null) || U3=
check "the attach reply of a comm that is not UTF-8 carries the session: $r2" [ -n "$U2" ]
check "the attach reply of a comm cut inside a character carries the session: $r3" [ -n "$U3" ]
check "its comm is shown with U+FFFD" \
  [ "$(jget 'd["session"]["target"]["comm"]' <<<"$r2" 2>/dev/null)" = $'bad\xef\xbf\xbd\xef\xbf\xbdutf' ]
check "a cut comm is shown with U+FFFD" \
  [ "$(jget 'd["session"]["target"]["comm"]' <<<"$r3" 2>/dev/null)" = $'abcdefghijklmn\xef\xbf\xbd' ]

SYS=$("${C[@]}" system "${S[@]}") || fail "root's system session"
# Wait until nobody's evil function is symbolized in its own session and the system's.
for ((i = 0; i < 150; i++)); do
  ru=$(ucall "{\"cmd\":\"tree\",\"session\":\"$U1\",\"format\":\"folded\"}")
  rs=$(call "{\"cmd\":\"tree\",\"session\":\"$SYS\",\"format\":\"folded\"}")
  for r in "$ru" "$rs"; do # an error reply is a failed check, shown whole
    check "a tree query answers: $(head -c 600 <<<"$r")" [ "$(jget 'd["ok"]' <<<"$r")" = True ]
  done
  out=$(jget 'd.get("output", "")' <<<"$ru")
  sys=$(jget 'd.get("output", "")' <<<"$rs")
  grep -q 'evil' <<<"$out" && grep -q 'evil' <<<"$sys" && break
  sleep 0.2
done
grep -q 'evil' <<<"$out" || fail "nobody's session never shows the evil function: $(head -3 <<<"$out")"

# ---- 1. terminal escapes -----------------------------------------------------------------
"${C[@]}" sessions "${S[@]}" >"$TMP/sessions.txt"
check "root's sessions table has no raw control byte" clean_text "$TMP/sessions.txt"
check "root's sessions table shows the comm escaped" has "$TMP/sessions.txt" '\x1b]0;PWN\x07\x1b[2J'
check "root's sessions table shows the name escaped" has "$TMP/sessions.txt" 'x\u0085\u009b[2Jfake line'
"${C[@]}" tree "$SYS" "${S[@]}" --group-by process >"$TMP/system.txt"
check "the whole-system text tree has no raw control byte" clean_text "$TMP/system.txt"
check "the whole-system text tree shows the comm escaped" has "$TMP/system.txt" '\x1b]0;PWN\x07\x1b[2J ['
check "the whole-system text tree shows the function escaped" has "$TMP/system.txt" "$EVIL_SHOWN"
"${C[@]}" tree "$U1" "${S[@]}" -t "merge:$EVIL_SYM" -t "focus:main" >"$TMP/u1.txt" 2>"$TMP/u1.err" || true
check "a tree header and notes quoting transforms have no raw control byte" \
  clean_text "$TMP/u1.txt"
check "stderr notes have no raw control byte" clean_text "$TMP/u1.err"
"${C[@]}" lines "$U1" "$EVIL_SYM" "${S[@]}" >"$TMP/lines.txt" 2>&1 || true
check "canopy lines has no raw control byte" clean_text "$TMP/lines.txt"
check "canopy lines shows the function escaped" has "$TMP/lines.txt" "$EVIL_SHOWN"
"${C[@]}" tree "$U1" "${S[@]}" -t "focus:$EVIL_SYM;nothing" >"$TMP/err.txt" 2>&1 || true
check "an error quoting the function has no raw control byte" clean_text "$TMP/err.txt"

# top, as root, on nobody's session, in a 160x40 tmux terminal.
tmux -L "$TMUX_SOCK" -f /dev/null new-session -d -s t -x 160 -y 40 \
  "env TERM=xterm-256color ASAN_OPTIONS=${ASAN_OPTIONS:-} $CANOPY_BIN top $U1 --socket $SOCK \
   2>$TMP/top.err; sleep 30"
for ((i = 0; i < 100; i++)); do
  tmux -L "$TMUX_SOCK" capture-pane -p -t t >"$TMP/top.txt"
  grep -q 'evil' "$TMP/top.txt" && break
  sleep 0.1
done
sleep 1.5 # a refresh or two
tmux -L "$TMUX_SOCK" capture-pane -p -t t >"$TMP/top.txt"
check "top shows the function escaped" has "$TMP/top.txt" "$EVIL_SHOWN"
check "top shows no control character (ncurses' ^[)" bash -c "! grep -qF '^[' '$TMP/top.txt'"
tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true

# ---- 2. comms that are not UTF-8 do not hide sessions -----------------------------------
count_check() { # WHO CALLER...: status counts what sessions lists, which has all ids
  local who=$1 ids n st
  shift
  ids=$("$@" /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" '{"cmd":"sessions"}' |
    jget '" ".join(s["id"] for s in d["sessions"])')
  n=$(wc -w <<<"$ids")
  st=$("$@" /usr/bin/python3 "$TMP/daemon_proto.py" call "$SOCK" '{"cmd":"status"}' | jget 'd["sessions"]')
  check "$who: status counts $st sessions, sessions lists $n" [ "$st" = "$n" ]
  for id in $U1 $U2 $U3; do
    check "$who: sessions lists $id" grep -qw -- "$id" <<<"$ids"
  done
}
count_check root env
count_check nobody as_nobody
"${C[@]}" sessions "${S[@]}" >"$TMP/sessions.txt"
check "root's table shows the bad comm" has "$TMP/sessions.txt" $'bad\xef\xbf\xbd\xef\xbf\xbdutf'
check "root's table shows the cut comm" has "$TMP/sessions.txt" $'abcdefghijklmn\xef\xbf\xbd'
as_nobody "${C[@]}" sessions "${S[@]}" >"$TMP/usessions.txt"
check "nobody's table shows the bad comm" has "$TMP/usessions.txt" $'bad\xef\xbf\xbd\xef\xbf\xbdutf'
# nobody can find it, and stop it.
if [ -n "$U2" ]; then
  check "nobody stops the session of the bad comm" as_nobody "${C[@]}" stop "$U2" "${S[@]}" >/dev/null
fi

# ---- root's session went on ---------------------------------------------------------------
sleep 1
after=$(root_samples)
check "root's session kept sampling: $before -> $after" [ "$after" -gt $((before + 100)) ]
"${C[@]}" tree "$RS" "${S[@]}" --format folded >"$TMP/root.folded"
check "root's session kept symbolizing" has "$TMP/root.folded" root_spin
kill -0 $D_PID 2>/dev/null || fail "canopyd died"
[ $FAILED = 0 ] || fail "$FAILED checks failed"
stop_daemon
echo "PASS: names with terminal escapes are shown escaped; comms that are not UTF-8 keep their sessions listed ($before -> $after samples in root's session)"
