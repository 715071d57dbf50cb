#!/usr/bin/env bash
# The CLI's face (issue 23 points 3 and 4): for every command, the options `canopy CMD
# --help` lists, the ones its section of canopy(1) lists and the ones its parser accepts
# are the same set (and likewise canopyd --help, canopyd(8) and getopt; canopyd.conf(5)
# and the config parser); every option literal in the parsers' sources is in some --help;
# docs/cli.md names every option and names none that does not exist (its SAMPLING and
# QUERY tables are exactly the parsers'), docs/protocol.md every config key; canopy --help is in
# aligned columns; --version prints the version and the executable's build id; typos get
# the nearest command or option; the bash completion completes commands, options, values,
# PIDs and canopyd's session names. The manual pages pass mandoc's lint (or groff -ww).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/daemon_lib.sh"
C=$CANOPY_BIN
MAN=$CANOPY_BUILD_DIR/man
SRC=$CANOPY_SOURCE_DIR
for p in canopy.1 canopyd.8 canopyd.conf.5; do
  [ -s "$MAN/$p" ] || fail "no manual page $MAN/$p (the build's man target)"
done

# --- the manual pages render and lint clean --------------------------------------------
for p in canopy.1 canopyd.8 canopyd.conf.5; do
  out=$(groff -ww -man -z "$MAN/$p" 2>&1) || fail "groff $p: $out"
  [ -z "$out" ] || fail "groff -ww warns on $p: $out"
  if command -v mandoc >/dev/null; then
    out=$(mandoc -T lint -W warning "$MAN/$p" 2>&1) || true
    [ -z "$out" ] || fail "mandoc lint on $p: $out"
  elif [ "${CI:-}" = true ]; then
    fail "mandoc is not installed (scripts/setup installs it)"
  else
    echo "note: no mandoc, $p linted by groff -ww only" >&2
  fi
  MANWIDTH=80 man -l "$MAN/$p" >"$TMP/$p.txt" 2>"$TMP/man.err" || fail "man -l $p: $(cat "$TMP/man.err")"
done
grep -q '^SAMPLING OPTIONS' "$TMP/canopy.1.txt" || fail "canopy(1) has no SAMPLING OPTIONS section"
grep -q 'retention = DURATION' "$TMP/canopyd.conf.5.txt" || fail "canopyd.conf(5) lacks retention"

# help_opts: the long options in a --help text on stdin (rows "  [-X, ]--name ...").
help_opts() { grep -oE '^  (-[A-Za-z], )?--[a-z][a-z-]*' | sed -E 's/^  (-[A-Za-z], )?//' | sort -u; }
# man_opts CMD: the long options in bold in canopy(1)'s section "canopy CMD".
man_opts() {
  awk -v s=".SS \"canopy $1\"" '$0 == s {on = 1; next} /^\.S[SH] / {on = 0} on' "$MAN/canopy.1" |
    grep -oE '\\fB\\-\\-[a-z][a-z\\-]*\\fR' | sed -e 's/\\fB//; s/\\fR//; s/\\-/-/g' | sort -u
}
# sample OPTION PLACEHOLDER: a value the parser accepts.
sample() {
  case "$2" in
  "") ;;
  *'|'*) echo "${2%%|*}" ;;
  HZ) echo 99 ;; EVENT) echo cpu-clock ;; BYTES) echo 4096 ;; DURATION) echo 5s ;;
  SECONDS | TIME) echo 1 ;; PID | TID | N | P) echo 1 ;; SPEC) echo merge:f ;; F) echo main ;;
  FMT) echo json ;; FILE | PATH | DIR) echo "$TMP/x.json" ;; NAME | DB) echo web ;;
  K=V*) echo service=web ;; URL) echo http://127.0.0.1:1/ ;; ADDR) echo 127.0.0.1 ;;
  KEY=VALUE*) echo container=0123 ;; ID) echo 0123 ;;
  *) fail "no sample value for $1 $2" ;;
  esac
}

# --- canopy --help: aligned columns ----------------------------------------------------
"$C" --help >"$TMP/help.txt"
cmds=$(grep -oE '^  [a-z]+ ' "$TMP/help.txt" | awk '{print $1}')
[ "$(echo "$cmds" | wc -l)" -ge 16 ] || fail "canopy --help lists $(echo "$cmds" | wc -l) commands"
# Every summary starts in one column: the column of the first one-line row.
python3 - "$TMP/help.txt" <<'EOF' || fail "canopy --help is not aligned: $(cat "$TMP/help.txt")"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
lines = lines[lines.index(""):]  # the command rows, after the usage lines
cols = set()
for i, l in enumerate(lines):
    m = re.match(r"^  ([a-z]+ .*?\S)( {2,})(\S.*)$", l)
    if m:
        cols.add(len(m.group(1)) + len(m.group(2)) + 2)
    elif re.match(r"^ {4,}\S", l):  # a summary under a long usage
        cols.add(len(l) - len(l.lstrip(" ")))
sys.exit(0 if len(cols) == 1 else 1)
EOF

# --- per command: --help == canopy(1) == what the parser accepts ------------------------
all_help=$TMP/all_help
: >"$all_help"
for cmd in $cmds; do
  "$C" "$cmd" --help >"$TMP/h.$cmd" || fail "canopy $cmd --help exits $?"
  help_opts <"$TMP/h.$cmd" >"$TMP/ho.$cmd"
  cat "$TMP/ho.$cmd" >>"$all_help"
  man_opts "$cmd" >"$TMP/mo.$cmd"
  [ -s "$TMP/ho.$cmd" ] || fail "canopy $cmd --help lists no option"
  diff "$TMP/ho.$cmd" "$TMP/mo.$cmd" >"$TMP/d" || fail "canopy $cmd: --help and canopy(1) differ: $(cat "$TMP/d")"
  # Each option row of --help, with a value if it takes one, then --help: the parser takes
  # options in order, so exit 0 means it accepted them. All of a command's options in one
  # run (the views exclude each other: --callers there, the others one run each); fleet
  # per subcommand, whose options must cover fleet --help's.
  grep -oE '^  (-[A-Za-z], )?--[a-z][a-z-]*( [^ ]+)?' "$TMP/h.$cmd" | sed -E 's/^  (-[A-Za-z], )?//' |
    grep -v '^--help' >"$TMP/rows.$cmd"
  subs=("$cmd")
  [ "$cmd" = fleet ] && subs=("fleet init" "fleet tree" "fleet labels" "fleet diff" "fleet prune")
  : >"$TMP/accepted"
  for sub in "${subs[@]}"; do
    all=()
    alone=()
    # shellcheck disable=SC2086 # "fleet tree" is two words
    "$C" __complete $sub -- >"$TMP/offered" # the options this (sub)command offers
    while read -r opt ph; do
      grep -qx -- "$opt" "$TMP/offered" || continue
      case $opt in --invert | --callees | --functions) alone+=("$opt $ph") && continue ;; esac
      all+=("$opt")
      [ -n "$ph" ] && all+=("$(sample "$opt" "$ph")")
      echo "$opt" >>"$TMP/accepted"
    done <"$TMP/rows.$cmd"
    # shellcheck disable=SC2086 # "fleet tree" is two words
    "$C" $sub "${all[@]}" --help >/dev/null 2>"$TMP/err" || fail "canopy $sub ${all[*]} --help: $(cat "$TMP/err")"
    for row in "${alone[@]}"; do
      read -r opt ph <<<"$row"
      args=("$opt")
      [ -n "$ph" ] && args+=("$(sample "$opt" "$ph")")
      "$C" $sub "${args[@]}" --help >/dev/null 2>"$TMP/err" || fail "canopy $sub ${args[*]} --help: $(cat "$TMP/err")"
      echo "$opt" >>"$TMP/accepted"
    done
  done
  sort -u "$TMP/accepted" | diff <(grep -v '^--help' "$TMP/ho.$cmd") - >"$TMP/d" ||
    fail "canopy $cmd: --help's options and those tried differ: $(cat "$TMP/d")"
  # ... and the check can fail: an option no table has is refused before anything is done.
  if [ "$cmd" = fleet ]; then set -- fleet tree; else set -- "$cmd"; fi
  "$C" "$@" --no-such-option >/dev/null 2>"$TMP/err" && fail "canopy $cmd accepted --no-such-option"
  grep -q "unknown option '--no-such-option'" "$TMP/err" || fail "canopy $cmd: $(cat "$TMP/err")"
done
sort -u -o "$all_help" "$all_help"

# Every option string the client's parsers compare against is in some --help (a new
# strcmp(a, "--x") without a table row fails here).
# (canopy's own --help and --version are in canopy --help's usage line; comments are
# left out.)
grep -q -- '--version' "$TMP/help.txt" || fail "canopy --help does not mention --version"
echo --version >>"$all_help"
sort -u -o "$all_help" "$all_help"
cat "$SRC"/client/*.c | grep -vE '^\s*(/\*|\*|//)' | grep -oE '"--[a-z][a-z-]*' | tr -d '"' |
  sort -u >"$TMP/literals"
comm -23 "$TMP/literals" "$all_help" >"$TMP/missing"
[ ! -s "$TMP/missing" ] || fail "options in client/*.c but in no --help: $(cat "$TMP/missing")"

# --- docs/cli.md -----------------------------------------------------------------------
# Every option of every --help is documented (cli.md, or the pages it sends to for live
# sessions, the fleet and the web view) ...
cat "$SRC"/docs/cli.md "$SRC"/docs/cli-live.md "$SRC"/docs/fleet.md "$SRC"/docs/web.md >"$TMP/docs"
while read -r opt; do
  grep -qE -- "$opt([^a-z-]|$)" "$TMP/docs" || fail "$opt is in --help but in no doc page"
done <"$all_help"
# ... and every option in docs/cli.md's option tables and command synopses exists.
{
  grep -E '^\| `-' "$SRC"/docs/cli.md
  awk '/^## Commands/ {on = 1} /^### SESSION/ {on = 0} on' "$SRC"/docs/cli.md
  grep -E '^\| `canopy' "$SRC"/docs/cli-live.md # its table of the live commands
} | grep -oE -- '--[a-z][a-z-]*' | sort -u >"$TMP/doc_opts"
comm -23 "$TMP/doc_opts" "$all_help" >"$TMP/missing"
[ ! -s "$TMP/missing" ] || fail "docs/cli.md or cli-live.md names options no command has: $(cat "$TMP/missing")"

# The SAMPLING and QUERY tables of docs/cli.md (their rows' first cells) are exactly the
# groups canopy run --help prints from cn_cli_sampling_opts and cn_cli_query_opts.
doc_table() { # SECTION: the options of the table under "## SECTION"
  awk -v h="## $1" '$0 == h {on = 1; next} /^##/ {on = 0} on && /^\| `-/' "$SRC"/docs/cli.md |
    cut -d'|' -f2 | grep -oE -- '--[a-z][a-z-]*' | sort -u
}
help_group() { # TITLE: the options of run --help's group "TITLE:"
  awk -v h="$1:" '$0 == h {on = 1; next} /^$/ {on = 0} on' "$TMP/h.run" | help_opts
}
diff <(doc_table "SAMPLING options") <(help_group "SAMPLING options") >"$TMP/d" ||
  fail "docs/cli.md's SAMPLING table and the SAMPLING options differ: $(cat "$TMP/d")"
diff <(doc_table "QUERY options") <(help_group "QUERY and output options") >"$TMP/d" ||
  fail "docs/cli.md's QUERY table and the QUERY options differ: $(cat "$TMP/d")"

# --- canopyd: --help == canopyd(8) == getopt; docs/cli.md's synopsis --------------------
"$CANOPYD_BIN" --help | help_opts >"$TMP/dho"
grep -oE '\\fB\\-\\-[a-z][a-z\\-]*\\fR' "$MAN/canopyd.8" | sed -e 's/\\fB//; s/\\fR//; s/\\-/-/g' | sort -u >"$TMP/dmo"
diff "$TMP/dho" "$TMP/dmo" >"$TMP/d" || fail "canopyd --help and canopyd(8) differ: $(cat "$TMP/d")"
"$CANOPYD_BIN" --help | grep -oE '^  (-[A-Za-z], )?--[a-z][a-z-]*( [^ ]+)?' | sed -E 's/^  (-[A-Za-z], )?//' |
  while read -r opt ph; do
    [ "$opt" = --help ] || [ "$opt" = --version ] && continue
    args=("$opt")
    [ -n "$ph" ] && args+=("$(sample "$opt" "$ph")")
    "$CANOPYD_BIN" "${args[@]}" --help >/dev/null 2>"$TMP/err" || fail "canopyd ${args[*]}: $(cat "$TMP/err")"
  done
"$CANOPYD_BIN" --no-such-option >/dev/null 2>&1 && fail "canopyd accepted --no-such-option"
awk '/^### canopyd/ {on = 1} on && /^```/ {if (++n == 2) exit} on' "$SRC"/docs/cli.md | grep -oE -- '--[a-z][a-z-]*' | sort -u >"$TMP/ddoc"
grep -vxE -- '--help|--version' "$TMP/dho" >"$TMP/dho2"
diff "$TMP/dho2" "$TMP/ddoc" >"$TMP/d" || fail "docs/cli.md's canopyd synopsis and canopyd --help differ: $(cat "$TMP/d")"

# canopyd.conf(5)'s keys: each loads (the config parser refuses keys not in the table, so
# the page lists every key), the systemd example's keys are all in the page.
grep -A1 '^\.TP' "$MAN/canopyd.conf.5" | grep -oE '^\\fB[a-z_]+\\fR' | sed -e 's/\\fB//; s/\\fR//' | sort -u >"$TMP/keys"
[ "$(wc -l <"$TMP/keys")" -ge 30 ] || fail "canopyd.conf(5) lists $(wc -l <"$TMP/keys") keys"
grep -oE '^#?[a-z_]+ =' "$SRC"/systemd/canopyd.conf.example | tr -d '#= ' | sort -u >"$TMP/ex_keys"
comm -23 "$TMP/ex_keys" "$TMP/keys" >"$TMP/missing"
[ ! -s "$TMP/missing" ] || fail "canopyd.conf.example keys missing from canopyd.conf(5): $(cat "$TMP/missing")"
# ... and docs/protocol.md's "Configuration" names the same keys.
awk '/^## Configuration/ {on = 1; next} /^## / {on = 0} on' "$SRC"/docs/protocol.md |
  grep -oE '`[a-z][a-z_]*`' | tr -d '`' | grep -vxE 'io_uring|epoll|cn_d_config_keys' | sort -u >"$TMP/doc_keys"
diff "$TMP/keys" "$TMP/doc_keys" >"$TMP/d" || fail "canopyd.conf(5) and docs/protocol.md's keys differ: $(cat "$TMP/d")"
echo "bogus_key = 1" >"$TMP/bad.conf"
"$CANOPYD_BIN" --config "$TMP/bad.conf" --socket "$TMP/no.sock" 2>"$TMP/err" && fail "canopyd took bogus_key"
grep -q "unknown setting 'bogus_key'" "$TMP/err" || fail "bogus_key: $(cat "$TMP/err")"

# --- --version: the version and the executable's GNU build id --------------------------
re='^canopyd? [0-9][^ ]* \(build ([0-9a-f]{40})\)$'
for b in "$C" "$CANOPYD_BIN"; do
  v=$("$b" --version)
  [[ $v =~ $re ]] || fail "$b --version: $v"
  id=$(readelf -n "$b" | awk '/Build ID/ {print $3}')
  [ "${BASH_REMATCH[1]}" = "$id" ] || fail "$b --version says build ${BASH_REMATCH[1]}, readelf $id"
done

# --- typos ------------------------------------------------------------------------------
expect_hint() { # WANT CMD...: exit 2 and "did you mean `WANT`?"
  local want=$1 rc=0
  shift
  "$C" "$@" >/dev/null 2>"$TMP/err" || rc=$?
  [ $rc = 2 ] || fail "canopy $* exits $rc"
  grep -qF "did you mean \`$want\`?" "$TMP/err" || fail "canopy $*: $(cat "$TMP/err")"
}
expect_hint attach atach 1
expect_hint timeline timelien
expect_hint --pid tree --pdi 1
expect_hint --format open --fromat json x
expect_hint --no-normalize diff --no-normalise a b
expect_hint --where fleet tree --wher x
expect_hint labels fleet lables
"$C" frobnicate 2>"$TMP/err" && fail "canopy frobnicate exits 0"
grep -q "did you mean" "$TMP/err" && fail "a suggestion for frobnicate: $(cat "$TMP/err")"

# --- bash completion ---------------------------------------------------------------------
# complete WORD...: COMPREPLY, one per line, for the command line "canopy WORD..." with
# the cursor at the end of the last word.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _canopy; printf "%s\n" "${COMPREPLY[@]}"' \
    sh "$SRC/client/canopy.bash" "$C" "$@"
}
expect_completion() { # WANT WORD...: WANT among the candidates
  local want=$1
  shift
  complete_words "$@" >"$TMP/comp"
  grep -qxF -- "$want" "$TMP/comp" || fail "completing 'canopy $*': no '$want' in: $(tr '\n' ' ' <"$TMP/comp")"
}
expect_completion attach at
expect_completion timeline ti
expect_completion --format tree --for
expect_completion --no-normalize diff --no-
expect_completion --cluster fleet init --cl
expect_completion dwarf run --unwind ""
expect_completion off-cpu attach 1 --mode o
expect_completion json open --format j
expect_completion --format=speedscope timeline --format=sp
expect_completion prune fleet pr
expect_completion "$$" attach ""
expect_completion bash run -- bas
complete_words run -- ls --ver >"$TMP/comp" # the command's own arguments: files, no options
grep -qx -- --freq "$TMP/comp" && fail "run offers its own options after --"
complete_words fleet tree --cl >"$TMP/comp"
grep -qx -- --cluster "$TMP/comp" && fail "--cluster offered for fleet tree"
complete_words open x.folded --pi >"$TMP/comp"
! grep -q . "$TMP/comp" || fail "open offers $(cat "$TMP/comp") for --pi (open has no --pid)"
# Files: bash's own file completion.
touch "$TMP/profile-one.folded"
expect_completion "$TMP/profile-one.folded" open "$TMP/profile-o"

# Session names and ids, from a private canopyd.
[ "$(id -u)" = 0 ] || skip "needs root for a canopyd session (the rest passed)"
start_daemon epoll "$TMP/state"
sleep 60 &
SLEEPER=$!
sid=$("$C" attach $SLEEPER -F 9 --name webcomp --socket "$SOCK") || fail "attach: $sid"
expect_completion webcomp tree --socket "$SOCK" web
expect_completion "$sid" stop --socket "$SOCK" ""
CANOPY_SOCKET=$SOCK expect_completion webcomp rm w
"$C" rm "$sid" --socket "$SOCK" >/dev/null
kill $SLEEPER
stop_daemon
echo PASS
