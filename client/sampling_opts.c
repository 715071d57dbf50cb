/* sampling_opts.c — the SAMPLING options of run, attach, system, tree --pid and top --pid
 * (docs/cli.md): -F/--freq, --event, --unwind, --stack-size, --kernel/--no-kernel,
 * --duration, --mode, --min-block and, for sessions, --name. One option at a time, like the QUERY
 * options, so a command can mix both; values are checked here and errors printed as one line.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cn_common.h"
#include "cn_fleet.h"
#include "live.h"

/* Bounds that keep a user from asking the kernel for nonsense. */
#define FREQ_MAX       100000
#define STACK_SIZE_MAX 65528u /* perf_event_attr.sample_stack_user limit, 8-aligned */

void cn_cli_sampling_init(cn_cli_sampling *s)
{
    memset(s, 0, sizeof(*s));
    s->kernel = -1;
}

void cn_cli_sampling_clear(cn_cli_sampling *s)
{
    if (!s)
        return;
    free(s->event);
    free(s->name);
    json_decref(s->labels);
    cn_cli_sampling_init(s);
}

const char *cn_cli_unwind_name(cn_cli_unwind u)
{
    switch (u) {
    case CN_CLI_UNWIND_FP:
        return "fp";
    case CN_CLI_UNWIND_DWARF:
        return "dwarf";
    default:
        return "auto";
    }
}

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

static int set_string(char **dst, const char *v)
{
    char *c = strdup(v);
    if (!c)
        return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

int cn_cli_parse_sampling_opt(cn_cli_sampling *s, const char *cmd, bool allow_name, int argc,
                              char **argv, int *i)
{
    const char *a = argv[*i], *v;
    long x;

    if (!strcmp(a, "-F") || is_opt(a, "--freq")) {
        if (!(v = opt_value(cmd, !strcmp(a, "-F") ? "-F" : "--freq", argc, argv, i)))
            return -1;
        if (parse_long(v, 1, FREQ_MAX, &x) < 0) {
            fprintf(stderr, "canopy %s: bad --freq '%s' (an integer from 1 to %d Hz)\n", cmd, v,
                    FREQ_MAX);
            return -1;
        }
        s->freq = (int)x;
        return 1;
    }
    if (is_opt(a, "--event")) {
        if (!(v = opt_value(cmd, "--event", argc, argv, i)))
            return -1;
        if (!*v || strlen(v) > 64 ||
            strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-_:/=,") != strlen(v)) {
            fprintf(stderr, "canopy %s: bad --event '%s'\n", cmd, v);
            return -1;
        }
        if (set_string(&s->event, v) < 0)
            goto nomem;
        return 1;
    }
    if (is_opt(a, "--unwind")) {
        if (!(v = opt_value(cmd, "--unwind", argc, argv, i)))
            return -1;
        if (!strcmp(v, "fp"))
            s->unwind = CN_CLI_UNWIND_FP;
        else if (!strcmp(v, "dwarf"))
            s->unwind = CN_CLI_UNWIND_DWARF;
        else if (!strcmp(v, "auto"))
            s->unwind = CN_CLI_UNWIND_AUTO;
        else {
            fprintf(stderr, "canopy %s: bad --unwind '%s' (fp, dwarf or auto)\n", cmd, v);
            return -1;
        }
        return 1;
    }
    if (is_opt(a, "--stack-size")) {
        uint64_t bytes;
        if (!(v = opt_value(cmd, "--stack-size", argc, argv, i)))
            return -1;
        if (cn_common_parse_size(v, &bytes) < 0 || bytes < 8 || bytes > STACK_SIZE_MAX) {
            fprintf(stderr, "canopy %s: bad --stack-size '%s' (8 to %u bytes)\n", cmd, v,
                    STACK_SIZE_MAX);
            return -1;
        }
        s->stack_size = (uint32_t)(bytes & ~7ull);
        return 1;
    }
    if (!strcmp(a, "--kernel") || !strcmp(a, "--no-kernel")) {
        s->kernel = !strcmp(a, "--kernel");
        return 1;
    }
    if (is_opt(a, "--duration")) {
        int64_t ns;
        if (!(v = opt_value(cmd, "--duration", argc, argv, i)))
            return -1;
        if (cn_common_parse_duration(v, &ns) < 0 || ns <= 0) {
            fprintf(stderr, "canopy %s: bad --duration '%s' (e.g. 5s, 2m, 500ms)\n", cmd, v);
            return -1;
        }
        s->duration_ns = ns;
        return 1;
    }
    if (is_opt(a, "--mode")) {
        if (!(v = opt_value(cmd, "--mode", argc, argv, i)))
            return -1;
        if (cn_smp_mode_parse(v, &s->mode) < 0) {
            fprintf(stderr, "canopy %s: bad --mode '%s' (cpu, off-cpu or wall)\n", cmd, v);
            return -1;
        }
        return 1;
    }
    if (is_opt(a, "--min-block")) {
        int64_t ns;
        if (!(v = opt_value(cmd, "--min-block", argc, argv, i)))
            return -1;
        if (cn_common_parse_duration(v, &ns) < 0 || ns < 0) {
            fprintf(stderr, "canopy %s: bad --min-block '%s' (e.g. 1ms, 100us)\n", cmd, v);
            return -1;
        }
        s->min_block_ns = ns;
        return 1;
    }
    if (allow_name && is_opt(a, "--name")) {
        if (!(v = opt_value(cmd, "--name", argc, argv, i)))
            return -1;
        /* A name must not look like a session id or a file path, and must be printable. */
        if (!*v || strlen(v) > 64 || strchr(v, '/') || v[0] == '-' ||
            strspn(v, "0123456789") == strlen(v)) {
            fprintf(stderr,
                    "canopy %s: bad --name '%s' (1-64 characters, no '/', not all digits)\n", cmd,
                    v);
            return -1;
        }
        for (const char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                fprintf(stderr, "canopy %s: bad --name (control characters)\n", cmd);
                return -1;
            }
        if (set_string(&s->name, v) < 0)
            goto nomem;
        return 1;
    }
    if (allow_name && is_opt(a, "--label")) {
        /* Labels of the session's fleet rows (docs/fleet.md); canopyd checks them again. */
        if (!(v = opt_value(cmd, "--label", argc, argv, i)))
            return -1;
        const char *eq = strchr(v, '=');
        char key[CN_FLEET_MAX_KEY + 2];
        cn_err err = {0};
        if (!eq || (size_t)(eq - v) > CN_FLEET_MAX_KEY) {
            fprintf(stderr, "canopy %s: bad --label '%s' (KEY=VALUE expected)\n", cmd, v);
            return -1;
        }
        snprintf(key, sizeof(key), "%.*s", (int)(eq - v), v);
        if (cn_fleet_label_check(key, eq + 1, &err) < 0 || !strcmp(key, "host")) {
            fprintf(stderr, "canopy %s: %s\n", cmd,
                    err.msg[0] ? err.msg : "label host is set by canopyd (fleet_host)");
            return -1;
        }
        if ((!s->labels && !(s->labels = json_object())) ||
            json_object_set_new(s->labels, key, json_string(eq + 1)) < 0)
            goto nomem;
        return 1;
    }
    if (allow_name && !strcmp(a, "--no-fleet")) {
        s->no_fleet = true;
        return 1;
    }
    return 0;
nomem:
    fprintf(stderr, "canopy %s: out of memory\n", cmd);
    return -1;
}

int cn_cli_sampling_to_json(const cn_cli_sampling *s, int default_freq, json_t *req)
{
    int rc = 0;
    rc |= json_object_set_new(req, "freq", json_integer(s->freq ? s->freq : default_freq));
    if (s->event)
        rc |= json_object_set_new(req, "event", json_string(s->event));
    rc |= json_object_set_new(req, "unwind", json_string(cn_cli_unwind_name(s->unwind)));
    if (s->stack_size)
        rc |= json_object_set_new(req, "stack_size", json_integer(s->stack_size));
    if (s->kernel >= 0)
        rc |= json_object_set_new(req, "kernel", json_boolean(s->kernel));
    if (s->duration_ns) /* a duration string, in ms so nothing is rounded away */
        rc |= json_object_set_new(req, "duration",
                                  json_sprintf("%lldms", (long long)(s->duration_ns / 1000000)));
    if (s->name)
        rc |= json_object_set_new(req, "name", json_string(s->name));
    if (s->mode != CN_SMP_MODE_CPU)
        rc |= json_object_set_new(req, "mode", json_string(cn_smp_mode_name(s->mode)));
    if (s->min_block_ns) /* a duration string, in us so nothing is rounded away */
        rc |= json_object_set_new(req, "min_block",
                                  json_sprintf("%lldus", (long long)(s->min_block_ns / 1000)));
    if (s->labels)
        rc |= json_object_set(req, "labels", s->labels);
    if (s->no_fleet)
        rc |= json_object_set_new(req, "fleet", json_false());
    return rc ? -ENOMEM : 0;
}
