#!/bin/sh
# The checks run inside the arm64 test machine (busybox sh; tests/arm64/vm.sh boots it and
# reads the console). One line per check: "VMTEST PASS|FAIL NAME: detail", then
# "VMTEST RESULT PASS|FAIL"; files for the host between "VMFILE BEGIN NAME" and
# "VMFILE END NAME" in base64.
#   vm_tests.sh test    the checks below
#   vm_tests.sh bench   bench_sampler's cost per sample, fp/dwarf/auto ("VMBENCH" lines)
#   vm_tests.sh debug   sources /debug.sh (vm.sh copies $CANOPY_A64_DEBUG there)
# Shares are those of tests/workloads/shares.c (work_a 50, work_b 30, work_c 20 per round,
# all through burn), counted on full paths (docs/perf-sampler.md "Accuracy"), ±5 points.
WL=/wl
T=/tmp/t
mkdir -p $T
export CANOPY_SOCKET=$T/canopy.sock
export CANOPY_NO_PROGRESS=1
fails=0

pass() { echo "VMTEST PASS $*"; }
fail() {
    echo "VMTEST FAIL $*"
    fails=$((fails + 1))
}
sendfile() { # NAME FILE
    echo "VMFILE BEGIN $1"
    base64 "$2"
    echo "VMFILE END $1"
}
# Prints a file's first lines (folded stacks, most weight first) to show what went wrong.
# (Sorted by the last field: Python frames hold spaces, "work_a (py_work.py)".)
show() { awk '{ print $NF "\t" $0 }' "$1" | sort -n -r | cut -f2- | head -"${2:-8}" | sed 's/^/  | /'; }

# shares MODE FOLDED: "a b c full burn in_main total" percentages from folded stacks. A
# stack counts for work_a, work_b or work_c when its frames below main (kernel frames, from
# el0t_* on, left aside) are the right chain: main;work_a[;burn], main;work_b;work_b_inner
# [;burn], main;work_c x5[;burn] (burn is a small leaf: work_*'s own loops take samples
# too). "burn" is the share of all samples whose user leaf is burn (under main or not);
# "full" the share of those with the whole right path down to burn. In fp, burn sets up no
# frame record, so its caller is missing (as with perf -g on x86-64): main;burn is work_a's,
# and work_b_inner and the innermost work_c are missing too.
shares() {
    awk -v mode="$1" '
    {
        n = $NF; s = $0; sub(/ [0-9]+$/, "", s); tot += n
        sub(/;el0t_64_.*$/, "", s)
        leaf_burn = (s ~ /(^|;)burn$/)
        if (leaf_burn) burn += n
        if (!match(s, /(^|;)main;/)) next
        s = substr(s, RSTART); sub(/^;/, "", s); inmain += n
        if (mode == "fp") {
            if (s ~ /^main;(burn|work_a|work_a;burn)$/) a += n
            else if (s ~ /^main;work_b(;work_b_inner)?(;burn)?$/) b += n
            else if (s ~ /^main;work_c(;work_c)*(;burn)?$/) c += n
        } else {
            if (s ~ /^main;work_a(;burn)?$/) a += n
            else if (s ~ /^main;work_b;work_b_inner(;burn)?$/) b += n
            else if (s ~ /^main;work_c;work_c;work_c;work_c;work_c(;burn)?$/) c += n
            else leaf_burn = 0
            if (leaf_burn) full += n
        }
    }
    END {
        if (!tot) tot = 1
        if (!inmain) inmain = 1
        printf "%.1f %.1f %.1f %.1f %.1f %.1f %d\n", 100*a/inmain, 100*b/inmain, 100*c/inmain,
            burn ? 100*full/burn : 0, 100*burn/tot, 100*inmain/tot, tot
    }' "$2"
}

# check_shares NAME MODE FOLDED: the shares of the samples under main within ±5 points
# (the program's start, exec and ld.so, is slow to emulate: a few % of a short run), ≥ 85%
# of the samples under main, and in dwarf/auto ≥ 90% of burn's samples with the full path
# down to burn, burn holding ≥ 10% of the samples (fp mode gives 0% full paths: burn has
# no frame record). The full paths count among burn's own samples, not among all: burn's
# share of the run follows the emulation's timing (seen 30-80% of the samples under main,
# and a CI run failed a bound of 30% of all samples at 29.9% with every stack right).
check_shares() {
    # shellcheck disable=SC2046 # the figures, one word each
    set -- "$1" "$2" "$3" $(shares "$2" "$3")
    if awk -v a="$4" -v b="$5" -v c="$6" -v f="$7" -v burn="$8" -v m="$9" -v n="${10}" \
        -v mode="$2" 'BEGIN {
        d = a - 50; if (d < 0) d = -d; if (d > 5) exit 1
        d = b - 30; if (d < 0) d = -d; if (d > 5) exit 1
        d = c - 20; if (d < 0) d = -d; if (d > 5) exit 1
        if (mode != "fp" && (f < 90 || burn < 10)) exit 1
        exit !(m >= 85 && n >= 200) }'; then
        pass "$1: work_a $4 work_b $5 work_c $6 (burn $8% of the samples, $7% of them full paths; in main $9%, ${10} samples)"
    else
        fail "$1: work_a $4 work_b $5 work_c $6 (want 50/30/20 ±5; burn $8% of the samples, $7% of them full paths, want ≥ 90; in main $9%, ${10} samples)"
        show "$3"
    fi
}

# share FOLDED ERE [BASE]: percentage of samples whose stack matches ERE, among those
# matching the ERE BASE (default: all).
share() { # FOLDED RE [BASE [SKIP]]: RE's share of BASE's samples, SKIP's left out
    awk -v re="$2" -v base="${3:-.}" -v skip="${4:-}" '{ n = $NF; if ($0 !~ base) next
        if (skip != "" && $0 ~ skip) next; tot += n; if ($0 ~ re) m += n }
        END { printf "%.1f\n", tot ? 100 * m / tot : 0 }' "$1"
}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# Samples in a signal handler (sigprof.c): the unwind goes through the signal frame
# (arm64: the vDSO's __kernel_rt_sigreturn) into the interrupted main_work.
sigprof() {
    for m in dwarf auto; do
        canopy run --unwind $m --format folded -o $T/sig-$m.folded -- $WL/wl_sigprof 2 \
            >/dev/null 2>$T/run.err || fail "sigprof-$m: canopy run exited $?: $(tail -3 $T/run.err)"
        h=$(share $T/sig-$m.folded ';on_prof;spin_handler[; ]' ';main;')
        both=$(share $T/sig-$m.folded ';main;main_work;.*;on_prof;spin_handler[; ]' ';on_prof;spin_handler[; ]')
        if ge "$h" 20 && ge "$both" 90; then
            pass "sigprof-$m: $h% in on_prof;spin_handler, $both% of them under main;main_work"
        else
            fail "sigprof-$m: $h% in on_prof;spin_handler (want ≥ 20), $both% of them under main;main_work (want ≥ 90)"
            show $T/sig-$m.folded
        fi
    done
}

# Python functions in the stacks (docs/python.md, "arm64"): Debian's arm64 CPython 3.11
# (vm.sh unpacks it) runs vm_python.py under `canopy run` through canopyd: the BPF program
# finds the thread's PyThreadState from the arm64 thread pointer (tp_value less glibc's
# struct pthread) and the splice puts work_a and work_b in the tree. Checked: the session's
# state "python frames: on"; work_a/work_b 70/30 ±5 (the workload's split by construction);
# the libm/libz samples (sin, deflate: only the loop calls them) lie under work_a or work_b
# and the Python frame of the round that called them (≥ 90%, at least 20): the samples
# joined to their own record; ≥ 75% of the samples in the eval loop (under PyEval_EvalCode)
# carry Python frames (seen 82.4-95.1% at load 11-25: the rest are the module's start before
# the registration, more of them the slower the machine; a join taking the wrong records,
# 59%).
python_frames() {
    PY=/usr/bin/python3.11
    if [ ! -x $PY ]; then
        echo "VMINFO python: no arm64 CPython in the machine (vm.sh): check skipped"
        return
    fi
    p0=$(cut -d' ' -f1 /proc/uptime)
    canopy run --name py-run --format folded -o $T/py.folded -- $PY -S $WL/py_work.py \
        "${VM_PY_SECONDS:-4}" >$T/py.out 2>$T/py.err &
    rpid=$!
    # pyj: the session's counters (registered processes, samples of them, joined to a
    # record); the loop starts once the interpreter is registered (vm_python.py)
    i=0
    while [ $i -lt 300 ]; do
        pyj=$(canopy sessions --format json 2>&1 | grep -o '"name":"py-run".*' |
            grep -o '"python":{[^}]*}' | head -1 | sed 's/"python"://; s/[{}"]//g; s/,/ /g')
        case " $pyj " in *" registered:1 "*) grep -q ready $T/py.out && break ;; esac
        sleep 0.1
        i=$((i + 1))
    done
    # the workload: canopy run's child (its pid in field 4 of its stat, comm has no space)
    for st in /proc/[0-9]*/stat; do
        # shellcheck disable=SC2046 # the fields, one word each
        set -- $(cat "$st" 2>/dev/null)
        [ "${4:-}" = "$rpid" ] && [ "$2" = "(python3.11)" ] && kill -USR1 "$1"
    done
    wait $rpid || fail "python: canopy run exited $?: $(tail -3 $T/py.err)"
    pyj=$(canopy sessions --format json 2>&1 | grep -o '"name":"py-run".*' |
        grep -o '"python":{[^}]*}' | head -1 | sed 's/"python"://; s/[{}"]//g; s/,/ /g')
    state=$(canopy tree py-run --depth 1 2>&1 | head -1 | grep -o 'python frames: [^,]*')
    f=$T/py.folded
    # (bracket expressions, not \( : awk -v would take the backslashes as escapes)
    P='[(]py_work[.]py[)]'
    na=$(awk -v re=";work_a $P" '$0 ~ re { n += $NF } END { print n + 0 }' $f)
    nb=$(awk -v re=";work_b $P" '$0 ~ re { n += $NF } END { print n + 0 }' $f)
    sa=$(awk -v a="$na" -v b="$nb" 'BEGIN { printf "%.1f", a + b ? 100 * a / (a + b) : 0 }')
    sb=$(awk -v a="$na" -v b="$nb" 'BEGIN { printf "%.1f", a + b ? 100 * b / (a + b) : 0 }')
    withpy=$(share $f " $P" ';PyEval_EvalCode;')
    # libm's sin has aliases at its address (sinf64, sinf32x): any of them names it
    C=';(sin|sinf64|sinf32x|deflate)[; ]'
    nc=$(awk -v re="$C" '$0 ~ re { n += $NF } END { print n + 0 }' $f)
    under=$(share $f ";work_[ab] $P;.*;round_ $P;.*$C" "$C")
    p1=$(cut -d' ' -f1 /proc/uptime)
    took=$(awk -v a="$p0" -v b="$p1" 'BEGIN { printf "%.0f", b - a }')
    what="work_a $sa% work_b $sb% ($((na + nb)) samples, $(tail -1 $T/py.out), registered after $((i / 10)).$((i % 10))s); $withpy% of the eval loop's samples with Python frames; $nc sin/deflate samples, $under% under work_*;…;round_"
    if [ "$state" = "python frames: on" ] && [ $((na + nb)) -ge 150 ] && awk -v a="$sa" \
        -v w="$withpy" -v n="$nc" -v u="$under" 'BEGIN { d = a - 70; if (d < 0) d = -d
            exit !(d <= 5 && w >= 75 && n >= 20 && u >= 90) }'; then
        pass "python: $state ($pyj); $what (${took}s)"
    else
        fail "python: ${state:-no python state} ($pyj); $what (want 70/30 ±5, ≥ 150 samples, ≥ 75%, ≥ 20, ≥ 90%)"
        show $f
    fi
}

tests() {
    # A complete number of rounds (a round is ~25 ms natively, ~10x slower emulated): shares
    # are per round.
    R=${VM_ROUNDS:-30}
    echo "VMINFO kernel.perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)" \
        "kptr_restrict $(cat /proc/sys/kernel/kptr_restrict)" \
        "pmu $(ls /sys/bus/event_source/devices | tr '\n' ' ')"
    echo "VMINFO cpu $(grep -m1 Features /proc/cpuinfo)"
    # The kernel lowers perf_event_max_sample_rate at run time when sampling interrupts take
    # more than perf_cpu_time_max_percent of a CPU, which an emulated machine on a loaded host
    # soon does (down to a few dozen Hz): not what is tested here (but see max-sample-rate).
    echo 0 >/proc/sys/kernel/perf_cpu_time_max_percent
    rate=/proc/sys/kernel/perf_event_max_sample_rate
    echo "VMINFO perf_event_max_sample_rate $(cat $rate)" \
        "perf_cpu_time_max_percent $(cat /proc/sys/kernel/perf_cpu_time_max_percent)"
    t0=$(cut -d' ' -f1 /proc/uptime)
    $WL/wl_shares_fp --rounds 2 >$T/cal.out
    echo "VMINFO calibration: $(cat $T/cal.out)"

    # ---- canopy run (in-process: no daemon yet) -------------------------------------------
    for b in fp nofp pac pacnofp; do
        for m in fp dwarf auto; do
            case $b$m in nofpfp | pacnofpfp) continue ;; esac # fp needs frame records
            out=$T/run-$b-$m.folded
            if canopy run --unwind $m --format folded -o $out -- $WL/wl_shares_$b --rounds $R \
                >$T/wl.out 2>$T/run.err; then
                check_shares "run-$b-$m" $m $out
            else
                fail "run-$b-$m: canopy run exited $?: $(tail -3 $T/run.err)"
            fi
        done
    done

    # The kernel lowers perf_event_max_sample_rate when sampling interrupts are slow (here,
    # emulated): `canopy run` asks for 999 Hz and must sample at the limit instead of failing.
    max0=$(cat $rate)
    echo 300 >$rate
    if canopy run --format folded -o $T/rate.folded -- $WL/wl_shares_fp --rounds 10 \
        >/dev/null 2>$T/run.err; then
        n=$(awk '{ n += $NF } END { print n + 0 }' $T/rate.folded)
        ge "$n" 50 && pass "max-sample-rate: 999 Hz asked, limit 300: $n samples" ||
            fail "max-sample-rate: only $n samples"
    else
        fail "max-sample-rate: 999 Hz asked, limit 300: $(tail -1 $T/run.err)"
    fi
    echo "$max0" >$rate

    # ---- the vDSO and the kernel ---------------------------------------------------------
    # The vDSO (no unwind tables on arm64): its leaves return through the link register.
    # Shares among the samples under main: the program's start (exec, ld.so) is slow to
    # emulate and takes up to a fifth of a short run on a loaded host.
    for m in dwarf auto; do
        canopy run --unwind $m --format folded -o $T/vdso-$m.folded -- $WL/wl_clockread 3 clock \
            >/dev/null 2>$T/run.err || fail "vdso-$m: canopy run exited $?: $(tail -3 $T/run.err)"
        main=$(share $T/vdso-$m.folded '(^|;)main;clock_loop[; ]')
        vdso=$(share $T/vdso-$m.folded \
            ';main;clock_loop;(wl_now_ns;)?clock_gettime;__kernel_clock_gettime[; ]' ';main;')
        if ge "$main" 75 && ge "$vdso" 25; then
            pass "vdso-$m: $main% reach main;clock_loop; of those, $vdso% main;clock_loop;…;clock_gettime;__kernel_clock_gettime"
        else
            fail "vdso-$m: $main% reach main;clock_loop (want ≥ 75); of those, $vdso% through __kernel_clock_gettime (want ≥ 25)"
            show $T/vdso-$m.folded
        fi
    done
    # wl_clockread has no frame pointers: auto and dwarf reach main. read_zero's clear_user is
    # an assembler leaf: read_zero itself may be missing; samples at the svc are user only.
    for m in auto dwarf; do
        canopy run --unwind $m --format folded -o $T/kern-$m.folded -- $WL/wl_clockread 3 kernel \
            >/dev/null 2>$T/run.err || fail "kernel-$m: canopy run exited $?: $(tail -3 $T/run.err)"
        main=$(share $T/kern-$m.folded '(^|;)main;zero_loop[; ]')
        k=$(share $T/kern-$m.folded ';main;zero_loop;read;el0t_64_sync;.*el0_svc;.*;vfs_read[; ]' ';main;')
        if ge "$main" 75 && ge "$k" 50; then
            pass "kernel-$m: $main% reach main;zero_loop; of those, $k% main;zero_loop;read;el0t_64_sync;…;el0_svc;…;vfs_read"
        else
            fail "kernel-$m: $main% reach main;zero_loop (want ≥ 75); of those, $k% main;zero_loop;read;el0t_64_sync;…;el0_svc;…;vfs_read (want ≥ 50)"
            show $T/kern-$m.folded
        fi
    done

    sigprof
    # ---- canopyd: attach, threads after attach, live tree, save, persistence ---------------
    canopyd --socket $CANOPY_SOCKET --state-dir $T/state >$T/d.log 2>&1 &
    dpid=$!
    i=0
    while [ ! -S $CANOPY_SOCKET ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -S $CANOPY_SOCKET ] || fail "canopyd: did not start: $(cat $T/d.log)"
    canopy status >$T/status.txt 2>&1 && pass "canopyd: $(head -1 $T/status.txt)" ||
        fail "canopyd status: $(cat $T/status.txt)"

    # Attach to running shares workloads, one per mode; a live tree twice while they run.
    for b in pac nofp; do
        for m in fp dwarf auto; do
            [ $b$m = nofpfp ] && continue
            $WL/wl_shares_$b --rounds $((R * 4)) >/dev/null &
            wpid=$!
            sleep 0.3
            sid=$(canopy attach $wpid --name at-$b-$m --unwind $m -F 499 2>$T/at.err) ||
                fail "attach-$b-$m: $(cat $T/at.err)"
            if [ $b$m = pacdwarf ]; then
                sleep 2
                canopy tree "$sid" --format json >$T/live1.json 2>&1
                sleep 2
                canopy tree "$sid" --format json >$T/live2.json 2>&1
                n1=$(grep -o '"samples":[0-9]*' $T/live1.json | head -1 | cut -d: -f2)
                n2=$(grep -o '"samples":[0-9]*' $T/live2.json | head -1 | cut -d: -f2)
                if [ -n "$n1" ] && [ -n "$n2" ] && [ "$n1" -gt 0 ] && [ "$n2" -gt "$n1" ]; then
                    pass "live-tree: $n1 then $n2 samples while attached"
                else
                    fail "live-tree: samples '$n1' then '$n2': $(head -c 300 $T/live2.json)"
                fi
            fi
            wait $wpid
            canopy tree "$sid" --format folded >$T/at-$b-$m.folded 2>&1 ||
                fail "attach-$b-$m: tree: $(head -3 $T/at-$b-$m.folded)"
            # Attached mid-round: the first and last rounds are partial, and the workload runs
            # 4R rounds so they weigh little.
            check_shares "attach-$b-$m" $m $T/at-$b-$m.folded
        done
    done

    # Threads started after attach: alpha_work is all of its thread's time, beta_x/beta_y
    # 70/30 of the other's. Per thread: how the two vCPUs are shared depends on the host's
    # load. The ratio gets ±8 points: on a loaded host the emulated cycle counter follows
    # host time, and preemptions of the vCPU land on one phase or the other (seen: 63–74).
    # At load average 20 a thread got as few as 116 samples in its 3 s: 60 are required.
    # The clock reads between phases (wl_now_ns;clock_gettime: slow under emulation) take
    # 1-10 % of a thread's samples from run to run (10 % in two fresh-clone CI runs of
    # 2026-11-30, which failed a bound of 90 % that counted them): they are the workload's
    # own time, stacks complete, so the shares are of the samples outside them, and the
    # phases need >= 90 % of those.
    for b in fp pac; do
        $WL/wl_threads_$b 3 1.5 >/dev/null &
        wpid=$!
        sleep 0.3
        sid=$(canopy attach $wpid --name thr-$b -F 499 2>$T/at.err) || fail "threads-$b: $(cat $T/at.err)"
        wait $wpid
        canopy tree "$sid" --format folded >$T/thr-$b.folded 2>&1
        na=$(awk '/;alpha;/ { n += $NF } END { print n + 0 }' $T/thr-$b.folded)
        nb=$(awk '/;beta;/ { n += $NF } END { print n + 0 }' $T/thr-$b.folded)
        al=$(share $T/thr-$b.folded ';alpha;alpha_work;spin[; ]' ';alpha;' ';wl_now_ns;')
        bx=$(share $T/thr-$b.folded ';beta;beta_x;spin[; ]' ';beta;' ';wl_now_ns;')
        by=$(share $T/thr-$b.folded ';beta;beta_y;spin[; ]' ';beta;' ';wl_now_ns;')
        if [ "$na" -ge 60 ] && [ "$nb" -ge 60 ] && awk -v a="$al" -v x="$bx" -v y="$by" '
            BEGIN { t = x + y; if (!t) exit 1; r = 100 * x / t
                    exit !(a >= 90 && x + y >= 90 && r >= 62 && r <= 78) }'; then
            pass "threads-$b: wl-alpha $na samples, alpha_work $al%; wl-beta $nb samples, beta_x $bx%, beta_y $by% (started after attach)"
        else
            fail "threads-$b: wl-alpha $na samples, alpha_work $al% (want ≥ 90); wl-beta $nb samples, beta_x $bx%, beta_y $by% (want 70/30 ±8)"
            show $T/thr-$b.folded
        fi
    done

    python_frames

    # A saved .canopy goes to the host, with canopy open's output here to compare with there.
    canopy save at-pac-dwarf -o $T/shares.canopy 2>$T/save.err || fail "save: $(cat $T/save.err)"
    for f in text folded json; do
        canopy open $T/shares.canopy --format $f >$T/open.$f 2>$T/open.err ||
            fail "open-$f: $(cat $T/open.err)"
    done
    sendfile shares.canopy $T/shares.canopy
    for f in text folded json; do sendfile open.$f $T/open.$f; done
    pass "save: shares.canopy $(wc -c <$T/shares.canopy) bytes sent to the host"

    # Persistence: every session stopped; SIGTERM; restart: the same trees.
    canopy sessions >$T/sessions.txt 2>&1
    canopy tree at-pac-dwarf --format folded >$T/before.folded 2>&1
    canopy tree thr-fp --format folded >$T/before2.folded 2>&1
    kill $dpid
    wait $dpid
    canopyd --socket $CANOPY_SOCKET --state-dir $T/state >>$T/d.log 2>&1 &
    dpid=$!
    i=0
    while ! canopy status >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    canopy tree at-pac-dwarf --format folded >$T/after.folded 2>&1
    canopy tree thr-fp --format folded >$T/after2.folded 2>&1
    if [ -s $T/before.folded ] && cmp -s $T/before.folded $T/after.folded &&
        cmp -s $T/before2.folded $T/after2.folded; then
        pass "persistence: trees identical across a canopyd restart ($(wc -l <$T/after.folded) stacks)"
    else
        fail "persistence: trees differ across restart: $(head -3 $T/after.folded)"
    fi
    kill $dpid
    wait $dpid
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "VMINFO tests took $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", b - a }')s"
}

bench() {
    # docs/perf-sampler.md "arm64": the sampler's CPU per sample under emulation.
    echo 0 >/proc/sys/kernel/perf_cpu_time_max_percent
    for w in deep_fp deep_nofp; do
        for m in fp auto dwarf; do
            [ $w$m = deep_nofpfp ] && continue
            bench_sampler --unwind $m --freq 999 -- $WL/wl_$w 3 0 2>&1 | sed "s/^/VMBENCH /"
        done
    done
    bench_sampler --unwind dwarf --libunwind --freq 999 -- $WL/wl_deep_fp 3 0 2>&1 | sed "s/^/VMBENCH /"
}

case ${1:-test} in
test) tests ;;
bench) bench ;;
debug) . /debug.sh ;; # vm.sh SRC OUT CANOPY debug, with CANOPY_A64_DEBUG=SCRIPT
*) fail "unknown mode $1" ;;
esac
if [ $fails = 0 ]; then
    echo "VMTEST RESULT PASS"
else
    echo "VMTEST RESULT FAIL ($fails failed)"
fi
