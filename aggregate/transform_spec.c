/* transform_spec.c — transforms as the user writes them: "NAME:ARG" parsing and
 * formatting, argument checks against a profile, renaming after symbolication (§4.3),
 * and the path mapping of each transform (§2, "Canopy's operations").
 *
 * Ownership: a cn_agg_transform owns arg and path (and each path element); they are
 * released by cn_agg_transform_clear. Paths passed to and returned by cn_agg_map_path are
 * arrays of malloc'ed strings.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "q_engine.h"

static const char *const tf_names[CN_AGG_TF__COUNT] = {
    [CN_AGG_TF_FOCUS] = "focus",
    [CN_AGG_TF_FOCUS_INVERTED] = "focus-inverted",
    [CN_AGG_TF_FOCUS_FUNC] = "focus-func",
    [CN_AGG_TF_FOCUS_SELF] = "focus-self",
    [CN_AGG_TF_FOCUS_LIB] = "focus-lib",
    [CN_AGG_TF_MERGE_NODE] = "merge-node",
    [CN_AGG_TF_MERGE] = "merge",
    [CN_AGG_TF_DROP] = "drop",
    [CN_AGG_TF_HIDE] = "hide",
    [CN_AGG_TF_PRUNE] = "prune",
    [CN_AGG_TF_COLLAPSE] = "collapse",
    [CN_AGG_TF_COLLAPSE_DIRECT_REC] = "collapse-direct-rec",
    [CN_AGG_TF_COLLAPSE_REC] = "collapse-rec",
    [CN_AGG_TF_COLLAPSE_LIB] = "collapse-lib",
    [CN_AGG_TF_COLLAPSE_ALL_REC] = "collapse-all-rec",
    [CN_AGG_TF_SEARCH] = "search",
};

const char *cn_agg_tf_name(cn_agg_tf_kind kind)
{
    return (unsigned)kind < CN_AGG_TF__COUNT ? tf_names[kind] : NULL;
}

bool cn_agg_tf_takes_path(cn_agg_tf_kind kind)
{
    return kind == CN_AGG_TF_FOCUS || kind == CN_AGG_TF_FOCUS_INVERTED ||
           kind == CN_AGG_TF_MERGE_NODE || kind == CN_AGG_TF_HIDE || kind == CN_AGG_TF_PRUNE;
}

static bool takes_lib(cn_agg_tf_kind kind)
{
    return kind == CN_AGG_TF_FOCUS_LIB || kind == CN_AGG_TF_COLLAPSE_LIB;
}

void cn_agg_transform_clear(cn_agg_transform *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->path_len; i++)
        free(t->path[i]);
    free(t->path);
    free(t->arg);
    memset(t, 0, sizeof(*t));
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Splits arg into t->path: at ';' for PATH kinds, else one element. */
static int split_arg(cn_agg_transform *t)
{
    size_t n = 1;
    bool split = cn_agg_tf_takes_path(t->kind);
    if (t->kind == CN_AGG_TF_COLLAPSE_ALL_REC)
        n = 0;
    for (const char *c = t->arg; split && *c; c++)
        n += *c == ';';
    t->path = calloc(n ? n : 1, sizeof(*t->path));
    if (!t->path)
        return -ENOMEM;
    const char *s = t->arg;
    for (size_t i = 0; i < n; i++) {
        const char *e = split ? strchr(s, ';') : NULL;
        size_t len = e ? (size_t)(e - s) : strlen(s);
        t->path[i] = strndup(s, len);
        if (!t->path[i])
            return -ENOMEM;
        t->path_len = i + 1;
        s += len + 1;
    }
    return 0;
}

int cn_agg_transform_parse(const char *spec, cn_agg_transform *out, cn_err *err)
{
    cn_agg_transform t = {0};
    if (!spec || !out)
        return cn_err_set(err, -EINVAL, "transform: missing SPEC");
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    int k;
    for (k = 0; k < CN_AGG_TF__COUNT; k++)
        if (strlen(tf_names[k]) == nlen && strncmp(tf_names[k], spec, nlen) == 0)
            break;
    if (k == CN_AGG_TF__COUNT)
        return cn_err_set(err, -EINVAL, "transform '%s': unknown operation '%.*s'", spec, (int)nlen,
                          spec);
    t.kind = (cn_agg_tf_kind)k;
    const char *arg = colon ? colon + 1 : "";
    if (t.kind == CN_AGG_TF_COLLAPSE_ALL_REC && *arg)
        return cn_err_set(err, -EINVAL, "transform '%s': collapse-all-rec takes no argument", spec);
    if (t.kind != CN_AGG_TF_COLLAPSE_ALL_REC && !*arg)
        return cn_err_set(err, -EINVAL, "transform '%s': missing %s after '%s:'", spec,
                          cn_agg_tf_takes_path(t.kind) ? "PATH"
                          : takes_lib(t.kind)          ? "library"
                          : t.kind == CN_AGG_TF_SEARCH ? "text"
                                                       : "function",
                          tf_names[k]);
    t.arg = strdup(arg);
    if (!t.arg || split_arg(&t) < 0) {
        cn_agg_transform_clear(&t);
        return cn_err_set(err, -ENOMEM, "transform '%s': out of memory", spec);
    }
    for (size_t i = 0; i < t.path_len; i++)
        if (!t.path[i][0]) {
            cn_agg_transform_clear(&t);
            return cn_err_set(err, -EINVAL, "transform '%s': empty function name in PATH", spec);
        }
    *out = t;
    return 0;
}

int cn_agg_transform_copy(const cn_agg_transform *src, cn_agg_transform *dst)
{
    cn_agg_transform t = {.kind = src->kind};
    t.arg = strdup(src->arg ? src->arg : "");
    t.path = calloc(src->path_len ? src->path_len : 1, sizeof(*t.path));
    if (!t.arg || !t.path)
        goto fail;
    for (size_t i = 0; i < src->path_len; i++) {
        t.path[i] = strdup(src->path[i]);
        if (!t.path[i])
            goto fail;
        t.path_len = i + 1;
    }
    *dst = t;
    return 0;
fail:
    cn_agg_transform_clear(&t);
    return -ENOMEM;
}

char *cn_agg_transform_format(const cn_agg_transform *t)
{
    const char *name = cn_agg_tf_name(t->kind);
    if (!name)
        return NULL;
    char *s = NULL;
    if (t->kind == CN_AGG_TF_COLLAPSE_ALL_REC || !t->arg)
        return strdup(name);
    if (asprintf(&s, "%s:%s", name, t->arg) < 0)
        return NULL;
    return s;
}

/* ---- checks against a profile ----------------------------------------------------- */

int cn_agg_transform_check(const cn_agg_profile *p, const cn_agg_transform *t, cn_err *err)
{
    /* search matches text, not a name: matching nothing is an empty tree, not an error. */
    if (cn_agg_tf_takes_path(t->kind) || t->kind == CN_AGG_TF_COLLAPSE_ALL_REC ||
        t->kind == CN_AGG_TF_SEARCH)
        return 0;
    if (takes_lib(t->kind)) {
        for (size_t i = 0; i < p->n_res; i++)
            if (strcmp(p->str[p->res_name[i]], t->arg) == 0)
                return 0;
        char *spec = cn_agg_transform_format(t);
        int rc = cn_err_set(err, -ENOENT, "transform '%s': no library '%s' in the profile",
                            spec ? spec : t->arg, t->arg);
        free(spec);
        return rc;
    }
    /* A function occurs when some frame's chain, or its symbol func (the name no_inline
     * shows, §4.5), holds a func with that name. */
    int32_t id = cn_agg__q_name_id(p, t->arg);
    for (size_t f = 0; id >= 0 && f < p->n_frame; f++) {
        if (p->frame_sym_func[f] >= 0 && p->func_name[p->frame_sym_func[f]] == id)
            return 0;
        const int32_t *chain = p->chain_pool + p->frame_chain[f];
        for (uint16_t d = 0; d < p->frame_depth[f]; d++)
            if (p->func_name[chain[d]] == id)
                return 0;
    }
    char *spec = cn_agg_transform_format(t);
    int rc = cn_err_set(err, -ENOENT, "transform '%s': no function '%s' in the profile",
                        spec ? spec : t->arg, t->arg);
    free(spec);
    return rc;
}

/* ---- renaming after symbolication (§4.3) ------------------------------------------- */

/* The rename map row of name s, or -1. */
static int32_t rename_row(const cn_agg_profile *p, const char *s)
{
    return cn_agg__rename_row(p, s);
}

/* Joins v[0..n) with ';'. malloc'ed, or NULL. */
static char *join(char *const *v, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i]) + 1;
    char *s = malloc(len), *w = s;
    if (!s)
        return NULL;
    *w = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *w++ = ';';
        size_t l = strlen(v[i]);
        memcpy(w, v[i], l + 1);
        w += l;
    }
    return s;
}

int cn_agg_remap_transform(const cn_agg_profile *p, cn_agg_transform *t)
{
    if (t->kind == CN_AGG_TF_COLLAPSE_ALL_REC || t->kind == CN_AGG_TF_SEARCH ||
        takes_lib(t->kind) || !p->n_rename)
        return 0;
    bool path = cn_agg_tf_takes_path(t->kind);
    size_t cap = 0, n = 0;
    bool changed = false;
    for (size_t i = 0; i < t->path_len; i++) {
        int32_t row = rename_row(p, t->path[i]);
        cap += row < 0 ? 1 : (size_t)p->rename_cnt[row];
    }
    char **v = calloc(cap ? cap : 1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < t->path_len; i++) {
        int32_t row = rename_row(p, t->path[i]);
        if (row < 0) {
            if (!(v[n++] = strdup(t->path[i])))
                goto nomem;
            continue;
        }
        /* A function argument maps to the outer function of an inline chain. */
        int32_t cnt = path ? p->rename_cnt[row] : 1;
        for (int32_t k = 0; k < cnt; k++)
            if (!(v[n++] = strdup(p->str[p->rename_pool[p->rename_off[row] + k]])))
                goto nomem;
        changed = true;
    }
    if (!changed) {
        free_strv(v, n);
        return 0;
    }
    char *arg = join(v, n);
    if (!arg)
        goto nomem;
    free_strv(t->path, t->path_len);
    free(t->arg);
    t->path = v;
    t->path_len = n;
    t->arg = arg;
    return 1;
nomem:
    free_strv(v, n);
    return -ENOMEM;
}

/* ---- path mapping (§2) ----------------------------------------------------------------- */

static bool starts_with(char *const *path, size_t len, char *const *pre, size_t k)
{
    if (len < k)
        return false;
    for (size_t i = 0; i < k; i++)
        if (strcmp(path[i], pre[i]) != 0)
            return false;
    return true;
}

int cn_agg_map_path(const cn_agg_transform *t, char *const *path, size_t len, char ***out,
                    size_t *out_len)
{
    /* keep[i]: element i of the input survives, in order. */
    uint8_t *keep = calloc(len ? len : 1, 1);
    if (!keep)
        return -ENOMEM;
    const char *F = t->path_len ? t->path[0] : "";
    size_t k = t->path_len;
    size_t first = len, last = len;
    for (size_t i = 0; i < len; i++)
        if (strcmp(path[i], F) == 0) {
            if (first == len)
                first = i;
            last = i;
        }
    bool pre = starts_with(path, len, t->path, k);
    switch (t->kind) {
    case CN_AGG_TF_FOCUS:
    case CN_AGG_TF_FOCUS_INVERTED:
        for (size_t i = pre ? k - 1 : len; i < len; i++)
            keep[i] = 1;
        break;
    case CN_AGG_TF_FOCUS_FUNC:
        for (size_t i = first; i < len; i++)
            keep[i] = 1;
        break;
    case CN_AGG_TF_FOCUS_SELF:
        if (first < len)
            keep[first] = 1;
        break;
    case CN_AGG_TF_MERGE_NODE:
        for (size_t i = 0; i < len; i++)
            keep[i] = !(pre && i == k - 1);
        break;
    case CN_AGG_TF_MERGE:
        for (size_t i = 0; i < len; i++)
            keep[i] = strcmp(path[i], F) != 0;
        break;
    case CN_AGG_TF_DROP:
        for (size_t i = 0; i < len; i++)
            keep[i] = first == len;
        break;
    case CN_AGG_TF_SEARCH: /* drops samples, never renames a node: a path that exists stays */
        for (size_t i = 0; i < len; i++)
            keep[i] = 1;
        break;
    case CN_AGG_TF_HIDE:
        for (size_t i = 0; i < len; i++)
            keep[i] = !pre;
        break;
    case CN_AGG_TF_PRUNE:
        for (size_t i = 0; i < len; i++)
            keep[i] = !pre || i + 1 < k;
        break;
    case CN_AGG_TF_COLLAPSE:
        for (size_t i = 0; i < len; i++)
            keep[i] = i <= first || first == len;
        break;
    case CN_AGG_TF_COLLAPSE_DIRECT_REC:
        for (size_t i = 0; i < len; i++)
            keep[i] = !(i > 0 && strcmp(path[i], F) == 0 && strcmp(path[i - 1], F) == 0);
        break;
    case CN_AGG_TF_COLLAPSE_REC:
        for (size_t i = 0; i < len; i++)
            keep[i] = first == len || i < first || i >= last;
        break;
    case CN_AGG_TF_COLLAPSE_ALL_REC: {
        /* §6.1: truncate back to the first invocation of a repeated name. */
        size_t n = 0;
        for (size_t i = 0; i < len; i++) {
            size_t j = 0;
            for (size_t x = 0; x < i; x++)
                if (keep[x] && strcmp(path[x], path[i]) == 0)
                    j = x + 1;
            if (j == 0) {
                keep[i] = 1;
                n++;
                continue;
            }
            for (size_t x = j; x < i; x++)
                keep[x] = 0;
        }
        (void)n;
        break;
    }
    case CN_AGG_TF_FOCUS_LIB:
    case CN_AGG_TF_COLLAPSE_LIB:
    default:
        /* Which names belong to LIB is not known without the profile: the path is lost. */
        break;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += keep[i];
    char **v = calloc(n ? n : 1, sizeof(*v));
    if (!v) {
        free(keep);
        return -ENOMEM;
    }
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (!keep[i])
            continue;
        if (!(v[w] = strdup(path[i]))) {
            free_strv(v, w);
            free(keep);
            return -ENOMEM;
        }
        w++;
    }
    free(keep);
    *out = v;
    *out_len = n;
    return 0;
}
