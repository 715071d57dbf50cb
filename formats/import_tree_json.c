/* import_tree_json.c — canopy's own JSON tree (`--format json`, docs/cli.md "JSON tree")
 * read back as a profile, so that `canopy open x.json` works on canopy's output.
 *
 * Layout: {"unit", "total", "view", "transforms", "roots": [{"name", "lib", "kind",
 * "total", "self", "children": [...]}]} plus fields that are skipped whatever their type.
 * Every node with non-zero self becomes one sample of weight `self` on the stack of its
 * path (names and libraries from the root, a library marked "kind": "python" a Python
 * source file), so the tree is rebuilt exactly, in the units the
 * JSON carries (its display values: scale 1). Only the call tree can be read back: an
 * inverted, callees or callers tree or a function list does not hold call paths, and a
 * differential tree holds two sides; those are refused with a clear message.
 *
 * Parsed as a stream with yajl (a tree may be as deep as the stacks canopy accepts,
 * deeper than a recursive parser allows): a stack of open nodes, each with its name,
 * library, kind, self weight and, once its children open, its interned stack id. A node's
 * `name`, `lib` and `kind` must come before its `children`, as canopy writes them.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import_internal.h"
#include "yajl_stream.h"

/* Deeper trees are refused (canopy's importers accept stacks of this many frames). */
#define MAX_DEPTH 100000

enum tj_state { TJ_START, TJ_TOP, TJ_ROOTS, TJ_NODE, TJ_END };
enum tj_key {
    K_OTHER,
    K_UNIT,
    K_VIEW,
    K_DIFF,
    K_ROOTS,
    K_FUNCTIONS,
    K_NAME,
    K_LIB,
    K_KIND,
    K_SELF,
    K_CHILDREN
};

typedef struct tj_node {
    int32_t name; /* string id, -1 = not seen */
    int32_t lib;  /* string id, -1 = none */
    bool python;  /* "kind": "python": lib is a Python source file */
    double self;
    int32_t stack; /* interned stack id, -1 = not yet */
} tj_node;

struct cn_fmt__treejson {
    cn_fmt__jstream js; /* the yajl handle, the name, the error bookkeeping */
    cn_agg_profile *p;
    enum tj_state st;
    enum tj_key key;
    size_t skip;    /* nesting depth of a skipped value, 0 = not skipping */
    tj_node *nodes; /* open nodes, root first */
    size_t depth, cap;
    bool have_roots;
};

/* Records an error at the offset reached; returns 0, what a yajl callback returns to stop. */
#define TJ_FAIL(c, code, ...) cn_fmt__jstream_fail(&(c)->js, (code), __VA_ARGS__)

static enum tj_key key_of(enum tj_state st, const unsigned char *s, size_t n)
{
    static const struct {
        enum tj_state st;
        const char *name;
        enum tj_key key;
    } keys[] = {
        {TJ_TOP, "unit", K_UNIT},
        {TJ_TOP, "view", K_VIEW},
        {TJ_TOP, "diff", K_DIFF},
        {TJ_TOP, "roots", K_ROOTS},
        {TJ_TOP, "functions", K_FUNCTIONS},
        {TJ_NODE, "name", K_NAME},
        {TJ_NODE, "lib", K_LIB},
        {TJ_NODE, "kind", K_KIND},
        {TJ_NODE, "self", K_SELF},
        {TJ_NODE, "children", K_CHILDREN},
    };
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if (keys[i].st == st && strlen(keys[i].name) == n && !memcmp(keys[i].name, s, n))
            return keys[i].key;
    return K_OTHER;
}

/* The key's name and the type its value must have, for messages. */
static void key_info(enum tj_key k, const char **name, const char **want)
{
    static const char *const names[] = {"?",    "unit", "view", "diff", "roots",   "functions",
                                        "name", "lib",  "kind", "self", "children"};
    *name = names[k];
    *want = k == K_DIFF                                           ? "a boolean"
            : k == K_SELF                                         ? "a number"
            : k == K_ROOTS || k == K_FUNCTIONS || k == K_CHILDREN ? "an array"
                                                                  : "a string";
}

/* A value of the wrong type for a known key, or an element of roots/children that is not
 * an object. */
static int bad_type(cn_fmt__treejson *c)
{
    const char *name, *want;
    if (c->st == TJ_ROOTS)
        return TJ_FAIL(c, -EINVAL, "'roots' and 'children' elements must be objects");
    key_info(c->key, &name, &want);
    return TJ_FAIL(c, -EINVAL, "'%s' must be %s", name, want);
}

/* A library's kind from its display name (docs/cli.md "Names"). */
static cn_agg_resource_kind lib_kind(const char *lib)
{
    if (!strcmp(lib, "[kernel]") || (lib[0] == '[' && strcmp(lib, "[jit]") != 0))
        return CN_AGG_RES_KERNEL;
    if (!strcmp(lib, "[jit]"))
        return CN_AGG_RES_JIT;
    if (strstr(lib, "://"))
        return CN_AGG_RES_URL;
    return CN_AGG_RES_LIBRARY;
}

/* Interns the stack of the innermost open node (its parent's is interned already).
 * Returns 1 (yajl: go on) or 0 with c->js.rc set. */
static int node_stack(cn_fmt__treejson *c)
{
    tj_node *n = &c->nodes[c->depth - 1];
    if (n->stack >= 0)
        return 1;
    if (n->name < 0)
        return TJ_FAIL(c, -EINVAL, "a node without 'name' (or 'name' after 'children')");
    int32_t res = -1, func, frame, stack;
    if (n->lib >= 0) {
        const char *lib = cn_agg_string_get(c->p, n->lib);
        res = n->python ? cn_agg_python_resource(c->p, lib)
                        : cn_agg_resource(c->p, lib, NULL, NULL, lib_kind(lib));
        if (res < 0)
            return TJ_FAIL(c, res, "out of memory");
    }
    if ((func = cn_agg_func(c->p, cn_agg_string_get(c->p, n->name), res, NULL, 0)) < 0 ||
        (frame = cn_agg_frame(c->p, func, res, -1, 0)) < 0 ||
        (stack = cn_agg_stack(c->p, c->depth > 1 ? c->nodes[c->depth - 2].stack : -1, frame)) < 0)
        return TJ_FAIL(c, -ENOMEM, "out of memory");
    n->stack = stack;
    return 1;
}

/* ---- yajl callbacks -------------------------------------------------------------- */

/* True when the value that starts now is skipped: inside a skipped value, or the value
 * of a key this importer does not read. */
static bool skipped(const cn_fmt__treejson *c)
{
    return c->skip || (c->st != TJ_ROOTS && c->key == K_OTHER);
}

static int cb_null(void *ctx)
{
    cn_fmt__treejson *c = ctx;
    return skipped(c) ? 1 : bad_type(c);
}

static int cb_bool(void *ctx, int b)
{
    cn_fmt__treejson *c = ctx;
    if (skipped(c))
        return 1;
    if (c->st == TJ_TOP && c->key == K_DIFF) {
        if (b)
            return TJ_FAIL(c, -EINVAL,
                           "a differential JSON tree cannot be read back "
                           "(write it with --format folded instead)");
        return 1;
    }
    return bad_type(c);
}

static int cb_number(void *ctx, const char *s, size_t n)
{
    cn_fmt__treejson *c = ctx;
    if (skipped(c))
        return 1;
    if (c->st == TJ_NODE && c->key == K_SELF) {
        char buf[64];
        if (n >= sizeof(buf))
            return TJ_FAIL(c, -EINVAL, "'self' is not a number");
        memcpy(buf, s, n);
        buf[n] = '\0';
        double v = strtod(buf, NULL);
        if (!isfinite(v) || fabs(v) > 1e300)
            return TJ_FAIL(c, -EINVAL, "'self' out of range");
        c->nodes[c->depth - 1].self = v;
        return 1;
    }
    return bad_type(c);
}

static int cb_string(void *ctx, const unsigned char *s, size_t n)
{
    cn_fmt__treejson *c = ctx;
    if (skipped(c))
        return 1;
    if (c->st == TJ_TOP && c->key == K_UNIT) {
        for (int u = CN_AGG_UNIT_SAMPLES; u <= CN_AGG_UNIT_EVENTS; u++) {
            const char *name = cn_agg_unit_name((cn_agg_unit)u);
            if (strlen(name) == n && !memcmp(name, s, n)) {
                cn_agg_profile_set_unit(c->p, (cn_agg_unit)u);
                return 1;
            }
        }
        return TJ_FAIL(c, -EINVAL, "unknown unit '%.*s'", (int)(n > 40 ? 40 : n), s);
    }
    if (c->st == TJ_TOP && c->key == K_VIEW) {
        if (n == 4 && !memcmp(s, "tree", 4))
            return 1;
        return TJ_FAIL(c, -EINVAL,
                       "a JSON '%.*s' view cannot be read back: only a call tree "
                       "(\"view\": \"tree\") holds the call paths",
                       (int)(n > 40 ? 40 : n), s);
    }
    if (c->st == TJ_NODE && (c->key == K_NAME || c->key == K_LIB)) {
        if (memchr(s, '\0', n))
            return TJ_FAIL(c, -EINVAL, "NUL byte in a name");
        int32_t id = cn_agg_string(c->p, (const char *)s, n);
        if (id < 0)
            return TJ_FAIL(c, -ENOMEM, "out of memory");
        tj_node *nd = &c->nodes[c->depth - 1];
        if (nd->stack >= 0)
            return TJ_FAIL(c, -EINVAL, "'%s' after 'children'", c->key == K_NAME ? "name" : "lib");
        *(c->key == K_NAME ? &nd->name : &nd->lib) = id;
        return 1;
    }
    if (c->st == TJ_NODE && c->key == K_KIND) {
        /* A marker this version does not know leaves the library's kind to its name. */
        cn_agg_resource_kind kind;
        tj_node *nd = &c->nodes[c->depth - 1];
        if (nd->stack >= 0)
            return TJ_FAIL(c, -EINVAL, "'kind' after 'children'");
        nd->python =
            cn_agg_resource_kind_parse((const char *)s, n, &kind) && kind == CN_AGG_RES_PYTHON;
        return 1;
    }
    return bad_type(c);
}

static int cb_start_map(void *ctx)
{
    cn_fmt__treejson *c = ctx;
    if (c->skip) {
        c->skip++;
        return 1;
    }
    switch (c->st) {
    case TJ_START:
        c->st = TJ_TOP;
        c->key = K_OTHER;
        return 1;
    case TJ_ROOTS:
        if (c->depth >= MAX_DEPTH)
            return TJ_FAIL(c, -EINVAL, "tree deeper than %d levels", MAX_DEPTH);
        if (CN_RESERVE(c->nodes, c->cap, c->depth + 1) < 0)
            return TJ_FAIL(c, -ENOMEM, "out of memory");
        c->nodes[c->depth++] =
            (tj_node){.name = -1, .lib = -1, .python = false, .self = 0, .stack = -1};
        c->st = TJ_NODE;
        c->key = K_OTHER;
        return 1;
    default:
        if (c->key == K_OTHER) {
            c->skip = 1;
            return 1;
        }
        return bad_type(c);
    }
}

static int cb_map_key(void *ctx, const unsigned char *s, size_t n)
{
    cn_fmt__treejson *c = ctx;
    if (!c->skip)
        c->key = key_of(c->st, s, n);
    return 1;
}

static int cb_end_map(void *ctx)
{
    cn_fmt__treejson *c = ctx;
    if (c->skip) {
        c->skip--;
        return 1;
    }
    if (c->st == TJ_TOP) {
        c->st = TJ_END;
        return 1;
    }
    /* TJ_NODE: the node is complete */
    if (!node_stack(c))
        return 0;
    tj_node *n = &c->nodes[c->depth - 1];
    if (n->self != 0 && cn_agg_add_sample(c->p, n->stack, 0, n->self, -1) < 0)
        return TJ_FAIL(c, -ENOMEM, "out of memory");
    c->depth--;
    c->st = TJ_ROOTS;
    return 1;
}

static int cb_start_array(void *ctx)
{
    cn_fmt__treejson *c = ctx;
    if (c->skip) {
        c->skip++;
        return 1;
    }
    if (c->st == TJ_TOP && c->key == K_ROOTS) {
        c->have_roots = true;
        c->st = TJ_ROOTS;
        return 1;
    }
    if (c->st == TJ_TOP && c->key == K_FUNCTIONS)
        return TJ_FAIL(c, -EINVAL,
                       "a JSON function list cannot be read back: only a call "
                       "tree (\"view\": \"tree\") holds the call paths");
    if (c->st == TJ_NODE && c->key == K_CHILDREN) {
        if (!node_stack(c))
            return 0;
        c->st = TJ_ROOTS;
        return 1;
    }
    if (c->st != TJ_ROOTS && c->key == K_OTHER) {
        c->skip = 1;
        return 1;
    }
    return bad_type(c);
}

static int cb_end_array(void *ctx)
{
    cn_fmt__treejson *c = ctx;
    if (c->skip) {
        c->skip--;
        return 1;
    }
    /* TJ_ROOTS: back to the node whose children these were, or to the top */
    c->st = c->depth > 0 ? TJ_NODE : TJ_TOP;
    c->key = K_OTHER;
    return 1;
}

static const yajl_callbacks callbacks = {
    cb_null,      cb_bool,    NULL,       NULL,           cb_number,    cb_string,
    cb_start_map, cb_map_key, cb_end_map, cb_start_array, cb_end_array,
};

/* ---- module-internal API ---------------------------------------------------------- */

cn_fmt__treejson *cn_fmt__treejson_new(const char *name)
{
    cn_fmt__treejson *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->p = cn_agg_profile_new();
    if (!c->p || cn_fmt__jstream_init(&c->js, name, &callbacks, c) < 0)
        return cn_fmt__treejson_free(c);
    return c;
}

cn_fmt__treejson *cn_fmt__treejson_free(cn_fmt__treejson *c)
{
    if (!c)
        return NULL;
    cn_fmt__jstream_fini(&c->js);
    cn_agg_profile_free(c->p);
    free(c->nodes);
    free(c);
    return NULL;
}

int cn_fmt__treejson_feed(cn_fmt__treejson *c, const void *data, size_t len, cn_err *err)
{
    return cn_fmt__jstream_feed(&c->js, data, len, err);
}

int cn_fmt__treejson_finish(cn_fmt__treejson *c, cn_agg_profile **out, cn_err *err)
{
    int rc = cn_fmt__jstream_finish(&c->js, err);
    if (rc < 0)
        return rc;
    if (c->st != TJ_END)
        return TJ_FAIL(c, -EINVAL, "truncated JSON"), c->js.rc;
    if (!c->have_roots)
        return TJ_FAIL(c, -EINVAL, "a canopy JSON tree without 'roots'"), c->js.rc;
    *out = c->p;
    c->p = NULL;
    return 0;
}

/* canopy writes "unit" first (docs/cli.md "JSON tree"); a .cpuprofile has no such key. */
bool cn_fmt__looks_tree_json(const char *data, size_t len)
{
    size_t i = cn_fmt__json_skip_blank(data, len, 0);
    if (i >= len || data[i++] != '{')
        return false;
    i = cn_fmt__json_skip_blank(data, len, i);
    return len - i >= 6 && !memcmp(data + i, "\"unit\"", 6);
}
