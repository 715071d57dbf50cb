/* test_transform_random.c — randomized differential test of the query engine.
 *
 * Random profiles (native frames regrouped into random inline chains of a small alphabet,
 * so recursion and shared names are common; weights in [-2, 5]) and random transform
 * sequences. The engine (stack-table transforms) is compared with an independent, simple
 * model written here: each sample's path (list of funcs, root first) is rewritten by the
 * per-sample path rules of docs/calltree.md §2.0–§2.12 / §6.1, then the views are built by
 * brute force over the rewritten paths. Trees are compared as sorted "path total self"
 * lines; the engine's sibling order is checked separately. Every query runs three ways:
 * through the profile's own query cache, through a cache that was filled before symbols
 * arrived and before the last stacks were added (regroup invalidation, incremental
 * extension), and with no cache. When the last transform is collapse-all-rec and the view
 * is the tree, its merged_stacks/recursions counters are compared too (model: §6.1 over
 * the shown nodes of that transform's input tree). Seeded and deterministic;
 * CANOPY_RANDOM_CASES=N runs more cases, CANOPY_RANDOM_SEED=S one case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cmocka.h>

#include "agg_internal.h"
#include "cn_agg.h"

#define MAXD   40
#define MAXS   40
#define NCASES 3000

typedef struct path {
    int32_t f[MAXD];
    int n;
    double w;
} path;

static uint64_t rng_state;
/* Whether the current case compares collapse-all-rec counters; how many cases did. */
static bool g_counts;
static int g_n_counts;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33) % n;
}

static const char *const NAMES[] = {"a", "b", "c", "d", "e"};

/* ---- the model ------------------------------------------------------------------- */

typedef struct model {
    cn_agg_profile *p;
    path s[MAXS];
    int n;
} model;

static const char *nm(const cn_agg_profile *p, int32_t f)
{
    return cn_agg_func_name(p, f);
}

static bool is(const cn_agg_profile *p, int32_t f, const char *name)
{
    return strcmp(nm(p, f), name) == 0;
}

static bool in_lib(const cn_agg_profile *p, int32_t f, const char *lib)
{
    int32_t r = cn_agg_func_resource(p, f);
    return r >= 0 && strcmp(cn_agg_resource_name(p, r), lib) == 0;
}

static bool prefix_is(const cn_agg_profile *p, const path *x, const cn_agg_transform *t)
{
    if ((size_t)x->n < t->path_len)
        return false;
    for (size_t i = 0; i < t->path_len; i++)
        if (!is(p, x->f[i], t->path[i]))
            return false;
    return true;
}

/* The path rule of transform t; returns false for DROP. */
static bool rule(cn_agg_profile *p, const cn_agg_transform *t, path *x)
{
    path o = *x;
    int k = (int)t->path_len, n = x->n;
    const char *F = k ? t->path[0] : "";
    int first = -1, last = -1;
    for (int i = 0; i < n; i++)
        if (is(p, x->f[i], F)) {
            if (first < 0)
                first = i;
            last = i;
        }
    o.n = 0;
    switch (t->kind) {
    case CN_AGG_TF_FOCUS:
        if (!prefix_is(p, x, t))
            return false;
        for (int i = k - 1; i < n; i++)
            o.f[o.n++] = x->f[i];
        break;
    case CN_AGG_TF_FOCUS_INVERTED:
        if (n < k)
            return false;
        for (int j = 0; j < k; j++)
            if (!is(p, x->f[n - 1 - j], t->path[j]))
                return false;
        for (int i = 0; i <= n - k; i++)
            o.f[o.n++] = x->f[i];
        break;
    case CN_AGG_TF_FOCUS_FUNC:
        if (first < 0)
            return false;
        for (int i = first; i < n; i++)
            o.f[o.n++] = x->f[i];
        break;
    case CN_AGG_TF_FOCUS_SELF:
        if (!is(p, x->f[n - 1], F))
            return false;
        o.f[o.n++] = x->f[n - 1];
        break;
    case CN_AGG_TF_FOCUS_LIB: {
        bool cat = false;
        for (int i = 0; i < n; i++) {
            if (cn_agg_func_resource(p, x->f[i]) >= 0)
                cat = in_lib(p, x->f[i], t->arg);
            if (cat)
                o.f[o.n++] = x->f[i];
        }
        break;
    }
    case CN_AGG_TF_MERGE_NODE: {
        bool m = prefix_is(p, x, t);
        for (int i = 0; i < n; i++)
            if (!(m && i == k - 1))
                o.f[o.n++] = x->f[i];
        break;
    }
    case CN_AGG_TF_MERGE:
        for (int i = 0; i < n; i++)
            if (!is(p, x->f[i], F))
                o.f[o.n++] = x->f[i];
        break;
    case CN_AGG_TF_DROP:
        if (first >= 0)
            return false;
        o = *x;
        break;
    case CN_AGG_TF_HIDE:
        if (prefix_is(p, x, t))
            return false;
        o = *x;
        break;
    case CN_AGG_TF_SEARCH: { /* any comma-separated, trimmed term; none: every sample */
        char terms[8][64], buf[256];
        int nt = 0;
        snprintf(buf, sizeof(buf), "%s", t->arg);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            while (*tok == ' ')
                tok++;
            size_t l = strlen(tok);
            while (l && tok[l - 1] == ' ')
                l--;
            if (l && nt < 8)
                snprintf(terms[nt++], sizeof(terms[0]), "%.*s", (int)l, tok);
        }
        bool hit = nt == 0;
        for (int i = 0; i < n && !hit; i++) {
            int32_t r = cn_agg_func_resource(p, x->f[i]);
            const char *file = cn_agg_func_file(p, x->f[i]);
            for (int term = 0; term < nt && !hit; term++)
                hit = strcasestr(nm(p, x->f[i]), terms[term]) ||
                      (r >= 0 && strcasestr(cn_agg_resource_name(p, r), terms[term])) ||
                      (file && strcasestr(file, terms[term]));
        }
        if (!hit)
            return false;
        o = *x;
        break;
    }
    case CN_AGG_TF_PRUNE:
        o = *x;
        if (prefix_is(p, x, t))
            o.n = k - 1;
        break;
    case CN_AGG_TF_COLLAPSE:
        o = *x;
        if (first >= 0)
            o.n = first + 1;
        break;
    case CN_AGG_TF_COLLAPSE_DIRECT_REC:
        for (int i = 0; i < n; i++) {
            if (is(p, x->f[i], F) && o.n > 0 && is(p, o.f[o.n - 1], F))
                o.n--;
            o.f[o.n++] = x->f[i];
        }
        break;
    case CN_AGG_TF_COLLAPSE_REC:
        for (int i = 0; i < n; i++)
            if (first < 0 || i < first || i >= last)
                o.f[o.n++] = x->f[i];
        break;
    case CN_AGG_TF_COLLAPSE_LIB: {
        int32_t lf = -1;
        for (size_t r = 0; r < cn_agg_resource_count(p) && lf < 0; r++)
            if (strcmp(cn_agg_resource_name(p, (int32_t)r), t->arg) == 0)
                lf = cn_agg_func(p, t->arg, (int32_t)r, NULL, 0);
        for (int i = 0; i < n; i++) {
            int32_t f = in_lib(p, x->f[i], t->arg) ? lf : x->f[i];
            if (f == lf && o.n > 0 && o.f[o.n - 1] == lf)
                continue;
            o.f[o.n++] = f;
        }
        break;
    }
    case CN_AGG_TF_COLLAPSE_ALL_REC:
        for (int i = 0; i < n; i++) {
            int at = -1;
            for (int j = 0; j < o.n; j++)
                if (strcmp(nm(p, o.f[j]), nm(p, x->f[i])) == 0)
                    at = j;
            if (at >= 0)
                o.n = at + 1;
            else
                o.f[o.n++] = x->f[i];
        }
        break;
    default:
        fail();
    }
    if (o.n == 0)
        return false;
    *x = o;
    return true;
}

/* ---- brute-force trees -------------------------------------------------------------- */

typedef struct tnode {
    int32_t f[MAXD];
    int n;
    double total, self;
    int merged, recur;
} tnode;

typedef struct btree {
    tnode *v;
    int n, cap;
} btree;

static tnode *bt_get(btree *t, const int32_t *f, int n)
{
    for (int i = 0; i < t->n; i++)
        if (t->v[i].n == n && memcmp(t->v[i].f, f, (size_t)n * sizeof(*f)) == 0)
            return &t->v[i];
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->v = realloc(t->v, (size_t)t->cap * sizeof(*t->v));
        assert_non_null(t->v);
    }
    tnode *x = &t->v[t->n++];
    memset(x, 0, sizeof(*x));
    memcpy(x->f, f, (size_t)n * sizeof(*f));
    x->n = n;
    return x;
}

/* Adds a path: w to every prefix's total, self to the last when with_self. */
static void bt_add(btree *t, const int32_t *f, int n, double w, bool with_self)
{
    for (int d = 1; d <= n; d++)
        bt_get(t, f, d)->total += w;
    if (with_self)
        bt_get(t, f, n)->self += w;
}

/* Shown: total != 0 or a shown descendant. */
static bool bt_shown(const btree *t, const tnode *x)
{
    if (x->total != 0)
        return true;
    for (int i = 0; i < t->n; i++) {
        const tnode *y = &t->v[i];
        if (y->n > x->n && y->total != 0 && memcmp(y->f, x->f, (size_t)x->n * sizeof(*x->f)) == 0)
            return true;
    }
    return false;
}

static int line_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Canonical text: sorted lines "f1,f2,..: total self [merged recur]". */
typedef struct lines {
    char **v;
    int n, cap;
} lines;

static void lines_add(lines *l, const int32_t *f, int n, double total, double self, int merged,
                      int recur, bool counts)
{
    char buf[1024];
    int off = 0;
    for (int i = 0; i < n; i++)
        off += snprintf(buf + off, sizeof(buf) - (size_t)off, "%s%d", i ? "," : "", f[i]);
    if (counts)
        snprintf(buf + off, sizeof(buf) - (size_t)off, ": %g %g %d %d", total, self, merged, recur);
    else
        snprintf(buf + off, sizeof(buf) - (size_t)off, ": %g %g", total, self);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, (size_t)l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = strdup(buf);
}

static char *lines_join(lines *l)
{
    if (l->n)
        qsort(l->v, (size_t)l->n, sizeof(*l->v), line_cmp);
    size_t len = 1;
    for (int i = 0; i < l->n; i++)
        len += strlen(l->v[i]) + 1;
    char *s = calloc(1, len);
    for (int i = 0; i < l->n; i++) {
        strcat(s, l->v[i]);
        strcat(s, "\n");
        free(l->v[i]);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
    return s;
}

static char *bt_text(const btree *t, bool counts)
{
    lines l = {0};
    for (int i = 0; i < t->n; i++)
        if (bt_shown(t, &t->v[i]))
            lines_add(&l, t->v[i].f, t->v[i].n, t->v[i].total, t->v[i].self, t->v[i].merged,
                      t->v[i].recur, counts);
    return lines_join(&l);
}

/* Walks the engine's tree: canonical text, and checks the sibling order. */
static void engine_walk(const cn_agg_profile *p, const cn_agg_tree *t, int32_t first, int32_t *f,
                        int depth, lines *l)
{
    const cn_agg_node *prev = NULL;
    for (int32_t i = first; i >= 0; i = t->nodes[i].next_sibling) {
        const cn_agg_node *nd = &t->nodes[i];
        if (prev) {
            assert_true(fabs(prev->total) >= fabs(nd->total));
            if (fabs(prev->total) == fabs(nd->total))
                assert_true(strcmp(nm(p, prev->func), nm(p, nd->func)) <= 0);
        }
        prev = nd;
        assert_true(depth < MAXD);
        f[depth] = nd->func;
        lines_add(l, f, depth + 1, nd->total, nd->self, nd->merged_stacks, nd->recursions,
                  g_counts);
        engine_walk(p, t, nd->first_child, f, depth + 1, l);
    }
}

static char *engine_text(const cn_agg_profile *p, const cn_agg_tree *t)
{
    lines l = {0};
    int32_t f[MAXD];
    if (t->view == CN_AGG_VIEW_FUNCTIONS) {
        for (size_t i = 0; i < t->n_functions; i++)
            lines_add(&l, &t->functions[i].func, 1, t->functions[i].total, t->functions[i].self, 0,
                      0, false);
        return lines_join(&l);
    }
    engine_walk(p, t, t->first_root, f, 0, &l);
    return lines_join(&l);
}

/* collapse-all-rec counters over the live nodes of the input paths (§6.1). */
static void allrec_counts(cn_agg_profile *p, const model *in, btree *out)
{
    btree t = {0};
    for (int i = 0; i < in->n; i++)
        bt_add(&t, in->s[i].f, in->s[i].n, in->s[i].w, true);
    for (int i = 0; i < t.n; i++) {
        if (!bt_shown(&t, &t.v[i]))
            continue;
        path x = {.n = t.v[i].n};
        memcpy(x.f, t.v[i].f, (size_t)x.n * sizeof(int32_t));
        bool recur = false;
        for (int j = 0; j < x.n - 1; j++)
            recur |= strcmp(nm(p, x.f[j]), nm(p, x.f[x.n - 1])) == 0;
        cn_agg_transform tf = {.kind = CN_AGG_TF_COLLAPSE_ALL_REC};
        assert_true(rule(p, &tf, &x));
        tnode *r = bt_get(out, x.f, x.n);
        r->merged++;
        r->recur += recur;
    }
    free(t.v);
}

/* The model's view of paths m. */
static char *model_view(cn_agg_profile *p, const model *m, const cn_agg_query *q, bool counts,
                        const model *before_allrec, int64_t *call_sites)
{
    btree t = {0};
    const char *F = q->view_func;
    for (int i = 0; i < m->n; i++) {
        const path *x = &m->s[i];
        int32_t rev[MAXD];
        for (int j = 0; j < x->n; j++)
            rev[j] = x->f[x->n - 1 - j];
        int first = -1;
        for (int j = 0; j < x->n && first < 0; j++)
            if (is(p, x->f[j], F ? F : ""))
                first = j;
        switch (q->view) {
        case CN_AGG_VIEW_TREE:
            bt_add(&t, x->f, x->n, x->w, true);
            break;
        case CN_AGG_VIEW_INVERTED:
            bt_add(&t, rev, x->n, x->w, false);
            bt_get(&t, rev, 1)->self += x->w;
            break;
        case CN_AGG_VIEW_CALLEES:
            if (first >= 0)
                bt_add(&t, x->f + first, x->n - first, x->w, true);
            break;
        case CN_AGG_VIEW_CALLERS:
            if (q->callers_mode == CN_AGG_CALLERS_TOTAL && first >= 0)
                bt_add(&t, rev + (x->n - 1 - first), first + 1, x->w, false);
            if (q->callers_mode == CN_AGG_CALLERS_SELF && is(p, x->f[x->n - 1], F))
                bt_add(&t, rev, x->n, x->w, false);
            break;
        case CN_AGG_VIEW_FUNCTIONS: {
            bt_get(&t, &x->f[x->n - 1], 1)->self += x->w;
            for (int j = 0; j < x->n; j++) {
                bool dup = false;
                for (int k = 0; k < j; k++)
                    dup |= x->f[k] == x->f[j];
                if (!dup)
                    bt_get(&t, &x->f[j], 1)->total += x->w;
            }
            break;
        }
        }
    }
    if (counts)
        allrec_counts(p, before_allrec, &t);
    if (q->view == CN_AGG_VIEW_CALLEES) {
        /* Call sites: shown outermost-F nodes of the full tree. */
        btree full = {0};
        for (int i = 0; i < m->n; i++)
            bt_add(&full, m->s[i].f, m->s[i].n, m->s[i].w, true);
        *call_sites = 0;
        for (int i = 0; i < full.n; i++) {
            tnode *x = &full.v[i];
            bool outer = is(p, x->f[x->n - 1], F);
            for (int j = 0; j < x->n - 1; j++)
                outer &= !is(p, x->f[j], F);
            *call_sites += outer && bt_shown(&full, x);
        }
        free(full.v);
    }
    char *s;
    if (q->view == CN_AGG_VIEW_FUNCTIONS) {
        lines l = {0};
        for (int i = 0; i < t.n; i++)
            if (t.v[i].total != 0 || t.v[i].self != 0)
                lines_add(&l, t.v[i].f, 1, t.v[i].total, t.v[i].self, 0, 0, false);
        s = lines_join(&l);
    } else {
        s = bt_text(&t, counts);
    }
    free(t.v);
    return s;
}

/* ---- random cases -------------------------------------------------------------------- */

/* Runs a throwaway tree query through the cache (fills or extends it). */
static void warm(cn_agg_profile *p, struct cn_agg__qcache **cache)
{
    cn_agg_query q;
    cn_agg_query_init(&q);
    cn_agg_tree *t = NULL;
    cn_err err;
    assert_int_equal(cn_agg__query_run_cached(p, cache, &q, &t, &err), 0);
    cn_agg_tree_free(t);
}

static cn_agg_profile *random_profile(model *m, struct cn_agg__qcache **cache)
{
    cn_agg_profile *p = cn_agg_profile_new();
    assert_non_null(p);
    int32_t res[2] = {cn_agg_resource(p, "l1", NULL, NULL, CN_AGG_RES_LIBRARY),
                      cn_agg_resource(p, "l2", NULL, NULL, CN_AGG_RES_LIBRARY)};
    int32_t th = cn_agg_thread(p, 1, 1, "t");
    int nsamples = 1 + (int)rnd(MAXS - 1);
    if (rnd(20) == 0)
        nsamples = 0;
    int64_t time = 0;
    for (int i = 0; i < nsamples; i++) {
        cn_agg_frame_ref refs[12];
        int depth = 1 + (int)rnd(rnd(3) ? 5 : 10);
        for (int d = 0; d < depth; d++) {
            int r = (int)rnd(5);
            refs[d] = (cn_agg_frame_ref){.resource = r < 2    ? res[r]
                                                     : r == 2 ? -1
                                                              : res[0],
                                         .offset = rnd(8)};
        }
        int32_t st = cn_agg_stack_from_refs(p, refs, (size_t)depth);
        assert_true(st >= 0);
        double w = (double)rnd(8) - 2;
        assert_int_equal(cn_agg_add_sample(p, st, time, w, th), 0);
        time += rnd(3);
        if (i == nsamples / 2)
            warm(p, cache);
    }
    warm(p, cache);
    /* Symbols: each frame gets a chain of 1–3 names (inline expansion). */
    size_t nf = cn_agg_frame_count(p);
    cn_agg_frame_symbols *batch = calloc(nf ? nf : 1, sizeof(*batch));
    cn_agg_symbol(*chains)[3] = calloc(nf ? nf : 1, sizeof(*chains));
    size_t nb = 0;
    for (size_t f = 0; f < nf; f++) {
        if (rnd(8) == 0)
            continue; /* stays a placeholder */
        size_t d = rnd(4) == 0 ? 1 + rnd(3) : 1;
        for (size_t j = 0; j < d; j++)
            chains[f][j] = (cn_agg_symbol){NAMES[rnd(5)], NULL, (int32_t)rnd(4)};
        batch[nb++] = (cn_agg_frame_symbols){.frame = (int32_t)f, .chain = chains[f], .depth = d};
    }
    assert_int_equal(cn_agg_regroup(p, batch, nb), 0);
    free(batch);
    free(chains);
    /* The model's paths. */
    m->p = p;
    m->n = 0;
    for (size_t i = 0; i < cn_agg_sample_count(p); i++) {
        path *x = &m->s[m->n++];
        memset(x, 0, sizeof(*x));
        x->w = cn_agg_sample_weight(p, i);
        int32_t fr[16];
        int nfr = 0;
        for (int32_t s = cn_agg_sample_stack(p, i); s >= 0; s = cn_agg_stack_prefix(p, s))
            fr[nfr++] = cn_agg_stack_frame(p, s);
        for (int j = nfr - 1; j >= 0; j--) {
            const int32_t *funcs;
            size_t d = cn_agg_frame_funcs(p, fr[j], &funcs);
            for (size_t k = 0; k < d; k++)
                x->f[x->n++] = funcs[k];
        }
    }
    return p;
}

static const char *random_name(const model *m)
{
    if (rnd(10) == 0)
        return "zz";
    if (m->n && rnd(4) == 0) {
        const path *x = &m->s[rnd((uint32_t)m->n)];
        return cn_agg_func_name(m->p, x->f[rnd((uint32_t)x->n)]);
    }
    return NAMES[rnd(5)];
}

static void random_transform(const model *m, cn_agg_transform *t)
{
    /* collapse-all-rec one time in five (else uniform), so that its counters, checked
     * when it is the last transform, get compared often, also after an earlier one. */
    cn_agg_tf_kind kind =
        rnd(5) == 0 ? CN_AGG_TF_COLLAPSE_ALL_REC : (cn_agg_tf_kind)rnd(CN_AGG_TF__COUNT);
    char spec[512];
    int off = snprintf(spec, sizeof(spec), "%s", cn_agg_tf_name(kind));
    if (cn_agg_tf_takes_path(kind)) {
        int k = 1 + (int)rnd(3);
        const path *x = m->n ? &m->s[rnd((uint32_t)m->n)] : NULL;
        bool from_sample = x && rnd(3) != 0;
        bool leaf_first = kind == CN_AGG_TF_FOCUS_INVERTED;
        for (int i = 0; i < k; i++) {
            const char *name;
            if (from_sample && i < x->n)
                name = cn_agg_func_name(m->p, x->f[leaf_first ? x->n - 1 - i : i]);
            else
                name = random_name(m);
            off += snprintf(spec + off, sizeof(spec) - (size_t)off, "%s%s", i ? ";" : ":", name);
        }
    } else if (kind == CN_AGG_TF_FOCUS_LIB || kind == CN_AGG_TF_COLLAPSE_LIB) {
        static const char *const libs[] = {"l1", "l2", "nolib"};
        snprintf(spec + off, sizeof(spec) - (size_t)off, ":%s", libs[rnd(3)]);
    } else if (kind == CN_AGG_TF_SEARCH) { /* case-insensitive, names and libraries */
        static const char *const texts[] = {"a", "B", "l1", "L2", "x", " c , d", "x,E", ", "};
        snprintf(spec + off, sizeof(spec) - (size_t)off, ":%s", texts[rnd(8)]);
    } else if (kind != CN_AGG_TF_COLLAPSE_ALL_REC) {
        snprintf(spec + off, sizeof(spec) - (size_t)off, ":%s", random_name(m));
    }
    cn_err err;
    assert_int_equal(cn_agg_transform_parse(spec, t, &err), 0);
}

/* One case; false (after printing the seed, the transforms and both trees) when the
 * engine and the model disagree. Other failures (engine errors, cached vs uncached runs
 * differing, sibling order) are assertions. */
static bool one_case(uint64_t seed)
{
    rng_state = seed;
    model m;
    struct cn_agg__qcache *cache = NULL;
    cn_agg_profile *p = random_profile(&m, &cache);
    cn_agg_transform tf[4];
    int ntf = (int)rnd(4);
    model before = m; /* the paths before the last transform */
    for (int i = 0; i < ntf; i++) {
        random_transform(&m, &tf[i]);
        before = m;
        int w = 0;
        for (int j = 0; j < m.n; j++) {
            path x = m.s[j];
            if (rule(p, &tf[i], &x))
                m.s[w++] = x;
        }
        m.n = w;
    }
    cn_agg_query q;
    cn_agg_query_init(&q);
    q.transforms = tf;
    q.n_transforms = (size_t)ntf;
    q.view = (cn_agg_view)rnd(5);
    if (ntf > 0 && tf[ntf - 1].kind == CN_AGG_TF_COLLAPSE_ALL_REC && rnd(2) == 0)
        q.view = CN_AGG_VIEW_TREE; /* the view that shows the counters */
    q.view_func = random_name(&m);
    q.callers_mode = (cn_agg_callers_mode)rnd(2);
    bool counts =
        ntf > 0 && tf[ntf - 1].kind == CN_AGG_TF_COLLAPSE_ALL_REC && q.view == CN_AGG_VIEW_TREE;
    cn_agg_tree *t = NULL;
    cn_err err;
    assert_int_equal(cn_agg_query_run(p, &q, &t, &err), 0);
    g_counts = counts;
    g_n_counts += counts;
    if (counts)
        assert_true(t->has_recursion_counts);
    char *got = engine_text(p, t);
    cn_agg_tree *tc = NULL;
    assert_int_equal(cn_agg__query_run_cached(p, &cache, &q, &tc, &err), 0);
    char *got_cached = engine_text(p, tc);
    assert_string_equal(got_cached, got);
    free(got_cached);
    cn_agg_tree_free(tc);
    assert_int_equal(cn_agg__query_run_cached(p, NULL, &q, &tc, &err), 0); /* no cache */
    got_cached = engine_text(p, tc);
    assert_string_equal(got_cached, got);
    free(got_cached);
    cn_agg_tree_free(tc);
    cn_agg__qcache_free(cache);
    int64_t sites = 0;
    char *want = model_view(p, &m, &q, counts, &before, &sites);
    bool ok = strcmp(got, want) == 0;
    if (!ok) {
        fprintf(stderr, "FAIL seed %llu view %d func %s:", (unsigned long long)seed, q.view,
                q.view_func);
        for (int i = 0; i < ntf; i++) {
            char *s = cn_agg_transform_format(&tf[i]);
            fprintf(stderr, " -t '%s'", s);
            free(s);
        }
        fprintf(stderr, "\nengine:\n%smodel:\n%s", got, want);
    }
    if (q.view == CN_AGG_VIEW_CALLEES && t->call_sites != sites) {
        fprintf(stderr, "FAIL seed %llu: call sites %lld, model %lld\n", (unsigned long long)seed,
                (long long)t->call_sites, (long long)sites);
        ok = false;
    }
    double total = 0;
    for (int i = 0; i < m.n; i++)
        total += m.s[i].w;
    if (t->total != total) {
        fprintf(stderr, "FAIL seed %llu: total %g, model %g\n", (unsigned long long)seed, t->total,
                total);
        ok = false;
    }
    free(got);
    free(want);
    cn_agg_tree_free(t);
    for (int i = 0; i < ntf; i++)
        cn_agg_transform_clear(&tf[i]);
    cn_agg_profile_free(p);
    return ok;
}

/* CANOPY_RANDOM_CASES=N runs N cases (default NCASES) and reports every failing seed
 * before failing; CANOPY_RANDOM_SEED=S runs the one case with seed S. */
static void test_random_transforms(void **state)
{
    (void)state;
    const char *one = getenv("CANOPY_RANDOM_SEED");
    if (one) {
        assert_true(one_case(strtoull(one, NULL, 0)));
        return;
    }
    const char *env = getenv("CANOPY_RANDOM_CASES");
    int n = env ? atoi(env) : NCASES, fails = 0;
    for (int i = 0; i < n; i++)
        fails += !one_case(0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1));
    fprintf(stderr, "%d cases, %d compared collapse-all-rec counters, %d disagree with the model\n",
            n, g_n_counts, fails);
    assert_int_equal(fails, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_random_transforms)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
