/* frame_kind.c — how each format marks a function's kind, written and read in this one
 * place (docs/python.md "Saved sessions, files, exports and the fleet").
 *
 * A kind is its resource's (cn_agg_resource_kind); only the kinds with a marker
 * (cn_agg_resource_kind_marker: "python") are written, the others go unmarked as before.
 * Per format, the convention its users already know:
 * - canopy's JSON outputs: `"kind": "python"` beside "lib";
 * - folded stacks: py-spy's `NAME (FILE)` for a Python function (FILE its library, the
 *   .py file's name), read back as the function NAME of the Python file FILE, as is
 *   py-spy's `NAME (FILE:LINE)`;
 * - pprof: Function.system_name `py::NAME:FILE`, the name CPython's perf trampolines
 *   (`python -X perf`) give the function in perf maps, read back as a Python function
 *   when it names the Function's own name.
 * Nothing here allocates beyond what a caller frees; strings are matched byte for byte.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "formats_internal.h"

const char *cn_fmt__func_kind(const cn_agg_profile *p, int32_t func)
{
    int32_t res = func >= 0 ? cn_agg_func_resource(p, func) : -1;
    return res >= 0 ? cn_agg_resource_kind_marker(cn_agg_resource_kind_of(p, res)) : NULL;
}

int cn_fmt__json_kind(FILE *out, const cn_agg_profile *p, int32_t func)
{
    const char *kind = cn_fmt__func_kind(p, func);
    if (!kind)
        return 0;
    return fputs(",\"kind\":", out) < 0 || cn_fmt__json_str(out, kind) < 0 ? -EIO : 0;
}

/* True when func is a Python function: its resource is a Python source file. */
static bool is_python(const cn_agg_profile *p, int32_t func)
{
    int32_t res = func >= 0 ? cn_agg_func_resource(p, func) : -1;
    return res >= 0 && cn_agg_resource_kind_of(p, res) == CN_AGG_RES_PYTHON;
}

/* ---- folded ------------------------------------------------------------------------ */

long cn_fmt__folded_frame(const cn_agg_profile *p, int32_t func, char **buf, size_t *cap,
                          size_t len)
{
    const char *name = func >= 0 ? cn_agg_func_name(p, func) : NULL;
    const char *lib =
        is_python(p, func) ? cn_agg_resource_name(p, cn_agg_func_resource(p, func)) : NULL;
    name = name ? name : "?";
    size_t nl = strlen(name), ll = lib ? strlen(lib) : 0;
    if (CN_RESERVE(*buf, *cap, len + nl + ll + 5) < 0)
        return -ENOMEM;
    char *o = *buf;
    if (len)
        o[len++] = ';';
    /* A line break would end the line: a blank instead (in the file's name also a ';',
     * which would split the frame). */
    for (size_t i = 0; i < nl; i++)
        o[len++] = name[i] == '\n' || name[i] == '\r' ? ' ' : name[i];
    if (lib) {
        o[len++] = ' ';
        o[len++] = '(';
        for (size_t i = 0; i < ll; i++)
            o[len++] = lib[i] == '\n' || lib[i] == '\r' || lib[i] == ';' ? ' ' : lib[i];
        o[len++] = ')';
    }
    o[len] = '\0';
    return (long)len;
}

/* True when s[0 .. n) names a Python source file: `*.py` or canopy's unknown "[python]". */
static bool python_file(const char *s, size_t n)
{
    return (n > 3 && !memcmp(s + n - 3, ".py", 3)) || (n == 8 && !memcmp(s, "[python]", 8));
}

bool cn_fmt__folded_python(const char *s, size_t n, size_t *name_len, const char **file,
                           size_t *file_len)
{
    if (n < 5 || s[n - 1] != ')')
        return false;
    size_t open = n - 1;
    while (open > 0 && s[open - 1] != '(')
        open--;
    /* "NAME (FILE)": a non-empty NAME, one blank, then the parenthesis. */
    if (open < 3 || s[open - 2] != ' ')
        return false;
    const char *f = s + open;
    size_t fl = n - 1 - open;
    /* py-spy's `FILE:LINE`: the line is dropped (lines are per frame, not per function). */
    size_t colon = fl;
    while (colon > 0 && f[colon - 1] >= '0' && f[colon - 1] <= '9')
        colon--;
    if (colon > 0 && colon < fl && f[colon - 1] == ':')
        fl = colon - 1;
    if (!python_file(f, fl))
        return false;
    *name_len = open - 2;
    *file = f;
    *file_len = fl;
    return true;
}

/* ---- pprof ------------------------------------------------------------------------- */

int cn_fmt__py_system_name(const cn_agg_profile *p, int32_t func, char **out)
{
    *out = NULL;
    if (!is_python(p, func))
        return 0;
    int32_t res = cn_agg_func_resource(p, func);
    const char *file = cn_agg_func_file(p, func);
    if (!file)
        file = cn_agg_resource_path(p, res);
    if (!file)
        file = cn_agg_resource_name(p, res);
    return asprintf(out, "py::%s:%s", cn_agg_func_name(p, func), file) < 0 ? (*out = NULL, -ENOMEM)
                                                                           : 0;
}

const char *cn_fmt__py_system_file(const char *system_name, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(system_name, "py::", 4) || strncmp(system_name + 4, name, n) ||
        system_name[4 + n] != ':')
        return NULL;
    return system_name + 4 + n + 1;
}
