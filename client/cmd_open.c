/* cmd_open.c — the offline commands: `canopy open FILE [QUERY]` and
 * `canopy timeline FILE [--tid T] [--format text|json|chrome-trace|speedscope]`.
 *
 * Both load the whole file with the importers (cn_fmt_import_file: format found by
 * content), then hand the profile and the parsed spec to the one renderer (cn_cli_render:
 * cn_fmt_render, a timeline when spec.timeline). Output is buffered and emitted only on
 * success.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "live.h"

static void open_help(void)
{
    cn_cli_help("open");
}

static void timeline_help(void)
{
    cn_cli_help("timeline");
}

/* Loads path into *out. Returns an exit status after printing the importer's one-line
 * error (which names the file and the line or byte offset). */
static int load(const char *path, cn_agg_profile **out)
{
    cn_err err = {0};
    int rc = cn_fmt_import_file(path, out, &err);

    if (rc < 0) {
        if (err.msg[0])
            fprintf(stderr, "canopy: %s\n", CN_TERM_STR(err.msg));
        else
            fprintf(stderr, "canopy: %s: %s\n", path, strerror(-rc));
        return rc == -ENOMEM ? CN_EXIT_FAIL : CN_EXIT_USAGE;
    }
    return CN_EXIT_OK;
}

/* Parses `CMD FILE [options]` into *file and q. Returns -1 when done successfully
 * (continue), or an exit status (0 after --help, 2 after an error). */
static int parse_args(int argc, char **argv, const char **file, cn_cli_query *q, void (*help)(void))
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            help();
            return CN_EXIT_OK;
        }
        int r = cn_cli_parse_query_opt(q, argc, argv, &i);
        if (r < 0)
            return CN_EXIT_USAGE;
        if (r > 0)
            continue;
        /* timeline's --socket (for a SESSION) means nothing for a file: accepted, unused. */
        const char *v;
        const cn_opt *o = cn_cli_command_find(argv[0])->tables & CN_LIVE_CONNECT
                              ? cn_opt_match(cn_cli_live_opts, CN_LIVE_CONNECT, argc, argv, &i, &v)
                              : NULL;
        if (o && o->arg && !v) {
            fprintf(stderr, "canopy %s: %s needs a value\n", argv[0], o->lng);
            return CN_EXIT_USAGE;
        }
        if (o)
            continue;
        if (!strcmp(a, "--")) {
            if (i + 1 < argc && !*file)
                *file = argv[++i];
            if (i + 1 < argc) {
                fprintf(stderr, "canopy %s: unexpected argument '%s'\n", argv[0], argv[i + 1]);
                return CN_EXIT_USAGE;
            }
            break;
        }
        if (a[0] == '-' && a[1]) {
            cn_cli_unknown_option(argv[0], a);
            return CN_EXIT_USAGE;
        }
        if (*file) {
            fprintf(stderr, "canopy %s: unexpected argument '%s' (one FILE only)\n", argv[0], a);
            return CN_EXIT_USAGE;
        }
        *file = a;
    }
    if (!*file) {
        fprintf(stderr, "canopy %s: missing FILE (see canopy %s --help)\n", argv[0], argv[0]);
        return CN_EXIT_USAGE;
    }
    if (cn_cli_query_finish(q) < 0)
        return CN_EXIT_USAGE;
    return -1;
}

int cn_cmd_open(int argc, char **argv)
{
    cn_cli_query q;
    cn_agg_profile *p = NULL;
    const char *file = NULL;
    int status;

    cn_cli_query_init(&q);
    status = parse_args(argc, argv, &file, &q, open_help);
    if (status >= 0)
        goto out;
    status = load(file, &p);
    if (status != CN_EXIT_OK)
        goto out;
    cn_fmt_render_opts o;
    cn_fmt_render_opts_init(&o);
    o.title = file;
    status = cn_cli_render(p, &q, &o);
out:
    cn_agg_profile_free(p);
    cn_cli_query_clear(&q);
    return status;
}

int cn_cmd_timeline(int argc, char **argv)
{
    cn_cli_query q;
    cn_agg_profile *p = NULL;
    const char *file = NULL;
    int status;

    /* SESSION or FILE: an existing file path wins (docs/cli.md). */
    if (argc > 1 && argv[1][0] != '-' && access(argv[1], F_OK) != 0)
        return cn_cli_live_timeline(argc, argv);
    cn_cli_query_init(&q);
    status = parse_args(argc, argv, &file, &q, timeline_help);
    if (status >= 0)
        goto out;
    if ((status = cn_cli_timeline_check(&q)) != CN_EXIT_OK)
        goto out;
    status = load(file, &p);
    if (status != CN_EXIT_OK)
        goto out;
    q.spec.timeline = true;
    status = cn_cli_render(p, &q, NULL);
out:
    cn_agg_profile_free(p);
    cn_cli_query_clear(&q);
    return status;
}
