/* bench_sampler.c — the sampler's own cost per sample (ring read + parse + ordering +
 * address-space lookup + unwind; interning is aggregate's and not included), measured as
 * this thread's CPU time inside cn_smp_session_read/_stop divided by the samples
 * delivered, on a workload started the way `canopy run` starts it.
 *
 *   bench_sampler [--unwind MODE] [--freq HZ] [--stack-size BYTES] [--libunwind] [--]
 *                 CMD ARGS...
 *       one run; prints samples, lost, early stops, frames per sample and µs per sample;
 *       in auto without --stack-size, also the adaptive copy's size at the end, its shrinks
 *       and grows, and µs per sample since its last change (the steady state).
 *   bench_sampler --run MODE FREQ -- CMD ARGS...
 *       just runs CMD under the sampler (used by bench/overhead.sh); MODE "none" runs it
 *       without sampling.
 * Without CMD: the default suite over $CANOPY_WORKLOADS (30-frame stacks with and without
 * frame pointers, in every mode; 2 busy threads at 999 Hz for lost records). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cn_smp.h"

typedef struct stats {
    uint64_t samples, frames;
    uint64_t steady_spent, steady_samples; /* since the copy size last changed */
} stats;

static void on_sample(void *arg, const cn_smp_sample *s)
{
    stats *st = arg;
    st->samples++;
    st->frames += s->nframes;
}

static uint64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Runs argv under the sampler; fills the results. Returns 0 or negative errno. */
static int run_one(char **argv, cn_smp_unwind mode, uint32_t freq, uint32_t stack_size,
                   bool libunwind_only, stats *st, cn_smp_counters *cnt, double *us_per_sample)
{
    cn_smp_child child;
    int ret = cn_smp_spawn(argv, (uid_t)-1, (gid_t)-1, &child);
    if (ret < 0)
        return ret;
    cn_smp_config cfg = {.target = CN_SMP_TARGET_PID,
                         .pid = child.pid,
                         .freq = freq,
                         .unwind = mode,
                         .enable_on_exec = true,
                         .stack_size = stack_size,
                         .libunwind_only = libunwind_only};
    cn_smp_callbacks cb = {.sample = on_sample};
    cn_smp_session *s = NULL;
    memset(st, 0, sizeof(*st));
    cn_err err = {0};
    ret = cn_smp_session_new(&cfg, &cb, st, &s);
    if (ret == 0)
        ret = cn_smp_session_start(s, &err);
    if (ret < 0) {
        fprintf(stderr, "bench_sampler: %s\n", err.msg[0] ? err.msg : strerror(-ret));
        cn_smp_child_abort(&child);
        cn_smp_session_free(s);
        return ret;
    }
    cn_smp_child_release(&child);
    uint64_t spent = 0;
    /* The steady state of auto's adaptive copy: from the last change of copy size on. */
    uint64_t changes = 0;
    st->steady_spent = st->steady_samples = 0;
    while (!cn_smp_session_ended(s)) {
        uint64_t t0 = cpu_ns();
        if (cn_smp_session_wait(s, 100) < 0)
            break;
        spent += cpu_ns() - t0;
        cn_smp_counters now;
        cn_smp_session_counters(s, &now);
        if (now.stack_shrinks + now.stack_grows != changes) {
            changes = now.stack_shrinks + now.stack_grows;
            st->steady_spent = spent;
            st->steady_samples = st->samples;
        }
    }
    uint64_t t0 = cpu_ns();
    cn_smp_session_stop(s);
    spent += cpu_ns() - t0;
    st->steady_spent = spent - st->steady_spent;
    st->steady_samples = st->samples - st->steady_samples;
    waitpid(child.pid, NULL, 0);
    cn_smp_session_counters(s, cnt);
    cn_smp_session_free(s);
    *us_per_sample = st->samples ? (double)spent / 1e3 / (double)st->samples : 0;
    return 0;
}

static void report(const char *what, cn_smp_unwind mode, bool libunwind_only, uint32_t freq,
                   const stats *st, const cn_smp_counters *c, double us)
{
    char how[32];
    snprintf(how, sizeof(how), "%s%s", cn_smp_unwind_name(mode),
             libunwind_only ? "/libunwind" : "");
    printf("%-20s %-15s %5u Hz  samples %6llu  lost %4llu  early-stops %4llu  frames/sample "
           "%5.1f  %7.2f us/sample\n",
           what, how, freq, (unsigned long long)st->samples, (unsigned long long)c->lost,
           (unsigned long long)c->unwind_early,
           st->samples ? (double)st->frames / (double)st->samples : 0.0, us);
    if (c->stack_adaptive)
        printf("%-20s stack copy %llu bytes (adaptive%s): shrinks %llu grows %llu, twins "
               "dropped %llu; steady state %llu samples %7.2f us/sample\n",
               "", (unsigned long long)c->stack_copy, c->stack_chain_off ? ", alone" : "",
               (unsigned long long)c->stack_shrinks, (unsigned long long)c->stack_grows,
               (unsigned long long)c->stack_switch_dropped, (unsigned long long)st->steady_samples,
               st->steady_samples ? (double)st->steady_spent / 1e3 / (double)st->steady_samples
                                  : 0.0);
}

static int suite(void)
{
    const char *dir = getenv("CANOPY_WORKLOADS");
    if (!dir)
        dir = "build/tests/workloads";
    static const struct {
        const char *bin, *arg;
        uint32_t freq;
    } runs[] = {
        {"wl_deep_fp", "3", 999},
        {"wl_deep_nofp", "3", 999},
        {"wl_threads_fp", "3", 999},
    };
    /* Each mode, and DWARF once more with libunwind alone (no compiled CFI) to compare. */
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        for (int m = CN_SMP_UNWIND_AUTO; m <= CN_SMP_UNWIND_DWARF + 1; m++) {
            cn_smp_unwind mode = m > CN_SMP_UNWIND_DWARF ? CN_SMP_UNWIND_DWARF : (cn_smp_unwind)m;
            bool lu = m > CN_SMP_UNWIND_DWARF;
            char path[1024];
            snprintf(path, sizeof(path), "%s/%s", dir, runs[i].bin);
            char *argv[] = {path, (char *)runs[i].arg, (char *)"0", NULL};
            stats st;
            cn_smp_counters c;
            double us;
            if (run_one(argv, mode, runs[i].freq, 0, lu, &st, &c, &us) < 0)
                return 1;
            report(runs[i].bin, mode, lu, runs[i].freq, &st, &c, us);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    cn_smp_unwind mode = CN_SMP_UNWIND_AUTO;
    uint32_t freq = 999;
    bool libunwind_only = false;
    uint32_t stack_size = 0;
    int i = 1;
    if (argc > 3 && strcmp(argv[1], "--run") == 0) {
        bool none = strcmp(argv[2], "none") == 0;
        if (!none && cn_smp_unwind_parse(argv[2], &mode) < 0)
            return 2;
        freq = (uint32_t)atoi(argv[3]);
        i = 4;
        if (i < argc && strcmp(argv[i], "--") == 0)
            i++;
        if (i >= argc)
            return 2;
        if (none) {
            execvp(argv[i], &argv[i]);
            return 127;
        }
        stats st;
        cn_smp_counters c;
        double us;
        return run_one(&argv[i], mode, freq, 0, false, &st, &c, &us) < 0 ? 1 : 0;
    }
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        } else if (strcmp(argv[i], "--unwind") == 0 && i + 1 < argc) {
            if (cn_smp_unwind_parse(argv[++i], &mode) < 0)
                return 2;
        } else if (strcmp(argv[i], "--stack-size") == 0 && i + 1 < argc) {
            stack_size = (uint32_t)atoi(argv[++i]);
        } else if (strcmp(argv[i], "--libunwind") == 0) {
            libunwind_only = true;
        } else if (strcmp(argv[i], "--freq") == 0 && i + 1 < argc) {
            freq = (uint32_t)atoi(argv[++i]);
        } else {
            fprintf(stderr, "bench_sampler: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc)
        return suite();
    stats st;
    cn_smp_counters c;
    double us;
    if (run_one(&argv[i], mode, freq, stack_size, libunwind_only, &st, &c, &us) < 0)
        return 1;
    report(argv[i], mode, libunwind_only, freq, &st, &c, us);
    return 0;
}
