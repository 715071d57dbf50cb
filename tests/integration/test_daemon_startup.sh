#!/usr/bin/env bash
# Startup (docs/security.md "Startup"): a state dir of 4096 saved sessions, several GB
# in all, reaches READY=1 in under a second, because only each session's small .meta is
# read; profiles are read by the query worker on the first query. The state dir is made
# quickly: one saved session, hard-linked 4096 times (the daemon sees 4096 files of its
# size), with .meta files carrying rewritten ids. A .canopy without its .meta (an older
# daemon's) is read whole once and gets one. A user's saved session stays invisible to
# another user (nobody).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
HERE=$(dirname "$0")
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
trap 'rc=$?; kill $D_PID 2>/dev/null || true; wait 2>/dev/null || true; finish_tmp $rc' EXIT
N=4096
STATE=$TMP/state
mkdir -p "$STATE" "$TMP/seed"
# One real saved session (1 MB), the template of the others.
$PY "$HERE/big_canopy.py" "$TMP/seed/one.canopy" s1 0 20000 30000 30000
SZ=$(stat -c %s "$TMP/seed/one.canopy")
SOCK=$TMP/canopyd.sock
printf 'state_dir_max = 64G\nuser_max_kept_bytes = 64G\nuser_max_kept = 4096\n' >"$TMP/canopyd.conf"
# The template's .meta, as canopyd writes it.
"$CANOPYD_BIN" --socket "$SOCK" --state-dir "$TMP/seed1" --config "$TMP/canopyd.conf" >>"$TMP/canopyd.log" 2>&1 &
D_PID=$!
mkdir -p "$TMP/seed1"
cp "$TMP/seed/one.canopy" "$TMP/seed1/s1.canopy"
kill $D_PID
wait $D_PID 2>/dev/null || true
"$CANOPYD_BIN" --socket "$SOCK" --state-dir "$TMP/seed1" --config "$TMP/canopyd.conf" >>"$TMP/canopyd.log" 2>&1 &
D_PID=$!
wait_for 20 eval 'call "{\"cmd\":\"hello\"}" >/dev/null 2>&1' || fail "canopyd did not start"
[ -s "$TMP/seed1/s1.meta" ] || fail "no .meta written for a .canopy without one"
kill $D_PID
wait $D_PID 2>/dev/null || true
$PY - "$TMP/seed1/s1.canopy" "$TMP/seed1/s1.meta" "$STATE" $N <<'PY'
import os, sys
src, meta, state, n = sys.argv[1], open(sys.argv[2]).read(), sys.argv[3], int(sys.argv[4])
assert "canopy.session.id\ts1\n" in meta
for i in range(1, n + 1):
    os.link(src, "%s/s%d.canopy" % (state, i))
for i in range(1, n + 1):  # after the links: a .meta older than its file is not trusted
    m = meta.replace("canopy.session.id\ts1\n", "canopy.session.id\ts%d\n" % i)
    if i % 2:
        m = m.replace("canopy.session.owner\t0\n", "canopy.session.owner\t65534\n")
    with open("%s/s%d.meta" % (state, i), "w") as f:
        f.write(m)
PY
total=$(du -s --apparent-size -B1 -l "$STATE" | cut -f1)
echo "state dir: $N sessions, $total bytes apparent ($SZ each)" >&2
[ "$total" -gt 2000000000 ] || fail "the state dir is not several GB ($total bytes)"

r=$($PY "$HERE/ready_time.py" "$TMP/canopyd.log" "$CANOPYD_BIN" --socket "$SOCK" --state-dir "$STATE" --config "$TMP/canopyd.conf")
D_PID=$(jget 'd["pid"]' <<<"$r")
echo "startup: $r" >&2
$PY -c "import sys; sys.exit(0 if $(jget 'd["ready_s"]' <<<"$r") < 1.0 * $SLOW else 1)" ||
  fail "READY after $(jget 'd["ready_s"]' <<<"$r") s (limit $SLOW s) with $N sessions"
[ "$(ok '{"cmd":"sessions"}' | jget 'len(d["sessions"])')" = $N ] || fail "not every session was loaded"
st=$(ok '{"cmd":"status"}')
rss=$(jget 'd["rss_bytes"]' <<<"$st")
echo "rss after start: $rss bytes" >&2
[ "$rss" -lt $((1 << 30)) ] || fail "profiles were loaded at start (rss $rss; the files hold $total bytes)"
# The first query reads the profile (in a worker) and gets all of it.
t=$(ok '{"cmd":"tree","session":"s4000","format":"json"}' | jget 'd["tree"]["total"]')
[ "$t" = 30000 ] || fail "lazy query total $t, want 30000"
# Ids, not names or files, identify sessions: nobody sees only its odd-numbered ones.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  cp "$HERE/daemon_proto.py" "$TMP/"
  u=$(setpriv --reuid=65534 --regid=65534 --clear-groups $PY "$TMP/daemon_proto.py" call "$SOCK" '{"cmd":"sessions"}')
  [ "$(jget 'len(d["sessions"])' <<<"$u")" = $((N / 2)) ] || fail "nobody sees $(jget 'len(d["sessions"])' <<<"$u") sessions"
  r=$(setpriv --reuid=65534 --regid=65534 --clear-groups $PY "$TMP/daemon_proto.py" call "$SOCK" '{"cmd":"tree","session":"s4000"}')
  [ "$(jget 'd["error"]["code"]' <<<"$r")" = unknown_session ] || fail "nobody reads root's saved session: $r"
fi
kill $D_PID
wait $D_PID 2>/dev/null || true
echo "ok"
