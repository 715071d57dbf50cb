/* fuzz_web_query.c — libFuzzer target for `canopy web`'s page queries (client/web_server.c):
 * the input's lines are the `arg` parameters of one /api/tree request (at most
 * CN_WEB_MAX_ARGS, as the server bounds them), parsed by cn_cli_web_query (the one QUERY
 * option parser, then web's refusals) and, when accepted, rendered on a small profile by
 * the renderer the server calls for files (cn_cli_render_mem), as the server would; a first
 * line "format=F" makes it an /api/export request, "func=F" an /api/lines one. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "web.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char profile_text[] = "main;<img src=x>;leaf 6\n"
                                   "main;work_a;burn 5\n"
                                   "main;work_b;work_b_inner;burn 3\n"
                                   "main;work_c;work_c;burn 2\n";

/* Splits data at '\n' into NUL-terminated copies in args (at most CN_WEB_MAX_ARGS). */
static int split(const uint8_t *data, size_t size, char **args)
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && n < CN_WEB_MAX_ARGS; i++) {
        if (i < size && data[i] != '\n')
            continue;
        size_t len = i - start;
        if (len > CN_WEB_MAX_ARG_LEN || !(args[n] = malloc(len + 1)))
            break;
        memcpy(args[n], data + start, len);
        args[n++][len] = '\0';
        start = i + 1;
    }
    return n;
}

/* As the server answers a file's page: the tree or export (cn_cli_render_mem), or the
 * lines of func (cn_fmt_lines_json). */
static void render(const cn_cli_query *q, const char *func)
{
    cn_agg_profile *p = NULL;
    cn_fmt_render_opts o;
    cn_err err = {0};
    char *out = NULL;
    size_t len = 0;
    json_t *doc = NULL;

    if (cn_fmt_import_buffer(profile_text, sizeof(profile_text) - 1, "fuzz", &p, &err) < 0)
        abort(); /* the harness's own profile must load */
    cn_fmt_render_opts_init(&o);
    if (func && cn_fmt_lines_json(p, &q->spec, &o, func, &doc, &err) == 0)
        json_decref(doc);
    if (!func && cn_cli_render_mem(p, &q->spec, &o, &out, &len, &err) == 0)
        free(out);
    cn_agg_profile_free(p);
}

/* The first line, when it starts with "format=" or "func=", is /api/export's format
 * parameter or /api/lines' func parameter; the other lines are the args. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *args[CN_WEB_MAX_ARGS];
    int n = split(data, size, args);
    const char *format = NULL, *func = NULL;
    int first = 0;
    cn_cli_query q;
    cn_err err = {0};

    if (n > 0 && !strncmp(args[0], "format=", 7))
        format = args[first++] + 7;
    else if (n > 0 && !strncmp(args[0], "func=", 5))
        func = args[first++] + 5;
    cn_cli_query_init(&q);
    if (cn_cli_web_query(args + first, n - first, format, &q, &err) == 0)
        render(&q, func);
    cn_cli_query_clear(&q);
    for (int i = 0; i < n; i++)
        free(args[i]);
    return 0;
}
