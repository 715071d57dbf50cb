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

static const char query_help[] =
    "QUERY options:\n"
    "  -t, --transform SPEC      apply a transform, repeatable, in order. SPEC is NAME:ARG:\n"
    "                            focus:PATH focus-inverted:PATH focus-func:F focus-self:F\n"
    "                            focus-lib:LIB merge-node:PATH merge:F drop:F hide:PATH\n"
    "                            prune:PATH collapse:F collapse-direct-rec:F collapse-rec:F\n"
    "                            collapse-lib:LIB collapse-all-rec\n"
    "                            (PATH = functions from the root joined by ';')\n"
    "  --invert                  inverted tree (roots are the functions samples were in)\n"
    "  --callees F               calls made by F (all outermost calls of F merged)\n"
    "  --callers F               callers of F; --callers-mode total|self (default total)\n"
    "  --functions               function list: self and total per function\n"
    "  --group-by none|process|thread|state   add a root per process, thread or thread\n"
    "                            state ([running], [blocked], [preempted]: off-cpu, wall)\n"
    "  --no-inline               fold inlined functions into the function they are\n"
    "                            inlined in (the symbol table's function)\n"
    "  --last DURATION           only the last DURATION of the profile (30s, 5m, 500ms)\n"
    "  --from T, --to T          only samples between T and T seconds since the start\n"
    "  --tid TID, --only-pid PID only this thread / process\n"
    "  --depth N                 text: show N levels\n"
    "  --min-percent P           text: hide nodes below P% of the total\n"
    "  --format FMT              text (default), json, folded, pprof, speedscope,\n"
    "                            chrome-trace, svg, firefox (the Firefox Profiler),\n"
    "                            otlp (OpenTelemetry profiles), canopy\n"
    "  -o, --output FILE         write to FILE; the format defaults from its extension\n"
    "                            (.json .folded .pb.gz .speedscope.json .firefox.json\n"
    "                            .trace.json .svg .otlp.pb .canopy)\n";

static void open_help(void)
{
    printf("usage: canopy open FILE [QUERY]\n\n"
           "Analyse a profile file offline: canopy's .canopy, folded stacks, Chrome/V8\n"
           ".cpuprofile, `perf script` output or pprof (.pb/.pb.gz), detected by content\n"
           "(gzip is decompressed first). Prints the call tree (see docs/cli.md).\n\n%s"
           "\nExit status: 0 success, 1 runtime failure, 2 bad usage or bad input.\n",
           query_help);
}

static void timeline_help(void)
{
    printf("usage: canopy timeline FILE|SESSION [--tid T]\n"
           "                       [--format text|json|chrome-trace|speedscope] [-o FILE]\n"
           "                       [-t SPEC]... [--from T --to T | --last DURATION]\n\n"
           "Estimated calls from consecutive samples: a call starts at the first sample\n"
           "that shows it and ends at the first sample that no longer does; calls still\n"
           "open at the last sample end at its time. chrome-trace output loads in\n"
           "chrome://tracing and ui.perfetto.dev; speedscope output (also chosen by\n"
           "-o FILE.speedscope.json) is an evented profile per thread for speedscope.app.\n"
           "Times are in microseconds (speedscope: nanoseconds). An existing file wins\n"
           "over a session name.\n\n"
           "Exit status: 0 success, 1 runtime failure, 2 bad usage or bad input.\n");
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
            fprintf(stderr, "canopy %s: unknown option '%s' (see canopy %s --help)\n", argv[0], a,
                    argv[0]);
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
