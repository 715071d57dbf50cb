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

/* "--freq=99" or "--freq 99": the value, or NULL after printing an error. */
static const char *opt_value(const char *cmd, const char *opt, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (!strncmp(a, opt, n) && a[n] == '=')
        return a + n + 1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "canopy %s: %s needs a value\n", cmd, opt);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

/* Does argv[*i] name opt, alone or as opt=VALUE? */
static bool is_opt(const char *a, const char *opt)
{
    size_t n = strlen(opt);
    return !strncmp(a, opt, n) && (a[n] == '\0' || a[n] == '=');
}

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
static int parse_number(cn_live_session_opts *s, const char *cmd, const char *opt, const char *v)
{
    int64_t ns;
    uint64_t bytes;
    long x;
    if (!strcmp(opt, "--freq") || !strcmp(opt, "-F")) {
        if (parse_long(v, 0, INT32_MAX, &x) < 0) {
            fprintf(stderr, "canopy %s: bad %s '%s' (an integer from 1 to %d Hz)\n", cmd, opt, v,
                    CN_LIVE_FREQ_MAX);
            return -1;
        }
        s->freq = (uint32_t)x;
    } else if (!strcmp(opt, "--stack-size")) {
        if (cn_common_parse_size(v, &bytes) < 0 || bytes == 0 || bytes > UINT32_MAX) {
            fprintf(stderr, "canopy %s: bad --stack-size '%s' (a size in bytes, e.g. 8K)\n", cmd,
                    v);
            return -1;
        }
        s->stack_size = (uint32_t)bytes;
    } else if (!strcmp(opt, "--duration")) {
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
static int parse_word(cn_live_session_opts *s, const char *cmd, const char *opt, const char *v)
{
    if (!strcmp(opt, "--event")) {
        s->event = v;
    } else if (!strcmp(opt, "--unwind")) {
        if (cn_smp_unwind_parse(v, &s->unwind) < 0) {
            fprintf(stderr, "canopy %s: bad --unwind '%s' (fp, dwarf or auto)\n", cmd, v);
            return -1;
        }
    } else if (!strcmp(opt, "--mode")) {
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
    static const char *const numbers[] = {"--freq", "--stack-size", "--duration", "--min-block"};
    static const char *const words[] = {"--event", "--unwind", "--mode", "--name"};
    const char *a = argv[*i], *v;

    if (!strcmp(a, "-F"))
        return (v = opt_value(cmd, "-F", argc, argv, i)) ? parse_number(s, cmd, "-F", v) : -1;
    for (size_t k = 0; k < sizeof(numbers) / sizeof(numbers[0]); k++)
        if (is_opt(a, numbers[k]))
            return (v = opt_value(cmd, numbers[k], argc, argv, i))
                       ? parse_number(s, cmd, numbers[k], v)
                       : -1;
    for (size_t k = 0; k < sizeof(words) / sizeof(words[0]); k++)
        if (is_opt(a, words[k]) && (k < 3 || allow_name))
            return (v = opt_value(cmd, words[k], argc, argv, i)) ? parse_word(s, cmd, words[k], v)
                                                                 : -1;
    if (!strcmp(a, "--kernel") || !strcmp(a, "--no-kernel")) {
        s->no_kernel = !strcmp(a, "--no-kernel");
        return 1;
    }
    if (!strcmp(a, "--python") || !strcmp(a, "--no-python")) {
        s->no_python = !strcmp(a, "--no-python");
        return 1;
    }
    if (allow_name && is_opt(a, "--label"))
        return (v = opt_value(cmd, "--label", argc, argv, i)) ? parse_label(s, cmd, v) : -1;
    if (allow_name && !strcmp(a, "--no-fleet")) {
        s->no_fleet = true;
        return 1;
    }
    return 0;
}
