/* sampling_opts.c — the SAMPLING options of run, attach, system, tree --pid and top --pid
 * (docs/cli.md): -F/--freq, --event, --unwind, --stack-size, --kernel/--no-kernel,
 * --python/--no-python,
 * --duration, --mode, --min-block and, for sessions, --name, --label, --no-fleet. One
 * option at a time, like the QUERY options, so a command can mix both. Each value goes
 * straight into the session's spec (cn_live_session_opts), which live/'s one validator
 * then checks: the rules are those canopyd applies to the same fields. Errors are one
 * line naming the option.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cn_common.h"
#include "cn_fleet.h"
#include "live.h"

/* The SAMPLING options (docs/cli.md "SAMPLING options") and the session options (--name,
 * --label, --no-fleet: CN_LIVE_NAME): the parser below matches argv against these rows,
 * and --help, the manual and the completion print them. A new option is one row here and
 * one case in cn_cli_parse_sampling_opt for its id. */
enum {
    S_FREQ,
    S_EVENT,
    S_UNWIND,
    S_STACK_SIZE,
    S_KERNEL,
    S_NO_KERNEL,
    S_PYTHON,
    S_NO_PYTHON,
    S_DURATION,
    S_MODE,
    S_MIN_BLOCK,
    S_NAME,
    S_LABEL,
    S_NO_FLEET,
};

const cn_opt cn_cli_sampling_opts[] = {
    {"--freq", "-F", "HZ", "999 for run and temporary sessions, 99 for attach and system",
     "samples per second, 1 to 100000", S_FREQ, CN_LIVE_SAMPLING},
    {"--event", NULL, "EVENT", "cycles where the kernel offers it, else cpu-clock",
     "cpu-clock, task-clock, cycles, ...", S_EVENT, CN_LIVE_SAMPLING},
    {"--unwind", NULL, "fp|dwarf|auto", "auto", "how user stacks are walked", S_UNWIND,
     CN_LIVE_SAMPLING},
    {"--stack-size", NULL, "BYTES", "16384, adaptive in auto",
     "user stack copied per sample (dwarf, auto): a multiple of 8 from 8 to 65528", S_STACK_SIZE,
     CN_LIVE_SAMPLING},
    {"--kernel", NULL, NULL, "on where permitted", "include kernel frames", S_KERNEL,
     CN_LIVE_SAMPLING},
    {"--no-kernel", NULL, NULL, NULL, "leave kernel frames out", S_NO_KERNEL, CN_LIVE_SAMPLING},
    {"--python", NULL, NULL, "on where BPF is permitted",
     "Python functions in CPython's stacks (docs/python.md)", S_PYTHON, CN_LIVE_SAMPLING},
    {"--no-python", NULL, NULL, NULL, "no Python frames", S_NO_PYTHON, CN_LIVE_SAMPLING},
    {"--duration", NULL, "DURATION", "run: until CMD exits; temporary sessions: 5s",
     "stop sampling after DURATION (5s, 2m, 500ms)", S_DURATION, CN_LIVE_SAMPLING},
    {"--mode", NULL, "cpu|off-cpu|wall", "cpu",
     "what is measured: CPU samples, time switched out, or both (weights in ns)", S_MODE,
     CN_LIVE_SAMPLING},
    {"--min-block", NULL, "DURATION", "0",
     "off-cpu, wall: drop off-CPU intervals shorter than DURATION", S_MIN_BLOCK, CN_LIVE_SAMPLING},
    {"--name", NULL, "NAME", "none", "name the session (1 to 64 printable bytes)", S_NAME,
     CN_LIVE_NAME},
    {"--label", NULL, "K=V", "service=the target's name",
     "a label of the session's fleet rows; repeatable", S_LABEL, CN_LIVE_NAME},
    {"--no-fleet", NULL, NULL, "pushed when canopyd has a fleet_url",
     "keep the session out of canopyd's fleet push", S_NO_FLEET, CN_LIVE_NAME},
    {NULL, NULL, NULL, NULL, NULL, 0, 0},
};

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return -EINVAL;
    *out = x;
    return 0;
}

/* After argv[*i]'s value v went into s: live/'s rules, as one line naming opt. */
static int checked(const cn_live_session_opts *s, const char *cmd, const char *opt, const char *v)
{
    cn_err err = {0};
    if (cn_live_session_opts_validate(s, &err) == 0)
        return 1;
    fprintf(stderr, "canopy %s: bad %s '%s': %s\n", cmd, opt, v, err.msg);
    return -1;
}

/* --label K=V into s's labels. */
static int parse_label(cn_live_session_opts *s, const char *cmd, const char *v)
{
    const char *eq = strchr(v, '=');
    char key[CN_FLEET_MAX_KEY + 2];
    cn_err err = {0};
    if (!eq || (size_t)(eq - v) > CN_FLEET_MAX_KEY) {
        fprintf(stderr, "canopy %s: bad --label '%s' (KEY=VALUE expected)\n", cmd, v);
        return -1;
    }
    snprintf(key, sizeof(key), "%.*s", (int)(eq - v), v);
    if (cn_fleet_labels_set(&s->labels, key, eq + 1, &err) < 0) {
        fprintf(stderr, "canopy %s: %s\n", cmd, err.msg);
        return -1;
    }
    return checked(s, cmd, "--label", v);
}

/* --freq, --stack-size, --duration, --min-block: the text to a number, then the rules. */
static int parse_number(cn_live_session_opts *s, const char *cmd, int id, const char *opt,
                        const char *v)
{
    int64_t ns;
    uint64_t bytes;
    long x;
    if (id == S_FREQ) {
        if (parse_long(v, 0, INT32_MAX, &x) < 0) {
            fprintf(stderr, "canopy %s: bad %s '%s' (an integer from 1 to %d Hz)\n", cmd, opt, v,
                    CN_LIVE_FREQ_MAX);
            return -1;
        }
        s->freq = (uint32_t)x;
    } else if (id == S_STACK_SIZE) {
        if (cn_common_parse_size(v, &bytes) < 0 || bytes == 0 || bytes > UINT32_MAX) {
            fprintf(stderr, "canopy %s: bad --stack-size '%s' (a size in bytes, e.g. 8K)\n", cmd,
                    v);
            return -1;
        }
        s->stack_size = (uint32_t)bytes;
    } else if (id == S_DURATION) {
        if (cn_common_parse_duration(v, &ns) < 0 || ns <= 0) {
            fprintf(stderr, "canopy %s: bad --duration '%s' (e.g. 5s, 2m, 500ms)\n", cmd, v);
            return -1;
        }
        s->duration_ns = ns;
    } else {
        if (cn_common_parse_duration(v, &ns) < 0 || ns < 0) {
            fprintf(stderr, "canopy %s: bad --min-block '%s' (e.g. 1ms, 100us)\n", cmd, v);
            return -1;
        }
        s->min_block_ns = (uint64_t)ns;
    }
    return checked(s, cmd, opt, v);
}

/* --event, --unwind, --mode, --name (strings borrow argv, which outlives the command). */
static int parse_word(cn_live_session_opts *s, const char *cmd, int id, const char *opt,
                      const char *v)
{
    if (id == S_EVENT) {
        s->event = v;
    } else if (id == S_UNWIND) {
        if (cn_smp_unwind_parse(v, &s->unwind) < 0) {
            fprintf(stderr, "canopy %s: bad --unwind '%s' (fp, dwarf or auto)\n", cmd, v);
            return -1;
        }
    } else if (id == S_MODE) {
        if (cn_smp_mode_parse(v, &s->mode) < 0) {
            fprintf(stderr, "canopy %s: bad --mode '%s' (cpu, off-cpu or wall)\n", cmd, v);
            return -1;
        }
    } else {
        s->name = v;
    }
    return checked(s, cmd, opt, v);
}

int cn_cli_parse_sampling_opt(cn_live_session_opts *s, const char *cmd, bool allow_name, int argc,
                              char **argv, int *i)
{
    const char *a = argv[*i], *v;
    const cn_opt *o =
        cn_opt_match(cn_cli_sampling_opts, CN_LIVE_SAMPLING | (allow_name ? CN_LIVE_NAME : 0), argc,
                     argv, i, &v);
    if (!o)
        return 0;
    /* The name as written (-F or --freq). */
    char name[32];
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(a, "="), a);
    if (o->arg && !v) {
        fprintf(stderr, "canopy %s: %s needs a value\n", cmd, name);
        return -1;
    }
    switch (o->id) {
    case S_FREQ:
    case S_STACK_SIZE:
    case S_DURATION:
    case S_MIN_BLOCK:
        return parse_number(s, cmd, o->id, name, v);
    case S_EVENT:
    case S_UNWIND:
    case S_MODE:
    case S_NAME:
        return parse_word(s, cmd, o->id, name, v);
    case S_LABEL:
        return parse_label(s, cmd, v);
    case S_KERNEL:
    case S_NO_KERNEL:
        s->no_kernel = o->id == S_NO_KERNEL;
        return 1;
    case S_PYTHON:
    case S_NO_PYTHON:
        s->no_python = o->id == S_NO_PYTHON;
        return 1;
    case S_NO_FLEET:
        s->no_fleet = true;
        return 1;
    }
    return 0;
}
